"""Simulated advice (`membudget estimate`'s "what would make it fit", JSON "advice"): every
line's numbers are those of a separate `membudget estimate` with the line's flags (at the
budget's batch, and solved without a batch), lines appear exactly when the rules say (the budget
does not fit; a given batch within 10% of the usable memory; --advise), and a change that does
not apply or saves nothing gives no line."""
import json

import pytest

from conftest import MODELS, ROOT, run

TRUTH = ROOT / "bench" / "truth" / "models"
BERT = ["--dim", "sequence=512"]


def doc(cli, *args, check=None):
    p = run(cli, "estimate", *args, "--json")
    assert p.returncode in (0, 3), p.stderr
    if check is not None:
        assert p.returncode == check, p.stderr
    return json.loads(p.stdout)


def without_batch(args):
    out, skip = [], False
    for a in map(str, args):
        if skip:
            skip = False
        elif a == "--batch":
            skip = True
        elif a != "--advise":
            out.append(a)
    return out


def check_lines(cli, args):
    """Each line against separate estimates: at the line's batch (the budget's, or accumulation's
    micro-batch) and solved with the line's flags (accumulation's --batch dropped)."""
    d = doc(cli, *args)
    adv, base = d["advice"], d["budget"]
    assert adv["baseline"]["device_peak"] == base["device_peak"]
    assert adv["baseline"]["batch_size"] == base["batch_size"]
    plain = without_batch(args)
    for line in adv["lines"]:
        flags = line["flags"]
        at = doc(cli, *plain, "--no-advise", "--batch", base["batch_size"], *flags)["budget"]
        assert (at["batch_size"], at["grad_accumulation"]) == (line["batch_size"], line["grad_accumulation"])
        for key in ("device_peak", "allocated_peak", "available"):
            assert at[key] == line[key], (line["kind"], key)
        assert at["fits"] == line["fits"]
        assert line["saves"] == base["device_peak"] - line["device_peak"] > 0  # no line that does not help
        solve_flags = without_batch(flags)
        if base["device_memory"]:
            solved = doc(cli, *plain, "--no-advise", *solve_flags)["budget"]
            assert line["solved_batch"] == (solved["batch_size"] if solved["fits"] else 0), line["kind"]
            assert line["solved_device_peak"] == solved["device_peak"]
        else:
            assert line["solved_batch"] is None
    return d


CASES = [
    ("resnet18", [MODELS / "resnet18.onnx", "--gpu", "t4", "--batch", "512"]),
    ("bert", [MODELS / "bert_base_like.onnx", "--gpu", "t4", *BERT, "--batch", "64"]),
    ("gpt2-min", [MODELS / "gpt2_small_like.onnx", "--gpu", "a100-40gb", "--dim", "sequence=1024",
                  "--batch-min", "64"]),
    ("vit-solved", [MODELS / "vit_b_16.onnx", "--gpu", "a100-40gb", "--advise"]),
    ("unet-no-device", [MODELS / "unet_like.onnx", "--batch", "8", "--advise"]),
    ("teacher", [MODELS / "resnet18.onnx", "--teacher", MODELS / "resnet50.onnx", "--gpu", "t4", "--batch", "640"]),
    ("lora", [TRUTH / "hf__llama_lora.onnx", "--gpu", "t4", "--dim", "sequence=512", "--batch", "64"]),
    ("gnn-graphs", [TRUTH / "gnn__gat.onnx", "--device-memory", "2GiB", "--per-sample", "nodes=37,edges=120",
                    "--batch", "4096"]),
    ("gpt2-ranks", [MODELS / "gpt2_small_like.onnx", "--gpu", "l4", "--dim", "sequence=1024", "--batch", "16",
                    "--world-size", "8"]),
    ("llama-ranks", [TRUTH / "hf__llama_lora.onnx", "--gpu", "t4", "--dim", "sequence=512", "--batch", "64",
                     "--world-size", "4", "--advise"]),
]


@pytest.mark.parametrize("name,args", CASES, ids=[c[0] for c in CASES])
def test_every_line_is_a_separate_estimate(cli, name, args):
    d = check_lines(cli, args)
    kinds = [line["kind"] for line in d["advice"]["lines"]]
    assert kinds and len(kinds) == len(set(kinds))
    peaks = [line["device_peak"] for line in d["advice"]["lines"]]
    assert peaks == sorted(peaks)  # largest saving first


