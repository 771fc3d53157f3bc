"""The QOperator export of int16 ops (``backends/onnx/sixteen.py``): LiteRT's 16x8 arithmetic in ONNX
Runtime's integer ops, with no QuantizeLinear between the model's input and output.

Small float models with dynamic dims, built with onnx.helper, are quantized with int16 activations
(every op with a 16x8 kernel takes it) and saved in QOperator form. ONNX Runtime runs the export at two
input sizes and its outputs must *equal* quantir's interpreter's (itself bit-exact with LiteRT's
BUILTIN_REF, tests/runtime/qkernels): the export writes the same integer arithmetic, not an
approximation of it. The summary's one-quantize-per-input holds in the file too: one QuantizeLinear
per input, one DequantizeLinear per output, nothing computed in float between them.
"""
from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pytest
from onnx import TensorProto, helper

import quantir as qr
from quantir.backends.onnx import integer_arith, save_quantized
from quantir.backends.onnx.builder import touches_16_bit
from quantir.ir.dialects import quant
from quantir.runtime import run

from .ort_helpers import onnx, session
from .test_quantized_export import _model as float_model

N = helper.make_node
RNG = np.random.default_rng(16)


def _w(*shape, scale=0.3):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def _model(nodes, inputs, outputs, weights):
    return float_model(nodes, inputs, outputs, weights, opset=18)   # ReduceMean's axes an input


