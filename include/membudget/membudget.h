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
  MB_STRUCT_ACCOUNTING = 3,
  MB_STRUCT_BUDGET = 4,
  MB_STRUCT_EVENT = 5,
  MB_STRUCT_SHAPE_DESC = 6,
  MB_STRUCT_DEVICE_INFO = 7,
  MB_STRUCT_REPLAY = 8,
  MB_STRUCT_MODULE_INFO = 9,
  MB_STRUCT_PEAK_TENSOR = 10,
  MB_STRUCT_ADVICE_LINE = 11
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
/* Where node i came from in PyTorch: its dotted module path as PyTorch names it
 * ("layer1.0.conv1", "model.layers.3.self_attn"; "" at the top level; NULL when the export does
 * not say), read from torch 2.x's node metadata or a TorchScript node name
 * ("/layer1/layer1.0/conv1/Conv"); and, for torch 2.x dynamo exports, the aten op the node was
 * translated from ("aten.conv2d.default"; NULL otherwise) and the Python function that ran it,
 * the innermost frame of its stack trace ("integrations/sdpa_attention.py:repeat_kv"; NULL
 * otherwise). Any pointer may be NULL. */
MB_API int mb_model_node_origin(const mb_model *model, size_t i, const char **module,
                                const char **aten, const char **site);

/* Signs that the graph was exported for inference, not training: estimating it as a training
 * step would answer a different question (BatchNorm folded into Conv leaves no activations to
 * keep, an inference-mode Dropout keeps no mask). mb_estimate refuses such a graph unless the
 * setup's accept_inference_graph is set. Each sign names the first node showing it. */
typedef enum mb_inference_sign_kind {
  MB_SIGN_OPTIMIZED = 1,         /* rewritten by onnxscript's optimizer (optimize=True) */
  MB_SIGN_BN_FOLDED = 2,         /* BatchNorm folded into the preceding Conv */
  MB_SIGN_BN_INFERENCE = 3,      /* BatchNormalization normalising with its running statistics */
  MB_SIGN_DROPOUT_INFERENCE = 4, /* Dropout in inference mode (training_mode false) */
  MB_SIGN_DROPOUT_REMOVED = 5    /* Dropout replaced by Identity (an eval-mode TorchScript export) */
} mb_inference_sign_kind;
MB_API size_t mb_model_num_inference_signs(const mb_model *model);
/* Sign i: its kind, the first node showing it, how many nodes show it, and a sentence saying
 * what was found. Pointers live as long as the model; any may be NULL. */
MB_API int mb_model_inference_sign(const mb_model *model, size_t i, int *kind, const char **node,
                                   int64_t *count, const char **message);

/* ================================================================ training setup */

/* (mb_setup_apply_recorded, below: the setup a model file recorded) */

/* A training setup: which parameters train, and (later) optimizer, precision, device.
 * Mutable; independent of any model, so one setup can be applied to many models. */
typedef struct mb_setup mb_setup;
MB_API int mb_setup_create(mb_setup **out);
MB_API void mb_setup_free(mb_setup *setup);
MB_API const char *mb_setup_errmsg(const mb_setup *setup);
/* The training setup the exporter recorded in the model file (membudget.hf --save-onnx writes
 * ModelProto.metadata_props "membudget.setup.freeze", ".trainable", ".checkpoint" and ".loop",
 * one value per line), applied to what the setup leaves unset: freeze/trainable when it names
 * neither, checkpoint when it has none, loop when neither loop nor hold_outputs was set. The
 * CLI applies it unless --ignore-recorded-setup. applied (may be NULL) receives what was taken
 * ("trainable (12 globs), loop trainer"; "" for nothing). MB_E_UNSUPPORTED names a recorded key
 * this library does not know. */
MB_API int mb_setup_apply_recorded(mb_setup *setup, const mb_model *model, char *applied, size_t size);

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
 * says so. An explicit mb_setup_set_dim() of the same name wins. batch 0 takes a batch size
 * back (none set: mb_estimate solves for it). */
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
/* Data-dependent sizes that were bounded by a default rule because the setup gave no value for
 * them: a NonZero or Compress over a bool mask (at most the mask's elements), the number of
 * graphs PyTorch Geometric computes as ReduceMax(batch) + 1 (the batch in graphs with
 * per-sample dims, else at most the node count). Each names its node, the tensor whose
 * mb_setup_set_dim (--dim TENSOR=N) overrides it, the value assumed and why. Strings live as
 * long as the shapes. */
MB_API size_t mb_shapes_num_assumptions(const mb_shapes *shapes);
MB_API int mb_shapes_assumption(const mb_shapes *shapes, size_t i, const char **node, const char **op_type,
                                const char **tensor, int64_t *value, const char **why);

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
/* Entry i's arity at the opsets it covers, from the ONNX schema: the inputs that must be given,
 * and the most input and output slots a node may have (-1: any number, a variadic op). A node
 * with more is refused at load. */
MB_API int mb_ops_arity(size_t i, int *min_inputs, int *max_inputs, int *max_outputs);

/* ================================================================ estimate
 * One training step simulated at a batch size as PyTorch runs it: forward (outputs allocated,
 * tensors kept for backward), loss, backward (activation grads, parameter grads), optimizer
 * step. The budget reports its peaks and parts; without a batch size in the setup the largest
 * batch size that fits the device is found by bisection. docs/estimate.md has the model. */

