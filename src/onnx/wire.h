/* Wire-level pass over a serialized ONNX ModelProto, before protobuf-c sees it.
 *
 * Why: a plain protobuf-c unpack copies every weight payload into the heap, so loading a
 * 1 GB model peaks at about 2 GB and reads every byte. We never need weight bytes. This pass
 * walks the message tree against a table of the ONNX schema, checks every length, wire type
 * and nesting depth, and writes a slim copy in which each tensor data field longer than
 * MB_WIRE_KEEP_PAYLOAD bytes is replaced by an unknown varint field
 * (MB_WIRE_DROPPED_BASE + original field number) holding the payload's byte length. The
 * skipped payload bytes are never touched: the pass reads through onnx/reader.h, so a file's
 * payloads are not even read from the disk.
 * Small payloads (shape constants) are kept so shape inference can read their values. */
#ifndef MB_ONNX_WIRE_H
#define MB_ONNX_WIRE_H
#include <stddef.h>
#include <stdint.h>

#include "onnx/reader.h"
#include "util/diag.h"
#include "util/limits.h"
#include "util/strbuf.h"

#define MB_WIRE_KEEP_PAYLOAD 4096u
#define MB_WIRE_DROPPED_BASE 536800000u /* < 2^29, far above any ONNX field number */
/* Nested messages: bounds the recursion. Each subgraph level is three messages (Graph, Node,
 * Attribute) and a type nests a few more, so the deepest subgraph_depth a caller may allow
 * (MB_LIMIT_DEPTH_CEILING) always meets limit.subgraph_depth, which names itself, first. */
#define MB_WIRE_MAX_DEPTH (3 * MB_LIMIT_DEPTH_CEILING + 64)

/* The torch exporter's node metadata (onnx/origin.c reads it) repeats: the nodes one FX node
 * became are consecutive and carry the same texts, and a decoder's layers repeat their stacks.
 * In the main graph, an entry equal to the previous kept entry of the same key (one of the
 * keys below, which origin.c remembers) is written as an entry with key MB_WIRE_REPEAT_KEY and
 * that key as its value: "as before". Entries with key "namespace" (never read) are dropped.
 * A 70B decoder's 34 MB of metadata so shrink to about a third before protobuf-c copies them. */
#define MB_WIRE_REPEAT_KEY "pkg.membudget.repeat_previous"
extern const char *const mb_wire_repeat_keys[4];

/* Validate data as a ModelProto and append the slim copy to out. MB_OK or MB_E_PARSE /
 * MB_E_LIMIT / MB_E_NOMEM with a message naming the message, field and byte offset. */
int mb_wire_slim_model(const uint8_t *data, size_t len, mb_strbuf *out, mb_diag *d);

/* The same from a reader (a file read through a window). */
int mb_wire_slim_reader(mb_reader *r, mb_strbuf *out, mb_diag *d);

/* The same for a serialized TensorProto (ONNX test data files). */
int mb_wire_slim_tensor(const uint8_t *data, size_t len, mb_strbuf *out, mb_diag *d);

/* Decode one varint at p (at most end - p bytes). Returns bytes used, 0 if malformed. */
size_t mb_wire_varint(const uint8_t *p, const uint8_t *end, uint64_t *v);
#endif
