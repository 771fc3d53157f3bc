"""Quantization parameters from float ranges, and the quantization of constants.

Two schemes are reproduced exactly (docs/numerics.md §3, §4.5):

``tflite``
    The LiteRT MLIR converter as the Python API runs it (``legacy_float_scale = true``):
    ``ConvertStatsToQDQs`` includes 0 in the range, ``ExpandVerySmallRange`` widens any
    range of 1e-6 or less to at least ``[-5e-7, 5e-7]``, and ``DownCastScale`` recomputes
    ``scale = f32(f32(rmax) - f32(rmin)) / f32(qmax - qmin)`` in float32 and the zero
    point from ``f32(qmin - rmin / scale)`` (evaluated in double, stored as float),
    clamped, then rounded half away from zero.
``onnxruntime``
    ``onnxruntime.quantization.quant_utils.compute_scale_zp``: float32 range including 0,
    ``scale = float64(rmax - rmin) / (qmax - qmin)``, ``zp = rhe(qmin - rmin / scale)``
    with the float64 scale, then ``scale`` cast to float32.

Zero and tiny ranges (never a zero, NaN or infinite scale):

* ``tflite``: an all-zero range becomes ``[-5e-7, 5e-7]``: scale ≈ 3.92e-9 for 255
  steps (asymmetric), ≈ 3.94e-9 for 254 steps (symmetric weights); real 0 stays exact.
* ``onnxruntime``: a float64 scale below float32 ``tiny`` (so also an exact zero range)
  gives ``(1.0, 0)``, as ORT does.
* NaN or infinite statistics, ``rmin > rmax``, or a range too wide for a float32 scale
  raise :class:`~quantir.errors.CalibrationError` saying which input was wrong.

Scales are returned as float32 (the storage type of every format we target), zero points
as int64; arrays in, arrays out (per-channel), scalars in, NumPy scalars out.
"""
from __future__ import annotations

import warnings
from enum import StrEnum
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from quantir.errors import CalibrationError
from quantir.numerics._validate import INT32_MAX, INT32_MIN, scalar_or_array
from quantir.numerics.quantize import _checked_scale, expand_params, quantize
from quantir.numerics.rounding import Rounding, round_half_away, round_half_even

__all__ = [
    "QParamScheme",
    "ConstantRounding",
    "BiasOverflowWarning",
    "NEAR_ZERO_TOLERANCE",
    "channel_min_max",
    "asymmetric_qparams",
    "symmetric_weight_qparams",
    "symmetric_activation_qparams",
    "quantize_weights",
    "bias_qparams",
    "quantize_bias",
]

NEAR_ZERO_TOLERANCE = 1e-6  # kNearZeroTolerance: ranges this small are widened (tflite)
_SMALLEST_HALF_RANGE = NEAR_ZERO_TOLERANCE / 2  # kSmallestHalfRange
_F32_TINY = float(np.finfo(np.float32).tiny)


class QParamScheme(StrEnum):
    """Whose arithmetic derives scale and zero point from a range (module docstring)."""

    TFLITE = "tflite"
    ONNXRUNTIME = "onnxruntime"


class ConstantRounding(StrEnum):
    """How a float constant (weight or bias) is rounded to its integer.

    * ``mlir_fold``: MLIR ``UniformQuantizedValueConverter`` (``UniformSupport.h``), the
      TFLite converter's constant fold without legacy scales: ``rha(double(w)/double(s) + zp)``
      for 8-bit storage, ``rha(double(b)/double(s))`` for the int32 bias.
    * ``tflite_legacy``: the legacy kernels the converter calls under
      ``legacy_float_scale`` (``SymmetricPerChannelQuantizeValues``,
      ``SymmetricBiasQuantize``): multiply by a float32 reciprocal,
      ``rha(f32(w · f32(1/double(s))))``; the bias is clamped to ``±(2**31 - 1)``.
    * ``onnxruntime``: ORT's quantization tool: weights ``rhe(f32(w) / f32(s)) + zp``,
      bias ``rhe(double(b) / double(s))``.
    """

    MLIR_FOLD = "mlir_fold"
    TFLITE_LEGACY = "tflite_legacy"
    ONNXRUNTIME = "onnxruntime"


class BiasOverflowWarning(UserWarning):
    """A bias value did not fit its integer type and was saturated."""