/* Training-setup options by name; the CLI's flags and the Python keywords map onto these.
 *   optimizer         sgd | sgd-momentum (or momentum) | adam | adamw | adam-amsgrad | adamw-amsgrad |
 *                     adamw-8bit | adafactor | lion | rmsprop | adagrad        (default adamw)
 *   precision         fp32 | amp-fp16 | amp-bf16 | fp16 | bf16                 (default fp32)
 *   master_weights    0 | 1: fp32 master weights for fp16/bf16 training        (default 0)
 *   attention         auto | fused | eager: auto runs attention as the graph shows it (an
 *                     SDPA op or a fused pattern fused, MatMul-Softmax-MatMul eager)  (default auto)
 *   loss              auto | ce | mse | none                                   (default auto)
 *   loss_dtype        auto | fp32: fp32 computes the loss on the output cast to fp32 in every
 *                     precision, as Hugging Face's causal-LM loss does; auto only under
 *                     autocast, in the output's dtype in pure fp16/bf16       (default auto)
 *   ema               0 | 1: an exponential-moving-average copy of the model   (default 0)
 *   teacher_offload   0 | 1: teacher weights on the CPU, one layer resident    (default 0)
 *   checkpoint        GLOB on module paths of node names; adds one, repeatable
 *   grad_accumulation micro-batches per optimizer step                         (default 1)
 *   gpu               a name from mb_gpu_* (sets device_memory and the cuBLAS workspace)
 *   device_memory     bytes, with an optional unit: 80GiB, 24GB, 16000MiB
 *   utilization       target fraction of device memory, 0 < u <= 1             (default 0.9)
 *   batch_min, batch_max   bounds of the batch-size search                     (default 1, 65536)
 *   batch_multiple    round the solved batch size down to a multiple           (default 1)
 *   context           CUDA context and kernel images (default from the context table: the GPU's
 *                     generation, cuda_version, driver_version, module_loading; 500MiB unknown)
 *   reserved          allocator | allowance: reserved memory from the model of PyTorch's caching
 *                     allocator (default on cuda) or allocated / (1 - fragmentation)
 *   alloc_conf        a PYTORCH_CUDA_ALLOC_CONF string for the allocator model, e.g.
 *                     "expandable_segments:True,max_split_size_mb:128"          (default "")
 *   fragmentation     the flat allowance, a fraction of the reserved peak (default 0.1); setting
 *                     it selects reserved allowance
 *   cublas_workspace  bytes per cuBLAS workspace (default from the GPU; 32MiB if unknown)
 *   cublaslt_workspace bytes of a separate cuBLASLt workspace per thread (default 0: it shares
 *                     the cuBLAS one, as PyTorch's OSS builds do)
 *   cudnn_workspace   the most one convolution call's cuDNN workspace takes, or auto (default:
 *                     input + output + weight bytes, the measured rule; 0: none)
 *   cuda_version      the CUDA runtime, e.g. 12.8 (below 11.7: eager module loading)
 *   driver_version    the driver, e.g. 550 (below 515: eager module loading)
 *   module_loading    lazy | eager: CUDA_MODULE_LOADING                         (default lazy)
 *   rounding          allocator block size (default 512; 1 counts exact tensor bytes)
 *   backend           cuda | cpu: which PyTorch's kernels and allocator (default cuda). cpu
 *                     models CPU training (dropout keeps an input-sized noise tensor, not a
 *                     bool mask; no cuBLAS) and sets the defaults foreach 0, rounding 1,
 *                     fragmentation 0, context 0; options set after it override them
 *   foreach           0 | 1: the optimizer's multi-tensor step (default 1 on cuda, 0 on cpu)
 *   accept_inference_graph 0 | 1: estimate a graph showing inference-export signs as it is
 *                     (mb_model_inference_sign) instead of failing            (default 0)
 *   transformers      eager | as-exported: Hugging Face transformers skip a causal mask and
 *                     repeated GQA keys/values in eager training that they build under
 *                     export; eager charges what training runs                (default eager)
 *   grad_sum          inplace | copy: how autograd sums two gradients of one tensor (a weight
 *                     used twice, an activation read by several ops): in place (PyTorch 2,
 *                     default) or into a new tensor (PyTorch 1.13 and before)
 * Batches of graphs (see "batches of graphs" below):
 *   per_sample        dims that grow with the batch and their count per graph:
 *                     "nodes=37,edges=120" (a count of 1: the dim is the batch itself); "" clears
 *   batch_unit        what the batch size counts, a word    (default "graphs" with per-sample
 *                     dims, else "samples")
 *   graph_sizes       a CSV file of the data set's graph sizes: a header naming per-sample dims
 *                     ("nodes,edges"), then one row of counts per graph; "" clears
 *   graph_quantile    Q in (0, 1]: budget for that quantile of random batches instead of the
 *                     worst batch ("largest", the default, goes back to the worst batch)
 *   graph_batches     random batches sampled for graph_quantile               (default 1000)
 * Evaluation inside training and cached teacher outputs (docs/estimate.md, "Evaluation inside
 * training"):
 *   eval_batch        N | train: after each step, a no-grad forward of the model in eval mode
 *                     (dropout off, BatchNorm on running statistics) at batch N, or at the
 *                     training batch; "", "none" or 0: no evaluation phase        (default "")
 *   zero_grad         none | zero | none-at-start | before-backward: optimizer.zero_grad()
 *                     after the step with set_to_none (evaluation without .grad),
 *                     set_to_none=False (.grad never freed: through every step and the
 *                     evaluation), set_to_none at the start of each step (evaluation with the
 *                     last step's .grad), or after the next forward, before its backward
 *                     (Lightning's closure: the last step's .grad through the forward)
 *                                                         (default: the loop's; plain: none)
 * The training loop around the step (docs/estimate.md, "The training loop"):
 *   loop              plain | trainer | lightning | accelerate: a preset of the keys below and
 *                     zero_grad (plain: next, none, no clipping; trainer: loss, none, 1.0;
 *                     lightning: loss, before-backward, none; accelerate: next, none, none);
 *                     keys given win over the preset, in any order          (default plain)
 *   hold_outputs      loss | backward | step | next: when the loop lets go of the model's
 *                     outputs and the loss: all but the loss once it is computed (Trainer), both
 *                     when backward returns, after optimizer.step() and zero_grad(), or when
 *                     the next iteration rebinds them                 (default: the loop's)
 *   max_grad_norm     0 | NORM: clip_grad_norm_ after backward          (default: the loop's)
 *   grad_scaler       auto | 0 | 1: torch.amp.GradScaler under fp16           (default auto)
 *   ema_swap          0 | 1: diffusers' EMAModel.store() + copy_to() around the evaluation
 *                     (needs ema)                                              (default 0)
 *   eval_keep_outputs K: the evaluation keeps K batches of outputs alive       (default 0)
 *   teacher_cache     N: N batches of the teacher's outputs stay on the device (needs a
 *                     teacher)                                                 (default 0)
 * Where the memory goes and what would make it fit (mb_estimate_json; mb_modules_create and
 * mb_advise take their own arguments):
 *   by_module         0 | 1: add the module tree ("modules") to the JSON            (default 0)
 *   module_depth      N: the deepest level of the tree written; 0 every level       (default 0)
 *   top               N: the N largest tensors alive at the allocated peak ("top")  (default 0)
 *   advise            never | auto | always: "advice" in the JSON; auto when the budget does
 *                     not fit or a given batch is within 10% of the usable memory (default never)
 *   advise_trainable  GLOB: what the freezing what-if trains (default LoRA adapters, else the
 *                     last module with parameters)
 * Several GPUs: the budget is one rank's at its own batch size (docs/distributed.md):
 *   world_size        N ranks                                                   (default 1)
 *   strategy          none | ddp | fsdp                                         (default none)
 *   gradient_as_bucket_view 0 | 1: DDP's .grad tensors are views of its buckets (default 0)
 *   bucket_cap_mb     DDP's bucket size in MiB (the first bucket: 1 MiB)        (default 25)
 *   fsdp_sharding     full_shard | shard_grad_op | no_shard | hybrid_shard      (default full_shard)
 *   fsdp_wrap         GLOB on module paths: a unit per module it names; adds one, "" clears
 *   gpus_per_node     N: hybrid_shard's shard group                             (default 8)
 *   fsdp_version      1 | 2: FullyShardedDataParallel (flat parameters) or fully_shard (default 2)
 *   fsdp_reshard_root 0 | 1: the root unit resharded after forward too, as
 *                     fully_shard(model, reshard_after_forward=True)            (default 0)
 *   zero1 | zero2 | zero3 strategies: reduce_bucket_size (elements, default 5e8),
 *                     overlap_comm (0 | 1), stage3_param_persistence_threshold (default 1e5)
 *   offload           none | optimizer | params: what lives in host memory (ZeRO-Offload,
 *                     ZeRO-3 offload_param, FSDP CPUOffload = params)             (default none)
 *   stage3_prefetch_bucket_size  elements ZeRO-3 gathers ahead of use          (default 5e7)
 *   stage3_max_live_parameters   gathered elements above which ZeRO-3 prefetches nothing (1e9)
 *   stage3_max_reuse_distance    a module used again within this many elements stays
 *                     gathered                                                  (default 1e9)
 *   allgather_bucket_size        ZeRO-1/2 (elements; no device memory)        (default 5e8)
 *   contiguous_gradients         0 | 1: ZeRO's reduction buffer                (default 1)
 * Measured mode (mb_measure_*) only:
 *   cuda_device       the CUDA device ordinal to measure                       (default 0)
 *   cuda_runtime      path or file name of libcudart      (default: libcudart.so.13, .12, ...)
 *   cuda_driver, nvml_library, cublas_library, cublaslt_library, cudnn_library
 *                     the same for libcuda, libnvidia-ml, libcublas, libcublasLt, libcudnn;
 *                     "" leaves that optional library out (its figures are then not measured)
 * Limits on untrusted input (docs/limits.md: each default and why). Exceeding one fails with
 * MB_E_LIMIT and a message naming the limit and its value; 0 restores the default. The first
 * seven apply when a model is loaded with mb_model_load_file_setup / _buffer_setup, unroll
 * when shapes are inferred (mb_infer_shapes, mb_estimate, ...):
 *   limit.file_bytes     size of the model file or of what a pipe delivers    (default 4GiB)
 *   limit.nodes          nodes in the model, subgraphs included              (default 1000000)
 *   limit.tensors        tensors defined in the model (inputs, initializers,
 *                        node outputs), subgraphs included                   (default 4000000)
 *   limit.subgraph_depth If/Loop/Scan bodies nested in one another, at most 64   (default 32)
 *   limit.rank           dims of a declared tensor, at most 64                    (default 64)
 *   limit.attr_bytes     the values of one attribute (ints, floats, strings)  (default 16MiB)
 *   limit.string_bytes   one name, op type, domain, dim name or data location  (default 1MiB)
 *   limit.unroll         Loop body passes unrolled in one inference; a Loop past it is
 *                        inferred once, and a failure there names the limit     (default 4096)
 * Unknown keys and bad values fail with MB_E_INVALID_ARG and a message naming them. */
