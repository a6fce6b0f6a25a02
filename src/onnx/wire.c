#include "onnx/wire.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "membudget/membudget.h"

/* ------------------------------------------------------------------ the ONNX schema table */

typedef enum msg_id {
  M_MODEL, M_GRAPH, M_NODE, M_ATTR, M_VALUE_INFO, M_TYPE, M_TYPE_TENSOR, M_TYPE_SEQUENCE,
  M_TYPE_MAP, M_TYPE_OPTIONAL, M_TYPE_SPARSE, M_SHAPE, M_DIM, M_TENSOR, M_SEGMENT, M_SPARSE,
  M_TRAINING_INFO, M_FUNCTION, M_OPSET, M_STRING_ENTRY, M_TENSOR_ANNOTATION, M_COUNT
} msg_id;

typedef enum field_kind {
  K_VARINT,      /* wire type 0 */
  K_FIXED32,     /* wire type 5 */
  K_BYTES,       /* wire type 2: string or bytes */
  K_MESSAGE,     /* wire type 2, parsed recursively */
  K_REP_VARINT,  /* repeated varint: unpacked (0) or packed (2) */
  K_REP_FIXED32, /* repeated float: unpacked (5) or packed (2) */
  K_REP_FIXED64  /* repeated double/fixed64: unpacked (1) or packed (2) */
} field_kind;

typedef struct field_rule {
  uint32_t number;
  uint8_t kind;      /* field_kind */
  uint8_t message;   /* msg_id, for K_MESSAGE */
  uint8_t payload;   /* 1: tensor data that may be dropped */
  const char *name;
  uint8_t single;    /* 1: a singular message field (see slim_message) */
  uint8_t text;      /* 1: a string that names something (a tensor, node, op, domain, dim,
                      * external-data key or location): a NUL inside it would cut it short in
                      * protobuf-c's C string, a silently different name */
} field_rule;

typedef struct msg_rule {
  const char *name;
  const field_rule *fields;
  size_t n_fields;
} msg_rule;

#define F(num, kind, msg, name) {num, kind, msg, 0, name, 0, 0}
#define S(num, msg, name) {num, K_MESSAGE, msg, 0, name, 1, 0}
#define P(num, kind, name) {num, kind, 0, 1, name, 0, 0}
#define T(num, name) {num, K_BYTES, 0, 0, name, 0, 1}

/* Fields of onnx.proto (IR version 10), including ones newer than the proto that generated
 * the protobuf-c code: those are passed through as unknown fields. */
