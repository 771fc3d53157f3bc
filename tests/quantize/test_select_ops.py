"""MAXIMUM, MINIMUM, the comparisons, ARG_MAX and SHAPE from their ONNX forms, end to end: the
integer op in the module, its float consumers reading its bool or index result as it is, the
.tflite bit-exact with LiteRT BUILTIN_REF and read back as the same op, the ONNX exports in ONNX
Runtime, `quantir check` clean, and the cases that must stay float with their reason."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import quantir as qr
from quantir.numerics import quantize_tflite
from quantir.quantize.check import view
from quantir.backends.tflite.reader import read_model
from quantir.cli.main import main as cli
from quantir.frontends.tflite import import_tflite
from quantir.runtime import run

RNG = np.random.default_rng(0)
# values on a grid of 1/8 in [-2, 2]: equal pairs happen, and distinct values are ~8 int8 steps apart,
# so the integer comparisons must agree with float exactly
X = (RNG.integers(-16, 17, size=(128, 3, 4, 4)) / 8).astype(np.float32)
Y = (RNG.integers(-16, 17, size=(128, 3, 4, 4)) / 8).astype(np.float32)
COMPARISONS = {"Equal": "qnn.equal", "Less": "qnn.less", "LessOrEqual": "qnn.less_equal", "Greater": "qnn.greater",
               "GreaterOrEqual": "qnn.greater_equal", "NotEqual": "qnn.not_equal"}
FLOAT = {"Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal, "Greater": np.greater,
         "GreaterOrEqual": np.greater_equal, "NotEqual": np.not_equal}


def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    v = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "g", [v(n, TP.FLOAT, [None, 3, 4, 4]) for n in inputs],
                              [v(n, t, None) for n, t in outputs], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _compare_nodes(name: str, a="x", b="y", out="c") -> list:
    if name == "NotEqual":
        return [helper.make_node("Equal", [a, b], ["eq"]), helper.make_node("Not", ["eq"], [out])]
    return [helper.make_node(name, [a, b], [out])]


def _comparison(name: str) -> onnx.ModelProto:
    """Compare(x, y) -> the bool output, a Where that picks with it and a Cast of it (float ops)."""
    return _model(_compare_nodes(name) + [helper.make_node("Where", ["c", "x", "y"], ["w"]),
                                          helper.make_node("Cast", ["c"], ["cf"], to=TP.FLOAT)],
                  ["x", "y"], [("c", TP.BOOL), ("w", TP.FLOAT), ("cf", TP.FLOAT)])


def _quantize(model, feeds=None):
    return qr.quantize(model, feeds or {"x": X, "y": Y}, qr.Config(progress=False))


def _names(r) -> list[str]:
    return [op.name for op in r.module.main.ops]


def _tflite_ok(tmp_path, r, feeds) -> list[str]:
    """Export to .tflite, verify bit-exact against LiteRT BUILTIN_REF, and return the qnn ops read back."""
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    path = tmp_path / "m.tflite"
    r.save(path)
    report = verify_tflite(path, feeds)
    assert report.ok, report.text()
    back = import_tflite(read_model(path.read_bytes(), "m.tflite")).module
    assert cli(["check", str(path)]) == 0
    return [op.name for op in back.main.ops if op.name.startswith("qnn.") or op.name == "nn.shape"]


# -- comparisons -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_a_comparison_is_one_integer_op_whose_bool_result_float_ops_read(name):
    r = _quantize(_comparison(name))
    ops = _names(r)
    assert ops.count(COMPARISONS[name]) == 1 and "nn.equal" not in ops and "nn.not" not in ops
    assert {"nn.where", "nn.cast"} <= set(ops)
    cmp = next(op for op in r.module.main.ops if op.name == COMPARISONS[name])
    a, b = (v.type.element_type for v in cmp.operands)
    assert (a.scale, a.zero_point) == (b.scale, b.zero_point)   # one shared scale
    assert str(cmp.results[0].type.element_type) == "i1"
    out = run(r.module, {"x": X, "y": Y})
    want = FLOAT[name](X, Y)
    assert want.any() and not want.all()
    np.testing.assert_array_equal(out["c"], want)
    np.testing.assert_array_equal(out["cf"], want.astype(np.float32))
    assert r.spec_report().ok and not r.spec_report().unknown


def test_a_result_that_is_not_quantized_is_neither_observed_nor_given_parameters():
    r = _quantize(_comparison("Less"))
    # the comparison; the Cast of its bool result to float is a region of its own (int8, scale 1)
    (region,) = [g for g in r.annotation.regions if g.pattern.name != "integer_cast"]
    c = region.output
    assert region.pattern.op.output_quantized is False
    assert c not in r.statistics.observers and c not in r.params
    assert all(v in r.params for v in region.inputs)
    (less,) = [op for op in r.module.main.ops if op.name == "qnn.less"]
    assert less.results[0].name_hint == "c"   # the float ops' value itself, not an integer version ("c__q")


def test_a_comparison_with_a_constant_quantizes_it_in_the_shared_scale():
    model = _model([helper.make_node("Greater", ["x", "t"], ["c"])], ["x"], [("c", TP.BOOL)],
                   [numpy_helper.from_array(np.float32(3.0), "t")])
    r = _quantize(model, {"x": X})
    cmp = next(op for op in r.module.main.ops if op.name == "qnn.greater")
    x_t, t_t = (v.type.element_type for v in cmp.operands)
    assert (x_t.scale, x_t.zero_point) == (t_t.scale, t_t.zero_point)
    assert x_t.scale * (127 - x_t.zero_point) >= 3.0   # the constant widened the class: it does not saturate
    np.testing.assert_array_equal(run(r.module, {"x": X})["c"], X > 3.0)


def test_a_narrow_range_is_widened_to_the_finest_scale_the_comparison_resolves():
    # range 1/16: its own scale (about 2**-11) would let LiteRT's rescale merge neighbouring stored values
    # (EQUAL(1, 0) true), so the result would not even be the comparison of the quantized inputs
    x, y = X / 64, Y / 64
    r = _quantize(_comparison("LessOrEqual"), {"x": x, "y": y})
    cmp = next(op for op in r.module.main.ops if op.name == "qnn.less_equal")
    t = cmp.operands[0].type.element_type
    assert 2.0 ** -8 <= t.scale < 2.0 ** -8 * 1.01
    qx, qy = (quantize_tflite(v, np.float32(t.scale), t.zero_point) for v in (x, y))
    np.testing.assert_array_equal(run(r.module, {"x": x, "y": y})["c"], qx <= qy)


def test_a_calibrated_range_that_needs_a_scale_of_one_stays_float_with_the_reason():
    r = _quantize(_comparison("Less"), {"x": X * 100, "y": Y * 100})   # [-200, 200]: scale 400/255
    assert "qnn.less" not in _names(r)
    reasons = {op.name: why for op, why in r.annotation.float_ops}
    assert reasons["nn.less"] == ("its inputs' calibrated range [-200, 200] needs an int8 scale of 1.56863; LiteRT's "
                                  "int8 comparison takes scales below 1 (it aborts at 1.0), so it stays float")


def test_the_range_that_decides_is_the_whole_same_scale_class():
    # x shares its scale with z through the Max; z's range [-200, 200] would put the comparison at scale 1.57
    model = _model([helper.make_node("Max", ["x", "z"], ["m"]), helper.make_node("Less", ["x", "y"], ["c"])],
                   ["x", "y", "z"], [("m", TP.FLOAT), ("c", TP.BOOL)])
    r = _quantize(model, {"x": X, "y": Y, "z": Y * 100})
    assert "qnn.less" not in _names(r) and "qnn.maximum" in _names(r)
    reasons = {op.name: why for op, why in r.annotation.float_ops}
    assert reasons["nn.less"].startswith("its inputs' calibrated range [-200, 200] needs an int8 scale of 1.56863")
    np.testing.assert_array_equal(run(r.module, {"x": X, "y": Y, "z": Y * 100})["c"], X < Y)   # in float


def test_a_comparison_of_integers_stays_as_it_is():
    v = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Less", ["i", "j"], ["c"])], "g",
                          [v("x", TP.FLOAT, [None, 4]), v("i", TP.INT64, [None, 4]), v("j", TP.INT64, [None, 4])],
                          [v("r", TP.FLOAT, None), v("c", TP.BOOL, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    n = 32
    r = qr.quantize(m, {"x": RNG.normal(size=(n, 4)).astype(np.float32), "i": np.arange(n * 4).reshape(n, 4),
                        "j": np.ones((n, 4), np.int64)}, qr.Config(progress=False))
    reasons = {op.name: why for op, why in r.annotation.float_ops}
    assert reasons == {"nn.less": "its operand is i64, not float: integer arithmetic is kept as it is"}


@pytest.mark.parametrize("name", ["Less", "NotEqual", "GreaterOrEqual"])
def test_comparisons_are_bit_exact_with_litert_and_read_back(tmp_path, name):
    model = _model(_compare_nodes(name), ["x", "y"], [("c", TP.BOOL)])
    r = _quantize(model)
    assert _tflite_ok(tmp_path, r, {"x": X[:32], "y": Y[:32]}) == [COMPARISONS[name]]


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
def test_comparison_onnx_exports_agree_with_the_integer_module(tmp_path, fmt):
    r = _quantize(_model(_compare_nodes("NotEqual") + [helper.make_node("Less", ["x", "y"], ["l"])], ["x", "y"],
                         [("c", TP.BOOL), ("l", TP.BOOL)]))
    path = tmp_path / f"m.{fmt}.onnx"
    r.save(path, format=fmt)
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": X, "y": Y})
    ours = run(r.module, {"x": X, "y": Y})
    np.testing.assert_array_equal(got[0], ours["c"])
    np.testing.assert_array_equal(got[1], ours["l"])
    assert cli(["check", str(path)]) == 0


# -- MAXIMUM, MINIMUM ------------------------------------------------------------------------------

def _max_min(op="Max") -> onnx.ModelProto:
    c = numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4), "k")
    return _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op, ["r", "y", "k"], ["m"])],
                  ["x", "y"], [("m", TP.FLOAT)], [c])


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_of_three_is_a_chain_of_two_in_one_scale(op):
    r = _quantize(_max_min(op))
    qop = "qnn.maximum" if op == "Max" else "qnn.minimum"
    chain = [o for o in r.module.main.ops if o.name == qop]
    assert len(chain) == 2 and chain[1].operands[0] is chain[0].results[0]
    types = {(v.type.element_type.scale, v.type.element_type.zero_point) for o in chain
             for v in (*o.operands, *o.results)}
    assert len(types) == 1
    y = run(r.module, {"x": X, "y": Y})["m"]
    k = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    select = np.maximum if op == "Max" else np.minimum
    want = select(select(np.maximum(X, 0), Y), k)
    s = chain[1].results[0].type.element_type.scale
    assert np.abs(y - want).max() <= 0.5 * s + 1e-6   # each value is one rounded input: half a step
    assert r.spec_report().ok


def test_max_is_bit_exact_with_litert_and_onnx_runtime_within_one_step(tmp_path):
    r = _quantize(_max_min("Max"))
    assert _tflite_ok(tmp_path, r, {"x": X[:32], "y": Y[:32]}) == ["qnn.clamp", "qnn.maximum", "qnn.maximum"]
    ours = run(r.module, {"x": X, "y": Y})["m"]
    step = next(o for o in r.module.main.ops if o.name == "qnn.maximum").results[0].type.element_type.scale
    for fmt in ("qdq", "qoperator"):
        path = tmp_path / f"m.{fmt}.onnx"
        r.save(path, format=fmt)
        got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": X, "y": Y})[0]
        assert np.abs(got - ours).max() <= step * 1.0001


def test_max_of_one_operand_stays_float_with_the_reason():
    r = _quantize(_model([helper.make_node("Max", ["x"], ["m"]), helper.make_node("Relu", ["m"], ["r"])], ["x"],
                         [("r", TP.FLOAT)]), {"x": X})
    reasons = {op.name: why for op, why in r.annotation.float_ops}
    assert reasons["nn.max"] == "nn.max of one operand is that operand: nothing to compute"


# -- ARG_MAX ---------------------------------------------------------------------------------------

def _arg_max(keepdims=1, select_last_index=0) -> onnx.ModelProto:
    return _model([helper.make_node("Relu", ["x"], ["r"]),
                   helper.make_node("ArgMax", ["r"], ["i"], axis=1, keepdims=keepdims,
                                    select_last_index=select_last_index)],
                  ["x"], [("i", TP.INT64)])


@pytest.mark.parametrize("keepdims", [0, 1])
def test_arg_max_reads_int8_and_gives_the_float_models_indices(keepdims):
    x = RNG.normal(size=(64, 3, 4, 4)).astype(np.float32)
    r = _quantize(_arg_max(keepdims), {"x": x})
    ops = _names(r)
    assert "qnn.arg_max" in ops and ("nn.unsqueeze" in ops) == bool(keepdims)
    got = run(r.module, {"x": x})["i"]
    want = np.argmax(np.maximum(x, 0), axis=1)
    want = want[:, None] if keepdims else want
    assert got.dtype == np.int64 and got.shape == want.shape
    assert np.mean(got == want) > 0.97   # only near-ties of the float values may differ
    assert r.spec_report().ok


def test_arg_max_is_bit_exact_with_litert_and_onnx_runtime(tmp_path):
    x = RNG.normal(size=(64, 3, 4, 4)).astype(np.float32)
    r = _quantize(_arg_max(1), {"x": x})
    assert _tflite_ok(tmp_path, r, {"x": x[:32]}) == ["qnn.clamp", "qnn.arg_max"]
    out = run(r.module, {"x": x}, intermediates=["r__q"])
    ours, q = out["i"], out["r__q"]   # the indices and the int8 input they index
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    for fmt in ("qdq", "qoperator"):
        path = tmp_path / f"m.{fmt}.onnx"
        r.save(path, format=fmt)
        got = ort.InferenceSession(str(path), plain, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.testing.assert_array_equal(got, ours)   # the graph as written: the same indices
        # ONNX Runtime's optimizer merges the two QuantizeLinear/DequantizeLinear pairs before the ArgMax
        # (the input's and the Relu's), so the float ArgMax sees values rounded once, at the input's scale:
        # where it differs, it picks a value within 2 steps of the int8 maximum
        got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        differ = got != ours
        assert differ.mean() < 0.02
        picked = np.take_along_axis(q, got, axis=1)[differ].astype(int)
        assert np.all(np.take_along_axis(q, ours, axis=1)[differ] - picked <= 2)


def test_arg_max_with_select_last_index_stays_float_with_the_reason():
    r = _quantize(_arg_max(1, select_last_index=1), {"x": X})
    reasons = {op.name: why for op, why in r.annotation.float_ops}
    assert reasons["nn.arg_max"] == "select_last_index=1 has no LiteRT form: ARG_MAX keeps the first of equal maxima"


# -- SHAPE -----------------------------------------------------------------------------------------

def _shape(**attrs) -> onnx.ModelProto:
    return _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Shape", ["r"], ["s"], **attrs)],
                  ["x"], [("r", TP.FLOAT), ("s", TP.INT64)], opset=17)


def test_shape_of_a_quantized_tensor_reads_its_integers(tmp_path):
    r = _quantize(_shape(), {"x": X})
    (op,) = [o for o in r.module.main.ops if o.name == "nn.shape"]
    assert op.operands[0].op.name == "qnn.clamp"   # the int8 Relu output, not a dequantized copy
    np.testing.assert_array_equal(run(r.module, {"x": X[:5]})["s"], [5, 3, 4, 4])
    assert r.spec_report().ok
    assert view(op).kind == "SHAPE" and view(op).inputs[0].dtype == "int8"
    assert _tflite_ok(tmp_path, r, {"x": X[:7]}) == ["qnn.clamp", "nn.shape"]
    for fmt in ("qdq", "qoperator"):
        path = tmp_path / f"m.{fmt}.onnx"
        r.save(path, format=fmt)
        got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": X[:6]})[1]
        np.testing.assert_array_equal(got, [6, 3, 4, 4])


def test_shape_with_start_stays_float_with_the_reason():
    # end=1 keeps the dynamic batch (start=1 reads only static dims: it folds at import, below)
    r = _quantize(_shape(end=1), {"x": X})
    reasons = {op.name: why for op, why in r.annotation.float_ops}
    assert reasons["nn.shape"] == ("Shape with start/end has no LiteRT SHAPE form (it would need a STRIDED_SLICE of "
                                   "the dims)")


def test_shape_of_static_dims_folds_at_import():
    r = _quantize(_shape(start=1), {"x": X})
    assert "nn.shape" not in _names(r)
    np.testing.assert_array_equal(run(r.module, {"x": X[:5]})["s"], [3, 4, 4])


def test_shape_of_a_float_tensor_reads_it_without_quantizing_it():
    model = _model([helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Shape", ["n"], ["s"])], ["x"],
                   [("n", TP.FLOAT), ("s", TP.INT64)])
    r = _quantize(model, {"x": X})
    assert _names(r) == ["nn.neg", "nn.shape", "func.return"]   # no QUANTIZE only to read the dims
    np.testing.assert_array_equal(run(r.module, {"x": X[:2]})["s"], [2, 3, 4, 4])
