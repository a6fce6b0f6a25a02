/* The graph IR: what the rest of membudget reads. Built once by src/onnx/convert.c, checked by
 * graph.c, annotated with roles by src/passes/roles.c, then never changed. Everything lives in
 * the model's arena. Tensors are referenced by index into mb_graph.values. */
#ifndef MB_GRAPH_GRAPH_H
#define MB_GRAPH_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "membudget/membudget.h"
#include "util/arena.h"
#include "util/limits.h"

/* Fixed bounds on untrusted input (each a clear error, never a crash). The limits a caller
 * can change (rank, subgraph depth, ...) are util/limits.h's; MB_MAX_RANK is the ceiling of
 * limit.rank, the size of the dims arrays shape inference keeps on the stack. */
#define MB_MAX_RANK 64
#define MB_MAX_SEQUENCE 65536           /* tensors in one ONNX sequence value */
#define MB_MAX_TENSOR_BYTES (1ull << 50) /* 1 PiB: anything larger is an absurd declaration */
/* Numeric tensors up to this many elements carry their values for shape inference; stored
 * tensors only when their payload survived the wire pass (MB_WIRE_KEEP_PAYLOAD bytes). */
#define MB_SMALL_VALUE_MAX 4096

/* A declared type: dtype and shape with named (symbolic) dims. */
typedef struct mb_type {
  int32_t dtype;             /* mb_dtype; 0 when not declared */
  int32_t rank;              /* -1 when the shape is not declared */
  int64_t *dims;             /* -1 where symbolic or unknown */
  const char **dim_params;   /* symbolic names or NULL */
} mb_type;

/* Values of a small numeric tensor (Constant nodes, small initializers), for shape inference. */
typedef struct mb_small_values {
  int64_t count;
  bool is_float;
  int64_t *i;   /* when !is_float */
  double *f;    /* when is_float */
} mb_small_values;

/* A constant tensor (initializer or tensor attribute). Weight bytes are never read; only small
 * numeric tensors carry their values. */
typedef struct mb_const_tensor {
  const char *name;
  int32_t dtype;
  int32_t rank;
  int64_t *dims;
  uint64_t numel;
  uint64_t nbytes;
  int32_t location;          /* mb_data_location */
  const char *external_file; /* external_data "location", or NULL */
  bool is_sparse;
  mb_small_values *values;   /* NULL unless small, numeric and embedded */
} mb_const_tensor;

typedef enum mb_value_kind {
  MB_VALUE_INPUT = 0,       /* graph input (or subgraph formal parameter) */
  MB_VALUE_INITIALIZER = 1,
  MB_VALUE_NODE_OUTPUT = 2,
  MB_VALUE_OUTER = 3        /* subgraph: captured from an enclosing graph by name */
} mb_value_kind;

typedef struct mb_value {
  const char *name;
  int32_t kind;             /* mb_value_kind */
  int32_t producer;         /* node index for NODE_OUTPUT, else -1 */
  int32_t initializer;      /* index into graph->inits for INITIALIZER, else -1 */
  int32_t num_uses;         /* node inputs (incl. subgraph captures) reading this value */
  int32_t outer_levels;     /* OUTER: how many graphs up the captured value lives (>= 1) */
  int32_t outer_index;      /* OUTER: its value index in that graph */
  mb_type type;             /* declared type (input/output/value_info), may be empty */
} mb_value;

typedef struct mb_graph mb_graph;

/* ONNX AttributeProto.AttributeType: which field of an attribute holds its value. */
typedef enum mb_attr_type {
  MB_ATTR_UNDEFINED = 0, /* files older than the type field: read as written */
  MB_ATTR_FLOAT = 1, MB_ATTR_INT = 2, MB_ATTR_STRING = 3, MB_ATTR_TENSOR = 4, MB_ATTR_GRAPH = 5,
  MB_ATTR_FLOATS = 6, MB_ATTR_INTS = 7, MB_ATTR_STRINGS = 8, MB_ATTR_TENSORS = 9, MB_ATTR_GRAPHS = 10,
  MB_ATTR_SPARSE_TENSOR = 11, MB_ATTR_SPARSE_TENSORS = 12, MB_ATTR_TYPE_PROTO = 13, MB_ATTR_TYPE_PROTOS = 14
} mb_attr_type;

typedef struct mb_attr {
  const char *name;
  int32_t type;             /* mb_attr_type as declared (ONNX AttributeProto.AttributeType) */
  float f;
  int64_t i;
  const char *s;            /* NUL-terminated copy; s_len is the real length */
  uint64_t s_len;
  float *floats;
  int64_t *ints;
  uint64_t n_floats, n_ints, n_strings, n_tensors, n_graphs;
  mb_const_tensor *t;       /* TENSOR / SPARSE_TENSOR */
  mb_graph *g;              /* GRAPH */
  mb_graph **graphs;        /* GRAPHS */
} mb_attr;

struct mb_op_def;

/* Where a node came from in PyTorch (filled from the export by onnx/origin.c, read with
 * graph/origin.h). Strings are interned: nodes translated from one FX node share them, so
 * comparing pointers compares origins. */
