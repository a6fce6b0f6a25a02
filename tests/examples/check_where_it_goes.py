"""examples/c/where_it_goes.c against the CLI: the program must print what
`membudget estimate MODEL --gpu GPU --json --by-module --top 3 --advise` says (the same batch
size, summary line, peaks and phase levels, depth-1 modules, top tensors and advice kinds), and
draw a timeline that parses as XML and is the CLI's own `--timeline` picture byte for byte.

    check_where_it_goes.py EXAMPLE CLI MODEL GPU
"""
import json
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path


def human(n):
    """The example's (and the CLI's) byte units."""
    if n < 1024:
        return f"{n} B"
    x, units = n / 1024, ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    u = 0
    while x >= 1024 and u < 5:
        x /= 1024
        u += 1
    return f"{x:.2f} {units[u]}"


def section(lines, header):
    """The indented lines after the line starting with header, up to a blank line."""
    start = next(i for i, l in enumerate(lines) if l.startswith(header))
    out = []
    for l in lines[start + 1:]:
        if not l.strip():
            break
        out.append(l)
    return out


def check(example, cli, model, gpu, tmp):
    svg_path, cli_svg = tmp / "step.svg", tmp / "cli.svg"
    p = subprocess.run([example, model, gpu, svg_path], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert p.stderr == "", p.stderr
    out = p.stdout
    q = subprocess.run([cli, "estimate", model, "--gpu", gpu, "--json", "--by-module", "--top", "3",
                        "--advise", "--timeline", cli_svg],
                       capture_output=True, text=True, timeout=300)
    assert q.returncode == 0, (q.returncode, q.stderr)
    doc = json.loads(q.stdout)
    b = doc["budget"]
    lines = out.splitlines()

    assert re.search(rf"^batch +{b['batch_size']} \(solved", out, re.M), out
    assert doc["summary"] in lines, (doc["summary"], out)

    def exact(label):
        m = re.search(rf"^  {re.escape(label)} +(\d+) ", out, re.M)
        assert m, (label, out)
        return int(m.group(1))

    for label, field in [("allocated peak", "allocated_peak"), ("reserved peak", "reserved_peak"),
                         ("CUDA context", "context"), ("device peak", "device_peak"),
                         ("after setup", "level_after_setup"),
                         ("forward peak (with the loss)", "forward_peak"),
                         ("after forward and loss", "level_after_forward"),
                         ("backward peak", "backward_peak"),
                         ("after backward", "level_after_backward"),
                         ("optimizer step peak", "optimizer_peak"),
                         ("after optimizer step", "level_after_optimizer")]:
        assert exact(label) == b[field], (label, exact(label), b[field])

    # depth-1 modules, in the library's order, with their share of the peak
    tree = [t for t in doc["modules"]["tree"] if t["depth"] <= 1]
    rows = section(lines, "modules at batch")
    assert len(rows) == len(tree), (rows, tree)
    for row, t in zip(rows, tree):
        name = "(no module)" if t["path"] is None else "(model)" if t["depth"] == 0 else t["path"]
        assert row.strip().startswith(name + " "), (row, t)
        assert f"{human(t['at_peak'])} " in row + " ", (row, t)

    # the three largest tensors at the peak: bytes, category, phase, module, name
    rows = section(lines, "the 3 largest tensors")
    assert len(rows) == len(doc["top"]) == 3, rows
    for row, t in zip(rows, doc["top"]):
        m = re.match(r"^ +(\d+) +\S+ \S+ +(\S+) +(\S+) +(\S+) +(.+)$", row)
        assert m, row
        module = "-" if t["module"] is None else t["module"] or "(root)"
        assert (int(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5)) == \
            (t["bytes"], t["category"], t["phase"], module, t["tensor"]), (row, t)

    # advice: the same kinds in the same order, each at the same device peak and largest batch,
    # with the same flags
    rows = section(lines, "advice (")
    advice = doc["advice"]["lines"]
    assert advice, "resnet18 on an H100 has advice lines"
    starts = [i for i, r in enumerate(rows) if not r.startswith("    ")]
    assert [rows[i].split(":")[0].strip() for i in starts] == [a["kind"] for a in advice], rows
    for i, a in zip(starts, advice):
        assert rows[i].endswith(a["title"]), (rows[i], a)
        assert rows[i + 1].startswith(f"    device peak {human(a['device_peak'])} at batch "
                                      f"{a['batch_size']}"), (rows[i + 1], a)
        assert f"largest batch that fits {a['solved_batch']}" in rows[i + 1], (rows[i + 1], a)
        assert rows[i + 2] == "    " + a["command"], (rows[i + 2], a)

    root = ET.parse(svg_path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
    assert svg_path.read_bytes() == cli_svg.read_bytes(), "the timeline differs from the CLI's"


def main():
    example, cli, model, gpu = sys.argv[1:5]
    with tempfile.TemporaryDirectory() as tmp:
        check(example, cli, model, gpu, Path(tmp))
    print("example where_it_goes: consistent with `membudget estimate --json`")


if __name__ == "__main__":
    main()