static const field_rule model_fields[] = {
  F(1, K_VARINT, 0, "ir_version"), F(2, K_BYTES, 0, "producer_name"),
  F(3, K_BYTES, 0, "producer_version"), T(4, "domain"),
  F(5, K_VARINT, 0, "model_version"), F(6, K_BYTES, 0, "doc_string"),
  S(7, M_GRAPH, "graph"), F(8, K_MESSAGE, M_OPSET, "opset_import"),
  F(14, K_MESSAGE, M_STRING_ENTRY, "metadata_props"),
  F(20, K_MESSAGE, M_TRAINING_INFO, "training_info"), F(25, K_MESSAGE, M_FUNCTION, "functions"),
};
static const field_rule graph_fields[] = {
  F(1, K_MESSAGE, M_NODE, "node"), T(2, "name"),
  F(5, K_MESSAGE, M_TENSOR, "initializer"), F(10, K_BYTES, 0, "doc_string"),
  F(11, K_MESSAGE, M_VALUE_INFO, "input"), F(12, K_MESSAGE, M_VALUE_INFO, "output"),
  F(13, K_MESSAGE, M_VALUE_INFO, "value_info"),
  F(14, K_MESSAGE, M_TENSOR_ANNOTATION, "quantization_annotation"),
  F(15, K_MESSAGE, M_SPARSE, "sparse_initializer"),
  F(16, K_MESSAGE, M_STRING_ENTRY, "metadata_props"),
};
static const field_rule node_fields[] = {
  T(1, "input"), T(2, "output"), T(3, "name"),
  T(4, "op_type"), F(5, K_MESSAGE, M_ATTR, "attribute"),
  F(6, K_BYTES, 0, "doc_string"), T(7, "domain"), T(8, "overload"),
  F(9, K_MESSAGE, M_STRING_ENTRY, "metadata_props"),
};
static const field_rule attr_fields[] = {
  T(1, "name"), F(2, K_FIXED32, 0, "f"), F(3, K_VARINT, 0, "i"),
  F(4, K_BYTES, 0, "s"), S(5, M_TENSOR, "t"), S(6, M_GRAPH, "g"),
  F(7, K_REP_FIXED32, 0, "floats"), F(8, K_REP_VARINT, 0, "ints"), F(9, K_BYTES, 0, "strings"),
  F(10, K_MESSAGE, M_TENSOR, "tensors"), F(11, K_MESSAGE, M_GRAPH, "graphs"),
  F(13, K_BYTES, 0, "doc_string"), S(14, M_TYPE, "tp"),
  F(15, K_MESSAGE, M_TYPE, "type_protos"), F(20, K_VARINT, 0, "type"),
  T(21, "ref_attr_name"), S(22, M_SPARSE, "sparse_tensor"),
  F(23, K_MESSAGE, M_SPARSE, "sparse_tensors"),
};
static const field_rule value_info_fields[] = {
  T(1, "name"), S(2, M_TYPE, "type"), F(3, K_BYTES, 0, "doc_string"),
  F(4, K_MESSAGE, M_STRING_ENTRY, "metadata_props"),
};
static const field_rule type_fields[] = {
  S(1, M_TYPE_TENSOR, "tensor_type"), S(4, M_TYPE_SEQUENCE, "sequence_type"),
  S(5, M_TYPE_MAP, "map_type"), F(6, K_BYTES, 0, "denotation"),
  S(8, M_TYPE_SPARSE, "sparse_tensor_type"),
  S(9, M_TYPE_OPTIONAL, "optional_type"),
};
static const field_rule type_tensor_fields[] = {
  F(1, K_VARINT, 0, "elem_type"), S(2, M_SHAPE, "shape"),
};
static const field_rule type_sequence_fields[] = { S(1, M_TYPE, "elem_type") };
static const field_rule type_map_fields[] = {
  F(1, K_VARINT, 0, "key_type"), S(2, M_TYPE, "value_type"),
};
static const field_rule type_optional_fields[] = { S(1, M_TYPE, "elem_type") };
static const field_rule shape_fields[] = { F(1, K_MESSAGE, M_DIM, "dim") };
static const field_rule dim_fields[] = {
  F(1, K_VARINT, 0, "dim_value"), T(2, "dim_param"), F(3, K_BYTES, 0, "denotation"),
};
static const field_rule tensor_fields[] = {
  F(1, K_REP_VARINT, 0, "dims"), F(2, K_VARINT, 0, "data_type"),
  S(3, M_SEGMENT, "segment"), P(4, K_REP_FIXED32, "float_data"),
  P(5, K_REP_VARINT, "int32_data"), P(6, K_BYTES, "string_data"),
  P(7, K_REP_VARINT, "int64_data"), T(8, "name"), P(9, K_BYTES, "raw_data"),
  P(10, K_REP_FIXED64, "double_data"), P(11, K_REP_VARINT, "uint64_data"),
  F(12, K_BYTES, 0, "doc_string"), F(13, K_MESSAGE, M_STRING_ENTRY, "external_data"),
  F(14, K_VARINT, 0, "data_location"), F(16, K_MESSAGE, M_STRING_ENTRY, "metadata_props"),
};
static const field_rule segment_fields[] = {
  F(1, K_VARINT, 0, "begin"), F(2, K_VARINT, 0, "end"),
};
static const field_rule sparse_fields[] = {
  S(1, M_TENSOR, "values"), S(2, M_TENSOR, "indices"),
  F(3, K_REP_VARINT, 0, "dims"),
};
static const field_rule training_info_fields[] = {
  S(1, M_GRAPH, "initialization"), S(2, M_GRAPH, "algorithm"),
  F(3, K_MESSAGE, M_STRING_ENTRY, "initialization_binding"),
  F(4, K_MESSAGE, M_STRING_ENTRY, "update_binding"),
};
static const field_rule function_fields[] = {
  T(1, "name"), T(4, "input"), T(5, "output"),
  T(6, "attribute"), F(7, K_MESSAGE, M_NODE, "node"), F(8, K_BYTES, 0, "doc_string"),
  F(9, K_MESSAGE, M_OPSET, "opset_import"), T(10, "domain"),
  F(11, K_MESSAGE, M_ATTR, "attribute_proto"), F(12, K_MESSAGE, M_VALUE_INFO, "value_info"),
  T(13, "overload"), F(14, K_MESSAGE, M_STRING_ENTRY, "metadata_props"),
};
static const field_rule opset_fields[] = { T(1, "domain"), F(2, K_VARINT, 0, "version") };
static const field_rule string_entry_fields[] = { T(1, "key"), T(2, "value") };
static const field_rule tensor_annotation_fields[] = {
  T(1, "tensor_name"),
  F(2, K_MESSAGE, M_STRING_ENTRY, "quant_parameter_tensor_names"),
};

