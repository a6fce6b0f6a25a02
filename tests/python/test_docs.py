"""The docs say what the code does: every relative link in README.md and docs/ points at a file
that exists, and every `$ membudget ...` block of the user guide and the README prints what they show
(each line of the guide's block, whitespace aside, is in the command's real output; a line
folded in the guide is two pieces of one output line; "..." stands for lines left out)."""
import re
import shlex
import subprocess

import pytest

from conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bindings/python/README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def links(path):
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # links in code blocks are not links
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        yield target.split("#")[0]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc):
    missing = [t for t in links(doc) if not (doc.parent / t).exists()]
    assert missing == [], f"{doc.name}: links to missing files {missing}"


def guide_blocks():
    """(command, the lines shown under it) for each ``$ membudget`` block of docs/guide.md and
    the README (``$ ./build/release/membudget`` there)."""
    text = "".join((ROOT / name).read_text(encoding="utf-8") for name in ("docs/guide.md", "README.md"))
    for block in re.findall(r"```\n\$ (?:\./build/release/)?(membudget.*?)```", text, flags=re.S):
        lines = block.splitlines()
        cmd = [lines.pop(0)]
        while cmd[-1].endswith("\\"):  # a command continued on the next line
            cmd[-1] = cmd[-1][:-1]
            cmd.append(lines.pop(0))
        yield " ".join(cmd), lines


def squash(s):
    return " ".join(s.split())


@pytest.mark.parametrize("command,shown", list(guide_blocks()), ids=lambda v: v if isinstance(v, str) else "")
def test_guide_output_is_real(cli, tmp_path, command, shown):
    argv = shlex.split(command)
    assert argv[0] == "membudget"
    (tmp_path / "models").symlink_to(ROOT / "models")  # the guide's paths; its pictures land here
    p = subprocess.run([cli, *argv[1:]], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode in (0, 3), p.stderr
    out = squash(p.stdout)
    for line in shown:
        if line.strip() in ("", "..."):
            continue
        assert squash(line) in out, f"not in the output of `{command}`: {line!r}"
    assert out  # a block that shows only the command still has to run
