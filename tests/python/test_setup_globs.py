"""A glob of the setup that names nothing in the model (issue 30, item 6) is an error that names
it and the nearest names the model has, never an unchanged budget."""
import pytest

from binding_util import membudget
from conftest import MODELS, run

GPT2 = [MODELS / "gpt2_small_like.onnx", "--dim", "sequence=128", "--batch", "2"]


@pytest.mark.parametrize("flag,glob,what,nearest", [
    ("--freeze", "h.0.atn.*", "weight", "'h.0.attn.c_attn.weight'"),
    ("--trainable", "*lora_A*", "weight", "'wte.weight'"),
    ("--checkpoint", "h.1x.*", "module", "'h.1.ln_1'"),
    ("--checkpoint", "/h.1x*", "module", "'/h.1'"),
    ("--advise-trainable", "h.11.atn*", "weight", "'h.11.attn.c_attn.weight'"),
])
def test_a_glob_that_matches_nothing_is_refused_with_the_nearest_names(cli, flag, glob, what, nearest):
    extra = ["--freeze", "*"] if flag == "--trainable" else []
    p = run(cli, "estimate", *GPT2, *extra, flag, glob, check=1)
    assert f"'{glob}' matches no {what} of the model (nearest: " in p.stderr and nearest in p.stderr


def test_fsdp_wrap_glob_that_matches_nothing(cli):
    p = run(cli, "estimate", *GPT2, "--world-size", "2", "--strategy", "fsdp", "--fsdp-wrap", "h.*.mlpx", check=1)
    assert "fsdp_wrap 'h.*.mlpx' matches no module" in p.stderr


def test_globs_that_match_still_estimate(cli):
    for flags in (["--freeze", "h.0.attn.*"], ["--freeze", "*", "--trainable", "h.11.*"], ["--checkpoint", "h.*"],
                  ["--checkpoint", "/h.1"]):
        run(cli, "estimate", *GPT2, *flags, check=0)


def test_python_raises_naming_the_glob():
    with pytest.raises(membudget.InvalidArgumentError, match="matches no weight"):
        membudget.estimate(MODELS / "gpt2_small_like.onnx", batch=2, dims={"sequence": 128}, freeze="h.0.atn.*")
