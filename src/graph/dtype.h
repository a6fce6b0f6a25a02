/* Facts about the IR's data types (ONNX TensorProto.DataType values), from one table. */
#ifndef MB_GRAPH_DTYPE_H
#define MB_GRAPH_DTYPE_H
#include <stdbool.h>
#include <stdint.h>

typedef enum mb_dtype_class {
  MB_DCLASS_UNKNOWN = 0,
  MB_DCLASS_FLOAT,   /* floating point, float8 and float4 included */
  MB_DCLASS_INT,     /* signed and unsigned integers, packed int4 included */
  MB_DCLASS_BOOL,
  MB_DCLASS_COMPLEX,
  MB_DCLASS_STRING
} mb_dtype_class;

mb_dtype_class mb_dtype_class_of(int dtype);
bool mb_dtype_is_float(int dtype);
bool mb_dtype_is_integer_like(int dtype); /* int or bool */
#endif
