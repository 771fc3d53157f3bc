"""The QOperator export without QDQ islands (issue 14): elementwise ops as lookup tables, MEAN over
any axes as QLinearGlobalAveragePool, TRANSPOSE_CONV as QLinearConv, each run in ONNX Runtime
against quantir's interpreter (itself bit-exact with LiteRT's BUILTIN_REF: tests/runtime/qkernels).

Tables hold the interpreter's integers, so those exports must be *equal* to it on every input value;
MEAN and TRANSPOSE_CONV use ONNX Runtime's requantization (a float multiplier, ties to even) and are
within one step of LiteRT's.
"""
from __future__ import annotations

import numpy as np
import pytest

from quantir.backends.onnx import tables
from quantir.backends.onnx.quantized import to_onnx_quantized
from quantir.ir import Function, Module, dialects
from quantir.ir.attributes import StringAttr
from quantir.ir.dialects import qnn
from quantir.numerics import quantize_multipliers
from quantir.runtime import run
from quantir.types import TensorType, parse_type

from .ort_helpers import session

onnx = pytest.importorskip("onnx")
F32 = parse_type("f32")


def qt(scale: float, zp: int):
    return parse_type(f"!quant.uniform<i8:f32, {scale}:{zp}>")


def _requantize_attrs(tin, tout) -> dict:
    m, s = quantize_multipliers(qnn.requantize_real_multiplier(tin, tout))
    return {"multiplier": m.tolist(), "shift": s.tolist()}


# (input type, output type, attributes) of each op whose QOperator form is a 256-entry table; a new
# elementwise op fails test_every_elementwise_op_is_covered until it gets a row here
UNARY = {
    "qnn.tanh": [(qt(0.05, 3), qt(1 / 128, 0), {})],
    "qnn.logistic": [(qt(0.07, -5), qt(1 / 256, -128), {})],
    "qnn.hard_swish": [(qt(0.04, -20), qt(0.03, -40), {}), (qt(0.11, 17), qt(0.05, -100), {})],
    "qnn.gelu": [(qt(0.03, 2), qt(0.02, -60), {}), (qt(0.05, -7), qt(0.03, -90), {"approximate": True})],
    "qnn.leaky_relu": [(qt(0.05, 3), qt(0.04, -2), {"alpha": 0.1})],
    "qnn.rsqrt": [(qt(0.02, -128), qt(0.05, -120), {})],
    "qnn.clamp": [(qt(0.05, 3), qt(0.03, -128), {"activation": "RELU"}),
                  (qt(0.05, 3), qt(0.04, -20), {"activation": "NONE"})],
    "qnn.requantize": [(qt(0.05, 3), qt(0.013, -9), "requantize")],
}
BINARY = {
    "qnn.sub": [(qt(0.05, 3), qt(0.02, -7), qt(0.06, 1), {}), (qt(0.03, -20), qt(0.05, 9), qt(0.04, -128),
                                                               {"activation": "RELU"})],
    "qnn.add": [(qt(0.05, 3), qt(0.02, -7), qt(0.06, 1), {})],
    "qnn.mul": [(qt(0.05, 3), qt(0.02, -7), qt(0.01, 1), {})],
    "qnn.maximum": [(qt(0.05, 3), qt(0.05, 3), qt(0.05, 3), {})],
    "qnn.minimum": [(qt(0.05, 3), qt(0.05, 3), qt(0.05, 3), {})],
    "qnn.squared_difference": [(qt(0.05, 3), qt(0.02, -7), qt(0.02, -100), {})],
}
# the binary ops ONNX Runtime has a QLinear kernel for keep it (within a step, measured elsewhere);
# maximum / minimum are Max / Min on the stored integers (test_maximum_minimum_on_int8)
QLINEAR = {"qnn.add", "qnn.mul", "qnn.maximum", "qnn.minimum"}


