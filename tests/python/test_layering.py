"""The step pipeline reads one way: a file under src/ includes its own stage and lower ones only.

The stages, lowest first, are the table below (docs/pipeline.md says what each hands to the
next). include/membudget/membudget.h, the public header, may be included anywhere for its public
types. Run by ctest (test `layering`, and with the other Python tests), or by hand:

    python3 tests/python/test_layering.py [SRC_DIR]

which prints every include that runs upward, naming the file, the line and the include, and
exits 1 when there is one.
"""
import re
import sys
from pathlib import Path

STAGES = [
    "util",    # arenas, strings, globs, JSON/pickle reading, SVG, the versioned-struct copy
    "graph",   # the IR, its data-type helpers and what a node's origin says
    "onnx",    # protobuf reading and conversion into the IR
    "ops",     # the operator table: shape and autograd rules
    "passes",  # roles, fusion, inference signs, a loaded model's assembly
    "shape",   # shape inference and its inputs (dims, batches of graphs)
    "sim",     # the step simulation: the step description, plan, events
    "alloc",   # the caching-allocator model
    "cuda",    # the CUDA device: libraries loaded at run time, memory pools, workspaces
    "budget",  # setup, accounting, estimate, reserved memory, advice, modules, measured mode
    "api",     # public functions, JSON, pictures
    "cli",     # the command-line tool
]
PUBLIC = "membudget/"               # include/membudget/*.h: allowed everywhere
GENERATED = {"onnx.pb-c.h": "onnx"}  # protoc-c's parser, generated into the build tree

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ROOT = Path(__file__).resolve().parents[2]


def stage_of_include(name, own_dir):
    """The stage an include belongs to, or None when it is not one of the table's."""
    if name in GENERATED:
        return GENERATED[name]
    if "/" not in name:  # a neighbour in the same directory
        return own_dir.name if (own_dir / name).exists() else None
    top = name.split("/", 1)[0]
    return top if top in STAGES else None


def violations(src):
    """Each include under src that runs upward or cannot be placed, as a sentence."""
    found = []
    rank = {s: i for i, s in enumerate(STAGES)}
    for d in sorted(p for p in src.iterdir() if p.is_dir()):
        if d.name not in rank:
            found.append(f"{d.relative_to(src.parent)}/: a directory that is not a stage of the table in "
                         f"{Path(__file__).name}: place it there")
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".c", ".h") or not path.is_file():
            continue
        stage = path.relative_to(src).parts[0]
        if stage not in rank:
            continue  # reported above
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1).startswith(PUBLIC):
                continue
            name = m.group(1)
            target = stage_of_include(name, path.parent)
            where = f"{path.relative_to(src.parent)}:{lineno}"
            if target is None:
                found.append(f'{where}: includes "{name}", which is no stage\'s')
            elif rank[target] > rank[stage]:
                allowed = ", ".join(STAGES[: rank[stage] + 1])
                found.append(f'{where}: includes "{name}" ({target}), a higher stage than {stage}: '
                             f"{stage} may include {allowed} and membudget/")
    return found


def test_includes_run_downward():
    bad = violations(ROOT / "src")
    assert not bad, "includes that run upward:\n" + "\n".join(bad)


def main(argv):
    src = Path(argv[1]) if len(argv) > 1 else ROOT / "src"
    bad = violations(src)
    for b in bad:
        print(b)
    print(f"layering: {len(bad)} violation{'s' if len(bad) != 1 else ''} under {src}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
