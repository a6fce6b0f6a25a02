#!/usr/bin/env python3
"""Refresh the outputs the user guide and the README show under their `$ membudget ...` blocks
(tests/python/test_docs.py holds each shown line to the command's real output).

    python3 scripts/refresh_doc_outputs.py [--cli build/release/membudget] [--check]

For every shown line that is no longer in the real output, the output line it stands for is
found (one with the same label, the words before the first figure, and as many words, sharing
the longest run of leading words) and put in its place, with the output's own spacing. A shown line
with no such partner (a folded line, a line the command no longer prints) is reported and left
for a person. --check only reports. The figures come from running the commands, so the docs
then show what the code prints; read the diff before committing it."""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("docs/guide.md", "README.md")
BLOCK = re.compile(r"```\n\$ (?:\./build/release/)?(membudget.*?)```", re.S)


def squash(s):
    return " ".join(s.split())


def label(s):
    """The words before the first one holding a digit: what a line is about."""
    words = []
    for w in s.split():
        if re.search(r"\d", w):
            break
        words.append(w)
    return words


def partner(line, outputs):
    """The output line of the same label and the same number of words that shares the most
    leading words; None where there is none (a folded line, a line no longer printed)."""
    want = line.split()
    need = label(line)
    best, best_n = None, 0
    for out in outputs:
        got = out.split()
        if len(got) != len(want) or label(out) != need:
            continue
        n = 0
        while n < len(want) and want[n] == got[n]:
            n += 1
        if n >= max(len(need), 1) and n > best_n:
            best, best_n = out, n
    return best


def run(cli, command, cwd):
    argv = shlex.split(command.replace("\\\n", " "))
    p = subprocess.run([cli, *argv[1:]], capture_output=True, text=True, timeout=300, cwd=cwd)
    if p.returncode not in (0, 3):
        raise SystemExit(f"`{command}` failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def refresh(path, cli, check, cwd):
    text = path.read_text(encoding="utf-8")
    changed, unmatched = 0, []

    def one(m):
        nonlocal changed
        block = m.group(1)
        lines = block.split("\n")
        head = [lines.pop(0)]
        while head[-1].endswith("\\"):
            head.append(lines.pop(0))
        out = run(cli, "\n".join(head), cwd)
        real = squash(out)
        outputs = [ln for ln in out.splitlines() if ln.strip()]
        for i, line in enumerate(lines):
            if line.strip() in ("", "...") or squash(line) in real:
                continue
            new = partner(line, outputs)
            if new is None:
                unmatched.append(f"{path.name}: `{head[0]}`: {line!r}")
                continue
            lines[i] = new.rstrip()
            changed += 1
        return m.group(0).replace(block, "\n".join(head + lines))

    new_text = BLOCK.sub(one, text)
    if changed and not check:
        path.write_text(new_text, encoding="utf-8")
    return changed, unmatched


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=str(ROOT / "build" / "release" / "membudget"))
    ap.add_argument("--check", action="store_true", help="report, change nothing")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(ROOT / "models", Path(tmp) / "models")  # the guide's paths; its pictures land here
        total, left = 0, []
        for name in DOCS:
            n, unmatched = refresh(ROOT / name, os.path.abspath(a.cli), a.check, tmp)
            total += n
            left += unmatched
    print(f"{total} shown line(s) {'out of date' if a.check else 'refreshed'}")
    for u in left:
        print("no partner in the output (mend by hand):", u)
    return 1 if left or (a.check and total) else 0


if __name__ == "__main__":
    sys.exit(main())
