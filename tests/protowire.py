"""Protobuf wire-format pieces for the scripts that write hand-made ONNX bytes
(tests/hostile/make_hostile.py, tests/fuzz/make_slow_inputs.py)."""


def varint(v):
    """v as a base-128 varint; a negative v as protobuf writes an int64 (ten bytes)."""
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(num, payload):
    """A length-delimited field (a string, bytes or an embedded message)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload
