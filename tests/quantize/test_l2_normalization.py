"""L2_NORMALIZATION end to end: ONNX LpNormalization(p=2) and the written-out forms become one
integer op with output (1/128, 0), bit-exact with LiteRT BUILTIN_REF, read back from .tflite, and
within one step of ONNX Runtime after QDQ/QOperator export; an epsilon that LiteRT's int8
kernel (which has none) would not honour keeps the graph float, with the reason."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import quantir as qr
from quantir.runtime import run

from .norm_models import CFG, const, float_reasons, integer_ops, model, onnx_runtime_within_one_step, \
    tflite_round_trip

X = (np.random.default_rng(0).normal(size=(64, 16)) * np.linspace(0.2, 3.0, 16)).astype(np.float32)
N = helper.make_node


def _ssq(form="mul"):
    """Nodes computing the kept sum of squares ``s`` of x over the last axis."""
    if form == "sumsquare":
        return [N("ReduceSumSquare", ["x", "ax"], ["s"], keepdims=1)]
    square = N("Mul", ["x", "x"], ["sq"]) if form == "mul" else N("Pow", ["x", "two"], ["sq"])
    return [square, N("ReduceSum", ["sq", "ax"], ["s"], keepdims=1)]


AX = [const("ax", [-1], np.int64), const("two", 2.0)]


def _forms():
    return {
        "lp": model([N("LpNormalization", ["x"], ["y"], axis=-1, p=2)]),
        "div_sqrt": model(_ssq() + [N("Sqrt", ["s"], ["n"]), N("Div", ["x", "n"], ["y"])], AX),
        "div_sqrt_pow2": model(_ssq("pow") + [N("Sqrt", ["s"], ["n"]), N("Div", ["x", "n"], ["y"])], AX),
        "mul_reciprocal": model(_ssq("sumsquare") + [N("Sqrt", ["s"], ["n"]), N("Reciprocal", ["n"], ["r"]),
                                                    N("Mul", ["r", "x"], ["y"])], AX),
        "mul_pow_half": model(_ssq() + [N("Pow", ["s", "mh"], ["r"]), N("Mul", ["x", "r"], ["y"])],
                              AX + [const("mh", -0.5)]),
        # torch.nn.functional.normalize: x / Expand(Clip(ReduceL2(x), min=1e-12))
        "torch_normalize": model([N("ReduceL2", ["x", "ax"], ["n"], keepdims=1), N("Clip", ["n", "eps"], ["c"]),
                                  N("Expand", ["c", "shape"], ["e"]), N("Div", ["x", "e"], ["y"])],
                                 AX + [const("eps", 1e-12), const("shape", [64, 16], np.int64)], shape=(64, 16)),
        # tf.math.l2_normalize: x · Pow(Max(sum, 1e-12), -0.5)
        "tf_l2_normalize": model(_ssq() + [N("Max", ["s", "eps"], ["m"]), N("Pow", ["m", "mh"], ["r"]),
                                           N("Mul", ["x", "r"], ["y"])], AX + [const("eps", 1e-12), const("mh", -0.5)]),
        "sqrt_of_sum_plus_eps": model(_ssq() + [N("Add", ["s", "eps"], ["se"]), N("Sqrt", ["se"], ["n"]),
                                                N("Div", ["x", "n"], ["y"])], AX + [const("eps", 1e-12)]),
    }


FORMS = _forms()


@pytest.mark.parametrize("name", sorted(FORMS))
def test_every_form_becomes_one_l2_normalization(name):
    r = qr.quantize(FORMS[name], {"x": X}, CFG)
    assert integer_ops(r) == ["qnn.l2_normalization"], float_reasons(r)
    assert r.annotation.float_ops == [] and r.cast_counts() == (1, 1)
    (op,) = [o for o in r.module.main.ops if o.name == "qnn.l2_normalization"]
    q = op.results[0].type.element_type
    assert (q.scale, q.zero_point) == (1 / 128, 0)
    assert r.spec_report().ok
    y = run(r.module, {"x": X})["y"]
    want = X / np.linalg.norm(X, axis=-1, keepdims=True)
    # int8 input (half a step of a row of norm >= 1 moves y by at most s_in/|x|) and half an output step
    s_in = r.module.main.ops[0].results[0].type.element_type.scale
    tol = 1 / 256 + s_in * 4 / np.linalg.norm(X, axis=-1).min() + 1 / 128
    assert np.abs(y - want).max() <= tol


def test_bit_exact_with_litert_reference_and_read_back(tmp_path):
    r = qr.quantize(FORMS["div_sqrt"], {"x": X}, CFG)
    x = np.concatenate([X[:15], np.zeros((1, 16), np.float32)])   # a zero row stays zero
    y = tflite_round_trip(r, tmp_path, x, "qnn.l2_normalization")
    assert np.all(y[-1] == 0) and np.abs(y[:-1]).max() >= 100


def test_onnx_exports_run_in_onnx_runtime_within_one_step(tmp_path):
    r = qr.quantize(FORMS["lp"], {"x": X}, CFG)
    onnx_runtime_within_one_step(r, tmp_path, X, "qnn.l2_normalization")


@pytest.mark.parametrize("eps_nodes,eps,reason", [
    (lambda: [N("Add", ["s", "eps"], ["se"]), N("Sqrt", ["se"], ["n"])], 1e-6,
     "Add(the sum of squares, 1e-06): LiteRT's int8 L2_NORMALIZATION has no epsilon, and one above 1.5625e-10 "
     "changes the normalized rows of inputs with scales down to 0.0001"),
    (lambda: [N("Sqrt", ["s"], ["r"]), N("Add", ["r", "eps"], ["n"])], 1e-5,
     "Add(the norm, 1e-05): LiteRT's int8 L2_NORMALIZATION has no epsilon, and one above 7.8125e-07 changes the "
     "normalized rows of inputs with scales down to 0.0001"),
    (lambda: [N("Sqrt", ["s"], ["r"]), N("Max", ["eps", "r"], ["n"])], 0.01,
     "Max(the norm, 0.01): LiteRT's int8 L2_NORMALIZATION has no epsilon, and one above 0.0001 changes the "
     "normalized rows of inputs with scales down to 0.0001"),
])
def test_an_epsilon_litert_would_not_honour_stays_float(eps_nodes, eps, reason):
    m = model(_ssq() + eps_nodes() + [N("Div", ["x", "n"], ["y"])], AX + [const("eps", eps)], tanh_first=True)
    r = qr.quantize(m, {"x0": X}, CFG)
    assert "qnn.l2_normalization" not in integer_ops(r)
    assert float_reasons(r)["nn.div"] == reason


def test_not_the_last_axis_or_not_p2_stays_float():
    r = qr.quantize(model([N("LpNormalization", ["x"], ["y"], axis=0, p=2)], tanh_first=True), {"x0": X}, CFG)
    assert float_reasons(r)["nn.lp_normalization"] == (
        "LpNormalization over axis 0: LiteRT L2_NORMALIZATION normalizes the last axis")
    r = qr.quantize(model([N("LpNormalization", ["x"], ["y"], axis=-1, p=1)], tanh_first=True), {"x0": X}, CFG)
    assert float_reasons(r)["nn.lp_normalization"] == "LpNormalization with p=1: LiteRT L2_NORMALIZATION is p=2"
    m = model(_ssq() + [N("Sqrt", ["s"], ["n"]), N("Div", ["x", "n"], ["y"])],
              [const("ax", [0], np.int64), const("two", 2.0)], tanh_first=True)
    r = qr.quantize(m, {"x0": X}, CFG)
    assert float_reasons(r)["nn.div"] == ("the norm is taken over axes [0] (keepdims=1): LiteRT L2_NORMALIZATION "
                                          "normalizes the last axis, kept")


def test_a_norm_used_elsewhere_is_not_fused():
    """The norm is a second output: claiming it into the region would lose it."""
    m = model(_ssq() + [N("Sqrt", ["s"], ["n"]), N("Div", ["x", "n"], ["y"])], AX, tanh_first=True)
    m.graph.output.append(helper.make_tensor_value_info("n", 1, None))
    r = qr.quantize(m, {"x0": X}, CFG)
    assert "qnn.l2_normalization" not in integer_ops(r)
