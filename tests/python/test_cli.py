"""The CLI's contract: exit codes, streams, human table, JSON schema, trainability globs."""
import json
import re

from conftest import MODELS, info_json, run


def test_help_and_version(cli):
    p = run(cli, "--help", check=0)
    assert "usage: membudget" in p.stdout and p.stderr == ""
    p = run(cli, "--version", check=0)
    assert re.match(r"membudget \d+\.\d+\.\d+ \(library \d+\.\d+\.\d+", p.stdout)


def test_usage_errors_exit_2_on_stderr(cli):
    for args in ([], ["frobnicate"], ["info"], ["info", "a.onnx", "b.onnx"],
                 ["info", MODELS / "resnet18.onnx", "--bogus"],
                 ["info", MODELS / "resnet18.onnx", "--freeze"],
                 ["info", MODELS / "resnet18.onnx", "--freeze", "layer[1"]):
        p = run(cli, *args, check=2)
        assert p.stdout == ""
        assert p.stderr.startswith("membudget: ")


def test_input_errors_exit_1_with_message(cli, tmp_path):
    p = run(cli, "info", tmp_path / "missing.onnx", check=1)
    assert "missing.onnx" in p.stderr and "No such file" in p.stderr
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes((MODELS / "resnet18.onnx").read_bytes()[:5000])
    p = run(cli, "info", bad, check=1)
    assert "truncated" in p.stderr and p.stdout == ""


def test_human_table(cli):
    p = run(cli, "info", MODELS / "resnet18.onnx", check=0)
    out = p.stdout
    assert "parameters 11,689,512 (trainable 11,689,512)" in out
    assert re.search(r"trainable parameter\s+float\s+62\s+11,689,512\s+46,758,048", out)
    assert "layer4.0.conv2.weight" in out  # among the largest initializers
    assert re.search(r"Conv\s+20", out)
    assert "[batch, 3, 224, 224]" in out


def test_json_schema(cli):
    doc = info_json(cli, MODELS / "bert_base_like.onnx")
    assert doc["schema_version"] == 1
    assert doc["opsets"] == [{"domain": "", "version": 17}]
    assert len(doc["largest_initializers"]) == 10
    sizes = [i["bytes"] for i in doc["largest_initializers"]]
    assert sizes == sorted(sizes, reverse=True)
    # every nn.Embedding: word ids come from the input, position and token-type ids from its shape
    assert [e["name"] for e in doc["embeddings"]] == [
        "word_embeddings.weight", "position_embeddings.weight", "token_type_embeddings.weight"]
    assert doc["embeddings"][0]["shape"] == [30522, 768]
    for group in doc["by_role_dtype"]:
        assert isinstance(group["bytes"], int)


def test_freeze_and_trainable(cli):
    doc = info_json(cli, MODELS / "gpt2_small_like.onnx", "--freeze", "*",
                    "--trainable", "h.11.*")
    t = doc["totals"]
    assert t["parameters"] == 124439808
    # one GPT-2 block: 2 LayerNorms (2*768 each), qkv 768*2304+2304, proj 768*768+768,
    # fc 768*3072+3072, mlp proj 3072*768+768
    block = 4 * 768 + 768 * 2304 + 2304 + 768 * 768 + 768 + 768 * 3072 + 3072 + 3072 * 768 + 768
    assert t["trainable"] == block
    assert t["frozen_embeddings"]["tensors"] == 2
    doc = info_json(cli, MODELS / "gpt2_small_like.onnx", "--freeze", "wte.*")
    assert doc["totals"]["trainable"] == 124439808 - 50257 * 768
