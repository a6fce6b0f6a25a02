"""The module tree (`membudget estimate --by-module`, JSON "modules" and "top"): hand-derived
figures on a small graph of nested modules, and the tree's invariants on the zoo.

The graph is two blocks of Linear + ReLU and a head, named as torch.onnx names a TorchScript
export of

    class Block(nn.Module):       fc = nn.Linear(d_in, 16); act = nn.ReLU()
    class Net(nn.Module):         blocks = nn.Sequential(Block(8), Block(16)); head = nn.Linear(16, 4)

x [B,8] -> /blocks.0/fc/Gemm -> h0 [B,16] -> /blocks.0/act/Relu -> r0 -> /blocks.1/fc/Gemm -> h1
        -> /blocks.1/act/Relu -> r1 -> /head/Gemm -> logits [B,4]

The head's weight has a name the exporter made up ("onnx::Gemm_12", as for a transposed or
folded weight): it belongs to the module of the node reading it. Each tensor of the step belongs
to the module of the node that allocated it; weights to the module their name says; the batch,
the targets and the loss (allocated by no node) to no module. The step is written out with the
Step helper from the autograd rules (test_estimate_mlp.py has the same Gemm/ReLU conventions),
each tensor tagged with its module by hand."""
import json
import subprocess

import pytest
from onnx import helper

from conftest import MODELS, ROOT, run
from estimate_util import EXACT, Step, init, model, tensor
from measure_util import fake_env, needs_fake

SGD = ["--optimizer", "sgd", *EXACT]
W0, B0 = 4 * 16 * 8, 4 * 16
W1, B1 = 4 * 16 * 16, 4 * 16
WH, BH = 4 * 4 * 16, 4 * 4
X, T, H, Y = 4 * 8, 8, 4 * 16, 4 * 4  # per sample: input row, class index, hidden row, logits row


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    path = tmp_path_factory.mktemp("modules") / "blocks.onnx"
    nodes = [
        helper.make_node("Gemm", ["x", "blocks.0.fc.weight", "blocks.0.fc.bias"], ["h0"], name="/blocks.0/fc/Gemm",
                         transB=1),
        helper.make_node("Relu", ["h0"], ["r0"], name="/blocks.0/act/Relu"),
        helper.make_node("Gemm", ["r0", "blocks.1.fc.weight", "blocks.1.fc.bias"], ["h1"], name="/blocks.1/fc/Gemm",
                         transB=1),
        helper.make_node("Relu", ["h1"], ["r1"], name="/blocks.1/act/Relu"),
        helper.make_node("Gemm", ["r1", "onnx::Gemm_12", "head.bias"], ["logits"], name="/head/Gemm", transB=1),
    ]
    inits = [init("blocks.0.fc.weight", 16, 8), init("blocks.0.fc.bias", 16), init("blocks.1.fc.weight", 16, 16),
             init("blocks.1.fc.bias", 16), init("onnx::Gemm_12", 4, 16), init("head.bias", 4)]
    return model(nodes, [tensor("x", "batch", 8)], [tensor("logits", "batch", 4)], inits, path)