def _function(inputs: list[TensorType], result: TensorType) -> Function:
    """``main(x) -> y`` or ``main(a, b) -> y``."""
    names = ["x"] if len(inputs) == 1 else ["a", "b"]
    return Function.create("main", inputs, [result], arg_attrs=[{"quantir.name": StringAttr(n)} for n in names],
                           res_attrs=[{"quantir.name": StringAttr("y")}])


def _finish(fn: Function, y) -> Module:
    y.name_hint = "y__q"
    fn.body.append(dialects.func.RETURN.build([y], []))
    return Module([fn])


def _float_interface(module: Module) -> Module:
    """The same op between quant.qcast of float inputs and quant.dcast of its result (uint8 storage
    needs float interfaces)."""
    src = module.main
    op = next(o for o in src.ops if o.opdef.dialect == "qnn")
    ft = [v.type.clone(element_type=F32) for v in src.arguments]
    fn = Function.create("main", ft, [op.results[0].type.clone(element_type=F32)],
                         arg_attrs=src.arg_attrs, res_attrs=src.res_attrs)
    qs = []
    for arg, v in zip(fn.arguments, src.arguments):
        q = fn.body.append(dialects.quant.QCAST.build([arg], [v.type])).result
        q.name_hint = f"{v.name_hint or 'x'}__q"
        qs.append(q)
    y = fn.body.append(op.opdef.build(qs, [op.results[0].type], label="op", **{k: op.attr(k) for k in op.attributes}))
    y.result.name_hint = "y__q"
    out = fn.body.append(dialects.quant.DCAST.build([y.result], [fn.type.results[0]])).result
    fn.body.append(dialects.func.RETURN.build([out], []))
    return Module([fn])


def unary_module(name: str, tin, tout, attrs, shape=(2, 128)) -> Module:
    opdef = _opdef(name)
    xt, yt = TensorType(shape, tin), TensorType(shape, tout)
    if attrs == "requantize":
        attrs = _requantize_attrs(xt, yt)
    fn = _function([xt], yt)
    return _finish(fn, fn.body.append(opdef.build(fn.arguments, [yt], label="op", **attrs)).result)


def binary_module(name: str, ta, tb, to, attrs, sa=(3, 1, 5), sb=(4, 1)) -> Module:
    opdef = _opdef(name)
    yt = TensorType(tuple(np.broadcast_shapes(sa, sb)), to)
    fn = _function([TensorType(sa, ta), TensorType(sb, tb)], yt)
    return _finish(fn, fn.body.append(opdef.build(fn.arguments, [yt], label="op", **attrs)).result)


def _opdef(name: str):
    return next(getattr(qnn, a) for a in dir(qnn) if getattr(getattr(qnn, a), "name", None) == name)


def _node_types(model) -> list[str]:
    return [n.op_type for n in model.graph.node]


def _all_values(shape) -> np.ndarray:
    return (np.arange(256) - 128).astype(np.int8).reshape(shape)


def _grid_floats(t, stored: np.ndarray) -> np.ndarray:
    """Real values exactly on the grid of ``t`` (quantize back to ``stored`` in both runtimes)."""
    q = t.element_type
    return (np.float32(q.scale) * (stored.astype(np.float32) - np.float32(q.zero_point))).astype(np.float32)


# -- which ops are tables ---------------------------------------------------------------------------

def test_every_elementwise_op_is_covered():
    """The qualifying ops come from their declarations; each has a case below."""
    from quantir.quantize.ops.registry import DECLARATIONS
    unary = {d.name for d in DECLARATIONS if tables.is_unary_elementwise(d)}
    binary = {d.name for d in DECLARATIONS if tables.is_binary_elementwise(d)}
    assert unary == set(UNARY) and binary == set(BINARY)
    # softmax, l2_normalization and the pools are not elementwise; comparisons give no int8 result
    assert not any(tables.is_unary_elementwise(d) for d in (qnn.SOFTMAX, qnn.LOG_SOFTMAX, qnn.L2_NORMALIZATION,
                                                              qnn.MEAN, qnn.MAX_POOL))
    assert not tables.is_binary_elementwise(qnn.EQUAL)