MB_API int mb_setup_set(mb_setup *setup, const char *key, const char *value);
/* A frozen teacher model run forward without grad each step (distillation), or NULL. The
 * caller keeps it alive while the setup uses it. */
MB_API int mb_setup_set_teacher(mb_setup *setup, const mb_model *teacher);

/* mb_model_load_file / mb_model_load_buffer under the setup's limit.* keys (NULL: the
 * defaults, which the plain functions use). Only the limits are read from the setup; the
 * model does not keep it. Every file load (this one and mb_model_load_file) checks where each
 * external-data location points, without opening it: a location that is absolute, climbs out with "..",
 * resolves (through symlinks) outside the model's directory, or names something other than a
 * regular file (a directory, FIFO, device or socket) fails with MB_E_INVALID_MODEL naming the
 * tensor; a location that does not exist is a weightless model, as before. A buffer load
 * checks the first two (it has no directory). */
MB_API int mb_model_load_file_setup(const char *path, const mb_setup *setup, mb_model **out);
MB_API int mb_model_load_buffer_setup(const void *data, size_t size, const mb_setup *setup,
                                      mb_model **out);

/* ---------------------------------------------------------------- batches of graphs
 * A graph neural network trains on batches of small graphs: PyTorch Geometric concatenates G
 * graphs into one graph of N nodes and E edges, so several symbolic dims grow with the batch.
 * The setup key per_sample ("nodes=37,edges=120") names them with their count per graph: a batch
 * size G then binds nodes = 37 G and edges = 120 G (a count of 1 makes a dim the batch itself,
 * as a "graphs" dim of per-graph targets), the batch-size solve answers in graphs, and
 * batch_unit (default "graphs" then) names what batch_size counts.
 * Real data sets vary. Given the size of every graph (the setup key graph_sizes, a CSV file,
 * or mb_setup_set_graph_sizes), a batch of G graphs is the worst batch a shuffled loader can
 * produce: each per-sample dim takes the sum of its G largest values in the table, which no
 * batch of G graphs of the data set exceeds in any dim (the graphs with the most nodes need
 * not be those with the most edges: an upper bound, exact when one order ranks both); with
 * graph_quantile Q, the smallest such point that covers, dim by dim, a fraction Q of
 * graph_batches (default 1000) random batches of G graphs drawn with a fixed seed. A batch
 * cannot hold more graphs than the table: the solve stops there. docs/estimate.md, "Batches of
 * graphs", has the details. */
typedef enum mb_batch_rule {
  MB_BATCH_PLAIN = 0,      /* the batch dim is the batch size (no per-sample dims) */
  MB_BATCH_PER_SAMPLE = 1, /* each per-sample dim = its count per graph x the batch */
  MB_BATCH_LARGEST = 2,    /* graph sizes: each dim's `batch` largest values summed */
  MB_BATCH_QUANTILE = 3    /* graph sizes: a quantile of random batches */
} mb_batch_rule;

/* The sizes of every graph of a data set: counts[g * n_dims + k] is dim dims[k] of graph g (an
 * integer >= 0). Copied. The dims become per-sample dims; for those also in per_sample the
 * table's sizes win. n_graphs == 0 clears the table. */
MB_API int mb_setup_set_graph_sizes(mb_setup *setup, const char *const *dims, size_t n_dims,
                                    const int64_t *counts, size_t n_graphs);
/* The per-sample dims: per_sample's in the order given, then graph-size columns not among
 * them. Names live until the setup's per-sample dims change. */
MB_API size_t mb_setup_num_sample_dims(const mb_setup *setup);
MB_API const char *mb_setup_sample_dim(const mb_setup *setup, size_t i);
/* Their values for a batch of `batch` graphs under the setup's rule, into values[0..n) (n at
 * least mb_setup_num_sample_dims). A batch larger than the graph-size table fails with
 * MB_E_INVALID_ARG and a message in mb_setup_errmsg. */
