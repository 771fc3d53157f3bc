"""Per-channel affines around convs, quantized (issue 14, PP-LCNetV3 detectors): the affine folds
into the conv (passes.fold_affine) and a conv output read only by hard-swish is quantized over
[-3, max] — below -3 hard-swish is 0 — so its int8 steps go to the values that matter."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

import quantir as qr  # noqa: E402
from quantir.ir.dialects import nn  # noqa: E402
from quantir.quantize.ops.activation import hard_swish_input_range  # noqa: E402
from quantir.runtime import run  # noqa: E402


def model(make_onnx_model, rng, second_user: bool):
    """conv → mul(a) → add(b) → hard-swish → conv, a conv whose output reaches far below -3
    (channel 0's bias), and optionally a second reader of the pre-activation value."""
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    inits = {"w": w, "bias": np.array([-60.0, 0.5, 0.0, 0.2], np.float32).reshape(1, 4, 1, 1),
             "a": np.array([0.8], np.float32), "b": np.array([0.1], np.float32),
             "w2": rng.standard_normal((2, 4, 1, 1)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "bias"], ["cb"]),
             helper.make_node("Mul", ["cb", "a"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["pre"]),
             helper.make_node("HardSwish", ["pre"], ["h"]),
             helper.make_node("Conv", ["h", "w2"], ["y"])]
    outputs = [("y", np.float32, None)]
    if second_user:
        nodes.append(helper.make_node("Relu", ["pre"], ["r"]))
        outputs.append(("r", np.float32, None))
    return make_onnx_model(nodes, [("x", np.float32, ("N", 3, "H", "W"))], outputs, inits)


def pre_activation_params(result):
    conv = next(r for r in result.annotation.regions if r.pattern.kind == "CONV_2D" and
                any(op.opdef is nn.UNARY["hard_swish"] for op, _ in r.output.uses))
    return result.params[conv.output]


def quantize(onnx_model, rng):
    calib = [{"x": rng.uniform(-1, 1, (1, 3, 12, 12)).astype(np.float32)} for _ in range(16)]
    return qr.quantize(onnx_model, calib, qr.Config(method="minmax", progress=False))


def test_range_rule():
    assert hard_swish_input_range(-500.0, 40.0) == (-3.0, 40.0)
    assert hard_swish_input_range(-1.0, 2.0) == (-1.0, 2.0)
    assert hard_swish_input_range(-6.0, 10.0) == (-3.0, 10.0)   # any tail below -3 is cut
    assert hard_swish_input_range(-9.0, -4.0) == (-3.0, -3.0)   # all below -3: zeros (the range takes 0)


def output_error(onnx_model, result, rng):
    """Mean |int8 - fp32| of y on new data, fp32 from ONNX Runtime."""
    x = rng.uniform(-1, 1, (2, 3, 10, 14)).astype(np.float32)
    session = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    return float(np.abs(run(result.module, {"x": x})["y"] - session.run(["y"], {"x": x})[0]).mean())


def test_hard_swish_input_quantized_over_what_it_reads(make_onnx_model, rng):
    onnx_model = model(make_onnx_model, rng, second_user=False)
    result = quantize(onnx_model, rng)
    # the affine folded: conv → hard-swish → conv, all integer
    assert sum(result.quantized_ops().values()) == 3 and result.cast_counts() == (1, 1)
    p = pre_activation_params(result)
    lo = (-128 - p.zero_point) * p.scale
    assert -3.0 - p.scale <= lo <= -3.0 + p.scale
    # the same network with a second reader of the pre-activation keeps its full range (-63..):
    # its y is several times further from fp32
    other = model(make_onnx_model, np.random.default_rng(0), second_user=True)
    full = quantize(other, np.random.default_rng(0))
    clamped = output_error(onnx_model, result, np.random.default_rng(2))
    assert clamped * 3 < output_error(other, full, np.random.default_rng(2))


def test_other_readers_keep_the_full_range(make_onnx_model, rng):
    result = quantize(model(make_onnx_model, rng, second_user=True), rng)
    p = result.params[next(r for r in result.annotation.regions if r.pattern.kind == "CONV_2D").output]
    assert (-128 - p.zero_point) * p.scale < -50.0
