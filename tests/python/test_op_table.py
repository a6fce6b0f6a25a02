"""The operator table's arity (`membudget ops`: the inputs that must be given, the most input and
output slots) against the ONNX schemas of the `onnx` package, an independent source: at every
opset each entry covers, the table says what `onnx.defs.get_schema(op, opset, domain)` says. And
a node with more inputs or outputs than its op takes at its opset is refused at load, naming the
node, the op and both counts (the counts in the expected messages are the schema's)."""
import pytest

from conftest import run

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

VARIADIC = onnx.defs.OpSchema.FormalParameterOption.Variadic
SINGLE = onnx.defs.OpSchema.FormalParameterOption.Single

# The optimizers' inputs are R, T and one variadic list; the schema asks for one tensor in it,
# the rule for one whole group (X, G and H: Adagrad; X, G and V: Momentum; X, G, V and H: Adam)
MIN_INPUTS_STRICTER = {("ai.onnx.preview.training", "Adagrad"): 5, ("ai.onnx.preview.training", "Momentum"): 5,
                       ("ai.onnx.preview.training", "Adam"): 6}


def table(cli):
    """The rows of `membudget ops`: domain, op, first and last opset (None: open), inputs that
    must be given, most input and output slots (None: any number)."""
    out = run(cli, "ops", check=0).stdout.splitlines()
    assert out[0].split() == ["domain", "op", "opsets", "inputs", "outputs"]
    rows = []
    for line in out[1:]:
        dom, op, opsets, ins, outs = line.split()
        lo, _, hi = opsets.partition("-")
        if lo.endswith("+"):
            lo, hi = lo[:-1], None
        elif not hi:
            hi = lo
        if ins.endswith("+"):
            min_in, max_in = int(ins[:-1]), None
        else:
            a, _, b = ins.partition("-")
            min_in, max_in = int(a), int(b or a)
        rows.append({"domain": "" if dom == "ai.onnx" else dom, "op": op, "lo": int(lo),
                     "hi": None if hi is None else int(hi), "min_in": min_in, "max_in": max_in,
                     "max_out": None if outs == "any" else int(outs)})
    return rows


def newest_opsets():
    newest = {"": onnx.defs.onnx_opset_version()}
    for s in onnx.defs.get_all_schemas_with_history():
        newest[s.domain] = max(newest.get(s.domain, 0), s.since_version)
    return newest


def schema_at(op, opset, domain):
    try:
        return onnx.defs.get_schema(op, opset, domain)
    except onnx.defs.SchemaError:
        return None  # the op is younger than this opset (the table may start earlier)


def required_inputs(schema):
    """Inputs a node must give: each single one, and a variadic list's least count."""
    return sum(1 if p.option == SINGLE else p.min_arity if p.option == VARIADIC else 0 for p in schema.inputs)


def most(params, count):
    return None if params and params[-1].option == VARIADIC else count


def test_every_entry_holds_the_schemas_arity_at_every_opset_it_covers(cli):
    rows = table(cli)
    newest = newest_opsets()
    checked, variadic = 0, set()
    for r in rows:
        for opset in range(r["lo"], (r["hi"] or newest[r["domain"]]) + 1):
            s = schema_at(r["op"], opset, r["domain"])
            if s is None:
                continue
            where = (r["domain"] or "ai.onnx", r["op"], opset, f"schema {s.since_version}")
            assert r["max_in"] == most(s.inputs, s.max_input), where
            assert r["max_out"] == most(s.outputs, s.max_output), where
            want_min = MIN_INPUTS_STRICTER.get((r["domain"], r["op"]), required_inputs(s))
            assert r["min_in"] == want_min, where
            checked += 1
            if r["max_in"] is None:
                variadic.add(r["op"])
    # not vacuous: the table spans hundreds of (op, opset) pairs, and the variadic ops are marked
    assert checked > 2000, checked
    assert {"Concat", "Sum", "Max", "Min", "Mean", "Einsum", "SequenceConstruct", "Loop", "Scan"} <= variadic


def test_no_entry_shadows_another(cli):
    """mb_op_find keeps the first of two entries with the same op and first opset: the second
    would never be used."""
    keys = [(r["domain"], r["op"], r["lo"]) for r in table(cli)]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)


def one_node(tmp_path, op, inputs, outputs, opset, name="n", **attrs):
    """A model of one node over float inputs; omitted inputs are written as ''."""
    given = [i for i in inputs if i]
    node = helper.make_node(op, inputs, outputs, name=name, **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(i, TensorProto.FLOAT, [2, 3]) for i in dict.fromkeys(given)],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(m.SerializeToString())
    return path


@pytest.mark.parametrize("op,opset,extra", [
    ("Relu", 17, "input"), ("Relu", 17, "output"), ("Add", 17, "input"), ("Clip", 10, "input"),
    ("Clip", 17, "input"), ("Dropout", 17, "output"), ("MatMul", 17, "input"), ("Reshape", 17, "input"),
])
def test_one_more_than_the_schema_is_refused_at_load(cli, tmp_path, op, opset, extra):
    s = onnx.defs.get_schema(op, opset, "")
    n_in, n_out = s.max_input, s.max_output
    ins = [f"x{k}" for k in range(n_in + (extra == "input"))]
    outs = [f"y{k}" for k in range(n_out + (extra == "output"))]
    path = one_node(tmp_path, op, ins, outs, opset, name="extra")
    p = run(cli, "info", path, check=1)
    if extra == "input":
        want = f"node 'extra' ({op}): {n_in + 1} inputs, more than the {n_in} the op takes at opset {opset}"
    else:
        want = f"node 'extra' ({op}): {n_out + 1} outputs, more than the {n_out} the op gives at opset {opset}"
    assert want in p.stderr, p.stderr
    # the schema's own count loads
    path = one_node(tmp_path, op, ins[:n_in], outs[:n_out], opset, name="exact")
    run(cli, "info", path, check=0)


def test_omitted_slots_count_as_the_checker_counts_them(cli, tmp_path):
    # Clip-11 takes input, min, max: a fourth slot is one too many even when it is ''
    p = run(cli, "info", one_node(tmp_path, "Clip", ["x", "", "", ""], ["y"], 11), check=1)
    assert "4 inputs, more than the 3 the op takes at opset 11" in p.stderr
    run(cli, "info", one_node(tmp_path, "Clip", ["x", "", ""], ["y"], 11), check=0)


def test_variadic_ops_take_any_number(cli, tmp_path):
    run(cli, "info", one_node(tmp_path, "Concat", [f"x{k}" for k in range(40)], ["y"], 17, axis=0), check=0)
    run(cli, "info", one_node(tmp_path, "Sum", [f"x{k}" for k in range(40)], ["y"], 17), check=0)
    run(cli, "info", one_node(tmp_path, "Split", ["x"], [f"y{k}" for k in range(3)], 17, axis=1), check=0)