#define MSG(name, fields) {name, fields, sizeof(fields) / sizeof(fields[0])}
static const msg_rule messages[M_COUNT] = {
  [M_MODEL] = MSG("ModelProto", model_fields),
  [M_GRAPH] = MSG("GraphProto", graph_fields),
  [M_NODE] = MSG("NodeProto", node_fields),
  [M_ATTR] = MSG("AttributeProto", attr_fields),
  [M_VALUE_INFO] = MSG("ValueInfoProto", value_info_fields),
  [M_TYPE] = MSG("TypeProto", type_fields),
  [M_TYPE_TENSOR] = MSG("TypeProto.Tensor", type_tensor_fields),
  [M_TYPE_SEQUENCE] = MSG("TypeProto.Sequence", type_sequence_fields),
  [M_TYPE_MAP] = MSG("TypeProto.Map", type_map_fields),
  [M_TYPE_OPTIONAL] = MSG("TypeProto.Optional", type_optional_fields),
  [M_TYPE_SPARSE] = MSG("TypeProto.SparseTensor", type_tensor_fields),
  [M_SHAPE] = MSG("TensorShapeProto", shape_fields),
  [M_DIM] = MSG("TensorShapeProto.Dimension", dim_fields),
  [M_TENSOR] = MSG("TensorProto", tensor_fields),
  [M_SEGMENT] = MSG("TensorProto.Segment", segment_fields),
  [M_SPARSE] = MSG("SparseTensorProto", sparse_fields),
  [M_TRAINING_INFO] = MSG("TrainingInfoProto", training_info_fields),
  [M_FUNCTION] = MSG("FunctionProto", function_fields),
  [M_OPSET] = MSG("OperatorSetIdProto", opset_fields),
  [M_STRING_ENTRY] = MSG("StringStringEntryProto", string_entry_fields),
  [M_TENSOR_ANNOTATION] = MSG("TensorAnnotation", tensor_annotation_fields),
};

static const field_rule *find_field_scan(msg_id m, uint32_t number) {
  const msg_rule *r = &messages[m];
  for (size_t i = 0; i < r->n_fields; i++)
    if (r->fields[i].number == number) return &r->fields[i];
  return NULL;
}

/* Each message's rule of every field number below SMALL_FIELDS, by index (+1; 0: none): the
 * walk looks a rule up for every field of the file, and a scan of the list mispredicted. */
enum { SMALL_FIELDS = 32 };
typedef struct field_index {
  uint8_t at[M_COUNT][SMALL_FIELDS];
} field_index;

static void index_fields(field_index *ix) {
  memset(ix, 0, sizeof *ix);
  for (int m = 0; m < M_COUNT; m++)
    for (size_t i = 0; i < messages[m].n_fields; i++)
      if (messages[m].fields[i].number < SMALL_FIELDS && i < UINT8_MAX)
        ix->at[m][messages[m].fields[i].number] = (uint8_t)(i + 1);
}

static const field_rule *find_field(const field_index *ix, msg_id m, uint32_t number) {
  if (number >= SMALL_FIELDS) return find_field_scan(m, number);
  return ix->at[m][number] ? &messages[m].fields[ix->at[m][number] - 1] : NULL;
}

