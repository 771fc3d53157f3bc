"""SiLU written out (x·σ(x): LOGISTIC, then MUL of x by its gate), as YOLO-style detectors
(ddddocr's common_det: 74 of them) export it. Below SILU_FLOOR LiteRT's LOGISTIC gives its
lowest step, 0, so the product is exactly 0 there: a conv output read only by a SiLU is quantized
over [SILU_FLOOR, max], and its negative tail stops coarsening the step of the values that count."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

import quantir as qr  # noqa: E402
from quantir.quantize.ops.activation import (LOGISTIC_SATURATES, SILU_FLOOR, logistic_input_range,  # noqa: E402
                                             silu_input_range)
from quantir.runtime import run  # noqa: E402

from ..runtime.qkernels.qk_oracle import OP, T, run_op  # noqa: E402


def test_range_rule():
    assert silu_input_range(-60.0, 8.0) == (SILU_FLOOR, 8.0)
    assert silu_input_range(-2.0, 8.0) == (-2.0, 8.0)
    assert silu_input_range(-20.0, -9.0) == (SILU_FLOOR, SILU_FLOOR)
    t = LOGISTIC_SATURATES
    assert logistic_input_range(-60.0, 12.0) == (-t, t)
    assert logistic_input_range(-2.0, 3.0) == (-2.0, 3.0)
    assert logistic_input_range(-20.0, -9.0) == (-t, -t)
    assert logistic_input_range(9.0, 20.0) == (t, t)


@pytest.mark.parametrize("scale,zero_point", [(0.06, 0), (0.25, 60), (0.5, -100), (0.03, 127), (0.03, -128)])
def test_litert_logistic_saturates_beyond_the_cut(scale, zero_point):
    """The premise, on LiteRT's reference kernel: every int8 input at or below -6.5 gives -128 (real
    0) and every one at or above 6.5 gives 127, so clipping the input there changes no output and
    x·σ(x) below SILU_FLOOR is 0 in the integer graph however x is clipped."""
    q = np.arange(-128, 128, dtype=np.int8)
    (out,) = run_op(OP.LOGISTIC, [T(q.shape, scale=scale, zero_point=zero_point)],
                    [T(q.shape, scale=1 / 256, zero_point=-128)], [q])
    real = (q.astype(np.float64) - zero_point) * scale
    below, above = real <= -LOGISTIC_SATURATES, real >= LOGISTIC_SATURATES
    assert below.any() or above.any()
    assert (out[below] == -128).all() and (out[above] == 127).all()


def model(make_onnx_model, rng, reader: str):
    """conv → SiLU → conv; channel 0's bias sends the first conv's output to about -60. ``reader``:
    "silu" (x·σ(x)), "se" (x·σ(mean of x): a squeeze-excite gate, not a SiLU) or
    "relu" (a SiLU plus a second reader of x)."""
    inits = {"w": (rng.standard_normal((4, 3, 3, 3)) * 0.5).astype(np.float32),
             "b": np.array([-60.0, 0.5, 0.0, 0.2], np.float32),
             "w2": rng.standard_normal((2, 4, 1, 1)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["pre"], pads=[1, 1, 1, 1])]
    outputs = [("y", np.float32, None)]
    if reader == "se":
        nodes += [helper.make_node("GlobalAveragePool", ["pre"], ["g"]), helper.make_node("Sigmoid", ["g"], ["s"])]
    else:
        nodes += [helper.make_node("Sigmoid", ["pre"], ["s"])]
    nodes += [helper.make_node("Mul", ["pre", "s"], ["h"]), helper.make_node("Conv", ["h", "w2"], ["y"])]
    if reader == "relu":
        nodes.append(helper.make_node("Relu", ["pre"], ["r"]))
        outputs.append(("r", np.float32, None))
    return make_onnx_model(nodes, [("x", np.float32, ("N", 3, "H", "W"))], outputs, inits)


def quantize(onnx_model, rng):
    calib = [{"x": rng.uniform(-1, 1, (1, 3, 12, 12)).astype(np.float32)} for _ in range(16)]
    return qr.quantize(onnx_model, calib, qr.Config(method="minmax", progress=False))


def pre_low(result) -> float:
    """The lowest real value of the first conv's int8 output."""
    conv = next(r for r in result.annotation.regions if r.pattern.kind == "CONV_2D")
    p = result.params[conv.output]
    return (-128 - p.zero_point) * p.scale