MB_API int mb_setup_sample_dims_at(mb_setup *setup, int64_t batch, int64_t *values, size_t n);
/* One sentence naming the batch of `batch` graphs the estimate budgets for ("the 256 largest
 * graphs of 10,000 in sizes.csv: 9,472 nodes, 30,720 edges (each dim's 256 largest values
 * summed)"); "" without per-sample dims. Writes at most size bytes (NUL-terminated); returns
 * the length it needed (0 on error, the message in mb_setup_errmsg). */
MB_API size_t mb_setup_describe_batch(mb_setup *setup, int64_t batch, char *buf, size_t size);

/* The GPU table: name ("h100-80gb"), description and memory in bytes. */
MB_API size_t mb_gpu_num(void);
MB_API int mb_gpu_get(size_t i, const char **name, const char **description, uint64_t *memory);

typedef enum mb_phase {
  MB_PHASE_SETUP = 0,   /* state that exists before the step: weights, optimizer states */
  MB_PHASE_TEACHER = 1, /* the teacher's forward, without grad */
  MB_PHASE_FORWARD = 2,
  MB_PHASE_LOSS = 3,
  MB_PHASE_BACKWARD = 4,
  MB_PHASE_OPTIMIZER = 5,
  MB_PHASE_EVAL = 6,    /* evaluation inside training (eval_batch): after the step, no grad */
  MB_PHASE_COUNT = 7
} mb_phase;
MB_API const char *mb_phase_name(int phase);

typedef enum mb_category {
  MB_CAT_PARAMETER = 0, MB_CAT_EMBEDDING = 1, MB_CAT_BUFFER = 2, MB_CAT_GRADIENT = 3,
  MB_CAT_OPTIMIZER = 4, MB_CAT_MASTER = 5, MB_CAT_EMA = 6, MB_CAT_TEACHER = 7,
  MB_CAT_INPUT = 8,       /* the batch and its targets */
  MB_CAT_ACTIVATION = 9,  /* forward outputs, kept for backward or not yet consumed */
  MB_CAT_ACT_GRAD = 10,   /* gradients of activations during backward */
  MB_CAT_TEMPORARY = 11,  /* autocast copies, backward and optimizer temporaries */
  MB_CAT_WORKSPACE = 12,  /* cuBLAS workspaces */
  MB_CAT_COUNT = 13
} mb_category;
MB_API const char *mb_category_name(int category);

typedef enum mb_mode { MB_MODE_STATIC = 0, MB_MODE_MEASURED = 1 } mb_mode;

/* The training loop around the step (setup key loop): a preset of what it holds and does. */
typedef enum mb_loop {
  MB_LOOP_PLAIN = 0,      /* a loop of its own, without del: hold_outputs next */
  MB_LOOP_TRAINER = 1,    /* transformers' Trainer: hold_outputs loss, max_grad_norm 1 */
  MB_LOOP_LIGHTNING = 2,  /* Lightning's automatic optimization: hold_outputs loss, zero_grad
                           * before-backward */
  MB_LOOP_ACCELERATE = 3  /* Accelerate's loop (the user's own): hold_outputs next */
} mb_loop;
/* When the loop lets go of the model's outputs (`out`) and the loss (setup key hold_outputs). */
typedef enum mb_hold_outputs {
  MB_HOLD_LOSS = 0,       /* the outputs once the loss is computed, the loss when backward ends */
  MB_HOLD_BACKWARD = 1,   /* both when backward ends */
  MB_HOLD_STEP = 2,       /* both after optimizer.step() and zero_grad() */
  MB_HOLD_NEXT = 3        /* both when the next iteration rebinds them: the previous ones are
                           * alive through the next forward */
} mb_hold_outputs;
MB_API const char *mb_loop_name(int loop);
MB_API const char *mb_loop_description(int loop); /* the preset's habits, one sentence */
MB_API const char *mb_hold_name(int hold);

/* Where reserved_peak comes from. */
typedef enum mb_reserved_source {
  MB_RESERVED_ALLOCATOR = 0, /* the model of PyTorch's caching allocator (docs/allocator.md) */
  MB_RESERVED_ALLOWANCE = 1  /* allocated_peak / (1 - fragmentation), rounded to 2 MiB */
} mb_reserved_source;