# -- unary tables -----------------------------------------------------------------------------------

UNARY_CASES = [pytest.param(name, *case, id=f"{name[4:]}-{i}") for name, cases in UNARY.items()
               for i, case in enumerate(cases)]


@pytest.mark.parametrize("name, tin, tout, attrs", UNARY_CASES)
def test_unary_table_equals_the_interpreter_on_every_int8_value(name, tin, tout, attrs):
    module = unary_module(name, tin, tout, attrs)
    model = to_onnx_quantized(module, format="qoperator")
    types = _node_types(model)
    assert "QuantizeLinear" not in types and "DequantizeLinear" not in types, types
    if name != "qnn.logistic":   # logistic keeps ms:QLinearSigmoid (equal to LiteRT's table on every value: below)
        assert types == ["Cast", "Reshape", "GatherElements", "Reshape"], types
    x = _all_values((2, 128))
    want = run(module, {"x": x})["y"]
    (got,) = session(model).run(None, {"x": x})
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name, tin, tout, attrs", [c for c in UNARY_CASES if c.values[0] != "qnn.rsqrt"][::2])
def test_unary_table_with_uint8_activations(name, tin, tout, attrs):
    """uint8 storage indexes the table 0..255; the export is the same integers, moved by 128."""
    module = _float_interface(unary_module(name, tin, tout, attrs))
    model = to_onnx_quantized(module, format="qoperator", activations="uint8")
    assert [t for t in _node_types(model) if t == "QuantizeLinear"] == ["QuantizeLinear"]
    x = _grid_floats(TensorType((2, 128), tin), _all_values((2, 128)))
    want = run(module, {"x": x})["y"]
    (got,) = session(model).run(None, {"x": x})
    np.testing.assert_array_equal(got, want)


def test_logistic_qlinear_sigmoid_equals_litert_table():
    """ms:QLinearSigmoid is kept for LOGISTIC: on 24 input parameter sets its output equals the
    interpreter's (LiteRT's) on all 256 values, so a table would buy nothing."""
    rng = np.random.default_rng(0)
    for _ in range(24):
        tin = qt(float(rng.uniform(0.005, 0.2)), int(rng.integers(-100, 100)))
        module = unary_module("qnn.logistic", tin, qt(1 / 256, -128), {})
        model = to_onnx_quantized(module, format="qoperator")
        x = _all_values((2, 128))
        (got,) = session(model).run(None, {"x": x})
        np.testing.assert_array_equal(got, run(module, {"x": x})["y"])


def test_table_layout_is_the_stored_value_modulo_256():
    module = unary_module("qnn.tanh", qt(0.05, 3), qt(1 / 128, 0), {})
    op = next(o for o in module.main.ops if o.opdef is qnn.TANH)
    table = tables.unary_table(op)
    x = _all_values((2, 128))
    want = run(module, {"x": x})["y"].ravel()
    np.testing.assert_array_equal(table[x.ravel().astype(np.int64) % 256], want)


# -- pair tables ------------------------------------------------------------------------------------

BINARY_CASES = [pytest.param(name, *case, id=f"{name[4:]}-{i}") for name, cases in BINARY.items()
                if name not in QLINEAR for i, case in enumerate(cases)]


@pytest.mark.parametrize("name, ta, tb, to, attrs", BINARY_CASES)
def test_pair_table_equals_the_interpreter_on_every_pair(name, ta, tb, to, attrs):
    """Every (a, b) pair of int8 values, through broadcasting (256, 1) against (1, 256)."""
    module = binary_module(name, ta, tb, to, attrs, sa=(256, 1), sb=(1, 256))
    model = to_onnx_quantized(module, format="qoperator")
    assert _node_types(model) == ["Cast", "Cast", "Mul", "Add", "Reshape", "GatherElements", "Reshape"]
    a, b = _all_values((256, 1)), _all_values((1, 256))
    want = run(module, {"a": a, "b": b})["y"]
    (got,) = session(model).run(None, {"a": a, "b": b})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name, onnx_op", [("qnn.maximum", "Max"), ("qnn.minimum", "Min")])