/* ------------------------------------------------------------------ wire primitives */

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_FIXED32 = 5 };

size_t mb_wire_varint(const uint8_t *p, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  for (size_t i = 0; i < 10 && p + i < end; i++) {
    uint8_t b = p[i];
    if (i == 9 && b > 1) return 0; /* more than 64 bits */
    x |= (uint64_t)(b & 0x7F) << (7 * i);
    if (!(b & 0x80)) {
      *v = x;
      return i + 1;
    }
  }
  return 0;
}

static size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

static void put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p = (uint8_t)v;
}

static void emit_varint(mb_strbuf *out, uint64_t v) {
  uint8_t buf[10];
  size_t n = varint_size(v);
  put_varint(buf, v);
  mb_sb_append(out, buf, n);
}

static bool wire_type_fits(field_kind k, unsigned wt) {
  switch (k) {
    case K_VARINT: return wt == WT_VARINT;
    case K_FIXED32: return wt == WT_FIXED32;
    case K_BYTES:
    case K_MESSAGE: return wt == WT_LEN;
    case K_REP_VARINT: return wt == WT_VARINT || wt == WT_LEN;
    case K_REP_FIXED32: return wt == WT_FIXED32 || wt == WT_LEN;
    case K_REP_FIXED64: return wt == WT_FIXED64 || wt == WT_LEN;
  }
  return false;
}

static const char *wire_type_name(unsigned wt) {
  static const char *names[] = {"varint", "fixed64", "length-delimited", "group start",
                                "group end", "fixed32", "invalid (6)", "invalid (7)"};
  return names[wt & 7];
}

/* ------------------------------------------------------------------ the slim copy */

/* The pass works on offsets into a reader (onnx/reader.h), not on pointers: a file is read
 * through a small window, and a skipped payload is never read at all. It only moves forward,
 * so the window serves it in order. */
enum { N_REPEAT = 4 };
const char *const mb_wire_repeat_keys[N_REPEAT] = {
    "pkg.torch.onnx.stack_trace", "pkg.torch.onnx.class_hierarchy", "pkg.torch.onnx.name_scopes",
    "pkg.torch.onnx.fx_node"};

typedef struct walker {
  field_index fields;
  mb_reader *r;
  mb_strbuf *out;
  mb_diag *d;
  int graphs;      /* GraphProto / FunctionProto messages open */
  bool main_graph; /* the outermost open one is ModelProto.graph */
  struct {
    size_t off, len; /* the value of the last kept entry of this key, in out */
    bool ok;         /* a repeat of it may be written as a marker */
  } last[N_REPEAT];
} walker;

/* A field's tag, its length or value, and nothing else fit in this many bytes. */
#define HEAD_MAX 20u

static int slim_message(walker *w, msg_id m, uint64_t p, uint64_t end, int depth);

/* A packed repeated field must hold whole elements; check without reading them all (only
 * the last byte of packed varints). */
static int check_packed(walker *w, const field_rule *f, msg_id m, uint64_t p, uint64_t len) {
  const char *msg = messages[m].name;
  unsigned long long off = (unsigned long long)p;
  if (f->kind == K_REP_FIXED32 && len % 4)
    return mb_fail(w->d, MB_E_PARSE,
                   "%s.%s at byte %llu: packed length %llu is not a multiple of 4", msg, f->name,
                   off, (unsigned long long)len);
  if (f->kind == K_REP_FIXED64 && len % 8)
    return mb_fail(w->d, MB_E_PARSE,
                   "%s.%s at byte %llu: packed length %llu is not a multiple of 8", msg, f->name,
                   off, (unsigned long long)len);
  if (f->kind == K_REP_VARINT && len > 0) {
    size_t avail;
    const uint8_t *last = mb_reader_at(w->r, p + len - 1, 1, &avail);
    if (!last) return w->d->status;
    if (*last & 0x80)
      return mb_fail(w->d, MB_E_PARSE, "%s.%s at byte %llu: packed varints end mid-value", msg,
                     f->name, off);
  }
  return MB_OK;
}

