/* The operator table: one entry per (domain, op type, since-version) with its shape rule and
 * its autograd rule (ops/grad.h: what backward keeps and allocates). Adding an op is adding an
 * entry to the table of its family file and tests for it. */
#ifndef MB_OPS_OP_H
#define MB_OPS_OP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"
#include "ops/grad.h"
#include "util/arena.h"
#include "util/diag.h"

/* What inference knows about one tensor at one set of dim values. */
typedef struct mb_tinfo {
  int32_t dtype;          /* mb_dtype, 0 while unknown */
  int32_t rank;           /* -1 while unknown */
  int64_t *dims;          /* rank concrete dims (>= 0) */
  mb_small_values *val;   /* values of a small numeric tensor when known (shape arithmetic) */
  /* A sequence (SplitToSequence, SequenceConstruct): its elements; dtype is theirs, rank 0.
   * NULL with seq_len 0 for a tensor, non-NULL for a sequence (even an empty one). */
  struct mb_tinfo *seq;
  int32_t seq_len;
} mb_tinfo;

/* A data-dependent size bounded by a default rule because the caller gave no value for it
 * (ops/bounds.c): named in the output so that it is never a silent guess. */
/* Loop body passes shape inference may still unroll (left), out of limit.unroll (limit). */
typedef struct mb_unroll {
  int64_t left, limit;
} mb_unroll;

typedef struct mb_assumption {
  const char *node, *op_type;
  const char *tensor;     /* the name a --dim of which overrides it */
  const char *why;
  int64_t value;
} mb_assumption;
typedef struct mb_assumptions {
  mb_assumption *items;   /* malloc'd, owned by the shapes handle */
  int32_t n, cap;
} mb_assumptions;

/* The caller's dims as the shape rules read them (shape inference fills it from its inputs,
 * shape/inputs.h): values given by name, and the dims that grow with the batch. */
typedef struct mb_op_dims {
  const char *const *names; /* dims and data-dependent bounds given by name (--dim NAME=N) */
  const int64_t *values;
  size_t n;
  const char *const *per_sample; /* per-sample dims (batches of graphs), in their order */
  const bool *is_batch;     /* per per-sample dim: it is the batch itself (a count of 1 per
                             * sample, no graph-size table), so it holds no graph per entry */
  size_t n_per_sample;
  const char *unit;         /* what the batch counts: "samples", "graphs" or the batch_unit given */
} mb_op_dims;

typedef struct mb_op_ctx mb_op_ctx;
struct mb_op_ctx {
  mb_arena *arena;        /* per-evaluation memory */
  mb_diag *d;
  const mb_node *node;
  const mb_graph *graph;  /* the graph holding node (for tensor names) */
  int64_t opset;          /* of the node's domain */
  int32_t n_in, n_out;
  const mb_tinfo *const *in; /* NULL where an optional input is omitted */
  mb_tinfo *const *out;      /* NULL where an optional output is omitted */
  const mb_op_dims *dims;  /* the caller's dim values (bounds for data-dependent sizes) */
  /* Control flow: infer subgraph g with its formal inputs bound to `inputs` (n of them);
   * *outputs receives g's n_outputs tensor infos (arena memory). */
  int (*infer_subgraph)(struct mb_op_ctx *c, const mb_graph *g, const mb_tinfo *const *inputs,
                        int32_t n, mb_tinfo **outputs);
  void *infer_state;
  mb_unroll *unroll_budget; /* Loop body passes left to unroll in this whole inference */
  int64_t batch;          /* the batch size this inference binds (graphs with per-sample dims), -1 */
  mb_assumptions *assumed; /* default bounds taken (mb_op_assume) */
  bool *bound_asked;      /* set when the rule looked up a --dim bound under its output's name */
};

typedef int (*mb_shape_fn)(mb_op_ctx *c);

/* An entry's arity, as the ONNX schema of each opset it covers gives it (an op whose arity
 * changed has an entry per change; tests/python/test_op_table.py holds the table to the onnx
 * package's schemas). A node with more inputs or outputs than its entry takes is refused at
 * load (mb_ops_resolve_model); one with fewer given inputs than min_inputs by shape inference. */
#define MB_OP_ANY (-1)    /* max_inputs / max_outputs of a variadic op: any number */
typedef struct mb_op_def {
  const char *domain;     /* "" = ai.onnx */
  const char *op_type;
  int32_t since;          /* first opset version this entry applies to */
  int32_t min_inputs;     /* inputs that must be given (not omitted): the required ones */
  int32_t max_inputs;     /* input slots, omitted ones ("") included; MB_OP_ANY: variadic */
  int32_t max_outputs;    /* output slots, omitted ones included; MB_OP_ANY: variadic */
  mb_shape_fn shape;
  uint8_t grad;           /* mb_grad_id (ops/grad.h) */
} mb_op_def;