def output_error(onnx_model, result) -> float:
    """Mean |int8 - fp32| of y on new data, fp32 from ONNX Runtime."""
    x = np.random.default_rng(2).uniform(-1, 1, (2, 3, 10, 14)).astype(np.float32)
    session = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    return float(np.abs(run(result.module, {"x": x})["y"] - session.run(["y"], {"x": x})[0]).mean())


def test_silu_input_quantized_from_the_floor(make_onnx_model, rng):
    onnx_model = model(make_onnx_model, rng, "silu")
    result = quantize(onnx_model, rng)
    assert result.cast_counts() == (1, 1)
    assert result.quantized_ops().get("sigmoid") == 1 and result.quantized_ops().get("mul") == 1
    conv = next(r for r in result.annotation.regions if r.pattern.kind == "CONV_2D")
    step = result.params[conv.output].scale
    assert SILU_FLOOR - step <= pre_low(result) <= SILU_FLOOR + step
    # the same network whose pre-activation has a second reader keeps its range down to -60, and
    # its y (whose other channels ride on that step) is several times further from fp32
    other = model(make_onnx_model, np.random.default_rng(0), "relu")
    full = quantize(other, np.random.default_rng(0))
    assert pre_low(full) < -50.0
    assert output_error(onnx_model, result) * 3 < output_error(other, full)


def test_other_gates_and_readers_keep_the_full_range(make_onnx_model, rng):
    for reader in ("se", "relu"):
        result = quantize(model(make_onnx_model, np.random.default_rng(0), reader), np.random.default_rng(0))
        assert pre_low(result) < -50.0, reader


def score_head(make_onnx_model, rng, second_reader: bool):
    """conv → sigmoid, a score head: logits mostly far below -6.5 (background cells), a few up to
    about +4; optionally a second reader of the logits (then nothing is cut)."""
    w = (rng.standard_normal((3, 3, 3, 3)) * 1.5).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["logits"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["logits"], ["y"])]
    outputs = [("y", np.float32, None)]
    if second_reader:
        nodes.append(helper.make_node("Relu", ["logits"], ["r"]))
        outputs.append(("r", np.float32, None))
    return make_onnx_model(nodes, [("x", np.float32, ("N", 3, "H", "W"))], outputs,
                           {"w": w, "b": np.array([-40.0, -3.0, 0.0], np.float32)})


def test_score_logits_quantized_over_what_the_sigmoid_tells_apart(make_onnx_model, rng):
    onnx_model = score_head(make_onnx_model, rng, False)
    result = quantize(onnx_model, rng)
    assert result.cast_counts() == (1, 1)
    p = result.params[next(r for r in result.annotation.regions if r.pattern.kind == "CONV_2D").output]
    lo = (-128 - p.zero_point) * p.scale
    assert -LOGISTIC_SATURATES - p.scale <= lo <= -LOGISTIC_SATURATES + p.scale
    other = score_head(make_onnx_model, np.random.default_rng(0), True)
    full = quantize(other, np.random.default_rng(0))
    assert pre_low(full) < -40.0
    # the scores thresholds act on (fp32 in [0.05, 0.95], from ONNX Runtime): over twice as close
    x = np.random.default_rng(2).uniform(-1, 1, (4, 3, 10, 14)).astype(np.float32)
    want = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        ["y"], {"x": x})[0]
    mid = (want > 0.05) & (want < 0.95)
    assert mid.sum() > 50
    cut, uncut = (np.abs(run(r.module, {"x": x})["y"] - want)[mid].mean() for r in (result, full))
    assert cut * 2 < uncut   # 0.0038 against 0.0101 here; the output's own 1/256 rounding is in both