static void forget_repeats(walker *w) {
  for (int k = 0; k < N_REPEAT; k++) w->last[k].ok = false;
}

/* Do n bytes of the source at off equal prev? */
static int source_equals(walker *w, uint64_t off, const char *prev, size_t n, bool *eq) {
  *eq = true;
  while (n > 0 && *eq) {
    size_t avail, want = n < MB_READER_MAX_PEEK ? n : MB_READER_MAX_PEEK;
    const uint8_t *q = mb_reader_at(w->r, off, want, &avail);
    if (!q) return w->d->status;
    if (avail > n) avail = n;
    *eq = !memcmp(q, prev, avail);
    off += avail, prev += avail, n -= avail;
  }
  return MB_OK;
}

/* NodeProto.metadata_props of a main-graph node (wire.h: repeats and "namespace"). *handled:
 * false leaves the entry to the plain copy (anything but a key field then a value field). The
 * marker relies on origin.c reading these nodes in file order, each before its subgraphs: so
 * any graph opening or closing forgets what came before (slim_field). */
static int node_metadata(walker *w, uint64_t field_start, uint64_t value, uint64_t len,
                         bool *handled) {
  *handled = false;
  if (len < 4) return MB_OK; /* a key field and a value field take 4 bytes at least (and the
                              * reader is never asked for the byte past the end) */
  size_t avail;
  const uint8_t *h = mb_reader_at(w->r, value, MB_READER_MAX_PEEK, &avail);
  if (!h) return w->d->status;
  if (avail > len) avail = (size_t)len;
  const uint8_t *q = h, *end = h + avail;
  uint64_t key_len, value_len;
  size_t n;
  if (q == end || *q++ != 0x0A || !(n = mb_wire_varint(q, end, &key_len)) ||
      key_len > (uint64_t)(end - q - n))
    return MB_OK;
  const char *key = (const char *)(q + n);
  q += n + key_len;
  if (q == end || *q++ != 0x12 || !(n = mb_wire_varint(q, end, &value_len))) return MB_OK;
  q += n;
  uint64_t value_off = value + (uint64_t)(q - h);
  if (value_len != value + len - value_off) return MB_OK;
  *handled = true;
  if ((key_len == 9 && !memcmp(key, "namespace", 9)) ||
      (key_len == strlen(MB_WIRE_REPEAT_KEY) && !memcmp(key, MB_WIRE_REPEAT_KEY, key_len)))
    return MB_OK;
  int kind = -1;
  for (int k = 0; k < N_REPEAT && kind < 0; k++)
    if (strlen(mb_wire_repeat_keys[k]) == key_len && !memcmp(key, mb_wire_repeat_keys[k], key_len))
      kind = k;
  mb_strbuf *out = w->out;
  if (kind >= 0 && w->last[kind].ok && w->last[kind].len == value_len) {
    bool eq;
    int rc = source_equals(w, value_off, out->data + w->last[kind].off, (size_t)value_len, &eq);
    if (rc != MB_OK) return rc;
    if (eq) {
      size_t mk = strlen(MB_WIRE_REPEAT_KEY), vk = (size_t)key_len;
      emit_varint(out, (9u << 3) | WT_LEN);
      emit_varint(out, 2 + varint_size(mk) + mk + varint_size(vk) + vk);
      emit_varint(out, 0x0A);
      emit_varint(out, mk);
      mb_sb_append(out, MB_WIRE_REPEAT_KEY, mk);
      emit_varint(out, 0x12);
      emit_varint(out, vk);
      mb_sb_append(out, mb_wire_repeat_keys[kind], vk); /* key may have left the window */
      return MB_OK;
    }
  }
  size_t at = out->len + (size_t)(value_off - field_start);
  int rc = mb_reader_append(w->r, field_start, value + len - field_start, out);
  if (rc != MB_OK || kind < 0 || mb_sb_failed(out)) return rc;
  w->last[kind].off = at;
  w->last[kind].len = (size_t)value_len;
  w->last[kind].ok = !memchr(out->data + at, '\0', (size_t)value_len);
  return MB_OK;
}

