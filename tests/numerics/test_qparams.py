"""quantir.numerics.qparams: scale / zero point from ranges, weights and bias (numerics.md §3, §4.5)."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantir.errors import CalibrationError
from quantir.numerics import (
    BiasOverflowWarning,
    asymmetric_qparams,
    bias_qparams,
    channel_min_max,
    dequantize,
    quantize_bias,
    quantize_weights,
    symmetric_activation_qparams,
    symmetric_weight_qparams,
)

F = np.float32

# ---------------------------------------------------------------------------
# §7 vectors


def test_activation_vectors():
    s, zp = asymmetric_qparams(-1.0, 3.0)
    assert s.dtype == np.float32 and s == F(4 / 255) and f"{s:.9f}" == "0.015686275" and zp == -64
    s, zp = asymmetric_qparams(0.0, 6.0)
    assert f"{s:.9f}" == "0.023529412" and zp == -128
    s, zp = asymmetric_qparams(1.0, 6.0)  # 0 is put into the range
    assert zp == -128 and s == F(6 / 255)


def test_weight_vectors():
    w = np.array([0.9921875, -0.25, 2.5 * 2**-7], dtype=np.float32)
    s, zp = symmetric_weight_qparams(w)
    assert s == 2.0**-7 and zp == 0
    tie = F(2.5 * 2**-7)  # exactly 2.5 steps
    assert quantize_weights(tie, s) == 3  # rha (MLIR fold)
    assert quantize_weights(tie, s, method="tflite_legacy") == 3  # rha (legacy)
    assert quantize_weights(tie, s, method="onnxruntime") == 2  # rhe (ORT)
    assert quantize_weights(w, s).tolist() == [127, -32, 3]


def test_all_zero_weight_channel_gets_the_range_floor():
    w = np.zeros((3, 2, 2, 4), dtype=np.float32)
    w[1] = 0.5
    s, zp = symmetric_weight_qparams(w, axis=0)
    floor_scale = (F(5e-7) - F(-5e-7)) / F(254)
    assert s.tolist() == [floor_scale, F(1.0) / F(254), floor_scale] and zp.tolist() == [0, 0, 0]
    assert math.isclose(float(floor_scale), 3.937e-9, rel_tol=1e-3)
    q = quantize_weights(w, s, axis=0)
    assert q[0].max() == 0 and q[1].max() == 127


def test_zero_and_tiny_ranges():
    s, zp = asymmetric_qparams(0.0, 0.0)
    assert s == (F(5e-7) - F(-5e-7)) / F(255) and -128 <= zp <= 127
    assert dequantize(zp, s, zp) == 0.0
    s, zp = asymmetric_qparams(0.0, 3e-7)  # width 3e-7 <= 1e-6: widened to [-5e-7, 5e-7]
    assert s == (F(5e-7) - F(-5e-7)) / F(255)
    s, zp = asymmetric_qparams(0.0, 0.0, scheme="onnxruntime")
    assert (s, zp) == (F(1.0), 0)
    s, zp = symmetric_weight_qparams(np.zeros(4, np.float32), scheme="onnxruntime")
    assert (s, zp) == (F(1.0), 0)
    with pytest.raises(CalibrationError, match="exactly 0"):
        symmetric_activation_qparams(0.0, 0.0)


@pytest.mark.parametrize("rmin, rmax, what", [
    (np.nan, 1.0, "rmin must be finite"),
    (-1.0, np.inf, "rmax must be finite"),
    (2.0, 1.0, "rmin must be <= rmax"),
    (-3e38, 3e38, "unusable float32 scale"),
])
def test_bad_statistics_raise_calibration_error(rmin, rmax, what):
    with pytest.raises(CalibrationError, match=what):
        asymmetric_qparams(rmin, rmax)


def test_bad_statistics_name_the_channel():
    with pytest.raises(CalibrationError, match=r"at index \(2,\)"):
        asymmetric_qparams(np.array([-1.0, -2.0, np.nan]), np.array([1.0, 2.0, 3.0]))
    with pytest.raises(CalibrationError, match="w must be finite"):
        symmetric_weight_qparams(np.array([1.0, np.inf]))


def test_symmetric_activation_int16():
    s, zp = symmetric_activation_qparams(-3.0, 2.0)
    assert s == F(3.0) / F(32767) and zp == 0


def test_narrow_range_and_unsupported_symmetric():
    with pytest.raises(ValueError, match="narrow range"):
        symmetric_weight_qparams(np.ones(3, np.float32), narrow_range=False)
    s, zp = symmetric_weight_qparams(np.array([-1.0, 0.5], np.float32), scheme="onnxruntime", signed=False)
    assert zp == 128 and s == F(2.0 / 255)
    # asymmetric parameters on the narrow symmetric storage range: MLIR's double nudging.
    s, zp = asymmetric_qparams(-1.0, 3.0, -127, 127)
    assert s == F(4 / 254) and zp == -64


# ---------------------------------------------------------------------------
# Scheme references


def _tflite_scalar(rmin: float, rmax: float, qmin: int, qmax: int) -> tuple[np.float32, int]:
    """ConvertStatsToQDQs + ExpandVerySmallRange + DownCastScale, transcribed per scalar."""
    rmin, rmax = min(rmin, 0.0), max(rmax, 0.0)
    if not rmax - rmin > 1e-6:
        rmin, rmax = min(rmin, -5e-7), max(rmax, 5e-7)
    scale = (F(rmax) - F(rmin)) / F(qmax - qmin)
    zfm = F(qmin - rmin / float(scale))  # double expression stored in a float
    if zfm < qmin:
        return scale, qmin
    if zfm > qmax:
        return scale, qmax
    return scale, int(math.copysign(math.floor(abs(float(zfm)) + 0.5), float(zfm)))  # std::round


ranges = st.tuples(st.floats(-1e4, 1e4, width=32), st.floats(-1e4, 1e4, width=32)).map(sorted)
tiny_ranges = st.tuples(st.floats(-2.0**-17, 2.0**-17, width=32), st.floats(-2.0**-17, 2.0**-17, width=32)).map(sorted)
qranges = st.sampled_from([(-128, 127), (0, 255), (-32768, 32767)])


@settings(max_examples=150, deadline=None)
@given(st.one_of(ranges, tiny_ranges), qranges)
def test_tflite_scheme_matches_transcription_and_covers_range(r, qr):
    rmin, rmax = r
    qmin, qmax = qr
    s, zp = asymmetric_qparams(rmin, rmax, qmin, qmax)
    assert (s, int(zp)) == _tflite_scalar(rmin, rmax, qmin, qmax)
    assert np.isfinite(s) and s > 0 and qmin <= zp <= qmax
    assert dequantize(zp, s, zp) == 0.0  # real 0 is exact
    lo, hi = float(s) * (qmin - int(zp)), float(s) * (qmax - int(zp))
    assert lo <= min(rmin, 0.0) + float(s) and hi >= max(rmax, 0.0) - float(s)


@settings(max_examples=200, deadline=None)
@given(st.one_of(ranges, tiny_ranges, st.just((0.0, 0.0))), qranges)
def test_onnxruntime_scheme_matches_ort_tool(r, qr):
    quant_utils = pytest.importorskip("onnxruntime.quantization.quant_utils")
    rmin, rmax = r
    qmin, qmax = qr
    dtype = np.int16 if qmin == -32768 else np.int8 if qmin < 0 else np.uint8
    zp_ort, s_ort = quant_utils.compute_scale_zp(np.array(rmin, np.float32), np.array(rmax, np.float32),
                                                 np.array(qmin, dtype), np.array(qmax, dtype))
    s, zp = asymmetric_qparams(rmin, rmax, qmin, qmax, scheme="onnxruntime")
    assert s == s_ort and s.dtype == np.float32 and zp == int(zp_ort)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(ranges, tiny_ranges), min_size=1, max_size=8), st.sampled_from(["tflite", "onnxruntime"]))
def test_vectorised_equals_scalar(rs, scheme):
    lo = np.array([r[0] for r in rs])
    hi = np.array([r[1] for r in rs])
    s, zp = asymmetric_qparams(lo, hi, scheme=scheme)
    assert s.dtype == np.float32 and zp.dtype == np.int64
    pairs = [asymmetric_qparams(a, b, scheme=scheme) for a, b in rs]
    assert s.tolist() == [p[0] for p in pairs] and zp.tolist() == [p[1] for p in pairs]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-10, 10, width=32), min_size=2, max_size=24))
def test_symmetric_weights_match_ort_tool(ws):
    quant_utils = pytest.importorskip("onnxruntime.quantization.quant_utils")
    w = np.array(ws, dtype=np.float32)
    zp_ort, s_ort = quant_utils.compute_scale_zp(w.min(), w.max(), np.array(-127, np.int8), np.array(127, np.int8),
                                                 symmetric=True)
    s, zp = symmetric_weight_qparams(w, scheme="onnxruntime")
    assert s == s_ort and zp == int(zp_ort)
    q = quantize_weights(w, s, zero_point=zp, method="onnxruntime")
    ort_q = quant_utils.quantize_nparray(3, w, s_ort, zp_ort, -127, 127)  # TensorProto.INT8 = 3
    assert q.tolist() == ort_q.tolist()


# ---------------------------------------------------------------------------
# Weights


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(-4, 4, width=32), st.floats(-4, 4, width=32)), min_size=2, max_size=12))
def test_weight_methods_are_the_named_formulas(ws):
    w = np.array(ws, dtype=np.float32)  # [K, 2]: two output channels on axis 1
    s, _ = symmetric_weight_qparams(w, axis=1)
    fold = quantize_weights(w, s, axis=1)
    legacy = quantize_weights(w, s, axis=1, method="tflite_legacy")
    s64 = s.astype(np.float64)
    exact = w.astype(np.float64) / s64
    assert fold.tolist() == np.clip(np.sign(exact) * np.floor(np.abs(exact) + 0.5), -127, 127).astype(int).tolist()
    prod = (w * (1.0 / s64).astype(np.float32)).astype(np.float32)
    rounded = np.sign(prod) * np.floor(np.abs(prod).astype(np.float64) + 0.5)
    assert legacy.tolist() == np.clip(rounded, -127, 127).astype(int).tolist()
    assert np.all(np.abs(fold - legacy) <= 1) and fold.min() >= -127


def test_channel_min_max():
    w = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 5
    lo, hi = channel_min_max(w, axis=2)
    assert lo.tolist() == [-5, -4, -3, -2] and hi.tolist() == [15, 16, 17, 18]
    assert channel_min_max(w) == (-5, 18)
    with pytest.raises(CalibrationError, match="empty"):
        channel_min_max(np.zeros((0, 3)))


# ---------------------------------------------------------------------------
# Bias


def test_bias_scale_is_float32_product():
    s, zp = bias_qparams(F(0.02), np.array([0.003, 0.25], np.float32))
    assert s.tolist() == [F(0.02) * F(0.003), F(0.02) * F(0.25)] and zp.tolist() == [0, 0]
    assert s[0] == F(np.float64(F(0.02)) * np.float64(F(0.003)))
    with pytest.raises(CalibrationError, match="unusable"):
        bias_qparams(F(1e-30), F(1e-30))  # underflows to 0


def test_quantize_bias_methods_and_ties():
    s = F(0.5)
    b = np.array([0.25, -0.25, 0.75, 1.0], np.float32)  # b/s = 0.5, -0.5, 1.5, 2
    assert quantize_bias(b, s).tolist() == [1, -1, 2, 2]
    assert quantize_bias(b, s, method="tflite_legacy").tolist() == [1, -1, 2, 2]
    assert quantize_bias(b, s, method="onnxruntime").tolist() == [0, 0, 2, 2]


def test_quantize_bias_saturates_and_reports():
    s = F(1e-10)
    b = np.array([1.0, -1.0, 0.5e-6], np.float32)
    with pytest.warns(BiasOverflowWarning, match="2 bias value"):
        q = quantize_bias(b, s)
    assert q.tolist() == [2**31 - 1, -(2**31), 5000]
    with pytest.warns(BiasOverflowWarning):
        assert quantize_bias(b, s, method="tflite_legacy").tolist()[:2] == [2**31 - 1, -(2**31 - 1)]
    with pytest.raises(CalibrationError, match="do not fit int32"):
        quantize_bias(b, s, on_overflow="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert quantize_bias(b, s, on_overflow="saturate")[0] == 2**31 - 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-100, 100, width=32), min_size=1, max_size=8), st.floats(2.0**-13, 1.0, width=32))
def test_quantize_bias_per_channel_equals_scalar(bs, s):
    b = np.array(bs, dtype=np.float32)
    scales = np.full(b.shape, s, dtype=np.float32)
    for method in ("mlir_fold", "tflite_legacy", "onnxruntime"):
        got = quantize_bias(b, scales, method=method)
        assert got.tolist() == [int(quantize_bias(v, s, method=method)) for v in b]


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.integers(1, 4), st.floats(1e-6, 10.0))
def test_symmetric_weights_match_the_exact_mlir_fold(seed, per_channel, channels, spread):
    """The symmetric fast path of ``quantize_weights`` is ``clamp(rha(double(w) / double(s)), ±127)``
    exactly: compared with Fraction arithmetic, with many exact ties (k/2 steps) and values past
    the range."""
    from fractions import Fraction
    rng = np.random.default_rng(seed)
    w = (rng.normal(size=(channels, 7)) * spread).astype(F)
    s = (np.abs(w).max(axis=1) / F(127)).astype(F) if per_channel else F(np.abs(w).max() / F(127))
    s = np.maximum(s, F(1e-12))
    step = s[:, None] if per_channel else s
    w[:, :3] = (rng.integers(-300, 301, size=(channels, 3)) / 2.0 * step).astype(F)   # ties and overflow
    q = quantize_weights(w, s, axis=0 if per_channel else None)
    for (c, j), x in np.ndenumerate(w):
        sc = Fraction(float(s[c] if per_channel else s))
        v = Fraction(float(x)) / sc
        r = math.floor(v + Fraction(1, 2)) if v >= 0 else -math.floor(-v + Fraction(1, 2))   # ties away
        assert q[c, j] == max(-127, min(127, r)), (x, s, v)
