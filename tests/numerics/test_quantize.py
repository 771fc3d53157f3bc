"""quantir.numerics.quantize: quantize / dequantize per tensor, per axis, blocked (numerics.md §2.10, §4)."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantir.numerics import (
    asymmetric_qparams,
    dequantize,
    expand_params,
    fused_activation_range,
    quantize,
    quantize_onnx,
    quantize_tflite,
)

F = np.float32


def test_quantize_table_tflite_vs_onnx():
    x = np.array([0.25, -0.25, 0.75, -0.75], dtype=np.float32)
    assert quantize_tflite(x, 0.5, 0).tolist() == [1, -1, 2, -2]
    assert quantize_onnx(x, 0.5, 0, -128, 127).tolist() == [0, 0, 2, -2]


def test_saturation_inf_and_nan():
    x = np.array([1e30, -1e30, np.inf, -np.inf, 3.0], dtype=np.float32)
    assert quantize_tflite(x, 0.01, 10).tolist() == [127, -128, 127, -128, 127]
    assert quantize_onnx(x, 0.01, 10, 0, 255).tolist() == [255, 0, 255, 0, 255]
    with pytest.raises(ValueError, match="NaN"):
        quantize_tflite([np.nan], 0.1, 0)
    for bad in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="scale"):
            quantize_tflite([1.0], bad, 0)


def test_division_precision_and_zero_point_placement():
    # MLIR quant.qcast lowering: divf, addf, fptosi (truncation): 2.7 -> 2, -2.7 -> -2.
    x = np.array([2.7, -2.7], dtype=np.float32)
    assert quantize(x, 1.0, 0, -128, 127, rounding="toward_zero", zero_point_before_rounding=True).tolist() == [2, -2]
    # Ties away from zero are not translation invariant: rha(-0.5) + 1 = 0 but rha(-0.5 + 1) = 1.
    assert quantize(-0.5, 1.0, 1, -128, 127, rounding="half_away") == 0
    assert quantize(-0.5, 1.0, 1, -128, 127, rounding="half_away", zero_point_before_rounding=True) == 1
    # The division precision decides ties: 0.25 / f32(0.1) is exactly 2.5 in float32 (-> 3 with
    # half_away, as LiteRT QUANTIZE) but 2.49999996 in double (-> 2, as MLIR's constant fold).
    assert quantize(F(0.25), F(0.1), 0, -128, 127, rounding="half_away", divide_in="float32") == 3
    assert quantize(F(0.25), F(0.1), 0, -128, 127, rounding="half_away", divide_in="float64") == 2
    with pytest.raises(ValueError, match="divide_in"):
        quantize(1.0, 1.0, 0, -128, 127, divide_in="float16")


def test_per_axis_and_blocked_params():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 10
    scales = np.array([0.5, 1.0, 2.0], dtype=np.float32)
    zps = np.array([1, -2, 3])
    got = quantize_onnx(x, scales, zps, -128, 127, axis=1)
    for c in range(3):
        assert got[:, c].tolist() == quantize_onnx(x[:, c], scales[c], zps[c], -128, 127).tolist()
    assert quantize_onnx(x, scales, zps, -128, 127, axis=-2).tolist() == got.tolist()
    # Blocked along axis 2 with block 3: ceil(4/3) = 2 blocks.
    bscale = np.array([[0.5, 4.0]] * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    bzp = np.zeros((2, 3, 2), dtype=np.int64)
    blocked = quantize_onnx(x, bscale, bzp, -128, 127, axis=2, block_size=3)
    assert blocked[..., :3].tolist() == quantize_onnx(x[..., :3], 0.5, 0, -128, 127).tolist()
    assert blocked[..., 3:].tolist() == quantize_onnx(x[..., 3:], 4.0, 0, -128, 127).tolist()
    with pytest.raises(ValueError, match="per-axis parameter must be 1-D of length 3"):
        quantize_onnx(x, scales[:2], 0, -128, 127, axis=1)
    with pytest.raises(ValueError, match="blocked parameter must have shape"):
        expand_params(np.ones((2, 3, 3)), x.shape, 2, 3)
    with pytest.raises(ValueError, match="scalar"):
        quantize_onnx(x, scales, 0, -128, 127)


def test_dequantize_matches_float32_product():
    q = np.arange(-128, 128)
    s = F(0.0173)
    want = s * (q - 5).astype(np.float32)
    assert dequantize(q, s, 5).tobytes() == want.tobytes()
    assert dequantize(q, s, 5, scheme="onnx").tobytes() == want.tobytes()
    # int32 beyond 2**24: LiteRT rounds the exact double product once; ONNX rounds q first.
    big = np.array([(1 << 30) + 1])
    assert dequantize(big, F(3.0)) == np.float32(3.0 * ((1 << 30) + 1))
    assert dequantize(big, F(3.0), scheme="onnx") == np.float32(3.0) * np.float32((1 << 30) + 1)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([np.int8, np.uint8, np.int16, np.uint16]), st.integers(1, 40),
       st.floats(float(np.float32(1e-8)), 1e4, allow_nan=False, width=32), st.integers(-70000, 70000), st.data())
def test_dequantize_of_8_and_16_bit_storage_is_the_int64_path(dtype, n, scale, zero_point, data):
    """The 8/16-bit fast path (f32 product of f32(q - zp)) gives the bytes of the exact int64 / float64
    path, per tensor and per axis, for both schemes."""
    info = np.iinfo(dtype)
    q = np.asarray(data.draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=n, max_size=n)), dtype)
    for scheme in ("tflite", "onnx"):
        assert dequantize(q, scale, zero_point, scheme=scheme).tobytes() == \
            dequantize(q.astype(np.int64), scale, zero_point, scheme=scheme).tobytes()
    grid = np.resize(q, (2, n))
    scales, zps = np.array([scale, scale * 3], np.float32), np.array([zero_point, -zero_point // 3])
    assert dequantize(grid, scales, zps, axis=0).tobytes() == \
        dequantize(grid.astype(np.int64), scales, zps, axis=0).tobytes()


def test_fused_activation_ranges():
    s, zp = asymmetric_qparams(0.0, 6.0)
    assert (float(s), int(zp)) == (float(F(6 / 255)), -128)
    assert fused_activation_range("relu6", s, zp) == (-128, 127)  # Q(6) = 127
    s, zp = F(0.05), -10
    assert fused_activation_range("none", s, zp) == (-128, 127)
    assert fused_activation_range("relu", s, zp) == (-10, 127)
    assert fused_activation_range("relu6", s, zp) == (-10, 110)
    assert fused_activation_range("relu_n1_to_1", s, zp) == (-30, 10)
    with pytest.raises(ValueError, match="activation"):
        fused_activation_range("gelu", s, zp)


# ---------------------------------------------------------------------------
# Properties


scales = st.floats(min_value=2.0**-20, max_value=10.0, allow_nan=False, width=32)
zero_points = st.integers(-128, 127)


@settings(max_examples=200, deadline=None)
@given(scales, zero_points, st.lists(st.floats(-1.0, 1.0, width=32), min_size=1, max_size=8),
       st.sampled_from(["float32", "float64"]), st.sampled_from(["half_even", "half_away", "half_up"]))
def test_round_trip_error_is_at_most_half_a_step(s, zp, us, divide_in, rounding):
    s = F(s)
    lo, hi = float(s) * (-128 - zp), float(s) * (127 - zp)
    x = np.array([lo + (u + 1) / 2 * (hi - lo) for u in us], dtype=np.float32)
    x = np.clip(x, F(lo), F(hi))
    q = quantize(x, s, zp, -128, 127, rounding=rounding, divide_in=divide_in)
    rel = Fraction(1, 2**23) if divide_in == "float32" else Fraction(1, 2**52)
    for xi, qi in zip(x.tolist(), q.tolist()):
        err = abs(Fraction(xi) - Fraction(float(s)) * (qi - zp))
        ratio = abs(Fraction(xi) / Fraction(float(s)))
        assert err <= Fraction(float(s)) * (Fraction(1, 2) + ratio * rel)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3, width=32), min_size=1, max_size=12), scales, zero_points)
def test_vectorised_equals_scalar(xs, s, zp):
    x = np.array(xs, dtype=np.float32)
    for fn in (quantize_tflite, lambda v, s_, z: quantize_onnx(v, s_, z, -128, 127)):
        assert fn(x, s, zp).tolist() == [int(fn(v, s, zp)) for v in x]


# ---------------------------------------------------------------------------
# ONNX reference evaluator and ONNX Runtime as oracles


onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402


def _qdq_model(op: str, shape, axis=None, block_size=None, out_type=TensorProto.INT8, opset=21):
    attrs = {}
    if axis is not None:
        attrs["axis"] = axis
    if block_size is not None:
        attrs["block_size"] = block_size
    in_type = TensorProto.FLOAT if op == "QuantizeLinear" else out_type
    res_type = out_type if op == "QuantizeLinear" else TensorProto.FLOAT
    node = helper.make_node(op, ["x", "s", "z"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", in_type, shape),
        helper.make_tensor_value_info("s", TensorProto.FLOAT, None),
        helper.make_tensor_value_info("z", out_type, None)],
        [helper.make_tensor_value_info("y", res_type, shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_quantize_onnx_matches_reference_evaluator():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((4, 6, 5)) * 3).astype(np.float32)
    x.flat[:8] = np.array([0.25, -0.25, 0.75, -0.75, 1.25, -1.25, 100.0, -100.0])
    cases = [
        (None, None, F(0.5), np.int8(3)),
        (1, None, rng.uniform(0.01, 0.5, 6).astype(np.float32), rng.integers(-5, 5, 6).astype(np.int8)),
        (2, 2, rng.uniform(0.01, 0.5, (4, 6, 3)).astype(np.float32), rng.integers(-5, 5, (4, 6, 3)).astype(np.int8)),
    ]
    for axis, block, s, z in cases:
        ref = ReferenceEvaluator(_qdq_model("QuantizeLinear", x.shape, axis, block))
        (want,) = ref.run(None, {"x": x, "s": np.asarray(s), "z": np.asarray(z)})
        got = quantize_onnx(x, s, z, -128, 127, axis=axis, block_size=block)
        np.testing.assert_array_equal(got, want)
        qref = ReferenceEvaluator(_qdq_model("DequantizeLinear", x.shape, axis, block))
        (dq,) = qref.run(None, {"x": want, "s": np.asarray(s), "z": np.asarray(z)})
        assert dequantize(want, s, z, axis=axis, block_size=block, scheme="onnx").tobytes() == dq.tobytes()
        assert dequantize(want, s, z, axis=axis, block_size=block).tobytes() == dq.tobytes()


def test_quantize_onnx_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(8)
    x = np.concatenate([(np.arange(-300, 300) + 0.5) * F(0.25), rng.standard_normal(400) * 40]).astype(np.float32)
    model = _qdq_model("QuantizeLinear", x.shape, out_type=TensorProto.UINT8, opset=13)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x, "s": np.array(0.25, np.float32), "z": np.array(7, np.uint8)})
    np.testing.assert_array_equal(quantize_onnx(x, F(0.25), 7, 0, 255), want)