/* Bytes are device bytes: every tensor rounded up to the allocator's block size. */
typedef struct mb_budget {
  uint32_t struct_size;          /* set to sizeof(mb_budget) by the caller */
  int32_t mode;                  /* mb_mode */
  int64_t batch_size;            /* solved, or the one asked for (the micro-batch) */
  int64_t grad_accumulation;     /* effective batch = batch_size x grad_accumulation */
  int32_t fits;                  /* 1 when the device peak (the larger of device_peak and
                                  * eval_device_peak) is at most usable_memory and every request
                                  * found room on the device (allocator_ooms == 0); 0 when not;
                                  * -1 without a device memory */
  int32_t solved;                /* 1 when batch_size came from the search */
  int32_t peak_phase;            /* mb_phase of the allocated peak */
  int32_t reserved_;
  /* persistent parts */
  uint64_t params_trainable, params_frozen, embeddings, buffers;
  uint64_t gradients, optimizer_states, master_weights, ema, teacher_weights;
  uint64_t workspace;            /* cuBLAS workspaces (allocated through PyTorch) */
  uint64_t static_bytes;         /* the sum of the persistent parts above */
  /* batch-dependent parts */
  uint64_t inputs;               /* the batch and its targets on the device */
  uint64_t activations;          /* kept for backward at the end of forward */
  uint64_t teacher_activations;  /* the teacher forward's transient peak */
  uint64_t dynamic_peak;         /* allocated_peak - static_bytes */
  uint64_t dynamic_fixed, dynamic_per_sample; /* per_sample: what one more sample adds to the
                                  * batch-driven peak (forward, backward); dynamic_peak = fixed +
                                  * per_sample x batch_size (fixed holds the optimizer step's
                                  * temporaries when they are the peak) */
  /* peaks: live bytes through the step (steady state: optimizer states exist) */
  uint64_t forward_peak, backward_peak, optimizer_peak;
  uint64_t first_step_peak;      /* the first step, before optimizer states exist */
  uint64_t allocated_peak;       /* torch.cuda.max_memory_allocated() */
  uint64_t fragmentation;        /* reserved_peak - allocated_peak */
  uint64_t reserved_peak;        /* torch.cuda.max_memory_reserved() */
  uint64_t context;              /* CUDA context, outside PyTorch's allocator */
  uint64_t device_peak;          /* what nvidia-smi shows: reserved + context */
  uint64_t device_memory;
  uint64_t usable_memory;        /* utilization x device_memory */
  int64_t available;             /* usable_memory - the device peak (the larger of device_peak
                                  * and eval_device_peak; negative: short by; usable_memory is 0
                                  * without a device memory) */
  uint64_t at_peak[MB_CAT_COUNT];/* live bytes per mb_category at the allocated peak */
  /* Measured mode only (mode == MB_MODE_MEASURED; 0 in static mode). There allocated_peak,
   * reserved_peak and fragmentation come from the step replayed on the device, context is this
   * process's measured context and library handles, device_peak = the device memory the replay
   * took at its worst + context (when the replay ran out of memory: a lower bound, all the
   * device had), device_memory the device's total unless the setup gives one, and available =
   * usable - other_processes - device_peak. */
  uint64_t measured_fixed;       /* device_peak ~ measured_fixed + measured_per_sample x batch */
  uint64_t measured_per_sample;
  uint64_t static_device_peak;   /* the static estimate's device_peak at the same batch size */
  uint64_t other_processes;      /* device memory in use outside this process when measured */
  uint64_t conv_workspace;       /* the largest cuDNN workspace the replay allocated */
  uint64_t matmul_workspace;     /* the largest cuBLASLt heuristic workspace (served by the
                                  * persistent cuBLAS workspace, not allocated again) */
  /* the caching allocator (reserved_source MB_RESERVED_ALLOCATOR; zeros with the allowance) */
  int32_t reserved_source;       /* mb_reserved_source */
  int32_t allocator_ooms;        /* requests the allocator could not serve within the device */
  uint64_t segments;             /* segments held when reserved peaked (expandable: mapped ranges) */
  uint64_t cached_free;          /* reserved but unallocated bytes then: the fragmentation */
  uint64_t largest_cached_free;  /* the largest free cached block then */
  uint64_t cudnn_workspace;      /* the largest cuDNN workspace one convolution asked for (transient) */
  /* batches of graphs (per_sample, graph sizes: see "batches of graphs" above) */
  char batch_unit[16];           /* what batch_size counts: "samples", or "graphs" (batch_unit) */
  int32_t batch_rule;            /* mb_batch_rule: how the per-sample dims follow batch_size;
                                  * dynamic_per_sample is then memory per graph */
  int32_t assumed_bounds;        /* data-dependent sizes bounded by a default rule, not the
                                  * setup (mb_shapes_assumption lists them) */
  int64_t batch_limit;           /* the most graphs a batch can hold: the graph-size table's
                                  * count (0: no limit) */
  /* the step as people log it, torch.cuda.memory_allocated() between the phases: live bytes
   * when the step leaves setup (weights, states, the batch), forward with the loss (the teacher's
   * forward before it), backward, and the optimizer step. The peaks inside the phases are
   * forward_peak (from the start of the step through the loss), backward_peak and
   * optimizer_peak (each at least the level its phase starts at). */
  uint64_t level_after_setup, level_after_forward, level_after_backward, level_after_optimizer;
  /* evaluation inside training (eval_batch) and the teacher output cache (teacher_cache); zeros
   * without them. The fields above stay the training step's; fits, available and the solved
   * batch size take the larger of device_peak and eval_device_peak. */
  int64_t eval_batch;            /* the evaluation's batch size (0: no evaluation phase) */
  uint64_t eval_peak;            /* allocated: live bytes at the evaluation's peak */
  uint64_t eval_reserved_peak;   /* reserved by a loop of steps and evaluations */
  uint64_t eval_device_peak;     /* eval_reserved_peak + context */
  uint64_t eval_forward;         /* the evaluation batch, its no-grad forward and its outputs:
                                  * the forward's peak above what the evaluation started with */
  uint64_t eval_outputs;         /* eval_keep_outputs batches of outputs */
  uint64_t ema_stored;           /* EMAModel.store's copy of the parameters on the device (a
                                  * CPU copy, 0, on cuda; device memory with backend cpu) */
  uint64_t teacher_cache;        /* teacher_cache batches of the teacher's outputs */
  uint64_t eval_at_peak[MB_CAT_COUNT]; /* live bytes per mb_category at the evaluation's peak */
  /* several GPUs (setup key world_size, docs/distributed.md): the budget is one rank's, at its
   * own batch_size; global_batch_size = batch_size x grad_accumulation x world_size */
  int64_t world_size;
  int64_t global_batch_size;
  uint64_t host_memory;          /* offloaded to the host (setup key offload): optimizer states,
                                  * fp32 master weights and gradients, parameters; not in any
                                  * device figure */
  /* the training loop around the step (setup keys loop, hold_outputs; docs/estimate.md) */
  int32_t loop;                  /* mb_loop */
  int32_t hold_outputs;          /* mb_hold_outputs */
  uint64_t loop_held;            /* the previous iteration's outputs and loss, alive from the
                                  * step's start through its forward (hold_outputs next) */
  int32_t loss_in_graph;         /* 1: the graph's output is the loss (the model computes it, as
                                  * Hugging Face models given labels do); 0: membudget adds the
                                  * loss on the model's output (setup key loss) */
  int32_t reserved2_;
  /* the safety margin (setup key margin; docs/estimate.md "The safety margin"): a share of the
   * usable memory held back from fits, available and the solved batch size, where the GPU
   * truth measured the family's solve above the largest batch that trains */
  double margin;                 /* the share (0: none) */
  uint64_t margin_bytes;         /* margin x usable_memory */
  char margin_family[32];        /* the family the graph was recognised as ("" none) */
  char margin_basis[160];        /* the measurement it comes from, or why there is none */
} mb_budget;

/* On failure the message is in mb_setup_errmsg(setup). */
MB_API int mb_estimate(const mb_model *model, mb_setup *setup, mb_budget *out);
/* The one-line summary: MemoryBudget(total=... static=... [params=... ...] ... mode=static).
 * Writes at most size bytes (NUL-terminated); returns the length it needed. */
MB_API size_t mb_budget_summary(const mb_budget *budget, char *buf, size_t size);
/* The budget (and, with trace != 0, every event of the step) as JSON; the caller frees the
 * string with mb_free(). Runs the estimate itself; budget (may be NULL, struct_size set) also
 * receives it, so a caller needing both does not estimate twice. */
MB_API int mb_estimate_json(const mb_model *model, mb_setup *setup, int trace, char **out_json,
                            mb_budget *budget);

/* The allocation trace of one step at one batch size. */
typedef struct mb_trace mb_trace;
MB_API int mb_trace_create(const mb_model *model, mb_setup *setup, int64_t batch, mb_trace **out);
MB_API void mb_trace_free(mb_trace *trace);
MB_API size_t mb_trace_num_events(const mb_trace *trace);
typedef struct mb_event {
  uint32_t struct_size;  /* set to sizeof(mb_event) by the caller */
  int32_t alloc;         /* 1: allocated, 0: freed */
  int32_t phase;         /* mb_phase */
  int32_t category;      /* mb_category */
  uint64_t bytes;        /* device bytes of this tensor */
  uint64_t live;         /* allocated bytes after the event */
  const char *tensor;    /* ONNX tensor name, or a description ("grad of x", "log_softmax") */
  const char *node;      /* ONNX node name, or NULL */
  int32_t storage;       /* the storage's id: an allocation and its free share it */
} mb_event;
MB_API int mb_trace_event(const mb_trace *trace, size_t i, mb_event *out);