def test_maximum_minimum_on_int8(name, onnx_op):
    module = binary_module(name, *BINARY[name][0], sa=(256, 1), sb=(1, 256))
    model = to_onnx_quantized(module, format="qoperator")
    assert _node_types(model) == [onnx_op]
    a, b = _all_values((256, 1)), _all_values((1, 256))
    (got,) = session(model).run(None, {"a": a, "b": b})
    np.testing.assert_array_equal(got, run(module, {"a": a, "b": b})["y"])


@pytest.mark.parametrize("activations", ["int8", "uint8"])
def test_pair_table_broadcasts_at_other_shapes(activations):
    ta, tb, to = qt(0.05, 3), qt(0.02, -7), qt(0.06, 1)
    module = binary_module("qnn.sub", ta, tb, to, {}, sa=(3, 1, 5), sb=(4, 1))
    if activations == "uint8":
        module = _float_interface(module)
    model = to_onnx_quantized(module, format="qoperator", activations=activations)
    rng = np.random.default_rng(3)
    a, b = rng.integers(-128, 128, (3, 1, 5)).astype(np.int8), rng.integers(-128, 128, (4, 1)).astype(np.int8)
    if activations == "uint8":
        a, b = _grid_floats(TensorType(a.shape, ta), a), _grid_floats(TensorType(b.shape, tb), b)
    want = run(module, {"a": a, "b": b})["y"]
    (got,) = session(model).run(None, {"a": a, "b": b})
    assert got.shape == (3, 4, 5)
    np.testing.assert_array_equal(got, want)


# -- MEAN over other axes ---------------------------------------------------------------------------

def mean_module(shape, axes, keepdims) -> Module:
    n = len(shape)
    reduced = [a % n for a in axes]
    out = tuple(1 if i in reduced else d for i, d in enumerate(shape) if keepdims or i not in reduced)
    xt, yt = TensorType(shape, qt(0.05, 3)), TensorType(out, qt(0.03, -4))
    fn = _function([xt], yt)
    return _finish(fn, fn.body.append(qnn.MEAN.build(fn.arguments, [yt], label="op", axes=list(axes),
                                                      keepdims=int(keepdims))).result)


@pytest.mark.parametrize("shape, axes, keepdims, sizes", [
    ((None, None, 24), (-1,), 1, [(1, 7, 24), (2, 5, 24)]),       # LayerNorm's mean, batch and width dynamic
    ((None, None, 24), (2,), 0, [(1, 7, 24), (3, 4, 24)]),
    ((None, 8, None, None), (1,), 1, [(1, 8, 5, 6), (2, 8, 3, 4)]),  # over channels: transposed last
    ((2, 6, 5, 4), (1, 3), 0, [(2, 6, 5, 4)]),                      # two axes apart
    ((None, 16, 10), (1, 2), 1, [(1, 16, 10), (3, 16, 10)]),
])
def test_mean_over_other_axes_is_qlinear_global_average_pool(shape, axes, keepdims, sizes):
    module = mean_module(shape, axes, keepdims)
    model = to_onnx_quantized(module, format="qoperator")
    types = _node_types(model)
    assert "QLinearGlobalAveragePool" in types and "QuantizeLinear" not in types and "ReduceMean" not in types
    sess = session(model)
    rng = np.random.default_rng(5)
    for size in sizes:
        x = rng.integers(-128, 128, size).astype(np.int8)
        want = run(module, {"x": x})["y"]
        (got,) = sess.run(None, {"x": x})
        assert got.shape == want.shape
        assert np.abs(got.astype(np.int16) - want).max() <= 1   # ONNX Runtime's rounding: within a step


