#include "graph/dtype.h"

#include "membudget/membudget.h"

typedef struct dtype_info {
  const char *name;
  uint8_t bits;   /* per element; 0 = unknown size (STRING) */
  uint8_t cls;    /* mb_dtype_class */
} dtype_info;

/* Indexed by the ONNX TensorProto.DataType value. */
static const dtype_info dtypes[] = {
  [MB_DTYPE_UNDEFINED] = {"undefined", 0, MB_DCLASS_UNKNOWN},
  [MB_DTYPE_FLOAT] = {"float", 32, MB_DCLASS_FLOAT},
  [MB_DTYPE_UINT8] = {"uint8", 8, MB_DCLASS_INT},
  [MB_DTYPE_INT8] = {"int8", 8, MB_DCLASS_INT},
  [MB_DTYPE_UINT16] = {"uint16", 16, MB_DCLASS_INT},
  [MB_DTYPE_INT16] = {"int16", 16, MB_DCLASS_INT},
  [MB_DTYPE_INT32] = {"int32", 32, MB_DCLASS_INT},
  [MB_DTYPE_INT64] = {"int64", 64, MB_DCLASS_INT},
  [MB_DTYPE_STRING] = {"string", 0, MB_DCLASS_STRING},
  [MB_DTYPE_BOOL] = {"bool", 8, MB_DCLASS_BOOL},
  [MB_DTYPE_FLOAT16] = {"float16", 16, MB_DCLASS_FLOAT},
  [MB_DTYPE_DOUBLE] = {"double", 64, MB_DCLASS_FLOAT},
  [MB_DTYPE_UINT32] = {"uint32", 32, MB_DCLASS_INT},
  [MB_DTYPE_UINT64] = {"uint64", 64, MB_DCLASS_INT},
  [MB_DTYPE_COMPLEX64] = {"complex64", 64, MB_DCLASS_COMPLEX},
  [MB_DTYPE_COMPLEX128] = {"complex128", 128, MB_DCLASS_COMPLEX},
  [MB_DTYPE_BFLOAT16] = {"bfloat16", 16, MB_DCLASS_FLOAT},
  [MB_DTYPE_FLOAT8E4M3FN] = {"float8e4m3fn", 8, MB_DCLASS_FLOAT},
  [MB_DTYPE_FLOAT8E4M3FNUZ] = {"float8e4m3fnuz", 8, MB_DCLASS_FLOAT},
  [MB_DTYPE_FLOAT8E5M2] = {"float8e5m2", 8, MB_DCLASS_FLOAT},
  [MB_DTYPE_FLOAT8E5M2FNUZ] = {"float8e5m2fnuz", 8, MB_DCLASS_FLOAT},
  [MB_DTYPE_UINT4] = {"uint4", 4, MB_DCLASS_INT},
  [MB_DTYPE_INT4] = {"int4", 4, MB_DCLASS_INT},
  [MB_DTYPE_FLOAT4E2M1] = {"float4e2m1", 4, MB_DCLASS_FLOAT},
  [MB_DTYPE_FLOAT8E8M0] = {"float8e8m0", 8, MB_DCLASS_FLOAT},
};
#define N_DTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

static const dtype_info *info(int dtype) {
  return dtype >= 0 && dtype < N_DTYPES ? &dtypes[dtype] : NULL;
}

MB_API const char *mb_dtype_name(int dtype) {
  const dtype_info *i = info(dtype);
  return i ? i->name : "unknown";
}

MB_API int mb_dtype_bits(int dtype) {
  const dtype_info *i = info(dtype);
  return i ? i->bits : 0;
}

MB_API int mb_dtype_bytes(int dtype, uint64_t numel, uint64_t *bytes) {
  int bits = mb_dtype_bits(dtype);
  if (!bytes) return MB_E_INVALID_ARG;
  if (bits == 0) return MB_E_UNSUPPORTED;
  if (bits < 8) { /* packed: 8 / bits elements per byte, rounded up */
    uint64_t per_byte = 8u / (unsigned)bits;
    *bytes = numel / per_byte + (numel % per_byte != 0);
    return MB_OK;
  }
  uint64_t size = (uint64_t)bits / 8u;
  if (numel > UINT64_MAX / size) return MB_E_LIMIT;
  *bytes = numel * size;
  return MB_OK;
}

mb_dtype_class mb_dtype_class_of(int dtype) {
  const dtype_info *i = info(dtype);
  return i ? (mb_dtype_class)i->cls : MB_DCLASS_UNKNOWN;
}

bool mb_dtype_is_float(int dtype) { return mb_dtype_class_of(dtype) == MB_DCLASS_FLOAT; }

bool mb_dtype_is_integer_like(int dtype) {
  mb_dtype_class c = mb_dtype_class_of(dtype);
  return c == MB_DCLASS_INT || c == MB_DCLASS_BOOL;
}
