/*
 * membudget: how much GPU memory will one training step take, where does it go, and which
 * batch size fits? Predicted from an ONNX graph, before the job starts.
 *
 * A first program:
 *
 *     mb_model *model = NULL;
 *     if (mb_model_load_file("resnet18.onnx", &model) != MB_OK) {
 *         fprintf(stderr, "%s\n", mb_model_errmsg(model));   // names file, node or tensor
 *         mb_model_free(model);
 *         return 1;
 *     }
 *     mb_accounting acct = { .struct_size = sizeof acct };
 *     mb_account(model, NULL, &acct);
 *     printf("%llu parameters\n", (unsigned long long)acct.parameters);
 *     mb_model_free(model);
 *
 * Conventions (the same for every function):
 * - Every fallible function returns an int status: MB_OK (0) or a negative mb_status.
 * - Byte and element counts are uint64_t / int64_t, never size_t or int.
 * - Handles come in create/free pairs; every *_free accepts NULL.
 * - A failed load still hands back a model handle (unless memory ran out) so that
 *   mb_model_errmsg() can say what went wrong; free it with mb_model_free().
 * - Returned `const char *` and `const T *` are borrowed: they live as long as their handle.
 *   Returned `char *` is owned by the caller and released with mb_free().
 * - Output structs start with `struct_size`, which the caller sets to sizeof(struct). The
 *   library writes only the fields that fit, so structs can grow at the end without breaking
 *   callers. mb_struct_size() tells bindings the library's own size of each struct.
 *
 * Threads: the library has no mutable global state. A loaded mb_model is immutable and may be
 * shared by any number of threads. An mb_setup must not be changed by one thread while
 * another uses it; distinct handles may be used concurrently.
 */
#ifndef MEMBUDGET_H
#define MEMBUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "membudget/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ status and version */

/* Status codes. Values are pinned and never renumbered. */
typedef enum mb_status {
  MB_OK = 0,
  MB_E_NOMEM = -1,         /* out of memory */
  MB_E_INVALID_ARG = -2,   /* the caller passed a bad argument (NULL, bad enum, bad glob) */
  MB_E_IO = -3,            /* a file could not be opened or read */
  MB_E_PARSE = -4,         /* the bytes are not a valid ONNX ModelProto */
  MB_E_INVALID_MODEL = -5, /* valid protobuf, but the graph is inconsistent */
  MB_E_UNSUPPORTED = -6,   /* valid, but uses something membudget does not support */
  MB_E_LIMIT = -7,         /* a size, rank or nesting limit was exceeded */
  MB_E_NO_CUDA = -8,       /* built without CUDA, or no GPU present */
  MB_E_RANGE = -9          /* an index is out of range */
} mb_status;

/* A static, human-readable name for a status code ("invalid model", ...). */
MB_API const char *mb_status_str(int status);

/* Runtime version, to compare with MB_VERSION_NUMBER / MB_VERSION_STRING. */
MB_API unsigned mb_version_number(void);
MB_API const char *mb_version_string(void);

/* Optional features compiled in. */
#define MB_FEATURE_CUDA 0x1u
MB_API unsigned mb_features(void);

/* Release memory returned by the library (JSON strings). Accepts NULL. */
MB_API void mb_free(void *ptr);

/* The library's sizeof() of each versioned struct, for bindings that mirror them. */
typedef enum mb_struct_id {
  MB_STRUCT_TENSOR_DESC = 1,
  MB_STRUCT_INITIALIZER_DESC = 2,
  MB_STRUCT_ACCOUNTING = 3
} mb_struct_id;
MB_API size_t mb_struct_size(int which);

/* ================================================================ data types */