@pytest.mark.parametrize("activations", ["int8", "uint8"])
@pytest.mark.parametrize("shape, axes, keepdims, size", [
    ((4, 6), (0, 1), 0, (4, 6)),            # every axis: a scalar
    ((None, 6), (0,), 1, (3, 6)),           # over the dynamic batch
    ((None, 5, 7), (0, 2), 0, (2, 5, 7)),
])
def test_mean_as_pool_edge_axes(shape, axes, keepdims, size, activations):
    module = mean_module(shape, axes, keepdims)
    if activations == "uint8":
        module = _float_interface(module)
    model = to_onnx_quantized(module, format="qoperator", activations=activations)
    assert "ReduceMean" not in _node_types(model)
    q = np.random.default_rng(6).integers(-128, 128, size).astype(np.int8)
    x = q if activations == "int8" else _grid_floats(TensorType(size, qt(0.05, 3)), q)
    want = run(module, {"x": x})["y"]
    (got,) = session(model).run(None, {"x": x})
    step = 1.0 if activations == "int8" else 0.03
    assert got.shape == want.shape
    assert np.abs(got.astype(np.float64) - want).max() <= step * 1.001


# -- TRANSPOSE_CONV ---------------------------------------------------------------------------------

def _conv_transpose_model(cin, cout, k, s, pads, rng):
    from onnx import TensorProto, helper, numpy_helper
    w = rng.normal(0, 0.3, (cin, cout, k, k)).astype(np.float32)
    bias = rng.normal(0, 0.1, (cout,)).astype(np.float32)
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["t"], strides=[s, s], pads=pads),
             helper.make_node("Relu", ["t"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", cin, "h", "w"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("cin, cout, k, s, pads, per_channel", [
    (4, 3, 2, 2, [0, 0, 0, 0], True),    # PP-OCR detectors' upsampling: 2x2, stride 2 (DepthToSpace)
    (2, 3, 3, 3, [0, 0, 0, 0], False),   # kernel = stride 3, per-tensor weights (DepthToSpace)
    (3, 5, 4, 2, [1, 1, 1, 1], True),    # SAME, cropping (stretched)
    (3, 4, 3, 2, [0, 0, 0, 0], True),    # VALID, overlapping windows (stretched)
    (3, 2, 3, 1, [1, 1, 1, 1], True),    # stride 1: pads only
])
def test_transpose_conv_is_qlinear_conv(cin, cout, k, s, pads, per_channel):
    """Kernel = stride without crop: a 1x1 QLinearConv to C_out·s² phases and DepthToSpace; otherwise
    QLinearConv over the input stretched with zero-point rows and columns."""
    from quantir.api import quantize
    from quantir.quantize.config import Config
    rng = np.random.default_rng(k * 10 + s)
    calib = rng.uniform(-1, 1, (16, cin, 6, 5)).astype(np.float32)
    result = quantize(_conv_transpose_model(cin, cout, k, s, pads, rng), {"x": calib},
                      Config(progress=False, per_channel=per_channel))
    assert any(op.opdef is qnn.TRANSPOSE_CONV for op in result.module.main.ops)
    model = to_onnx_quantized(result.module, format="qoperator")
    types = _node_types(model)
    assert types.count("QuantizeLinear") == 1 and "ConvTranspose" not in types and "QLinearConv" in types, types
    assert ("DepthToSpace" in types) == (k == s and not any(pads)), types
    assert ("Unsqueeze" in types) == (k != s and s > 1), types
    out_t = next(op for op in result.module.main.ops if op.opdef is dialects.quant.DCAST).operands[0].type
    scale = float(out_t.element_type.scale)
    sessions = [session(model), session(to_onnx_quantized(result.module, format="qoperator", activations="uint8"))]
    for size in [(1, cin, 6, 5), (2, cin, 4, 7)]:      # two sizes, batch, H and W dynamic
        x = rng.uniform(-1, 1, size).astype(np.float32)
        want = run(result.module, {"x": x})["y"]
        for sess in sessions:
            (got,) = sess.run(None, {"x": x})
            assert got.shape == want.shape == (size[0], cout, *(s * (d - 1) + k - p0 - p1 for d, p0, p1 in
                                                                zip(size[2:], pads[:2], pads[2:])))
            assert np.abs(got - want).max() <= scale * 1.001   # one step