def blocks_step(b):
    """The SGD step at batch b, each tensor with its module (None: no module)."""
    s = Step()
    s.alloc("blocks.0.fc params", W0 + B0, module="blocks.0.fc")
    s.alloc("blocks.1.fc params", W1 + B1, module="blocks.1.fc")
    s.alloc("head params", WH + BH, module="head")
    s.alloc("x", b * X)
    s.alloc("targets", b * T)
    s.enter("forward")
    s.alloc("h0", b * H, module="blocks.0.fc")             # read by the ReLU only
    s.alloc("r0", b * H, act=True, module="blocks.0.act")  # relu keeps its result
    s.free("h0")
    s.alloc("h1", b * H, module="blocks.1.fc")             # the Gemm keeps r0 (already kept)
    s.alloc("r1", b * H, act=True, module="blocks.1.act")
    s.free("h1")
    s.alloc("logits", b * Y, act=True, module="head")      # held by the caller until backward ends
    kept = s.kept_by_module()
    s.enter("loss")                                         # log_softmax + nll_loss: no node, no module
    s.alloc("logp", b * Y)
    s.alloc("loss", 4)
    s.enter("backward")
    s.alloc("seed", 4)
    s.alloc("g_logp", b * Y)
    s.free("seed")
    s.alloc("g_logits", b * Y)
    s.free("g_logp", "logp")                                # the loss stays until backward returns
    s.alloc("g_r1", b * H, module="head")                   # head's Gemm: grad of r1, its weight and bias
    s.alloc("head grads", WH + BH, module="head")
    s.free("g_logits")
    s.alloc("g_h1", b * H, module="blocks.1.act")           # relu: grad of h1; r1 and grad r1 released
    s.free("r1", "g_r1")
    s.alloc("g_r0", b * H, module="blocks.1.fc")
    s.alloc("blocks.1.fc grads", W1 + B1, module="blocks.1.fc")
    s.free("g_h1")
    s.alloc("g_h0", b * H, module="blocks.0.act")
    s.free("r0", "g_r0")
    s.alloc("blocks.0.fc grads", W0 + B0, module="blocks.0.fc")  # x needs no grad
    s.free("g_h0")
    s.free("logits")
    s.enter("optimizer")
    return s, kept


def doc(cli, path, *args, check=0):
    p = run(cli, "estimate", path, "--json", *args, check=check)
    return json.loads(p.stdout)


def subtree(by_module, path):
    """Sum of a {module: bytes} map over a module and its submodules."""
    return sum(v for m, v in by_module.items() if m is not None and (path == "" or m == path or
                                                                      m.startswith(path + ".")))


PATHS = ["", "blocks", "blocks.0", "blocks.0.fc", "blocks.0.act", "blocks.1", "blocks.1.fc", "blocks.1.act", "head"]
PARAMS = {"blocks.0.fc": W0 + B0, "blocks.1.fc": W1 + B1, "head": WH + BH}


@pytest.mark.parametrize("b", [2, 64])
def test_blocks_tree_by_hand(cli, blocks, b):
    """Parameters, what each module keeps at the end of forward, and what each holds at the
    allocated peak: at batch 64 the peak is in the ReLU of blocks.1's backward (its input's grad
    beside the head's), at batch 2 when blocks.0.fc's weight grads appear (the parameters'
    grads outweigh the activations)."""
    s, kept = blocks_step(b)
    d = doc(cli, blocks, "--batch", str(b), *SGD, "--by-module")
    assert d["budget"]["allocated_peak"] == s.allocated_peak
    tree = {m["path"]: m for m in d["modules"]["tree"]}
    assert set(tree) == set(PATHS) | {None}
    at_peak = {}
    for _, (nbytes, module) in s.live_at_peak.items():
        at_peak[module] = at_peak.get(module, 0) + nbytes
    for path in PATHS:
        m = tree[path]
        assert m["parameters"] == subtree(PARAMS, path), path
        assert m["kept"] == subtree(kept, path), path
        assert m["at_peak"] == subtree(at_peak, path), path
        assert m["model"] == "model" and m["depth"] == (path.count(".") + 1 if path else 0)
    none = tree[None]
    assert none["at_peak"] == at_peak[None] and none["model"] is None and none["parent"] is None
    # the batch, and the loss the loop holds until backward returns
    assert none["at_peak_categories"] == {"inputs": b * (X + T), "activations": 4}
    assert tree[""]["at_peak"] + none["at_peak"] == s.allocated_peak
    assert tree[""]["kept"] == d["budget"]["activations"] == b * (2 * H + Y)
    assert tree[""]["parameters"] == d["budget"]["params_trainable"]
    # nodes per module: one ONNX node each, subtree counts above
    assert tree["blocks"]["nodes"] == 4 and tree[""]["nodes"] == 5 and tree["head"]["nodes"] == 1
    # print order: depth first, siblings by share of the peak (then kept, parameters, path)
    order = [m["path"] for m in d["modules"]["tree"]]
    assert order[0] == "" and order[-1] is None
    for parent in ("", "blocks", "blocks.0", "blocks.1"):
        kids = [m for m in d["modules"]["tree"] if m["parent"] is not None
                and d["modules"]["tree"][m["parent"]]["path"] == parent]
        keys = [(-m["at_peak"], -m["kept"], -m["parameters"]) for m in kids]
        assert keys == sorted(keys), parent


