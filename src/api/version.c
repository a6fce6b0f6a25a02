#include <stdlib.h>

#include "membudget/membudget.h"

MB_API unsigned mb_version_number(void) { return MB_VERSION_NUMBER; }
MB_API const char *mb_version_string(void) { return MB_VERSION_STRING; }

MB_API unsigned mb_features(void) {
#if MB_HAVE_CUDA
  return MB_FEATURE_CUDA;
#else
  return 0;
#endif
}

MB_API void mb_free(void *ptr) { free(ptr); }

MB_API const char *mb_status_str(int status) {
  switch (status) {
    case MB_OK: return "ok";
    case MB_E_NOMEM: return "out of memory";
    case MB_E_INVALID_ARG: return "invalid argument";
    case MB_E_IO: return "i/o error";
    case MB_E_PARSE: return "not a valid ONNX model";
    case MB_E_INVALID_MODEL: return "invalid model";
    case MB_E_UNSUPPORTED: return "unsupported";
    case MB_E_LIMIT: return "limit exceeded";
    case MB_E_NO_CUDA: return "no CUDA device";
    case MB_E_RANGE: return "index out of range";
    default: return "unknown status";
  }
}

MB_API size_t mb_struct_size(int which) {
  switch (which) {
    case MB_STRUCT_TENSOR_DESC: return sizeof(mb_tensor_desc);
    case MB_STRUCT_INITIALIZER_DESC: return sizeof(mb_initializer_desc);
    case MB_STRUCT_ACCOUNTING: return sizeof(mb_accounting);
    case MB_STRUCT_BUDGET: return sizeof(mb_budget);
    case MB_STRUCT_EVENT: return sizeof(mb_event);
    case MB_STRUCT_SHAPE_DESC: return sizeof(mb_shape_desc);
    case MB_STRUCT_DEVICE_INFO: return sizeof(mb_device_info);
    case MB_STRUCT_REPLAY: return sizeof(mb_replay);
    case MB_STRUCT_MODULE_INFO: return sizeof(mb_module_info);
    case MB_STRUCT_PEAK_TENSOR: return sizeof(mb_peak_tensor);
    case MB_STRUCT_ADVICE_LINE: return sizeof(mb_advice_line);
    default: return 0;
  }
}