# -- the real pattern: a LayerNorm and activations, one QuantizeLinear in all -----------------------

def _layer_norm_model(rng):
    """Paddle's LayerNorm written out, between a HardSwish'd FC and a GELU, on (N, T, C) with N, T dynamic."""
    from onnx import TensorProto, helper, numpy_helper
    c = 16
    inits = {"w": rng.normal(0, 0.3, (c, c)).astype(np.float32), "two": np.float32(2.0),
             "eps": np.float32(1e-5), "g": rng.uniform(0.5, 1.5, c).astype(np.float32),
             "beta": rng.normal(0, 0.1, c).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["fc"]), helper.make_node("HardSwish", ["fc"], ["h"]),
             helper.make_node("ReduceMean", ["h"], ["mu"], axes=[-1]), helper.make_node("Sub", ["h", "mu"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["d2"]), helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
             helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["d", "sd"], ["n"]), helper.make_node("Mul", ["n", "g"], ["ng"]),
             helper.make_node("Add", ["ng", "beta"], ["ln"]), helper.make_node("Tanh", ["ln"], ["y"])]
    graph = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "t", c])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_layer_norm_block_exports_with_one_quantize_linear():
    from quantir.api import quantize
    from quantir.quantize.config import Config
    rng = np.random.default_rng(2)
    calib = [{"x": rng.normal(0, 1, (1, t, 16)).astype(np.float32)} for t in (12, 9, 15, 10) * 5]
    result = quantize(_layer_norm_model(rng), calib, Config(progress=False))
    kinds = {op.opdef.name for op in result.module.main.ops}
    assert {"qnn.sub", "qnn.rsqrt", "qnn.mean", "qnn.hard_swish", "qnn.tanh"} <= kinds, kinds
    model = to_onnx_quantized(result.module, format="qoperator")
    types = _node_types(model)
    assert types.count("QuantizeLinear") == 1 and types.count("DequantizeLinear") == 1, types
    out_t = next(op for op in result.module.main.ops if op.opdef is dialects.quant.DCAST).operands[0].type
    sess = session(model)
    for size in [(1, 11, 16), (3, 6, 16)]:
        x = rng.normal(0, 1, size).astype(np.float32)
        want = run(result.module, {"x": x})["y"]
        (got,) = sess.run(None, {"x": x})
        # the tables are exact; QLinearMatMul/Mul/Add and the mean's pool round as ONNX Runtime does,
        # and the LayerNorm's 1/sqrt amplifies a one-step difference of the variance
        assert got.shape == want.shape
        assert np.mean(np.abs(got - want) <= float(out_t.element_type.scale) * 1.001) > 0.9


def test_sixteen_bit_operands_index_a_65536_entry_table():
    """An int16 tanh (LiteRT's 16-bit LUT kernel) is a table over every int16 value: exact on each."""
    t16 = parse_type("!quant.uniform<i16:f32, 0.001:0>")
    module = _float_interface(unary_module("qnn.tanh", t16, parse_type("!quant.uniform<i16:f32, 3.0517578125e-05:0>"),
                                           {}, shape=(256, 256)))
    model = to_onnx_quantized(module, format="qoperator")
    types = _node_types(model)
    assert "Tanh" not in types and "GatherElements" in types and types.count("QuantizeLinear") == 1, types
    x = _grid_floats(TensorType((256, 256), t16), (np.arange(65536) - 32768).astype(np.int16).reshape(256, 256))
    got = session(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, run(module, {"x": x})["y"])