def test_sharding_line_with_ranks(cli):
    """With --world-size N the sharding line is simulated (FSDP with the checkpoint line's blocks
    as units, or ZeRO-3, whichever is lower); without ranks there is none."""
    args = [MODELS / "gpt2_small_like.onnx", "--gpu", "l4", "--dim", "sequence=1024", "--batch", "16"]
    kinds = {line["kind"]: line for line in doc(cli, *args, "--world-size", "8")["advice"]["lines"]}
    assert kinds["shard"]["flags"] == ["--strategy", "fsdp", "--fsdp-wrap", "h.*"]
    assert "shard" not in {line["kind"] for line in doc(cli, *args)["advice"]["lines"]}


def test_which_lines_apply(cli):
    """bert at 64 on a T4 (no bf16): fp16 autocast, checkpointing the 12 encoder layers, 8-bit
    AdamW, fused attention for the Python-written attention, half the micro-batch or less, and
    the freezing what-if (the encoder has no head: its last layer)."""
    d = doc(cli, MODELS / "bert_base_like.onnx", "--gpu", "t4", *BERT, "--batch", "64", check=3)
    lines = {line["kind"]: line for line in d["advice"]["lines"]}
    assert set(lines) == {"precision", "checkpoint", "optimizer", "attention", "grad_accumulation", "freeze"}
    assert lines["precision"]["flags"] == ["--precision", "amp-fp16"] and "GradScaler" in lines["precision"]["note"]
    assert lines["checkpoint"]["flags"] == ["--checkpoint", "layers.*"]
    assert "12 blocks" in lines["checkpoint"]["title"]
    assert lines["optimizer"]["flags"] == ["--optimizer", "adamw-8bit"]
    assert lines["attention"]["flags"] == ["--attention", "fused"]
    ga = lines["grad_accumulation"]
    assert ga["effective_batch_size"] == 64 and ga["fits"] and ga["batch_size"] < 64
    assert ga["flags"] == ["--batch", str(ga["batch_size"]), "--grad-accumulation", str(ga["grad_accumulation"])]
    # the smallest factor that fits: the next larger micro-batch (a divisor of 64) does not
    larger = doc(cli, MODELS / "bert_base_like.onnx", "--gpu", "t4", *BERT, "--no-advise",
                 "--batch", str(2 * ga["batch_size"]), "--grad-accumulation", str(ga["grad_accumulation"] // 2))
    assert not larger["budget"]["fits"]
    assert lines["freeze"]["what_if"] and lines["freeze"]["flags"] == ["--freeze", "*", "--trainable", "layers.11.*"]
    assert not any(line["what_if"] for k, line in lines.items() if k != "freeze")
    # bf16 where the GPU has it
    a100 = doc(cli, MODELS / "bert_base_like.onnx", "--gpu", "a100-40gb", *BERT, "--batch", "128", check=3)
    prec = [line for line in a100["advice"]["lines"] if line["kind"] == "precision"]
    assert prec[0]["flags"] == ["--precision", "amp-bf16"] and prec[0]["note"] == ""


def test_lines_that_do_not_apply_are_left_out(cli):
    base = [MODELS / "bert_base_like.onnx", "--gpu", "t4", *BERT, "--batch", "64"]
    kinds = lambda *more: {line["kind"] for line in doc(cli, *base, *more)["advice"]["lines"]}  # noqa: E731
    assert "precision" not in kinds("--precision", "amp-bf16")
    assert "optimizer" not in kinds("--optimizer", "sgd-momentum")
    assert "optimizer" not in kinds("--optimizer", "adamw-8bit")
    assert "attention" not in kinds("--attention", "fused")
    assert "teacher_offload" not in kinds()
    assert "freeze" not in kinds("--freeze", "word_embeddings.*")  # the setup already says what trains
    assert "freeze" in kinds("--freeze", "word_embeddings.*", "--advise-trainable", "layers.11.*")
    # a graph whose attention is already the fused kernel: nothing to switch
    llama = doc(cli, TRUTH / "hf__llama.onnx", "--gpu", "t4", "--dim", "sequence=512", "--batch", "64", check=3)
    assert "attention" not in {line["kind"] for line in llama["advice"]["lines"]}
    # a solved batch that fits: accumulation cannot make room for more (it is the micro-batch)
    vit = doc(cli, MODELS / "vit_b_16.onnx", "--gpu", "a100-40gb", "--advise", check=0)
    assert "grad_accumulation" not in {line["kind"] for line in vit["advice"]["lines"]}
    # batch 1 cannot be split
    one = doc(cli, MODELS / "gpt2_small_like.onnx", "--device-memory", "3GiB", "--dim", "sequence=1024", "--batch", "1",
              check=3)
    assert one["advice"]["lines"]
    assert "grad_accumulation" not in {line["kind"] for line in one["advice"]["lines"]}


def test_accumulation_counts_graphs(cli):
    d = doc(cli, TRUTH / "gnn__gat.onnx", "--device-memory", "2GiB", "--per-sample", "nodes=37,edges=120",
            "--batch", "4096", check=3)
    ga = [line for line in d["advice"]["lines"] if line["kind"] == "grad_accumulation"][0]
    assert ga["effective_batch_size"] == 4096 and ga["fits"]
    assert "the same 4096 graphs per optimizer step" in ga["note"]


def test_teacher_offload_and_lora(cli):
    t = doc(cli, MODELS / "resnet18.onnx", "--teacher", MODELS / "resnet50.onnx", "--gpu", "t4", "--batch", "640",
            check=3)
    off = [line for line in t["advice"]["lines"] if line["kind"] == "teacher_offload"]
    assert off and off[0]["flags"] == ["--teacher-offload"]
    lora = doc(cli, TRUTH / "hf__llama_lora.onnx", "--gpu", "t4", "--dim", "sequence=512", "--batch", "64", check=3)
    freeze = [line for line in lora["advice"]["lines"] if line["kind"] == "freeze"]
    assert freeze[0]["flags"] == ["--freeze", "*", "--trainable", "*lora_*"] and "LoRA" in freeze[0]["title"]


def batch_within_10_percent(cli):
    """A batch that fits with less than 10% of the usable memory to spare: the solved one."""
    solved = doc(cli, MODELS / "resnet50.onnx", "--gpu", "t4", "--no-advise", check=0)["budget"]
    assert solved["available"] < solved["usable_memory"] / 10
    return solved["batch_size"]


def test_when_lines_appear(cli):
    """auto (the default): when the budget does not fit, or a given batch is within 10% of the
    usable memory; never for a solved batch that fits (it sits at the limit by construction);
    --advise always; --no-advise never."""
    r50 = [MODELS / "resnet50.onnx", "--gpu", "t4"]
    roomy = doc(cli, *r50, "--batch", "8", check=0)
    assert roomy["advice"]["due"] is False and roomy["advice"]["reason"] is None and roomy["advice"]["lines"] == []
    assert roomy["advice"]["asked"] == "auto"
    over = doc(cli, *r50, "--batch", "512", check=3)
    assert over["advice"]["due"] and over["advice"]["reason"] == "does not fit" and over["advice"]["lines"]
    near = batch_within_10_percent(cli)
    tight = doc(cli, *r50, "--batch", near, check=0)
    assert tight["budget"]["fits"] and tight["advice"]["reason"] == "within 10% of the usable memory"
    assert tight["advice"]["lines"]
    solved = doc(cli, *r50, check=0)
    assert solved["budget"]["solved"] and not solved["advice"]["due"] and solved["advice"]["lines"] == []
    asked = doc(cli, *r50, "--batch", "8", "--advise", check=0)
    assert asked["advice"]["asked"] == "always" and not asked["advice"]["due"] and asked["advice"]["lines"]
    never = doc(cli, *r50, "--batch", "512", "--no-advise", check=3)
    assert "advice" not in never
    unfit_min = doc(cli, MODELS / "gpt2_small_like.onnx", "--gpu", "t4", "--dim", "sequence=1024", "--batch-min", "32",
                    check=3)
    assert unfit_min["budget"]["solved"] and unfit_min["advice"]["reason"] == "does not fit"
    # the table: a section exactly when the JSON has lines
    for args, shown in (([*r50, "--batch", "8"], False), ([*r50, "--batch", "512"], True),
                        ([*r50, "--batch", near], True), ([*r50], False), ([*r50, "--batch", "8", "--advise"], True),
                        ([*r50, "--batch", "512", "--no-advise"], False)):
        p = run(cli, "estimate", *args)
        assert ("what would make" in p.stdout) == shown, args
    p = run(cli, "estimate", *r50, "--batch", "512", check=3)
    assert "what would make it fit (does not fit: device peak" in p.stdout
    assert "--precision amp-fp16" in p.stdout and "--checkpoint 'layer1.*'" in p.stdout
    p = run(cli, "estimate", *r50, "--batch", near, check=0)
    assert "what would make more room (within 10% of the usable memory" in p.stdout


def test_table_matches_json(cli):
    args = [MODELS / "resnet18.onnx", "--gpu", "t4", "--batch", "512"]
    d = doc(cli, *args, check=3)
    p = run(cli, "estimate", *args, check=3)
    section = p.stdout[p.stdout.index("what would make it fit"):]
    for line in d["advice"]["lines"]:
        row = next(r for r in section.splitlines() if line["command"] in r)
        assert line["title"][:30] in row
        assert ("yes" if line["fits"] else "no") in row.split()


def test_table_of_a_solved_batch_with_assumed_bounds(cli):
    """Printing the assumed bounds binds the solved batch for their shapes: the advice after
    them must still see a solved budget (no gradient-accumulation line), as the JSON does."""
    args = [MODELS / "gnn" / "gcn.dynamo.onnx", "--gpu", "t4", "--per-sample", "nodes=37,edges=120", "--advise"]
    d = doc(cli, *args)
    assert d["budget"]["solved"] and d["budget"]["assumed_bounds"]
    table = run(cli, "estimate", *args, check=0).stdout
    section = table[table.index("what would make"):]
    for line in d["advice"]["lines"]:
        assert line["command"] in section
    assert "grad-accumulation" not in section
    assert {line["kind"] for line in d["advice"]["lines"]} == {"freeze", "precision"}


def test_without_a_device(cli):
    """No device memory: no line fits or solves; the peaks still compare."""
    d = doc(cli, MODELS / "unet_like.onnx", "--batch", "8", "--advise", check=0)
    assert d["budget"]["fits"] is None and d["advice"]["lines"]
    for line in d["advice"]["lines"]:
        assert line["fits"] is None and line["solved_batch"] is None and line["solved_device_peak"] is None
    p = run(cli, "estimate", MODELS / "unet_like.onnx", "--batch", "8", check=0)
    assert "what would" not in p.stdout  # auto: nothing to fit


def test_bad_options(cli):
    p = run(cli, "estimate", MODELS / "resnet18.onnx", "--batch", "2", "--advise-trainable", "[")
    assert p.returncode == 2 and "advise_trainable" in p.stderr
    p = run(cli, "estimate", MODELS / "resnet18.onnx", "--mode", "measured", "--advise")
    assert p.returncode == 2 and "static mode only" in p.stderr


def _line_flags(doc, kind):
    return [ln for ln in doc["advice"]["lines"] if ln["kind"] == kind]


def test_the_for_loop_step_and_pairs_when_no_single_change_fits(cli):
    """RMSprop (no 8-bit line) on the GPT-2-like model at batch 1, sequence 512, where the
    foreach step's temporaries and the backward peak are near: the for-loop step lowers only
    the one, checkpointing only the other, their pair both. On a device where neither line fits
    alone (its memory between what they allocate with the context; the allocator model's
    reserved memory follows the device, so each memory is tried as a whole), the advice gives
    the pair, at the device peak the two flags together give there."""
    base = [MODELS / "gpt2_small_like.onnx", "--dim", "sequence=512", "--batch", "1", "--optimizer", "rmsprop",
            "--gpu", "h100-80gb", "--margin", "0"]  # memories chosen to the byte: no safety margin
    ckpt = ["--checkpoint", "h.*"]  # the model's blocks, as the checkpoint line names them

    def budget(*flags):
        return json.loads(run(cli, "estimate", *base, *flags, "--json").stdout)
    def need(*flags):
        b = budget(*flags)["budget"]
        return b["allocated_peak"] + b["context"]
    alone = min(need("--foreach", "0"), need(*ckpt))
    both = need("--foreach", "0", *ckpt)
    assert both < alone
    found = False
    for k in range(1, 20):  # from the pair's need to past the singles' (reserved memory comes on top)
        memory = ["--device-memory", str(both + (alone - both) * k // 10), "--utilization", "1"]
        doc = json.loads(run(cli, "estimate", *base, *memory, "--advise", "--json").stdout)
        direct = budget("--foreach", "0", *ckpt, *memory)["budget"]
        if not direct["fits"] or doc["budget"]["fits"] or [ln for ln in doc["advice"]["lines"] if
                                                           ln["kind"] != "combined" and not ln["what_if"] and ln["fits"]]:
            continue
        pair = [ln for ln in _line_flags(doc, "combined") if sorted(ln["flags"]) == sorted(["--foreach", "0", *ckpt])]
        assert pair and pair[0]["fits"] and pair[0]["device_peak"] == direct["device_peak"]
        assert pair[0]["title"] == ("the for-loop optimizer step (foreach=False) + activation checkpointing of 12 "
                                    "blocks (h.*)") or "+" in pair[0]["title"]
        found = True
    assert found