/* ================================================================ pictures
 * SVG documents drawn by the library itself (no plotting dependency), the same for the CLI, C
 * callers and Python; the caller frees the string with mb_free(). Messages of failures go to
 * mb_setup_errmsg(setup). docs/cli.md describes what they show. */

/* The live memory of one simulated step: the allocated bytes after each event, stacked by
 * category, over the events in order (more events than pixel columns: each column keeps its
 * lowest and highest level, so the peak stays visible); the phases shaded and named; the
 * allocated peak marked with its node and module; lines for the device peak, the usable memory
 * and the device memory (when the setup gives one). batch > 0 draws the step at that batch size
 * as an estimate at that batch would run it; 0 draws it at the setup's batch size, else at the
 * solved one. title: a line above the plot (the model's name), or NULL. */
MB_API int mb_timeline_svg(const mb_model *model, mb_setup *setup, int64_t batch, const char *title,
                           char **out_svg);

/* ================================================================ sweeps
 * The budget at several values of the batch size or of one symbolic dim (a sequence length):
 * each point is the budget mb_estimate gives with that value in the setup. A batch sweep runs
 * every value on one plan (the plan the batch-size solve uses); a dim sweep plans each value
 * once, because a plan's structure depends on the dims' values (docs/cli.md, "sweep"), and uses
 * the setup's batch size at each, or solves it there on that value's plan. */
typedef struct mb_sweep mb_sweep;
/* dim NULL or "": sweep the batch size (the setup's batch size is set to each value for the
 * call, then restored); else a symbolic dim of the graph inputs (or a tensor a dim value
 * bounds), set to each value (the setup's own value of it comes back afterwards). values: n
 * values >= 1 in any order, swept ascending, each once. add_solved != 0, with a batch sweep and
 * a device memory in the setup, adds the batch size mb_estimate would solve for as a point of its
 * own (its budget has solved = 1); n may then be 0. On failure *out is NULL and
 * mb_setup_errmsg(setup) names the value that failed. */
MB_API int mb_sweep_create(const mb_model *model, mb_setup *setup, const char *dim,
                           const int64_t *values, size_t n, int add_solved, mb_sweep **out);
MB_API void mb_sweep_free(mb_sweep *sweep);
MB_API size_t mb_sweep_num_points(const mb_sweep *sweep);
/* The swept dim, or NULL for a batch sweep. Lives as long as the sweep. */
MB_API const char *mb_sweep_dim(const mb_sweep *sweep);
/* The solved batch size of a batch sweep made with add_solved (0: none). */
MB_API int64_t mb_sweep_solved_batch(const mb_sweep *sweep);
/* Point i, ascending by value: the value and its budget (struct_size set by the caller). */
MB_API int mb_sweep_point(const mb_sweep *sweep, size_t i, int64_t *value, mb_budget *out);
/* The default values of a range lo..hi: with points == 0 the powers of two inside it and both
 * ends; with 2 <= points <= 65536 that many values spread evenly on a log scale from lo to hi,
 * rounded (fewer where two round to the same). Writes at most cap of them into values (which may
 * be NULL) and returns how many there are; 0 for a bad range (lo < 1, hi < lo, other points). */
MB_API size_t mb_sweep_values(int64_t lo, int64_t hi, int points, int64_t *values, size_t cap);
/* `membudget sweep --json` (docs/cli.md). The caller frees the string with mb_free(). */
MB_API int mb_sweep_json(const mb_sweep *sweep, char **out_json);
/* The device peak, reserved and allocated peaks against the swept value, lines for the usable
 * and the device memory, the solved batch marked. title: a line above the plot, or NULL. */
MB_API int mb_sweep_svg(const mb_sweep *sweep, const char *title, char **out_svg);
/* ---------------------------------------------------------------- where the memory goes
 * The step at one batch size attributed to PyTorch modules, as a tree. A module's path comes
 * from the graph (mb_model_node_origin: the dynamo exporter's name scopes, TorchScript's node
 * names). Each tensor of the step belongs to one module:
 * - a tensor a node allocates (activations, their grads, a weight's grad, temporaries) to that
 *   node's module;
 * - a weight, embedding or buffer (and a gradient allocated before the step, with gradient
 *   accumulation) to the module its name says ("layer1.0.conv1.weight": layer1.0.conv1) or, for
 *   a name that is no module path ("onnx::MatMul_12"), to the innermost module running every
 *   node that reads it;
 * - the teacher's tensors to the teacher's tree; what no node makes and no weight is (optimizer
 *   states, master weights, the EMA copy, the batch, cuBLAS workspaces, the loss) to no module.
 * Entries come in print order: the model's root ("" ), its submodules depth first with siblings
 * largest first (share of the peak, then kept, then parameters), then the teacher's root and
 * tree if there is a teacher, then one "no module" entry (path NULL, model -1). Figures are
 * subtree totals, so a module's children add up to at most its own, and the roots and the
 * "no module" entry add up to the allocated peak (at_peak), to what forward keeps (kept) and to
 * every parameter and embedding byte on the device (parameters). */
typedef struct mb_modules mb_modules;
/* Simulate the step at batch (>= 1) and attribute it. Messages go to mb_setup_errmsg(setup). */
MB_API int mb_modules_create(const mb_model *model, mb_setup *setup, int64_t batch, mb_modules **out);
MB_API void mb_modules_free(mb_modules *modules);
MB_API size_t mb_modules_num(const mb_modules *modules);
typedef struct mb_module_info {
  uint32_t struct_size;  /* set to sizeof(mb_module_info) by the caller */
  int32_t model;         /* 0: the model, 1: the teacher, -1: the "no module" entry */
  int32_t parent;        /* index of the parent entry; -1 for a root and for "no module" */
  int32_t depth;         /* 0 for a root, 1 for its children, ... */
  const char *path;      /* dotted PyTorch module path ("layer1.0.conv1"), "" for a root, NULL
                          * for "no module" */
  int64_t nodes;         /* ONNX nodes that run in it and its submodules */
  uint64_t parameters;   /* parameter and embedding bytes on the device (its own and its
                          * submodules'); buffers are not parameters */
  uint64_t kept;         /* what it keeps for backward: activation bytes live at the end of
                          * forward that its nodes made (budget.activations in all) */
  uint64_t at_peak;      /* its share of the peak: bytes live at the allocated peak that belong
                          * to it and its submodules */
  uint64_t at_peak_category[MB_CAT_COUNT]; /* the same by mb_category */
} mb_module_info;
MB_API int mb_modules_get(const mb_modules *modules, size_t i, mb_module_info *out);
/* Every tensor live at the allocated peak, largest first. */
MB_API size_t mb_modules_num_tensors(const mb_modules *modules);
typedef struct mb_peak_tensor {
  uint32_t struct_size;  /* set to sizeof(mb_peak_tensor) by the caller */
  int32_t category;      /* mb_category */
  int32_t phase;         /* the mb_phase that allocated it */
  int32_t model;         /* 0: the model, 1: the teacher */
  uint64_t bytes;        /* device bytes */
  const char *tensor;    /* as mb_event.tensor */
  const char *node;      /* the ONNX node that allocated it, or NULL */
  const char *op_type;   /* that node's op type, or NULL */
  const char *aten;      /* the aten op a dynamo export recorded for it, or NULL */
  const char *module;    /* the path of the module it belongs to, or NULL (no module) */
  int32_t module_index;  /* that module's entry (mb_modules_get) */
} mb_peak_tensor;
MB_API int mb_modules_tensor(const mb_modules *modules, size_t i, mb_peak_tensor *out);