def cnn():
    """Conv (+Relu), depthwise conv, average pool with padding, max pool (+Relu), nearest upsampling, a
    2x2 stride-2 ConvTranspose and a 3x3 stride-2 one (TFLite's SAME), a sigmoid gate (Mul of two
    activations), HardSwish, Add, Concat, a mean over the dynamic spatial dims (GlobalAveragePool) and
    one over the dynamic width alone."""
    c = 6
    weights = {"w1": _w(c, 3, 3, 3), "b1": _w(c, scale=0.1), "wd": _w(c, 1, 3, 3), "bd": _w(c, scale=0.1),
               "wt": _w(c, c, 2, 2), "bt": _w(c, scale=0.1), "w2": _w(c, 2 * c, 1, 1),
               "wt3": _w(c, c, 3, 3, scale=0.2), "bt3": _w(c, scale=0.1),
               "scales": np.array([1, 1, 2, 2], np.float32), "width": np.array([3], np.int64)}
    nodes = [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["r1"]),
             N("Conv", ["r1", "wd", "bd"], ["d1"], pads=[1, 1, 1, 1], strides=[2, 2], group=c),
             N("HardSwish", ["d1"], ["h1"]),
             N("AveragePool", ["h1"], ["a1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0),
             N("Sigmoid", ["a1"], ["g"]), N("Mul", ["a1", "g"], ["s1"]),
             N("ConvTranspose", ["s1", "wt", "bt"], ["u1"], strides=[2, 2]),
             N("Resize", ["s1", "", "scales"], ["u2"], mode="nearest"),
             N("ConvTranspose", ["s1", "wt3", "bt3"], ["u3"], strides=[2, 2], pads=[0, 0, 1, 1]),
             N("Add", ["u1", "r1"], ["sum0"]), N("Add", ["sum0", "u3"], ["sum"]),
             N("Concat", ["sum", "u2"], ["cat"], axis=1),
             N("Conv", ["cat", "w2"], ["c2"]),
             N("MaxPool", ["c2"], ["m0"], kernel_shape=[2, 2], strides=[2, 2]), N("Relu", ["m0"], ["m1"]),
             N("GlobalAveragePool", ["m1"], ["gap"]),
             N("ReduceMean", ["m1", "width"], ["row"], keepdims=0)]
    return _model(nodes, [("x", ["N", 3, "H", "W"])], [("gap", ["N", c, 1, 1]), ("row", ["N", c, "H2"])], weights)


def attention():
    """FC on rank-3 input, a transposed BATCH_MATMUL of two activations, Softmax, a residual Add,
    FC with bias and Relu, a mean over the last axis and a Sub (LayerNorm's centering)."""
    d = 8
    weights = {"wq": _w(d, d), "wk": _w(d, d), "wv": _w(d, d), "w1": _w(d, d), "b1": _w(d, scale=0.1),
               "scale": np.float32(1 / np.sqrt(d)), "axes": np.array([-1], np.int64)}
    nodes = [N("MatMul", ["x", "wq"], ["q"]), N("MatMul", ["x", "wk"], ["k"]), N("MatMul", ["x", "wv"], ["v"]),
             N("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), N("MatMul", ["q", "kt"], ["qk"]),
             N("Mul", ["qk", "scale"], ["scores"]), N("Softmax", ["scores"], ["p"], axis=-1),
             N("MatMul", ["p", "v"], ["att"]), N("Add", ["x", "att"], ["h"]),
             N("MatMul", ["h", "w1"], ["f0"]), N("Add", ["f0", "b1"], ["f1"]), N("Relu", ["f1"], ["f"]),
             N("ReduceMean", ["f", "axes"], ["m"], keepdims=1), N("Sub", ["f", "m"], ["y"])]
    return _model(nodes, [("x", ["B", "T", d])], [("y", ["B", "T", d])], weights)


def on_input_grid(module, x: np.ndarray) -> np.ndarray:
    """``x`` moved onto its input's quantization grid (``k · scale``): the interpreter's QUANTIZE rounds
    ties away from zero, ONNX Runtime's QuantizeLinear to even, so an input exactly between two steps
    would enter the two runtimes as different integers. On the grid both read the same ``k``."""
    (qcast,) = [op for op in module.main.ops if op.opdef is quant.QCAST and op.operands[0] in module.main.arguments]
    scale = np.float32(qcast.results[0].type.element_type.scale)
    return (np.round(x / scale) * scale).astype(np.float32)


MODELS = {"cnn": (cnn, [(1, 3, 16, 16), (2, 3, 24, 32)]), "attention": (attention, [(1, 5, 8), (3, 11, 8)])}


@pytest.fixture(scope="module", params=sorted(MODELS))
def exported(request, tmp_path_factory):
    build, sizes = MODELS[request.param]
    model = build()
    path = tmp_path_factory.mktemp("m") / f"{request.param}.onnx"
    onnx.save(model, path)
    name = model.graph.input[0].name
    calib = [{name: RNG.uniform(-1, 1, size=sizes[0]).astype(np.float32)} for _ in range(16)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = qr.quantize(str(path), calib, qr.Config(activations="int16", progress=False))
    out = path.with_suffix(".qop.onnx")
    requantized: list = []
    save_quantized(result.module, out, format="qoperator", requantized=requantized)
    return request.param, result, out, requantized, name, sizes


def test_int16_ops_take_their_integer_form(exported):
    """The model is int16 (almost) throughout, and the export computes nothing in float."""
    key, result, path, requantized, _, _ = exported
    wide = Counter(op.name for op in result.module.main.ops if op.opdef.dialect == "qnn" and touches_16_bit(op))
    assert sum(wide.values()) >= (10 if key == "cnn" else 8), wide
    assert requantized == []
    ops = Counter(n.op_type for n in onnx.load(str(path)).graph.node)
    assert ops["QuantizeLinear"] == 1 and ops["DequantizeLinear"] == len(onnx.load(str(path)).graph.output)
    assert not {"Conv", "MatMul", "Softmax", "Sigmoid", "HardSwish", "ConvTranspose", "AveragePool"} & set(ops)


def test_onnx_runtime_equals_the_interpreter_at_two_sizes(exported):
    _, result, path, _, name, sizes = exported
    sess = session(path)
    for size in sizes:
        x = on_input_grid(result.module, RNG.uniform(-1.2, 1.2, size=size).astype(np.float32))  # past the range too
        got = sess.run(None, {name: x})
        want = list(run(result.module, {name: x}).values())
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_array_equal(g, w)


# -- the fixed-point helpers alone, against quantir.numerics ----------------------------------------

class _OnnxGraph(integer_arith.Subgraph):
    """The helpers writing a standalone graph of input ``x`` (int64), run in ONNX Runtime."""

    def __init__(self):
        super().__init__("t", 21)

    def run(self, out, x):
        graph = self.graph("g", [helper.make_tensor_value_info("x", TensorProto.INT64, None)],
                           [helper.make_tensor_value_info(out, TensorProto.INT64, None)])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
        m.ir_version = 10
        return session(m).run(None, {"x": x})[0]


def _int32_edges(rng, n):
    edges = np.array([0, 1, -1, 2, -2, 3, -3, (1 << 31) - 1, -(1 << 31), (1 << 30), -(1 << 30), 12345, -12345])
    return np.concatenate([edges, rng.integers(-(1 << 31), 1 << 31, n)]).astype(np.int64)


@pytest.mark.parametrize("seed", range(4))
def test_mbqm_equals_litert_s_32_bit_multiply_by_quantized_multiplier(seed):
    from quantir.numerics import multiply_by_quantized_multiplier
    rng = np.random.default_rng(seed)
    for shift in (-31, -20, -7, -1, 0, 1, 5, 30):
        m = int(rng.integers(1 << 30, 1 << 31))
        x = _int32_edges(rng, 2000)
        x = x[np.abs(x << max(shift, 0)) < (1 << 31)] if shift > 0 else x   # x·2^left within int32
        g = _OnnxGraph()
        got = g.run(integer_arith.mbqm(g, "x", m, shift), x)
        np.testing.assert_array_equal(got, multiply_by_quantized_multiplier(x, m, shift), err_msg=f"shift {shift}")


def test_mbqm_per_channel_with_some_shifts_zero():
    """Per-channel shifts of both signs (and 0, where the rounding shift must not nudge)."""
    from quantir.numerics import multiply_by_quantized_multiplier
    rng = np.random.default_rng(7)
    shifts = np.array([-3, 0, 0, -12, 2, -1])
    mults = rng.integers(1 << 30, 1 << 31, size=6)
    x = rng.integers(-(1 << 28), 1 << 28, size=(50, 6)).astype(np.int64)
    x[0] = 0
    x[1] = -1
    g = _OnnxGraph()
    got = g.run(integer_arith.mbqm(g, "x", mults, shifts), x)
    np.testing.assert_array_equal(got, multiply_by_quantized_multiplier(x, mults, shifts))


@pytest.mark.parametrize("seed", range(3))
def test_mbqm64_equals_litert_s_64_bit_multiply_by_quantized_multiplier(seed):
    from quantir.numerics import multiply_by_quantized_multiplier_int64
    rng = np.random.default_rng(seed)
    for shift in (-31, -25, -10, 0, 3, 7):
        m = np.array([int(rng.integers(1 << 30, 1 << 31)), 0x7FFF0000, 0x7FFFFFFF, 1 << 30])
        bound = min(1 << 47, (1 << 31) << (15 - shift) >> 16)   # the result must fit int32
        x = rng.integers(-bound + 1, bound, size=(300, 1)).astype(np.int64)
        x[:4, 0] = [0, -1, 1, -(bound - 1)]
        g = _OnnxGraph()
        got = g.run(integer_arith.mbqm64(g, "x", m, shift), x)
        np.testing.assert_array_equal(got, multiply_by_quantized_multiplier_int64(x, m, shift))


def test_rounding_divide_by_pot_ties_go_away_from_zero():
    from quantir.numerics import rounding_divide_by_pot
    x = np.arange(-70, 71, dtype=np.int64).reshape(-1, 1)
    for e in (1, 2, 3, 6):
        g = _OnnxGraph()
        got = g.run(integer_arith.rdbpot(g, "x", np.int64(e)), x)
        np.testing.assert_array_equal(got, rounding_divide_by_pot(x, e))