# ---------------------------------------------------------------------------
# Ranges


def _finite_stats(x: ArrayLike, func: str, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.size and not np.all(np.isfinite(a)):
        idx = np.argwhere(~np.isfinite(a))[0]
        where = f" at index {tuple(int(i) for i in idx)}" if a.ndim else ""
        raise CalibrationError(
            f"{func}: {name} must be finite, found {a[tuple(idx)]}{where}; the calibration "
            "statistics are not usable (NaN/Inf in the data, or no batch was observed)")
    return a


def _finite_f32(x: ArrayLike, func: str, name: str) -> np.ndarray:
    """``x`` as float32 (no copy when it already is), checked finite without a float64 copy:
    NaN and ±Inf show in the min or the max. A weight can be hundreds of megabytes."""
    a = np.asarray(x, dtype=np.float32)
    if a.size and not (np.isfinite(a.min()) and np.isfinite(a.max())):
        _finite_stats(a, func, name)   # raises, naming the first bad element
    return a


def _ordered_range(rmin: ArrayLike, rmax: ArrayLike, func: str) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = _finite_stats(rmin, func, "rmin"), _finite_stats(rmax, func, "rmax")
    lo, hi = np.broadcast_arrays(lo, hi)
    if np.any(lo > hi):
        i = np.argwhere(lo > hi)[0]
        raise CalibrationError(f"{func}: rmin must be <= rmax, found rmin={lo[tuple(i)]} > rmax={hi[tuple(i)]}")
    return lo, hi


def _check_scale(scale: np.ndarray, func: str, what: str) -> None:
    scale = np.asarray(scale)
    if scale.size and not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
        idx = np.argwhere(~(np.isfinite(scale) & (scale > 0)))[0]
        where = f" at index {tuple(int(i) for i in idx)}" if scale.ndim else ""
        raise CalibrationError(f"{func}: {what} gives the unusable float32 scale {scale[tuple(idx)]}{where}")


def _check_qrange(qmin: int, qmax: int, func: str) -> None:
    if not qmin <= 0 <= qmax or qmin == qmax:
        raise ValueError(f"{func}: need qmin <= 0 <= qmax and qmin < qmax, found [{qmin}, {qmax}]")


def channel_min_max(w: ArrayLike, axis: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Minimum and maximum of ``w`` per index along ``axis`` (over everything if None)."""
    a = np.asarray(w)
    if a.size == 0:
        raise CalibrationError("channel_min_max: the tensor is empty, so it has no range")
    if axis is None:
        return a.min(), a.max()
    axis %= a.ndim
    others = tuple(i for i in range(a.ndim) if i != axis)
    return a.min(axis=others), a.max(axis=others)


# ---------------------------------------------------------------------------
# Scale and zero point


def asymmetric_qparams(rmin: ArrayLike, rmax: ArrayLike, qmin: int = -128, qmax: int = 127,
                       scheme: QParamScheme | str = QParamScheme.TFLITE) -> tuple[np.ndarray, np.ndarray]:
    """Scale (float32) and zero point (int64) covering ``[rmin, rmax]`` with 0 exact.

    Vectorised over per-channel ``rmin``/``rmax``. See the module docstring for the two
    schemes. With storage ranges symmetric about 0 (``qmin == -qmax``, narrow range) the
    ``tflite`` zero point comes from MLIR's double-precision nudging instead (it keeps
    the smaller-error end), as ``DownCastScale`` leaves it alone in that case.

    >>> asymmetric_qparams(-1.0, 3.0)
    (np.float32(0.015686275), np.int64(-64))
    """
    func = "asymmetric_qparams"
    _check_qrange(qmin, qmax, func)
    lo, hi = _ordered_range(rmin, rmax, func)
    steps = qmax - qmin
    if QParamScheme(scheme) is QParamScheme.ONNXRUNTIME:
        lo32 = np.minimum(lo.astype(np.float32), np.float32(0))
        hi32 = np.maximum(hi.astype(np.float32), np.float32(0))
        scale64 = (hi32.astype(np.float64) - lo32.astype(np.float64)) / float(steps)
        tiny = scale64 < _F32_TINY
        safe = np.where(tiny, 1.0, scale64)
        zp = round_half_even(np.clip(qmin - lo32.astype(np.float64) / safe, qmin, qmax))
        scale = np.where(tiny, np.float32(1.0), scale64.astype(np.float32))
        _check_scale(scale, func, "the range")
        return scalar_or_array(scale.astype(np.float32)), scalar_or_array(np.where(tiny, 0, zp))

    lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)
    small = (hi - lo) <= NEAR_ZERO_TOLERANCE  # ExpandVerySmallRange
    lo = np.where(small, np.minimum(lo, -_SMALLEST_HALF_RANGE), lo)
    hi = np.where(small, np.maximum(hi, _SMALLEST_HALF_RANGE), hi)
    with np.errstate(over="ignore"):
        scale = (hi.astype(np.float32) - lo.astype(np.float32)) / np.float32(steps)
    _check_scale(scale, func, "the range (too wide for float32?)")
    if qmax != -qmin:  # DownCastScale: zero point recomputed from the float32 scale
        zfm = (float(qmin) - lo / scale.astype(np.float64)).astype(np.float32)
        zp = round_half_away(np.clip(zfm, qmin, qmax))
    else:  # getNudgedScaleAndZeroPoint in double, kept by DownCastScale
        scale_d = (hi - lo) / float(steps)
        from_min, err_min = qmin - lo / scale_d, abs(qmin) + np.abs(lo / scale_d)
        from_max, err_max = qmax - hi / scale_d, abs(qmax) + np.abs(hi / scale_d)
        zp = round_half_away(np.clip(np.where(err_min < err_max, from_min, from_max), qmin, qmax))
    return scalar_or_array(scale), scalar_or_array(np.asarray(zp, dtype=np.int64))


def symmetric_weight_qparams(w: ArrayLike, axis: int | None = None, bits: int = 8, narrow_range: bool = True,
                             scheme: QParamScheme | str = QParamScheme.TFLITE,
                             signed: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric weight parameters per channel (``axis``) or per tensor (§3.2).

    ``amax = max(|min(w, 0)|, |max(w, 0)|)`` per channel.

    * ``tflite``: signed narrow range ``[-(2**(b-1) - 1), 2**(b-1) - 1]`` only (the
      converter refuses other symmetric types); ``scale = f32(2·amax / (2·qmax))`` in
      float32, i.e. ``amax / 127`` for int8; zero point 0. ``amax`` of 5e-7 or less is
      raised to 5e-7 (an all-zero channel gets scale ≈ 3.94e-9).
    * ``onnxruntime``: range ``[-127, 127]`` for int8 (``[0, 255]`` unsigned), scale
      ``f32(2·amax / (qmax - qmin))`` from float64, zero point ``rhe((qmin + qmax)/2)``
      (0, or 128 for uint8); a scale below float32 ``tiny`` gives ``(1.0, 0)``.

    For asymmetric int8/uint8 weights use :func:`channel_min_max` with
    :func:`asymmetric_qparams`.

    >>> scale, zp = symmetric_weight_qparams(np.array([[0.9921875, -0.5], [0.0, 0.0]], np.float32), axis=0)
    >>> scale[0] == 2**-7, f"{scale[1]:.4g}", zp
    (np.True_, '3.937e-09', array([0, 0]))
    """
    func = "symmetric_weight_qparams"
    a = _finite_f32(w, func, "w")
    wmin, wmax = channel_min_max(a, axis)
    # Exact in float64; the converter compares ranges with 1e-6 in double.
    amax = np.maximum(np.abs(np.minimum(wmin, 0)), np.abs(np.maximum(wmax, 0))).astype(np.float64)
    if QParamScheme(scheme) is QParamScheme.ONNXRUNTIME:
        qmin, qmax = (-(1 << (bits - 1)) + 1, (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        scale64 = 2.0 * amax / float(qmax - qmin)
        tiny = scale64 < _F32_TINY
        zp = int(round_half_even((qmin + qmax) / 2.0))
        scale = np.where(tiny, np.float32(1.0), scale64.astype(np.float32)).astype(np.float32)
        return scalar_or_array(scale), scalar_or_array(np.where(tiny, 0, zp).astype(np.int64))
    if not (signed and narrow_range):
        raise ValueError(f"{func}: the tflite scheme has symmetric weights only for signed narrow range; "
                         "use asymmetric_qparams for other storage ranges")
    qmax = (1 << (bits - 1)) - 1
    amax = np.where(2.0 * amax <= NEAR_ZERO_TOLERANCE, np.maximum(amax, _SMALLEST_HALF_RANGE), amax)
    with np.errstate(over="ignore"):
        scale = (amax.astype(np.float32) - (-amax).astype(np.float32)) / np.float32(2 * qmax)
    _check_scale(scale, func, "the weight range")
    return scalar_or_array(scale), scalar_or_array(np.zeros(np.shape(scale), dtype=np.int64))


def symmetric_activation_qparams(rmin: ArrayLike, rmax: ArrayLike, bits: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Legacy LiteRT symmetric activation parameters (``GetSymmetricQuantizationParams``, §3.5).

    Used for int16 activations (16x8 mode): ``scale = f32(amax) / f32(2**(bits-1) - 1)``
    in float32, zero point 0, where the range includes 0. LiteRT returns a zero scale for
    an all-zero range; here that raises :class:`~quantir.errors.CalibrationError`.
    """
    func = "symmetric_activation_qparams"
    lo, hi = _ordered_range(rmin, rmax, func)
    lo32 = np.minimum(lo.astype(np.float32), np.float32(0))
    hi32 = np.maximum(hi.astype(np.float32), np.float32(0))
    amax = np.maximum(np.abs(lo32), np.abs(hi32))
    scale = amax / np.float32((1 << (bits - 1)) - 1)
    if np.any(scale == 0):
        raise CalibrationError(f"{func}: the range is exactly 0, which gives a zero scale; "
                               "the tensor never took a nonzero value during calibration")
    _check_scale(scale, func, "the range")
    return scalar_or_array(scale), scalar_or_array(np.zeros(np.shape(scale), dtype=np.int64))


# ---------------------------------------------------------------------------
# Constants


def quantize_weights(w: ArrayLike, scale: ArrayLike, axis: int | None = None, zero_point: ArrayLike = 0,
                     qmin: int = -127, qmax: int = 127,
                     method: ConstantRounding | str = ConstantRounding.MLIR_FOLD) -> np.ndarray:
    """Quantize a float32 weight tensor to int64 values in ``[qmin, qmax]`` (§3.2).

    ``method`` names the rounding (:class:`ConstantRounding`); the default is the MLIR
    constant fold ``rha(double(w)/double(s) + zp)`` clamped to ±127. ``w`` is read as
    float32, as stored. At the tie ``w = 2.5·2**-7``, ``s = 2**-7``: ``mlir_fold`` and
    ``tflite_legacy`` give 3, ``onnxruntime`` gives 2.

    ``tflite_legacy`` is the per-channel legacy formula (``f32(1/double(s))`` as the
    reciprocal). The legacy *per-tensor* path (``PortableSymmetricQuantizeFloats``) uses
    ``f32(127 / amax)`` instead, which can differ by one ulp; it is not reproduced here.

    >>> (quantize_weights(np.float32(2.5 * 2**-7), np.float32(2**-7)),
    ...  quantize_weights(np.float32(2.5 * 2**-7), np.float32(2**-7), method="onnxruntime"))
    (np.int64(3), np.int64(2))
    """
    func = "quantize_weights"
    w32 = _finite_f32(w, func, "w")
    method = ConstantRounding(method)
    if method is ConstantRounding.MLIR_FOLD:
        if not np.any(np.asarray(zero_point)):
            # the symmetric case, with fewer full-size passes than the general quantize():
            # clamping before rounding is the same as after (integer bounds, monotone rounding)
            s = expand_params(_checked_scale(scale, func), w32.shape, axis, None, "scale").astype(np.float64)
            y = np.divide(w32, s, dtype=np.float64)
            y = np.clip(y, qmin, qmax, out=y if isinstance(y, np.ndarray) else None)
            return round_half_away(y)
        return quantize(w32, scale, zero_point, qmin, qmax, axis=axis, rounding=Rounding.HALF_AWAY,
                        divide_in="float64", zero_point_before_rounding=True)
    if method is ConstantRounding.ONNXRUNTIME:
        return quantize(w32, scale, zero_point, qmin, qmax, axis=axis, rounding=Rounding.HALF_EVEN,
                        divide_in="float32")
    if np.any(np.asarray(zero_point) != 0):
        raise ValueError(f"{func}: tflite_legacy quantizes symmetric weights only (zero point 0)")
    s = expand_params(np.asarray(scale, dtype=np.float32), w32.shape, axis, None, "scale").astype(np.float64)
    _check_scale(s, func, "the given scale")
    inverse = (1.0 / s).astype(np.float32)
    q = round_half_away(np.clip(w32 * inverse, qmin - 1, qmax + 1))
    return scalar_or_array(np.clip(q, qmin, qmax))


def bias_qparams(input_scale: ArrayLike, weight_scales: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Bias scale ``f32(double(s_in) · double(s_w[c]))`` and zero point 0 (§3.3).

    The double product of two float32 values is exact, so this equals the float32 product
    that ORT's tool computes. A product that underflows to 0 raises CalibrationError.
    """
    func = "bias_qparams"
    s_in = np.asarray(input_scale, dtype=np.float32)
    s_w = np.asarray(weight_scales, dtype=np.float32)
    with np.errstate(under="ignore", over="ignore"):
        scale = (s_in.astype(np.float64) * s_w.astype(np.float64)).astype(np.float32)
    _check_scale(scale, func, "input_scale · weight_scale")
    return scalar_or_array(scale), scalar_or_array(np.zeros(np.shape(scale), dtype=np.int64))


def quantize_bias(b: ArrayLike, scale: ArrayLike,
                  method: ConstantRounding | str = ConstantRounding.MLIR_FOLD,
                  on_overflow: Literal["warn", "raise", "saturate"] = "warn") -> np.ndarray:
    """Quantize a float32 bias to int32 values (returned as int64), zero point 0 (§3.3).

    ``scale`` broadcasts against ``b`` (per-channel or per-tensor). Rounding per
    :class:`ConstantRounding`: ``mlir_fold`` (default) ``rha(double(b)/double(s))``
    clamped to the int32 range; ``tflite_legacy`` ``rha(f32(b · f32(1/s)))`` clamped to
    ``±(2**31 - 1)``; ``onnxruntime`` ``rhe(double(b)/double(s))`` clipped to int32.

    Values that do not fit are saturated, never wrapped; ``on_overflow`` says whether that
    also warns (:class:`BiasOverflowWarning`, default), raises CalibrationError, or is silent.
    """
    func = "quantize_bias"
    if on_overflow not in ("warn", "raise", "saturate"):
        raise ValueError(f"{func}: on_overflow must be 'warn', 'raise' or 'saturate', found {on_overflow!r}")
    b32 = _finite_stats(np.asarray(b, dtype=np.float32), func, "bias").astype(np.float32)
    s = np.asarray(scale, dtype=np.float32)
    _check_scale(s, func, "the given scale")
    b32, s = np.broadcast_arrays(b32, s)
    method = ConstantRounding(method)
    lo, hi = INT32_MIN, INT32_MAX
    if method is ConstantRounding.TFLITE_LEGACY:
        lo = -INT32_MAX
        with np.errstate(over="ignore"):
            y = (b32 * (1.0 / s.astype(np.float64)).astype(np.float32)).astype(np.float64)
        y = np.nan_to_num(y, posinf=hi + 1.0, neginf=lo - 1.0)
        rounder = round_half_away
    else:
        y = b32.astype(np.float64) / s.astype(np.float64)
        rounder = round_half_even if method is ConstantRounding.ONNXRUNTIME else round_half_away
    q = np.asarray(rounder(np.clip(y, lo - 1.0, hi + 1.0)), dtype=np.int64)
    over = (q < lo) | (q > hi)
    if np.any(over):
        idx = np.flatnonzero(over)
        msg = (f"{func}: {idx.size} bias value(s) do not fit int32 at scale {s.ravel()[idx[0]]} "
               f"(first at flat index {int(idx[0])}: {b32.ravel()[idx[0]]} / scale = {y.ravel()[idx[0]]:.6g}); "
               f"saturated to [{lo}, {hi}]. The bias scale (input scale × weight scale) is too small, "
               "e.g. a weight channel that is all zeros")
        if on_overflow == "raise":
            raise CalibrationError(msg)
        if on_overflow == "warn":
            warnings.warn(msg, BiasOverflowWarning, stacklevel=2)
    return scalar_or_array(np.clip(q, lo, hi))