typedef struct mb_origin {
  const char *module;       /* dotted module path ("layer1.0.conv1"), "" at the top level,
                             * NULL when the export does not say */
  const char *fx;           /* the FX node ("conv2d_1"), NULL for TorchScript exports */
  const char *aten;         /* its target without "torch.ops." ("aten.conv2d.default") */
  const char *args;         /* its call's arguments as written: "(%x, %p_w, None, [2, 2])" */
  const char *kwargs;       /* and keyword arguments: "{dtype: torch.float32}" */
  const char *site;         /* the innermost frame of its recorded stack trace ("llama/
                             * modeling_llama.py:forward"; the exporter records module forwards,
                             * not the library helpers they call) */
  const char *scope;        /* the modules it runs in as a call chain, each named relative to
                             * its caller, then the node: "/layer1/layer1.0/conv1/Conv" (the
                             * TorchScript node name), "/model/layers.0/self_attn/linear_4"
                             * (from dynamo's name_scopes); NULL when unknown */
  const char *frames;       /* its recorded stack, outermost first, one line per frame:
                             * "function:line:c0:c1:target:file\n"; c0, c1: the columns the
                             * traceback's carets mark (0, 0: none); target: the local the
                             * frame's statement assigns, or empty; file: from site-packages/
                             * on, or its last four components (onnx/origin.c). NULL without a
                             * stack trace */
  const char *classes;      /* the Python modules defining the module classes it runs in, from
                             * the root, one per line ("graph_zoo\ntorch_geometric.nn.conv.
                             * gat_conv\n"); NULL when the export does not say */
  const char *rewrite;      /* onnxscript rewriter rules that made it ("FuseBatchNormIntoConv,
                             * RemoveOptionalBiasFromConv"): the export was optimized */
  const char *cls;          /* the class of its module ("transformers.models.llama.modeling_
                             * llama.LlamaAttention"), NULL when the export does not say */
  const char *class_names;  /* the class names of the modules it runs in, from the root, one per
                             * line, aligned with scope's levels ("ResNet\nSequential\n
                             * BasicBlock\nConv2d\n"); NULL when the export does not say */
} mb_origin;

typedef struct mb_node {
  const struct mb_op_def *op; /* operator-table entry, resolved at load; NULL if unsupported */
  int64_t opset;            /* version of the node's domain in the model, resolved at load */
  const char *name;
  const char *op_type;
  const char *domain;       /* "" for ai.onnx */
  int32_t n_inputs, n_outputs, n_attrs;
  int32_t *inputs;          /* value indices; -1 for an omitted optional input */
  int32_t *outputs;         /* value indices; -1 for an omitted optional output */
  mb_attr *attrs;
  mb_origin origin;
} mb_node;

struct mb_graph {
  const char *name;
  mb_graph *parent;         /* enclosing graph for subgraphs */
  int32_t depth;
  int32_t n_values, n_nodes, n_inits, n_inputs, n_outputs;
  mb_value *values;
  mb_node *nodes;           /* topological order after mb_graph_check() */
  mb_const_tensor *inits;
  int32_t *inputs;          /* value indices of real graph inputs (initializers excluded) */
  int32_t *outputs;         /* value indices */
};

typedef struct mb_opset {
  const char *domain;
  int64_t version;
} mb_opset;

/* One initializer of the whole model (main graph and subgraphs), flattened for the API. */
typedef struct mb_init_ref {
  mb_graph *graph;
  int32_t index;            /* into graph->inits */
  int32_t value;            /* value index of the initializer in graph */
  int32_t role;             /* mb_role, derived by passes/roles.c */
} mb_init_ref;

/* A sign that the graph was exported for inference (passes/inference.c). */
typedef struct mb_inference_sign {
  int32_t kind;             /* mb_inference_sign_kind */
  const char *node;         /* the first node showing it */
  int32_t count;            /* how many nodes show it */
  const char *detail;       /* e.g. the rewriter rule */
} mb_inference_sign;

struct mb_model {
  mb_arena arena;
  int status;
  char *errmsg;             /* malloc'd; "" when ok */
  int64_t ir_version;
  const char *producer;
  int32_t n_opsets;
  mb_opset *opsets;
  mb_graph *graph;
  int32_t n_all_inits;
  mb_init_ref *all_inits;
  int32_t n_warnings;
  const char **warnings;
  int32_t n_inference_signs;
  mb_inference_sign *inference_signs;
  mb_limits limits;         /* what the load was allowed (the setup's limit.* keys) */
  /* the training setup the exporter recorded (ModelProto.metadata_props "membudget.setup.KEY":
   * one value per line), which mb_setup_apply_recorded fills a setup's unset keys from */
  int32_t n_recorded;
  const char **recorded_keys, **recorded_values;
};
#define MB_RECORDED_PREFIX "membudget.setup."

/* A node's subgraphs (If branches, Loop/Scan bodies): the GRAPH attributes and every entry
 * of GRAPHS attributes, in attribute order. */
int32_t mb_node_num_subgraphs(const mb_node *n);
mb_graph *mb_node_subgraph(const mb_node *n, int32_t i);

/* A node's attribute by name, read as `type`: NULL when it is absent or declared as another
 * type (an axis given as a FLOAT: its INT field is not the value). One without a declared type
 * (0) is returned as it is. Shape inference refuses a declared type other than the one its rule
 * reads (ops/op_util.c), naming both; later stages read through this and never the wrong field. */
const mb_attr *mb_node_attr(const mb_node *n, const char *name, int32_t type);
/* "INT", "STRING", ... ("unknown" out of range). */
const char *mb_attr_type_name(int32_t type);

/* The opset version of a domain ("" or "ai.onnx" = default), or -1. */
int64_t mb_model_opset_of(const struct mb_model *m, const char *domain);

#endif
