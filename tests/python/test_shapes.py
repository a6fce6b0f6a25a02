"""`membudget shapes`: shapes derived by hand from the architectures, at two batch sizes."""
import json

import pytest

from conftest import MODELS, run


def shapes(cli, model, *dims):
    args = ["shapes", MODELS / model, "--json"]
    for d in dims:
        args += ["--dim", d]
    doc = json.loads(run(cli, *args, check=0).stdout)
    return {t["name"]: t for t in doc["tensors"]}


@pytest.mark.parametrize("b", [1, 8])
def test_resnet18(cli, b):
    t = shapes(cli, "resnet18.onnx", f"batch={b}")
    assert t["output"]["shape"] == [b, 1000]
    assert t["output"]["bytes"] == b * 1000 * 4
    by_node = {v["producer"]: v for v in t.values() if v["producer"]}
    # stem: 7x7/2 conv pad 3 -> 112, 3x3/2 max pool pad 1 -> 56
    assert by_node["/conv1/Conv"]["shape"] == [b, 64, 112, 112]
    assert by_node["/maxpool/MaxPool"]["shape"] == [b, 64, 56, 56]
    assert by_node["/layer4/layer4.1/conv2/Conv"]["shape"] == [b, 512, 7, 7]
    assert by_node["/avgpool/GlobalAveragePool"]["shape"] == [b, 512, 1, 1]


@pytest.mark.parametrize("b,s", [(2, 128), (3, 64)])
def test_transformers(cli, b, s):
    t = shapes(cli, "bert_base_like.onnx", f"batch={b}", f"sequence={s}")
    assert t["last_hidden_state"]["shape"] == [b, s, 768]
    scores = [v for v in t.values() if v["op_type"] == "Softmax"]
    assert len(scores) == 12 and all(v["shape"] == [b, 12, s, s] for v in scores)
    t = shapes(cli, "gpt2_small_like.onnx", f"batch={b}", f"sequence={s}")
    assert t["logits"]["shape"] == [b, s, 50257]
    assert t["logits"]["dtype"] == "float"


def test_vit(cli):
    t = shapes(cli, "vit_b_16.onnx", "batch=2")
    assert t["output"]["shape"] == [2, 1000]
    # 224/16 = 14 -> 196 patches + class token
    assert any(v["shape"] == [2, 197, 768] for v in t.values() if v["op_type"] == "LayerNormalization")


@pytest.mark.parametrize("b", [1, 3])
def test_unet(cli, b):
    t = shapes(cli, "unet_like.onnx", f"batch={b}")
    assert t["output"]["shape"] == [b, 3, 64, 64]
    ups = [v for v in t.values() if v["op_type"] == "Resize"]
    # nearest x2 upsampling on the way back up (scales come from a Concat of constants)
    assert len(ups) == 2
    for v in ups:
        assert v["shape"][0] == b and v["shape"][2] * 1 in (32, 64)


def test_errors_name_the_problem(cli):
    p = run(cli, "shapes", MODELS / "bert_base_like.onnx", "--dim", "batch=2", check=1)
    assert "symbolic dim 'sequence'" in p.stderr and "--dim sequence=N" in p.stderr
    run(cli, "shapes", MODELS / "resnet18.onnx", "--dim", "batch", check=2)
    run(cli, "shapes", MODELS / "resnet18.onnx", "--dim", "batch=-1", check=2)


def test_ops_lists_the_table(cli):
    out = run(cli, "ops", check=0).stdout
    rows = [line.split() for line in out.splitlines()]
    assert ["ai.onnx", "Conv", "1+", "2-3", "1"] in rows
    assert ["ai.onnx", "LayerNormalization", "17+", "2-3", "3"] in rows
    assert ["ai.onnx", "Attention", "23", "3-6", "4"] in rows  # attn_mask, past_key, past_value
    assert ["ai.onnx", "Attention", "24+", "3-7", "4"] in rows  # and nonpad_kv_seqlen
    assert ["ai.onnx", "Concat", "1+", "1+", "1"] in rows


TESTDATA = "/usr/share/libonnx-testdata/data/node/test_reshape_extended_dims"


@pytest.mark.skipif(not __import__("os").path.isdir(TESTDATA), reason="libonnx-testdata not installed")
def test_input_data_binds_values(cli):
    # input_1.pb holds the target shape [2, 3, 2, 2] (output_0.pb has that shape): without it
    # the Reshape cannot resolve
    p = run(cli, "shapes", f"{TESTDATA}/model.onnx", "--json",
            "--input-data", f"{TESTDATA}/test_data_set_0", check=0)
    t = {v["name"]: v for v in json.loads(p.stdout)["tensors"]}
    assert t["reshaped"]["shape"] == [2, 3, 2, 2]
    p = run(cli, "shapes", f"{TESTDATA}/model.onnx", "--input-data", "/nonexistent", check=1)
    assert "input_0.pb" in p.stderr


def test_batch_dim_found_automatically(cli):
    # the symbolic dim on axis 0 of the inputs is the batch dim
    t = shapes_args(cli, "bert_base_like.onnx", "--batch", "4", "--dim", "sequence=16")
    assert t["last_hidden_state"]["shape"] == [4, 16, 768]
    # named explicitly: here the sequence dim plays "batch", so the batch dim needs --dim
    t = shapes_args(cli, "bert_base_like.onnx", "--batch-dim", "sequence", "--batch", "9",
                    "--dim", "batch=2")
    assert t["last_hidden_state"]["shape"] == [2, 9, 768]
    run(cli, "shapes", MODELS / "resnet18.onnx", "--batch", "0", check=2)
    run(cli, "shapes", MODELS / "resnet18.onnx", "--batch", "x", check=2)


@pytest.mark.skipif(not __import__("os").path.isdir("/usr/share/libonnx-testdata/data"),
                    reason="libonnx-testdata not installed")
def test_static_inputs_take_axis_0_and_say_so(cli):
    model = "/usr/share/libonnx-testdata/data/node/test_relu/model.onnx"  # x: [3, 4, 5]
    p = run(cli, "shapes", model, "--batch", "7", "--json", check=0)
    t = {v["name"]: v for v in json.loads(p.stdout)["tensors"]}
    assert t["y"]["shape"] == [7, 4, 5]
    assert "fully static" in p.stderr and "axis 0" in p.stderr


def shapes_args(cli, model, *args):
    doc = json.loads(run(cli, "shapes", MODELS / model, "--json", *args, check=0).stdout)
    return {t["name"]: t for t in doc["tensors"]}
