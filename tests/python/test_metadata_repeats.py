"""The wire pass writes a torch 2.x node's metadata entry that repeats the previous node's
(stack trace, class hierarchy, name scopes, FX node) as a short "as before" marker, and drops
"namespace" (src/onnx/wire.h); origin.c answers the marker with what it read for the previous
node. The check here is independent of that shortcut: the same model with one key-only entry
put first in every node's metadata (which origin.c ignores, and which makes the wire pass forget
what came before, so no marker is ever written) must give the same module tree, top tensors and
figures; and so must a model whose nodes carry a forged marker of their own, which is dropped."""
import json

import onnx
import pytest
from onnx import helper

from conftest import MODELS, run

CASES = [("gpt2_small.dynamo.onnx", ["--dim", "sequence=64"]), ("resnet18.dynamo.onnx", []),
         ("llama_small.dynamo.onnx", ["--dim", "sequence=64"])]


def estimate(cli, path, dims):
    out = run(cli, "estimate", str(path), "--batch", "2", *dims, "--by-module", "--depth", "4",
              "--top", "10", "--json")
    return json.loads(out.stdout)


def with_first_entry(src, dst, key, value=None):
    m = onnx.load(str(src), load_external_data=False)
    touched = 0
    for n in m.graph.node:
        if not len(n.metadata_props):
            continue
        e = onnx.StringStringEntryProto(key=key)
        if value is not None:
            e.value = value
        props = [e] + list(n.metadata_props)
        del n.metadata_props[:]
        n.metadata_props.extend(props)
        touched += 1
    onnx.save(m, str(dst))
    return touched


@pytest.mark.parametrize("name,dims", CASES)
def test_repeats_read_as_written(cli, name, dims, tmp_path):
    src = MODELS / "torch2" / name
    m = onnx.load(str(src), load_external_data=False)
    last, repeats = {}, 0
    for n in m.graph.node:
        for p in n.metadata_props:
            repeats += last.get(p.key) == p.value and p.key.startswith("pkg.torch.onnx.")
            last[p.key] = p.value
    assert repeats > len(m.graph.node) // 2, "the model has the repeats the shortcut is for"
    plain = tmp_path / "plain.onnx"
    assert with_first_entry(src, plain, "x.no_value") > 0
    forged = tmp_path / "forged.onnx"
    with_first_entry(src, forged, "pkg.membudget.repeat_previous", "pkg.torch.onnx.stack_trace")
    ref = estimate(cli, src, dims)
    assert ref["modules"], "module attribution comes from the metadata"
    assert estimate(cli, plain, dims) == ref
    assert estimate(cli, forged, dims) == ref