/* ONNX TensorProto.DataType values (the numbering is ONNX's). */
typedef enum mb_dtype {
  MB_DTYPE_UNDEFINED = 0, MB_DTYPE_FLOAT = 1, MB_DTYPE_UINT8 = 2, MB_DTYPE_INT8 = 3,
  MB_DTYPE_UINT16 = 4, MB_DTYPE_INT16 = 5, MB_DTYPE_INT32 = 6, MB_DTYPE_INT64 = 7,
  MB_DTYPE_STRING = 8, MB_DTYPE_BOOL = 9, MB_DTYPE_FLOAT16 = 10, MB_DTYPE_DOUBLE = 11,
  MB_DTYPE_UINT32 = 12, MB_DTYPE_UINT64 = 13, MB_DTYPE_COMPLEX64 = 14, MB_DTYPE_COMPLEX128 = 15,
  MB_DTYPE_BFLOAT16 = 16, MB_DTYPE_FLOAT8E4M3FN = 17, MB_DTYPE_FLOAT8E4M3FNUZ = 18,
  MB_DTYPE_FLOAT8E5M2 = 19, MB_DTYPE_FLOAT8E5M2FNUZ = 20, MB_DTYPE_UINT4 = 21,
  MB_DTYPE_INT4 = 22, MB_DTYPE_FLOAT4E2M1 = 23, MB_DTYPE_FLOAT8E8M0 = 24
} mb_dtype;

/* Lower-case name of a data type ("float", "bfloat16", "int4"); "unknown" if not known. */
MB_API const char *mb_dtype_name(int dtype);
/* Bits per element (4 for int4/uint4/float4); 0 for STRING and unknown types. */
MB_API int mb_dtype_bits(int dtype);
/* Bytes of `numel` elements of `dtype` (sub-byte types packed, rounded up). Returns
 * MB_E_LIMIT on overflow, MB_E_UNSUPPORTED for STRING/unknown. */
MB_API int mb_dtype_bytes(int dtype, uint64_t numel, uint64_t *bytes);

/* ================================================================ models */

typedef struct mb_model mb_model;

/* Load an ONNX model. Weight bytes are never read: sizes come from dims and data type, and
 * initializers whose external data file is absent ("weightless" models) are normal.
 * On success *out is a model and MB_OK is returned. On failure a negative status is
 * returned and *out is a model handle whose mb_model_errmsg() names the problem (or NULL if
 * memory ran out); free it with mb_model_free(). */
MB_API int mb_model_load_file(const char *path, mb_model **out);
/* Same from memory. The buffer is not kept after the call returns. */
MB_API int mb_model_load_buffer(const void *data, size_t size, mb_model **out);
MB_API void mb_model_free(mb_model *model);
/* The message of a failed load, "" after a successful one. */
MB_API const char *mb_model_errmsg(const mb_model *model);

/* Non-fatal findings made while loading (STRING initializers of unknown size, ...). */
MB_API size_t mb_model_num_warnings(const mb_model *model);
MB_API const char *mb_model_warning(const mb_model *model, size_t i);

MB_API int64_t mb_model_ir_version(const mb_model *model);
MB_API const char *mb_model_producer(const mb_model *model); /* "pytorch 1.13.0" or "" */
MB_API size_t mb_model_num_opsets(const mb_model *model);
/* domain "" is the default ONNX domain (ai.onnx). */
MB_API int mb_model_opset(const mb_model *model, size_t i, const char **domain, int64_t *version);

/* A graph input or output: its declared type. */
typedef struct mb_tensor_desc {
  uint32_t struct_size;          /* set to sizeof(mb_tensor_desc) by the caller */
  const char *name;
  int32_t dtype;                 /* mb_dtype */
  int32_t rank;                  /* -1 when the shape is not declared */
  const int64_t *dims;           /* rank values; -1 where the dim is symbolic or unknown */
  const char *const *dim_params; /* rank entries: the symbolic name ("batch") or NULL */
} mb_tensor_desc;

/* Graph inputs exclude initializers that are also listed as inputs (IR version < 4). */
MB_API size_t mb_model_num_inputs(const mb_model *model);
MB_API size_t mb_model_num_outputs(const mb_model *model);
MB_API int mb_model_input(const mb_model *model, size_t i, mb_tensor_desc *out);
MB_API int mb_model_output(const mb_model *model, size_t i, mb_tensor_desc *out);