/* ---------------------------------------------------------------- what would make it fit
 * Advice, each line a real re-run of the simulation with one change to the setup, the rest as
 * given: mixed precision (amp-bf16; amp-fp16 on a GPU of the table without bf16), checkpointing
 * the modules that keep the most (the repeated blocks of the module tree), 8-bit AdamW (for
 * Adam and AdamW), fused attention (unless already fused), gradient accumulation keeping the
 * effective batch (a given batch, or a minimum that does not fit: the micro-batch divided by
 * the smallest factor that fits, the steps multiplied by it), teacher offload (with a teacher),
 * sharding over the setup's world_size ranks (when it has several and no sharding strategy:
 * FSDP with the checkpoint line's blocks as units, or ZeRO-3, whichever is lower), the
 * for-loop optimizer step (foreach=False, for an optimizer whose foreach step makes a list of
 * temporaries), when no single change fits each pair of them that fits together, and, as a
 * what-if that changes what trains, freezing all but a glob (advise_trainable; LoRA
 * adapters when the graph has them, else the last top-level module with parameters). A change
 * that does not apply, fails to simulate or does not lower the device peak gives no line.
 * Lines come largest saving first. */
typedef struct mb_advice mb_advice;
typedef enum mb_advice_kind {
  MB_ADVICE_PRECISION = 1, MB_ADVICE_CHECKPOINT = 2, MB_ADVICE_OPTIMIZER = 3,
  MB_ADVICE_ATTENTION = 4, MB_ADVICE_GRAD_ACCUMULATION = 5, MB_ADVICE_TEACHER_OFFLOAD = 6,
  MB_ADVICE_FREEZE = 7, MB_ADVICE_SHARD = 8,
  MB_ADVICE_FOREACH = 9,   /* the for-loop optimizer step */
  MB_ADVICE_COMBINED = 10  /* two of the changes above together, when no one alone fits */
} mb_advice_kind;
MB_API const char *mb_advice_kind_name(int kind); /* "precision", "checkpoint", ... */
/* Whether a budget calls for advice: 1 when it does not fit, or when its batch size was given
 * (not solved) and its device peak is within 10% of the usable memory (available < usable /
 * 10); else 0. reason (may be NULL) gets "does not fit", "within 10% of the usable memory" or
 * "". A solved batch sits at the limit by construction, so it alone calls for nothing. */
MB_API int mb_advice_due(const mb_budget *budget, const char **reason);
/* The advice for this setup (at its batch size, or the solved one). The setup is changed during
 * the call and restored before it returns. Messages go to mb_setup_errmsg(setup). */
MB_API int mb_advise(const mb_model *model, mb_setup *setup, mb_advice **out);
MB_API void mb_advice_free(mb_advice *advice);
/* The budget the lines are compared with (the setup as given). */
MB_API int mb_advice_baseline(const mb_advice *advice, mb_budget *out);
MB_API size_t mb_advice_num(const mb_advice *advice);
typedef struct mb_advice_line {
  uint32_t struct_size;  /* set to sizeof(mb_advice_line) by the caller */
  int32_t kind;          /* mb_advice_kind */
  const char *title;     /* "mixed precision (bf16 autocast)" */
  const char *note;      /* what to know about it, or "" */
  const char *flags;     /* the change as `membudget estimate` flags, shell-quoted:
                          * "--checkpoint 'layers.*'" */
  int32_t argc;          /* the same flags, one argument each */
  const char *const *argv;
  int32_t what_if;       /* 1: it changes what the model learns (freezing), not only how */
  int32_t fits;          /* at batch_size: 1, 0; -1 without device memory */
  int64_t batch_size;    /* the batch the peak is at: the baseline's, or gradient
                          * accumulation's smaller micro-batch */
  int64_t grad_accumulation;
  uint64_t allocated_peak;
  uint64_t device_peak;  /* `membudget estimate --batch batch_size` with the change */
  int64_t available;     /* usable memory - device_peak */
  int64_t solved_batch;  /* the largest batch that fits with the change (`membudget estimate`
                          * without --batch); 0: none fits; -1: no device memory */
  uint64_t solved_device_peak; /* the device peak at solved_batch */
} mb_advice_line;
MB_API int mb_advice_get(const mb_advice *advice, size_t i, mb_advice_line *out);

/* ================================================================ measured mode (CUDA)
 * The step measured on a real device. A measuring session loads the CUDA runtime at run time
 * (dlopen: one build runs with and without a GPU; libcuda, NVML, cuBLAS, cuBLASLt and cuDNN
 * too when present), creates the device's context and measures what it and the libraries
 * cost. A replay then allocates every tensor of the simulated step on the device, in the
 * simulation's order, through a pool shaped like PyTorch's caching allocator (2 MiB segments
 * for blocks up to 1 MiB, 20 MiB segments up to 10 MiB, larger ones rounded to 2 MiB; best fit,
 * split, merged on free), each segment cudaMalloc'd and touched with cudaMemset; at each
 * convolution the workspace cuDNN's heuristics ask for at that shape is allocated for the
 * call, and at each GEMM cuBLASLt's heuristics are asked too. The device's free memory
 * (cudaMemGetInfo) gives the measured peak. docs/estimate.md, "Measured mode", has the details.
 *
 * Without CUDA (built without the toolkit, libcudart not found, no driver or no device) every
 * measured call returns MB_E_NO_CUDA, and the message says which library was tried and what
 * the runtime answered. A session holds dlopen handles and library handles: one thread at a
 * time. It uses the device's primary context, which stays, as the libraries stay loaded, when
 * the session is freed (they are the process's, shared with PyTorch if that runs in the same
 * process); the session's own handles and device memory are given back. */
typedef struct mb_measure mb_measure;
/* Load the libraries named by the setup's cuda_* keys (setup may be NULL: defaults), open the
 * device and measure its context. On failure *out still holds the message
 * (mb_measure_errmsg); free it with mb_measure_free. */