/* The entry for a node's op at an opset: the one with the largest since <= opset, or NULL. */
const mb_op_def *mb_op_find(const char *domain, const char *op_type, int64_t opset);
/* Resolve every node's opset and table entry (all graphs) once at load: inference runs many
 * times per model. */
int mb_ops_resolve_model(struct mb_model *m, mb_diag *d);
/* Every entry, for `membudget ops`. */
size_t mb_op_count(void);
const mb_op_def *mb_op_at(size_t i);

/* ---- helpers for shape rules (ops/op_util.c) ---- */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int mb_op_fail(mb_op_ctx *c, const char *fmt, ...); /* "node 'n' (Op): ..." */
/* Attributes, each read as the type the rule takes: one the node declares as another type is
 * an error naming the node, the attribute and both types (recorded in c->d, which inference
 * checks after the rule; the accessor then answers as if the attribute were absent). Rules
 * read attributes only through these. */
const mb_attr *mb_op_attr_typed(const mb_op_ctx *c, const char *name, int32_t type); /* NULL: absent */
int64_t mb_op_attr_i(const mb_op_ctx *c, const char *name, int64_t dflt);
float mb_op_attr_f(const mb_op_ctx *c, const char *name, float dflt);
const char *mb_op_attr_s(const mb_op_ctx *c, const char *name, const char *dflt);
/* ints / floats attribute; returns count (0 if absent) and sets *v */
uint64_t mb_op_attr_ints(const mb_op_ctx *c, const char *name, const int64_t **v);
uint64_t mb_op_attr_floats(const mb_op_ctx *c, const char *name, const float **v);
/* A STRING attribute that names one of a fixed set (auto_pad, direction, reduction): another
 * value is an error listing the set (NULL-terminated), as is another type; dflt when absent. */
const char *mb_op_attr_enum(const mb_op_ctx *c, const char *name, const char *dflt, const char *const *allowed);
/* TENSOR attribute (NULL when absent; declared without a tensor is an error too) */
const mb_const_tensor *mb_op_attr_t(const mb_op_ctx *c, const char *name);
const mb_graph *mb_op_attr_g(const mb_op_ctx *c, const char *name);
/* Required input i with known rank, or an error naming the node. */
int mb_op_input(mb_op_ctx *c, int32_t i, const mb_tinfo **t);
/* Set output i (ignored when omitted): copies dims. */
int mb_op_set(mb_op_ctx *c, int32_t i, int32_t dtype, int32_t rank, const int64_t *dims);
/* Make output i a sequence of n elements (ignored when omitted; NULL then, or on failure with
 * the status set). The caller fills each element with mb_op_set_elem. */
mb_tinfo *mb_op_set_seq(mb_op_ctx *c, int32_t i, int32_t dtype, int32_t n);
int mb_op_set_elem(mb_op_ctx *c, mb_tinfo *e, int32_t dtype, int32_t rank, const int64_t *dims);
/* Give output i known integer values (it must be set first, numel == n). */
int mb_op_set_ivalues(mb_op_ctx *c, int32_t i, const int64_t *v, int64_t n);
/* n fresh values attached to output i for the caller to fill (evaluation arena). NULL when
 * the output is omitted (c->d->status stays MB_OK) or memory ran out (it says so). */
int64_t *mb_op_new_ivalues(mb_op_ctx *c, int32_t i, int64_t n);
double *mb_op_new_fvalues(mb_op_ctx *c, int32_t i, int64_t n);
/* Multidirectional (numpy) broadcast of two shapes into out (MB_MAX_RANK entries). */
int mb_op_broadcast(mb_op_ctx *c, const mb_tinfo *a, const mb_tinfo *b, int32_t *rank, int64_t *out);
/* Index of element k of an output of shape (r, od) in an input of shape t broadcast to it. */
int64_t mb_op_bcast_index(const mb_tinfo *t, int32_t r, const int64_t *od, int64_t k);
/* Input i (when given with a known shape) broadcasts one way to dims: each of its dims, right
 * aligned, is that dim or 1 (Gemm's C, a norm's scale and bias). A zero-size scale where the
 * op needs elements fails here, naming the node and both shapes. */