def test_blocks_peak_categories_by_hand(cli, blocks):
    """At batch 64: the head holds its weights and their grads, the logits (kept) and r1's grad
    (its backward made it); blocks.1.act holds r1 and h1's grad."""
    b = 64
    d = doc(cli, blocks, "--batch", str(b), *SGD, "--by-module")
    tree = {m["path"]: m for m in d["modules"]["tree"]}
    assert tree["head"]["at_peak_categories"] == {"parameters": WH + BH, "gradients": WH + BH,
                                                  "activations": b * Y, "activation_grads": b * H}
    assert tree["blocks.1.act"]["at_peak_categories"] == {"activations": b * H, "activation_grads": b * H}
    assert tree["blocks.0.fc"]["at_peak_categories"] == {"parameters": W0 + B0}


def test_blocks_top_tensors_by_hand(cli, blocks):
    """--top N: the largest tensors live at the peak, each with the node and op that made it and
    its module; ties in allocation order."""
    b = 64
    d = doc(cli, blocks, "--batch", str(b), *SGD, "--top", "3")
    assert "modules" not in d
    top = d["top"]
    assert [t["bytes"] for t in top] == [b * H] * 3
    assert [(t["node"], t["op_type"], t["module"], t["category"], t["phase"]) for t in top] == [
        ("/blocks.0/act/Relu", "Relu", "blocks.0.act", "activations", "forward"),
        ("/blocks.1/act/Relu", "Relu", "blocks.1.act", "activations", "forward"),
        ("/head/Gemm", "Gemm", "head", "activation_grads", "backward"),
    ]
    assert top[0]["tensor"] == "r0" and top[0]["model"] == "model" and top[0]["aten"] is None


def test_blocks_depth_and_table(cli, blocks):
    """--depth N leaves out deeper modules (parents keep their totals); the table prints the
    same figures, indented by depth."""
    d = doc(cli, blocks, "--batch", "64", *SGD, "--by-module", "--depth", "1")
    full = doc(cli, blocks, "--batch", "64", *SGD, "--by-module")
    assert d["modules"]["depth"] == 1 and full["modules"]["depth"] is None
    cut = {m["path"]: m for m in d["modules"]["tree"]}
    assert set(cut) == {"", "blocks", "head", None}
    for m in full["modules"]["tree"]:
        if m["path"] in cut:
            assert {k: v for k, v in m.items() if k != "parent"} == \
                   {k: v for k, v in cut[m["path"]].items() if k != "parent"}
    p = run(cli, "estimate", blocks, "--batch", "64", *SGD, "--by-module", "--top", "2", check=0)
    lines = p.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("modules at batch 64"))
    rows = lines[start + 3:start + 3 + 10]
    assert rows[0].split()[0] == "(model)"
    head = next(r for r in rows if r.strip().startswith("head "))
    assert head.startswith("    head ")  # depth 1: two spaces of indent past the table's own
    fc = next(r for r in rows if r.strip().startswith("blocks.1.fc "))
    assert fc.startswith("        blocks.1.fc ")
    assert "largest tensors alive at the allocated peak" in p.stdout
    assert "/blocks.0/act/Relu" in p.stdout


def test_options_are_checked(cli, blocks):
    for bad in (["--depth", "0"], ["--top", "x"], ["--depth"]):
        p = run(cli, "estimate", blocks, "--batch", "2", *bad)
        assert p.returncode == 2, bad