/* What an initializer is for. Derived from how the graph uses it (see docs/roles.md):
 * - PARAMETER: a floating tensor in a weight position (Conv/Gemm/MatMul weights and biases,
 *   normalisation scales and biases) or any non-scalar floating tensor that is not a buffer;
 * - EMBEDDING: a floating table read by a Gather whose indices depend on a graph input;
 * - BUFFER: BatchNormalization running statistics, and integer/bool tensors that are not
 *   shape-carrying constants (position ids, masks);
 * - CONSTANT: scalars and integer tensors that feed shape inputs (Reshape shape, Slice bounds).
 * Parameters and embeddings are what PyTorch's model.parameters() holds. */
typedef enum mb_role {
  MB_ROLE_PARAMETER = 0,
  MB_ROLE_EMBEDDING = 1,
  MB_ROLE_BUFFER = 2,
  MB_ROLE_CONSTANT = 3
} mb_role;
MB_API const char *mb_role_name(int role);

typedef enum mb_data_location {
  MB_DATA_EMBEDDED = 0, /* bytes are inside the model (not read) */
  MB_DATA_EXTERNAL = 1, /* bytes are in an external file (not read; may be absent) */
  MB_DATA_EMPTY = 2     /* no data at all (zero elements, or declared without data) */
} mb_data_location;

typedef struct mb_initializer_desc {
  uint32_t struct_size; /* set to sizeof(mb_initializer_desc) by the caller */
  const char *name;
  int32_t dtype;
  int32_t rank;
  const int64_t *dims;
  uint64_t numel;
  uint64_t nbytes;      /* numel x element size (0 for STRING) */
  int32_t role;         /* mb_role, as derived from the graph */
  int32_t location;     /* mb_data_location */
  int32_t is_sparse;    /* 1 for a sparse_initializer (counted at its dense size) */
  int32_t num_uses;     /* how many node inputs read it (tied weights: > 1) */
  const char *external_file; /* location key of external data, or NULL */
  int32_t subgraph;     /* 1 if it belongs to an If/Loop/Scan body */
} mb_initializer_desc;

/* Initializers of the main graph and of every subgraph, in file order. */
MB_API size_t mb_model_num_initializers(const mb_model *model);
MB_API int mb_model_initializer(const mb_model *model, size_t i, mb_initializer_desc *out);

/* Nodes of the main graph in topological order. */
MB_API size_t mb_model_num_nodes(const mb_model *model);
MB_API int mb_model_node(const mb_model *model, size_t i, const char **op_type,
                         const char **domain, const char **name);

/* ================================================================ training setup */

/* A training setup: which parameters train, and (later) optimizer, precision, device.
 * Mutable; independent of any model, so one setup can be applied to many models. */
typedef struct mb_setup mb_setup;
MB_API int mb_setup_create(mb_setup **out);
MB_API void mb_setup_free(mb_setup *setup);
MB_API const char *mb_setup_errmsg(const mb_setup *setup);

/* Glob patterns (`*`, `?`, `[...]`) on initializer names. A parameter or embedding is frozen
 * when it matches a freeze pattern and no trainable pattern: trainable wins. Everything is
 * trainable by default, so "train only LoRA" is freeze "*" plus trainable "*lora*".
 * Buffers and constants never train. */
MB_API int mb_setup_add_freeze(mb_setup *setup, const char *glob);
MB_API int mb_setup_add_trainable(mb_setup *setup, const char *glob);
/* Give a named (symbolic) dim a value, e.g. "batch" = 8, "sequence" = 512. */
MB_API int mb_setup_set_dim(mb_setup *setup, const char *name, int64_t value);

/* The batch size: it binds the batch dim, which is the dim named by mb_setup_set_batch_dim()
 * or else found automatically (the symbolic dim on axis 0 of the graph inputs). If every
 * input is static, axis 0 of each input is taken as the batch axis, and mb_shapes_note()
 * says so. An explicit mb_setup_set_dim() of the same name wins. */
MB_API int mb_setup_set_batch(mb_setup *setup, int64_t batch);
MB_API int mb_setup_set_batch_dim(mb_setup *setup, const char *name);