int mb_op_unidirectional(mb_op_ctx *c, int32_t i, int32_t rank, const int64_t *dims, const char *what);
/* Normalise a possibly negative axis for a given rank; error naming the node if out of range. */
int mb_op_axis(mb_op_ctx *c, int64_t axis, int32_t rank, int32_t *out);
/* A value the user gave for a name (--dim NAME=N). Returns true and sets *v when given. */
bool mb_op_user_dim(const mb_op_ctx *c, const char *name, int64_t *v);
/* Data-dependent sizes (NonZero count, Loop trip count, ...) are bounded by the user under
 * the name of the node's first output tensor: mb_op_bound_name() gives it, mb_op_bound()
 * looks it up, mb_op_data_dependent() fails with a message that says how to give it. */
const char *mb_op_bound_name(const mb_op_ctx *c);
bool mb_op_bound(const mb_op_ctx *c, int64_t *v);
int mb_op_data_dependent(mb_op_ctx *c, const char *what);
/* Default bounds (ops/bounds.c), used where the user gave no --dim: each is recorded with
 * mb_op_assume (value, and why in a sentence) under the node's bound name.
 * mb_op_mask_bound: a NonZero/Compress over a bool mask keeps at most the mask's elements
 * (limit: what else caps the count); true and *count set when it applies. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
int mb_op_assume(mb_op_ctx *c, int64_t value, const char *fmt, ...);
bool mb_op_mask_bound(mb_op_ctx *c, const mb_tinfo *mask, int64_t limit, int64_t *count);
/* ReduceMax's integer result when its input's values are unknown: the user's --dim under its
 * output's name, else the number of graphs - 1 for PyG's batch vector (a 1-D integer graph
 * input, read only as sizes follow from it), else nothing (the values stay unknown). */
int mb_op_reduce_max_value(mb_op_ctx *c, const mb_tinfo *x);
/* "[2, 3, 4]" into buf for messages. */
const char *mb_shape_str(char *buf, size_t size, const mb_tinfo *t);
/* "'W' [4, 2, 3, 3]": input i's tensor name and shape, for messages. */
const char *mb_op_input_str(const mb_op_ctx *c, int32_t i, char *buf, size_t size);
/* Input i (when given with a known shape) must have exactly `rank` dims `dims` (a norm's
 * per-channel scale, a convolution's bias): a zero-size or mis-sized one fails, naming the
 * node, what it is, the tensor and both shapes. */
int mb_op_exact_shape(mb_op_ctx *c, int32_t i, int32_t rank, const int64_t *dims, const char *what,
                      const char *of);
uint64_t mb_tinfo_numel(const mb_tinfo *t);
/* Values of input i as integers when known (NULL otherwise). */
const int64_t *mb_op_ivalues(const mb_op_ctx *c, int32_t i, int64_t *n);
/* Values of input i as doubles (integers converted) when known; the array lives in the
 * evaluation arena. NULL when unknown. */
const double *mb_op_fvalues(mb_op_ctx *c, int32_t i, int64_t *n);
/* Give output i known floating values. */
int mb_op_set_fvalues(mb_op_ctx *c, int32_t i, const double *v, int64_t n);

/* auto_pad's values (nn.c), NULL-terminated. */
extern const char *const mb_auto_pads[];

/* Shared shape rules (nn.c), for the quantized and integer variants. */
/* wi, ai, bi: the weight's and operands' input indices (for messages). */
int mb_op_conv_shape(mb_op_ctx *c, const mb_tinfo *x, const mb_tinfo *w, int32_t wi, int32_t dtype);
int mb_op_matmul_shape(mb_op_ctx *c, const mb_tinfo *a, const mb_tinfo *b, int32_t ai, int32_t bi, int32_t dtype);

/* Checked int64 arithmetic for sizes computed from untrusted attributes and values. */
static inline bool mb_add_i64(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }
static inline bool mb_mul_i64(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
/* floor(v) as int64 when it fits and is >= 0 (false for NaN, negative or huge). */
static inline bool mb_floor_dim(double v, int64_t *r) {
  if (!(v >= 0 && v < 9.0e18)) return false;
  *r = (int64_t)v;
  return true;
}

/* Family tables (one file each). */
#define MB_OP_FAMILY(name) \
  extern const mb_op_def mb_ops_##name[]; \
  extern const size_t mb_ops_##name##_count;
MB_OP_FAMILY(elementwise)
MB_OP_FAMILY(nn)
MB_OP_FAMILY(tensor)
MB_OP_FAMILY(reduce)
MB_OP_FAMILY(layout)
MB_OP_FAMILY(quant)
MB_OP_FAMILY(loss)
MB_OP_FAMILY(rnn)
MB_OP_FAMILY(control)
MB_OP_FAMILY(sequence)
#endif