MB_API int mb_measure_create(const mb_setup *setup, mb_measure **out);
MB_API void mb_measure_free(mb_measure *measure);
MB_API const char *mb_measure_errmsg(const mb_measure *measure);

typedef struct mb_device_info {
  uint32_t struct_size;        /* set to sizeof(mb_device_info) by the caller */
  int32_t ordinal;             /* the CUDA device (as CUDA_VISIBLE_DEVICES numbers them) */
  const char *name;            /* "NVIDIA H100 80GB HBM3" */
  const char *gpu;             /* the GPU-table entry it matches (mb_gpu_get), or NULL */
  int32_t cc_major, cc_minor;  /* compute capability */
  int32_t runtime_version, driver_version; /* 13000 = CUDA 13.0 */
  uint64_t total_memory;
  uint64_t free_before;        /* free before this process's context (NVML); 0 if unknown */
  uint64_t free_after_context;
  uint64_t free_now;           /* after the context and the library handles: a replay's start */
  uint64_t context;            /* free_before (total when unknown) - free_after_context: the
                                * context alone when context_measured, else more (see notes) */
  uint64_t cublas;             /* a cuBLAS handle, its first GEMM's kernels and a cuBLASLt handle */
  uint64_t cudnn;              /* a cuDNN handle */
  uint64_t other_processes;    /* total - free_before (0 when unknown): memory held before */
  int32_t context_measured;    /* 1: context is a measurement (see notes when 0) */
  const char *runtime_path;    /* the libcudart that was loaded */
  const char *notes;           /* what was not measured and why; "" when everything was */
} mb_device_info;
MB_API int mb_measure_device(const mb_measure *measure, mb_device_info *out);

/* One replay of the step at a batch size. */
typedef struct mb_replay {
  uint32_t struct_size;        /* set to sizeof(mb_replay) by the caller */
  int32_t fits;                /* 0: the device ran out of memory during the replay */
  int64_t batch;
  uint64_t allocated_peak;     /* live block bytes, cuDNN workspaces included */
  uint64_t reserved_peak;      /* segment bytes held (cudaMalloc'd) at the most */
  uint64_t device_bytes;       /* measured: the largest drop of the device's free memory */
  uint64_t device_peak;        /* device_bytes + the session's context and library handles */
  uint64_t forward_device_bytes; /* device_bytes up to the end of the loss */
  uint64_t static_allocated_peak, static_reserved_peak, static_device_peak; /* the simulation */
  uint64_t conv_workspace;     /* the largest cuDNN workspace allocated */
  uint64_t matmul_workspace;   /* the largest cuBLASLt heuristic workspace asked for */
  int64_t segments;            /* cudaMalloc calls */
  int64_t convs, matmuls;      /* workspace queries made */
  double seconds;              /* wall time of the replay */
} mb_replay;
/* Replay the step at batch (>= 1) on the device. A batch the device cannot hold is not an
 * error: fits is 0. Messages go to mb_setup_errmsg(setup), as for mb_estimate. */
MB_API int mb_measure_run(mb_measure *measure, const mb_model *model, mb_setup *setup,
                          int64_t batch, mb_replay *out);
/* The budget in measured mode (mode MB_MODE_MEASURED): without a batch size in the setup, the
 * largest batch whose replay fits utilization x the device's memory, with the memory other
 * processes hold now counted against it, found by bisection over replays; the device memory
 * and the GPU-table entry (cuBLAS workspace size) come from the device unless the setup gives
 * them. measured_fixed/per_sample come from replays at batch_min and the reported batch. */
MB_API int mb_measure_estimate(mb_measure *measure, const mb_model *model, mb_setup *setup,
                               mb_budget *out);
/* As mb_estimate_json, in measured mode: the document also has "device" and "measured"
 * (docs/cli.md). The caller frees the string with mb_free(). */
MB_API int mb_measure_estimate_json(mb_measure *measure, const mb_model *model, mb_setup *setup,
                                    int trace, char **out_json, mb_budget *budget);
/* `membudget measure --json`: the device and a replay at each of n batch sizes (n >= 2 for the
 * fixed and per-sample figures). */
MB_API int mb_measure_json(mb_measure *measure, const mb_model *model, mb_setup *setup,
                           const int64_t *batches, size_t n, char **out_json);
/* ================================================================ allocator replay
 * A request stream PyTorch recorded, replayed through the caching-allocator model: the dict
 * torch.cuda.memory._snapshot() returns (after _record_memory_history()), as the pickle
 * torch.cuda.memory._dump_snapshot() writes or as the same structure in JSON. The setup gives
 * alloc_conf (else the snapshot's own PYTORCH_CUDA_ALLOC_CONF is used) and, optionally, the
 * device (gpu / device_memory, less the context) whose limit makes cudaMalloc fail. Where the
 * trace holds PyTorch's own segment events, the replay's are compared with them request by
 * request. */
typedef struct mb_alloc_replay mb_alloc_replay;
/* On failure *out still holds the message (mb_alloc_replay_errmsg); free it with mb_alloc_replay_free. */
MB_API int mb_alloc_replay_create(const void *data, size_t size, const mb_setup *setup, mb_alloc_replay **out);
MB_API void mb_alloc_replay_free(mb_alloc_replay *replay);
MB_API const char *mb_alloc_replay_errmsg(const mb_alloc_replay *replay);
/* The report as text (json == 0) or JSON (raw bytes, every segment); mb_free() it. */
MB_API int mb_alloc_replay_report(const mb_alloc_replay *replay, int json, char **out);

/* ================================================================ request-stream diff
 * A recorded step (the same snapshot mb_alloc_replay_create reads, recorded with its frames,
 * PyTorch's default) lined up with the simulated step of model at the setup's batch size
 * (required: the batch the snapshot's step ran at): the requests on both sides, which match,
 * which differ in size, which are missing from the estimate or extra in it, and whose
 * lifetimes differ, in step order and summed by op and module (docs/allocator.md, "alloc-diff").
 * The recorded step is the one between the last two optimizer steps' ends. On failure *out
 * still holds the message (mb_alloc_diff_errmsg); free it with mb_alloc_diff_free. */
typedef struct mb_alloc_diff mb_alloc_diff;
MB_API int mb_alloc_diff_create(const void *data, size_t size, const mb_model *model, mb_setup *setup,
                                mb_alloc_diff **out);
MB_API void mb_alloc_diff_free(mb_alloc_diff *diff);
MB_API const char *mb_alloc_diff_errmsg(const mb_alloc_diff *diff);
/* The report as text (json == 0) or JSON (every recorded request with its partner); mb_free() it. */
MB_API int mb_alloc_diff_report(const mb_alloc_diff *diff, int json, char **out);

#ifdef __cplusplus
}
#endif
#endif