static int slim_field(walker *w, msg_id m, const field_rule *f, uint64_t field_start,
                      size_t tag_len, uint64_t value, uint64_t len, int depth) {
  mb_strbuf *out = w->out;
  if (f && m == M_NODE && f->number == 9 && w->graphs == 1 && w->main_graph) {
    bool handled;
    int rc = node_metadata(w, field_start, value, len, &handled);
    if (rc != MB_OK || handled) return rc;
    forget_repeats(w);
  }
  if (f && f->kind == K_MESSAGE) {
    bool graph = f->message == M_GRAPH || f->message == M_FUNCTION;
    if (graph) {
      if (w->graphs++ == 0) w->main_graph = m == M_MODEL && f->number == 7;
      forget_repeats(w);
    }
    /* tag, then a 5-byte hole for the length, then the slim body; then close the hole. */
    int rc = mb_reader_append(w->r, field_start, tag_len, out);
    if (rc != MB_OK) return rc;
    size_t hole = out->len;
    static const uint8_t zeros[5] = {0};
    mb_sb_append(out, zeros, sizeof zeros);
    rc = slim_message(w, (msg_id)f->message, value, value + len, depth + 1);
    if (rc != MB_OK) return rc;
    if (graph) w->graphs--, forget_repeats(w);
    if (mb_sb_failed(out)) return mb_fail(w->d, MB_E_NOMEM, "out of memory");
    size_t body = out->len - hole - sizeof zeros;
    size_t vs = varint_size(body);
    memmove(out->data + hole + vs, out->data + hole + sizeof zeros, body);
    put_varint((uint8_t *)out->data + hole, body);
    out->len = hole + vs + body;
    for (int k = 0; k < N_REPEAT; k++) /* what node_metadata remembers moved with the body */
      if (w->last[k].off >= hole + sizeof zeros) w->last[k].off -= sizeof zeros - vs;
    return MB_OK;
  }
  if (f && f->payload && len > MB_WIRE_KEEP_PAYLOAD) {
    /* Drop the payload, keep its length as an unknown varint field. */
    if (f->kind != K_BYTES) {
      int rc = check_packed(w, f, m, value, len);
      if (rc != MB_OK) return rc;
    }
    emit_varint(out, ((uint64_t)(MB_WIRE_DROPPED_BASE + f->number) << 3) | WT_VARINT);
    emit_varint(out, len);
    return MB_OK;
  }
  if (f && f->kind >= K_REP_VARINT) {
    int rc = check_packed(w, f, m, value, len);
    if (rc != MB_OK) return rc;
  }
  int rc = mb_reader_append(w->r, field_start, value + len - field_start, out);
  if (rc == MB_OK && f && f->text && !mb_sb_failed(out) && memchr(out->data + out->len - len, '\0', (size_t)len))
    return mb_fail(w->d, MB_E_INVALID_MODEL, "%s.%s at byte %llu: a NUL byte inside the string (\"%.*s\"...): a name "
                   "cannot hold one", messages[m].name, f->name, (unsigned long long)value,
                   (int)strnlen(out->data + out->len - len, 64), out->data + out->len - len);
  return rc;
}