/* Bind graph input `position` (as in mb_model_input) to a concrete tensor: a serialized ONNX
 * TensorProto. Its dtype and shape replace the declared ones, and the values of small numeric
 * tensors feed shape inference (a Reshape target, Slice bounds, Resize sizes). */
MB_API int mb_setup_bind_input(mb_setup *setup, size_t position, const void *tensor_pb,
                               size_t size);
/* Bind input_0.pb, input_1.pb, ... of a directory (the layout of ONNX's test data sets). */
MB_API int mb_setup_bind_input_dir(mb_setup *setup, const char *dir);

/* 1 if initializer i trains under this setup (setup may be NULL), 0 if not, <0 on error. */
MB_API int mb_initializer_trainable(const mb_model *model, const mb_setup *setup, size_t i);

/* ================================================================ accounting */

typedef struct mb_role_total {
  uint64_t tensors;
  uint64_t numel;
  uint64_t bytes;
} mb_role_total;

typedef struct mb_accounting {
  uint32_t struct_size;               /* set to sizeof(mb_accounting) by the caller */
  mb_role_total trainable_parameters; /* excluding embeddings */
  mb_role_total frozen_parameters;
  mb_role_total trainable_embeddings;
  mb_role_total frozen_embeddings;
  mb_role_total buffers;
  mb_role_total constants;
  uint64_t parameters;           /* numel of parameters + embeddings: PyTorch's count */
  uint64_t trainable;            /* numel that trains */
  uint64_t unknown_size_tensors; /* STRING initializers, counted with 0 bytes */
} mb_accounting;

/* Count every initializer by role (setup may be NULL: everything trainable). A tensor shared
 * by several nodes (tied weights) counts once. */
MB_API int mb_account(const mb_model *model, const mb_setup *setup, mb_accounting *out);

/* The whole `membudget info` report as JSON (raw byte integers, "schema_version"). The string
 * is the caller's, to release with mb_free(). */
MB_API int mb_model_info_json(const mb_model *model, const mb_setup *setup, char **out_json);

/* ================================================================ shapes (in progress)
 * Shape and dtype of every tensor of the main graph at one set of dim values. Covers the ops
 * of `mb_op_*` in src/ops/; subgraph ops (If/Loop/Scan) are not inferred yet. */

typedef struct mb_shapes mb_shapes;
/* On failure *out still holds the message (mb_shapes_errmsg); free it with mb_shapes_free. */
MB_API int mb_infer_shapes(const mb_model *model, const mb_setup *setup, mb_shapes **out);
MB_API void mb_shapes_free(mb_shapes *shapes);
MB_API const char *mb_shapes_errmsg(const mb_shapes *shapes);
/* Something the caller should be told about how dims were bound ("" if nothing). */
MB_API const char *mb_shapes_note(const mb_shapes *shapes);
/* The automatically found batch dim of a model (symbolic axis 0 of its inputs), or NULL. */
MB_API const char *mb_model_batch_dim(const mb_model *model);
MB_API size_t mb_shapes_num_tensors(const mb_shapes *shapes);

typedef struct mb_shape_desc {
  uint32_t struct_size;  /* set to sizeof(mb_shape_desc) by the caller */
  const char *name;
  const char *producer;  /* node name, NULL for inputs and initializers */
  const char *op_type;   /* producer's op, NULL for inputs and initializers */
  int32_t dtype;
  int32_t rank;          /* -1: not inferred (an unused optional output) */
  const int64_t *dims;
  uint64_t nbytes;
  int32_t known;         /* 1 when dtype and shape are known */
} mb_shape_desc;
MB_API int mb_shapes_tensor(const mb_shapes *shapes, size_t i, mb_shape_desc *out);

/* The operator table: entry i's domain ("" = ai.onnx), op type and first opset version. */
MB_API size_t mb_ops_num(void);
MB_API int mb_ops_get(size_t i, const char **domain, const char **op_type, int *since_version);

#ifdef __cplusplus
}
#endif
#endif
