"""membudget.torch and `python -m membudget.hf` on torch 2.x (the dynamo exporter). The
exports run in a child of a torch 2.x Python (torch2_binding_child.py; $MEMBUDGET_TORCH2_PYTHON,
default bench/truth/.venv2/bin/python); skipped where there is none (CI). The references are
the CLI on the very files the child wrote, and counts derived by hand from the configs."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from binding_util import python_env
from conftest import MODELS, ROOT, info_json, run

TORCH2_PYTHON = os.environ.get("MEMBUDGET_TORCH2_PYTHON", str(ROOT / "bench" / "truth" / ".venv2" / "bin" / "python"))
CHILD = Path(__file__).with_name("torch2_binding_child.py")


def has_torch2():
    try:
        p = subprocess.run([TORCH2_PYTHON, "-c", "import torch, transformers, peft, torchvision; "
                            "assert int(torch.__version__.split('.')[0]) >= 2"], capture_output=True, timeout=300)
        return p.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = pytest.mark.skipif(not has_torch2(), reason=f"no torch 2.x with transformers and peft at {TORCH2_PYTHON}")

# the child's Llama config (LLAMA there): vocab 1000, hidden 256, MLP 512, 3 layers, 4 heads of
# 64, 2 kv heads, untied head
V, H, I, L, KV = 1000, 256, 512, 3, 2 * 64
LLAMA_PARAMS = 2 * V * H + L * (2 * H * H + 2 * H * KV + 3 * H * I + 2 * H) + H
LORA_R = 8
LORA_PARAMS = L * LORA_R * ((H + H) + (H + KV))   # q_proj: H -> H, v_proj: H -> KV


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    out = tmp_path_factory.mktemp("torch2")
    p = subprocess.run([TORCH2_PYTHON, str(CHILD), str(out)], capture_output=True, text=True, timeout=1800,
                       env=python_env(PYTHONWARNINGS="ignore"), cwd="/")
    assert p.returncode == 0, p.stderr[-4000:]
    return out, json.loads(p.stdout.strip().splitlines()[-1])


def cli_budget(cli, path, *args):
    return json.loads(run(cli, "estimate", path, *args, "--json", check=0).stdout)["budget"]


def test_torchvision_model_equals_the_cli_on_its_export(cli, child):
    out, res = child
    r = res["resnet18"]
    assert cli_budget(cli, out / "resnet18.onnx", "--batch", "4", "--optimizer", "sgd") == r["budget"]
    solved = json.loads(run(cli, "estimate", out / "resnet18.onnx", "--gpu", "t4", "--utilization", "0.5",
                            "--json", check=0).stdout)["budget"]["batch_size"]
    assert r["solved"] == solved
    assert info_json(cli, out / "resnet18.onnx")["totals"]["parameters"] == r["parameters"] == 11_689_512


def test_export_runs_in_train_mode_and_puts_the_module_back(cli, child):
    out, res = child
    r = res["resnet18"]
    assert r["training_after"] is False and r["state_kept"] and r["rng_kept"]
    ops = {o["op_type"] for o in info_json(cli, out / "resnet18.onnx")["op_types"]}
    assert "BatchNormalization" in ops  # optimize=False: not folded into Conv (an inference graph)


def test_hf_decoder_with_keyword_inputs_and_its_own_loss(cli, child):
    out, res = child
    doc = info_json(cli, out / "llama.onnx")
    assert [(i["name"], i["shape"]) for i in doc["inputs"]] == [
        ("input_ids", ["batch", "sequence"]), ("attention_mask", ["batch", "sequence"]),
        ("labels", ["batch", "sequence"])]
    # the ModelOutput's tensors: Hugging Face's loss first, then the logits the output holds
    assert [o["shape"] for o in doc["outputs"]] == [[], ["batch", "sequence", V]]
    assert res["llama"]["parameters"] == LLAMA_PARAMS and res["llama"]["is_meta"]
    # dims given: at them; not given: the example's sequence length (64); the loop: Trainer's,
    # membudget.torch's default for a Hugging Face model
    assert cli_budget(cli, out / "llama.onnx", "--batch", "4", "--dim", "sequence=128", "--loop", "trainer") == \
        res["llama"]["budget"]
    assert cli_budget(cli, out / "llama.onnx", "--batch", "4", "--dim", "sequence=64", "--loop", "trainer") == \
        res["llama"]["budget_example_seq"]


def test_hf_encoder(cli, child):
    out, res = child
    assert info_json(cli, out / "bert.onnx")["totals"]["parameters"] == res["bert"]["parameters"] == 28_795_194
    assert cli_budget(cli, out / "bert.onnx", "--batch", "4", "--dim", "sequence=128", "--loop", "trainer") == \
        res["bert"]["budget"]


def test_several_inputs_positional_and_keyword(cli, child):
    out, res = child
    doc = info_json(cli, out / "two.onnx")
    assert [(i["name"], i["shape"]) for i in doc["inputs"]] == [("x", ["batch", 8]), ("y", ["batch", 4])]
    # Linear(8, 16) + Linear(4, 16), fp32, exact bytes
    assert res["two"]["budget"]["params_trainable"] == 4 * (8 * 16 + 16 + 4 * 16 + 16)


def test_models_over_2_gib(child):
    _, res = child
    meta = res["big_meta"]
    assert meta["parameters"] == 300_000 * 2048 + 2048 * 300_000 + 300_000
    assert meta["budget"]["params_trainable"] + meta["budget"]["embeddings"] == 4 * meta["parameters"]
    cpu = res["big_cpu"]
    assert cpu["parameters"] == 32768 * 16384 + 16384
    assert cpu["budget"]["params_trainable"] == 4 * cpu["parameters"]
    # weightless: the 2 GiB weight was neither copied nor written (it would be resident)
    assert cpu["rss_after"] < cpu["weight_bytes"]


def test_fake_tensor_module_estimates_like_the_meta_one(child):
    _, res = child
    assert res["fake"]["budget"] == res["llama"]["budget"]


def test_lora_base_weights_are_frozen(child):
    _, res = child
    r = res["lora"]
    assert r["trainable"] == LORA_PARAMS
    assert r["budget"]["params_trainable"] == 4 * LORA_PARAMS   # rounding 1: exact bytes


def test_hf_gradient_checkpointing_becomes_checkpoint_globs(child):
    _, res = child
    r = res["checkpointing"]
    assert r["checkpoint"] == [f"model.layers.{i}" for i in range(L)]
    assert r["still_on"] is True


@pytest.mark.parametrize("name", ["llama_small", "gpt2_small", "bert_small"])
def test_same_prediction_as_the_committed_file(cli, child, name):
    # models/torch2/NAME.dynamo.onnx was exported from the same config by models/make_torch2_models.py;
    # membudget.torch runs a Hugging Face model's step as the Trainer does
    _, res = child
    assert cli_budget(cli, MODELS / "torch2" / f"{name}.dynamo.onnx", "--batch", "8", "--dim", "sequence=256",
                      "--loop", "trainer") == res["zoo"][name]


def test_truth_cases_predict_the_same_through_membudget_torch(cli, child):
    # issue 14: the module as the torch 2.x truth trains it (bench/truth/torch2_cases.py) gives the
    # budget the CLI gives for the committed file with the case's flags: LoRA's requires_grad
    # becomes the freeze/trainable globs, Hugging Face's checkpointing flag the checkpoint globs
    _, res = child
    assert len(res["truth"]) == 5
    for r in res["truth"]:
        expected = cli_budget(cli, ROOT / r["args"][0], *r["args"][1:])
        assert r["budget"] == expected, r["case"]


def test_failed_export_names_each_exporters_reason(child):
    _, res = child
    assert res["error"].startswith("torch.onnx.export of Unexportable failed: dynamo: ")
    assert "aten._linalg_svd" in res["error"] and "; torchscript: UnsupportedOperatorError" in res["error"]


def test_fallback_to_torchscript_says_so(child):
    _, res = child
    assert any("the dynamo export failed" in w and "used the torchscript exporter" in w
               for w in res["fallback"]["warnings"])
    assert res["fallback"]["params_trainable"] == 4 * (3 * 3 + 3)   # Linear(3, 3), exact bytes


# ---------------------------------------------------------------- python -m membudget.hf
SMALL_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V, "hidden_size": H,
               "intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": 4, "num_key_value_heads": 2,
               "max_position_embeddings": 1024, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def hf(*args, timeout=900):
    return subprocess.run([TORCH2_PYTHON, "-m", "membudget.hf", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=python_env(PYTHONWARNINGS="ignore"), cwd="/")


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("hf") / "config.json"
    path.write_text(json.dumps(SMALL_LLAMA))
    return path


def test_hf_config_to_budget_equals_the_cli_on_its_export(cli, config, tmp_path):
    onnx = tmp_path / "llama.onnx"
    p = hf(config, "--batch", 4, "--seq-len", 128, "--save-onnx", onnx, "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    # fp32 weights whatever torch_dtype says (--precision says how training runs)
    assert doc["parameters"] == doc["trainable_parameters"] == LLAMA_PARAMS
    assert doc["budget"] == cli_budget(cli, onnx, "--batch", "4", "--dim", "sequence=128", "--loop", "trainer")
    assert doc["budget"]["params_trainable"] + doc["budget"]["embeddings"] >= 4 * LLAMA_PARAMS


def test_hf_lora_and_checkpointing(config):
    p = hf(config, "--batch", 4, "--seq-len", 128, "--lora", f"r={LORA_R},targets=q_proj,v_proj", "--checkpointing",
           "--rounding", 1, "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert doc["trainable_parameters"] == LORA_PARAMS
    assert doc["budget"]["params_trainable"] == 4 * LORA_PARAMS
    assert doc["setup"]["checkpoint"] == [f"model.layers.{i}" for i in range(L)]


def test_hf_exit_codes(config, tmp_path):
    assert hf(config, "--seq-len", 128).returncode == 2          # neither --batch nor a device
    assert hf(config, "--batch", 4, "--lora", "r=x").returncode == 2
    missing = hf(tmp_path / "nope.json", "--batch", 4)
    assert missing.returncode == 1 and "nope.json" in missing.stderr
    assert hf(config, "--batch", 4, "--seq-len", 4096).returncode == 2   # over the 1024 positions
    big = hf(config, "--batch", 100000, "--seq-len", 1024, "--gpu", "t4")
    assert big.returncode == 3 and "does not fit" in big.stdout


def test_contrastive_loss_keeps_the_batch_symbolic(cli, child):
    """CLIP given return_loss=True computes its loss from torch.arange(len(logits)); exported as
    written, the dynamo exporter fixes that length at the example's batch of 2 (issue 32, item
    2). membudget.torch's export keeps it the batch: the file estimates at batch 8 as the binding
    did, and the step grows with the batch (a graph fixed at 2 would not)."""
    out, res = child
    seq = ["--dim", "sequence=16"]  # the example's, which the binding's estimate takes
    b8 = cli_budget(cli, out / "clip.onnx", "--batch", "8", *seq, "--loop", "trainer")  # the binding's for HF
    assert b8 == res["clip"]["budget"]
    assert b8["loss_in_graph"] is True
    b2, b16 = (cli_budget(cli, out / "clip.onnx", "--batch", str(b), *seq) for b in (2, 16))
    assert b2["activations"] < b8["activations"] < b16["activations"]