static int slim_message(walker *w, msg_id m, uint64_t p, uint64_t end, int depth) {
  const char *msg = messages[m].name;
  if (depth > MB_WIRE_MAX_DEPTH)
    return mb_fail(w->d, MB_E_LIMIT, "%s at byte %llu: messages nested deeper than %d", msg,
                   (unsigned long long)p, MB_WIRE_MAX_DEPTH);
  /* A singular message field may legally appear several times (protobuf merges them), but
   * protobuf-c merges each repeat into a copy of the whole message so far: quadratic. No
   * exporter writes that, so it is refused. Field numbers of singular fields are < 32. */
  uint32_t seen_single = 0;
  while (p < end) {
    const uint64_t field_start = p;
    unsigned long long off = (unsigned long long)p;
    /* The head of the field: its tag and its value, or its length. */
    size_t avail;
    const uint8_t *h = mb_reader_at(w->r, p, HEAD_MAX, &avail);
    if (!h) return w->d->status;
    if (avail > end - p) avail = (size_t)(end - p);
    const uint8_t *hend = h + avail, *q = h;
    uint64_t tag;
    size_t n = mb_wire_varint(q, hend, &tag);
    if (!n)
      return mb_fail(w->d, MB_E_PARSE, "%s at byte %llu: truncated or malformed field tag", msg,
                     off);
    q += n;
    size_t tag_len = n;
    uint64_t number = tag >> 3;
    unsigned wt = (unsigned)(tag & 7);
    if (number == 0 || number > 0x1FFFFFFF)
      return mb_fail(w->d, MB_E_PARSE, "%s at byte %llu: invalid field number %llu", msg, off,
                     (unsigned long long)number);
    const field_rule *f = find_field(&w->fields, m, (uint32_t)number);
    if (f && f->single) {
      uint32_t bit = 1u << (f->number & 31);
      if (seen_single & bit)
        return mb_fail(w->d, MB_E_PARSE, "%s.%s at byte %llu: this single field appears more "
                       "than once", msg, f->name, off);
      seen_single |= bit;
    }
    if (f && !wire_type_fits((field_kind)f->kind, wt))
      return mb_fail(w->d, MB_E_PARSE,
                     "%s.%s at byte %llu: wire type %s does not fit this field (is this an ONNX "
                     "model?)", msg, f->name, off, wire_type_name(wt));
    uint64_t len = 0;
    switch (wt) {
      case WT_VARINT: {
        uint64_t v;
        size_t k = mb_wire_varint(q, hend, &v);
        if (!k) return mb_fail(w->d, MB_E_PARSE, "%s at byte %llu: truncated varint", msg, off);
        q += k;
        break;
      }
      case WT_FIXED64:
        if (hend - q < 8)
          return mb_fail(w->d, MB_E_PARSE, "%s at byte %llu: truncated fixed64", msg, off);
        q += 8;
        break;
      case WT_FIXED32:
        if (hend - q < 4)
          return mb_fail(w->d, MB_E_PARSE, "%s at byte %llu: truncated fixed32", msg, off);
        q += 4;
        break;
      case WT_LEN: {
        size_t k = mb_wire_varint(q, hend, &len);
        if (!k) return mb_fail(w->d, MB_E_PARSE, "%s at byte %llu: truncated length", msg, off);
        q += k;
        break;
      }
      default:
        return mb_fail(w->d, MB_E_PARSE, "%s at byte %llu: unsupported wire type %s", msg, off,
                       wire_type_name(wt));
    }
    size_t head = (size_t)(q - h);
    p += head;
    if (wt == WT_LEN) {
      if (len > end - p)
        return mb_fail(w->d, MB_E_PARSE,
                       "%s%s%s at byte %llu: length %llu runs past the end of the data "
                       "(truncated file?)", msg, f ? "." : "", f ? f->name : "", off,
                       (unsigned long long)len);
      uint64_t value = p;
      p += len;
      int rc = slim_field(w, m, f, field_start, tag_len, value, len, depth);
      if (rc != MB_OK) return rc;
    } else {
      mb_sb_append(w->out, h, head); /* h is still valid: nothing was read since */
    }
    if (mb_sb_failed(w->out)) return mb_fail(w->d, MB_E_NOMEM, "out of memory");
  }
  return MB_OK;
}

int mb_wire_slim_reader(mb_reader *r, mb_strbuf *out, mb_diag *d) {
  walker w = {.r = r, .out = out, .d = d};
  index_fields(&w.fields);
  return slim_message(&w, M_MODEL, 0, r->size, 0);
}

int mb_wire_slim_model(const uint8_t *data, size_t len, mb_strbuf *out, mb_diag *d) {
  mb_reader r;
  mb_reader_init_buffer(&r, data, len, d);
  walker w = {.r = &r, .out = out, .d = d};
  index_fields(&w.fields);
  return slim_message(&w, M_MODEL, 0, len, 0);
}

int mb_wire_slim_tensor(const uint8_t *data, size_t len, mb_strbuf *out, mb_diag *d) {
  mb_reader r;
  mb_reader_init_buffer(&r, data, len, d);
  walker w = {.r = &r, .out = out, .d = d};
  index_fields(&w.fields);
  return slim_message(&w, M_TENSOR, 0, len, 0);
}