@needs_fake
def test_tree_of_a_measured_budget(cli, blocks):
    """In measured mode the tree is the simulated step's at the measured batch: the static tree."""
    measured = subprocess.run([cli, "estimate", str(blocks), "--mode", "measured", "--batch", "64", *SGD,
                               "--by-module", "--top", "4", "--json"], capture_output=True, text=True,
                              env=fake_env(), timeout=120)
    assert measured.returncode == 0, measured.stderr
    m = json.loads(measured.stdout)
    assert m["budget"]["mode"] == "measured" and "advice" not in m
    static = doc(cli, blocks, "--batch", "64", *SGD, "--by-module", "--top", "4")
    assert m["modules"] == static["modules"] and m["top"] == static["top"]
    table = subprocess.run([cli, "estimate", str(blocks), "--mode", "measured", "--batch", "64", *SGD, "--by-module"],
                           capture_output=True, text=True, env=fake_env(), timeout=120)
    assert "modules at batch 64" in table.stdout and "what would" not in table.stdout


# ---- the tree's invariants on the zoo ----------------------------------------------------------

ZOO = [
    ("resnet18.onnx", ["--batch", "8"]),
    ("resnet50.onnx", ["--batch", "4", "--precision", "amp-bf16"]),
    ("bert_base_like.onnx", ["--batch", "4", "--dim", "sequence=128"]),
    ("gpt2_small_like.onnx", ["--batch", "2", "--dim", "sequence=256", "--checkpoint", "h.*"]),
    ("vit_b_16.onnx", ["--batch", "2", "--freeze", "*", "--trainable", "heads.*"]),
    ("mobilenet_v3_large.onnx", ["--batch", "8", "--optimizer", "sgd-momentum"]),
    ("unet_like.onnx", ["--batch", "2", "--grad-accumulation", "4"]),
]
TRUTH = ROOT / "bench" / "truth" / "models"
DYNAMO = [
    ("hf__llama.onnx", ["--batch", "4", "--dim", "sequence=64"]),
    ("hf__llama_lora.onnx", ["--batch", "2", "--dim", "sequence=64", "--freeze", "*", "--trainable", "*lora_*"]),
    ("hf__t5.torchscript.onnx", ["--batch", "2", "--dim", "sequence=32", "--dim", "decoder_sequence=16"]),
    ("tv__swin_t.onnx", ["--batch", "2"]),
    ("gnn__gat.onnx", ["--batch", "16", "--per-sample", "nodes=20,edges=60"]),
]


def check_invariants(d):
    b, tree = d["budget"], d["modules"]["tree"]
    cats = [c for c in b["at_peak"]]
    kids = {}
    for i, m in enumerate(tree):
        if m["parent"] is not None:
            kids.setdefault(m["parent"], []).append(m)
            assert tree[m["parent"]]["depth"] == m["depth"] - 1
            assert m["path"].startswith(tree[m["parent"]]["path"])
    for i, m in enumerate(tree):
        under = kids.get(i, [])
        for key in ("at_peak", "kept", "parameters", "nodes"):
            assert sum(k[key] for k in under) <= m[key], (m["path"], key)
        for c in cats:
            assert sum(k["at_peak_categories"].get(c, 0) for k in under) <= m["at_peak_categories"].get(c, 0)
        assert sum(m["at_peak_categories"].values()) == m["at_peak"]
    roots = [m for m in tree if m["parent"] is None]
    none = [m for m in roots if m["path"] is None]
    model_root = [m for m in roots if m["model"] == "model"]
    assert len(none) == 1 and len(model_root) == 1 and tree[0] is model_root[0] and tree[-1] is none[0]
    # the root's share is the allocated peak less what belongs to no module (and the teacher's)
    assert sum(m["at_peak"] for m in roots) == b["allocated_peak"]
    assert model_root[0]["at_peak"] == b["allocated_peak"] - none[0]["at_peak"] - \
        sum(m["at_peak"] for m in roots if m["model"] == "teacher")
    for c, n in b["at_peak"].items():
        assert sum(m["at_peak_categories"].get(c, 0) for m in roots) == n, c
    # parameter bytes add up to the parameter total; what forward keeps to the activations
    assert model_root[0]["parameters"] == b["params_trainable"] + b["params_frozen"] + b["embeddings"]
    assert sum(m["kept"] for m in roots) == b["activations"]
    top = d["top"]
    assert [t["bytes"] for t in top] == sorted((t["bytes"] for t in top), reverse=True)
    assert top[0]["bytes"] <= b["allocated_peak"]
    paths = {m["path"] for m in tree}
    assert all(t["module"] in paths for t in top)


@pytest.mark.parametrize("name,args", ZOO, ids=[z[0] for z in ZOO])
def test_tree_invariants_zoo(cli, name, args):
    check_invariants(doc(cli, MODELS / name, *args, "--by-module", "--top", "20"))


@pytest.mark.parametrize("name,args", DYNAMO, ids=[z[0] for z in DYNAMO])
def test_tree_invariants_torch2(cli, name, args):
    d = doc(cli, TRUTH / name, *args, "--by-module", "--top", "20")
    check_invariants(d)
    assert len(d["modules"]["tree"]) > 10


def test_tree_with_a_teacher(cli):
    """The teacher's modules are a tree of their own; the roots and "no module" still add up."""
    d = doc(cli, MODELS / "resnet18.onnx", "--teacher", MODELS / "resnet50.onnx", "--batch", "4", "--by-module",
            "--top", "5", "--rounding", "1")
    check_invariants(d)
    teacher = [m for m in d["modules"]["tree"] if m["model"] == "teacher"]
    assert teacher[0]["path"] == "" and teacher[0]["depth"] == 0 and teacher[0]["parent"] is None
    assert teacher[0]["parameters"] == 4 * 25557032  # ResNet-50's parameters, fp32 (not its BN buffers)
    assert d["budget"]["teacher_weights"] > teacher[0]["parameters"]
    assert {m["path"] for m in teacher} >= {"layer4", "layer4.2.conv3", "fc"}


def test_names_that_are_no_module_paths(cli, tmp_path):
    """Initializer names that spell no module path ("a..b", ".w", "w.", a dotted name over 1024
    characters) belong to the module of the nodes reading them; a node scope 100 modules deep is a
    tree 100 levels deep. Nothing fails, the figures still add up."""
    deep = "/" + "/".join(f"m{i}" for i in range(100)) + "/Gemm"
    long_name = ".".join(["x" * 9] * 300) + ".bias"
    nodes = [
        helper.make_node("Gemm", ["x", "a..b", ".w"], ["h"], name=deep, transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/r/Relu"),
        helper.make_node("Gemm", ["r", "w.", long_name], ["y"], name="/head/Gemm", transB=1),
    ]
    inits = [init("a..b", 16, 8), init(".w", 16), init("w.", 4, 16), init(long_name, 4)]
    path = model(nodes, [tensor("x", "batch", 8)], [tensor("y", "batch", 4)], inits, tmp_path / "names.onnx")
    d = doc(cli, path, "--batch", "4", *SGD, "--by-module", "--top", "10")
    check_invariants(d)
    tree = {m["path"]: m for m in d["modules"]["tree"]}
    assert tree["head"]["parameters"] == 4 * (4 * 16 + 4)  # "w." and the long bias by their reader
    assert tree[""]["parameters"] == 4 * (16 * 8 + 16 + 4 * 16 + 4)
    deepest = max(d["modules"]["tree"], key=lambda m: m["depth"] if m["path"] is not None else -1)
    assert deepest["depth"] == 100 and deepest["path"].endswith("m98.m99")
    assert tree["m0"]["parameters"] == 4 * (16 * 8 + 16)  # "a..b" and ".w" by their reader
    assert all(m["path"] is None or len(m["path"]) <= 1024 for m in d["modules"]["tree"])
