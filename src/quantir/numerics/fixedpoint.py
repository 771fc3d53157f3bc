"""Fixed-point multipliers and the integer primitives of gemmlowp and LiteRT.

A real multiplier ``m`` is stored as ``(M, shift)`` with ``m ≈ M · 2**(shift - 31)`` and
``M`` in ``[2**30, 2**31)`` (docs/numerics.md §1). Kernels requantize an int32
accumulator with :func:`multiply_by_quantized_multiplier` (MBQM). Everything here is
integer arithmetic on int64 NumPy arrays, vectorised and broadcasting (a per-channel
``M``/``shift`` of shape ``(C,)`` against an accumulator of shape ``(..., C)``); Python
ints work too and give NumPy scalars back.

Rounding vocabulary (docs/numerics.md notation): *rhu* = round half up
(``floor(v + 1/2)``), *rha* = round half away from zero.

Contracts
---------
The C code leaves several inputs undefined (int32 overflow of ``x · 2**left``, shifts of
32 or more, results outside int32 that only a debug ``DCHECK`` catches). Here each such
case raises ``ValueError`` naming the function, the argument and the value, rather than
returning what one particular compiler happens to produce.

Double vs single rounding
-------------------------
Standard LiteRT/TFLite builds leave ``TFLITE_SINGLE_ROUNDING`` undefined and use
**double rounding** (:attr:`MultiplierRounding.DOUBLE`), the default everywhere here;
single rounding is an option for TFLM and vendor builds (§1.4).
"""
from __future__ import annotations

from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike

from quantir.numerics._validate import (
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    as_float64,
    as_int64,
    require_range,
    scalar_or_array,
)
from quantir.numerics.rounding import round_half_away

__all__ = [
    "MultiplierRounding",
    "quantize_multiplier",
    "quantize_multipliers",
    "quantize_multiplier_smaller_than_one_exp",
    "quantize_multiplier_greater_than_one",
    "downscale_multiplier_to_int16",
    "wrap_int32",
    "count_leading_zeros_32",
    "saturating_rounding_doubling_high_mul",
    "saturating_rounding_doubling_high_mul_16",
    "saturating_doubling_high_mul_16",
    "rounding_divide_by_pot",
    "saturating_left_shift",
    "multiply_by_quantized_multiplier",
    "multiply_by_quantized_multiplier_int64",
    "multiply_by_quantized_multiplier_smaller_than_one_exp",
    "multiply_by_quantized_multiplier_greater_than_one",
]


class MultiplierRounding(StrEnum):
    """Which MBQM a LiteRT build compiles (the ``TFLITE_SINGLE_ROUNDING`` macro)."""

    DOUBLE = "double"  # default builds: SRDHM (rhu at 2**-31) then RDBPOT (rha)
    SINGLE = "single"  # TFLITE_SINGLE_ROUNDING=1: one rhu in int64


# ---------------------------------------------------------------------------
# Real multiplier -> (M, shift)


def quantize_multipliers(m: ArrayLike, *, single_rounding: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised ``QuantizeMultiplier`` (``quantization_util.cc``): float64 array -> int64 ``(M, shift)``.

    Per element, following §1.1: ``(f, e) = frexp(m)``; ``M = rha(f · 2**31)``; if ``M``
    rounded up to ``2**31`` then ``M = 2**30`` and ``e += 1``; if ``e < -31`` the multiplier
    is flushed to ``(0, 0)``; with ``single_rounding`` (``TFLITE_SINGLE_ROUNDING`` builds)
    ``e > 30`` saturates to ``(2**31 - 1, 30)``. ``m == 0`` gives ``(0, 0)``. A negative
    ``m`` gives a negative ``M`` (only LEAKY_RELU meets it, and takes ``|M|``).

    ``m`` must be finite; pass the multiplier computed exactly as the kernel does
    (see :mod:`quantir.numerics.multipliers`), since one ulp can change ``M``.
    """
    mm = as_float64(m, "quantize_multipliers", "m")
    frac, exp = np.frexp(mm)
    big_m = np.asarray(round_half_away(frac * 2.0**31), dtype=np.int64)  # f·2**31 is exact
    shift = np.asarray(exp, dtype=np.int64)
    carried = big_m == (1 << 31)
    big_m = np.where(carried, 1 << 30, big_m)
    shift = np.where(carried, shift + 1, shift)
    flushed = (mm == 0.0) | (shift < -31)
    big_m = np.where(flushed, 0, big_m)
    shift = np.where(flushed, 0, shift)
    if single_rounding:
        saturated = shift > 30
        big_m = np.where(saturated, INT32_MAX, big_m)
        shift = np.where(saturated, 30, shift)
    return big_m, shift


def quantize_multiplier(m: float, *, single_rounding: bool = False) -> tuple[int, int]:
    """``QuantizeMultiplier`` for one real multiplier: returns Python ints ``(M, shift)``.

    >>> quantize_multiplier(0.75), quantize_multiplier(0.1), quantize_multiplier(2.0**-33)
    ((1610612736, 0), (1717986918, -3), (0, 0))
    """
    if np.ndim(m) != 0:
        raise ValueError("quantize_multiplier: m must be a scalar; use quantize_multipliers for arrays")
    big_m, shift = quantize_multipliers(m, single_rounding=single_rounding)
    return int(big_m), int(shift)


def quantize_multiplier_smaller_than_one_exp(m: float) -> tuple[int, int]:
    """``QuantizeMultiplierSmallerThanOneExp``: requires ``0 < m < 1``; returns ``shift <= 0``.

    The C function aborts (``TFLITE_CHECK``) outside that range; here it raises ValueError.
    """
    mf = float(m)
    if not 0.0 < mf < 1.0:
        raise ValueError(f"quantize_multiplier_smaller_than_one_exp: m must be in (0, 1), found {mf!r}")
    big_m, shift = quantize_multiplier(mf)
    if shift > 0:  # only reachable when m rounds up to 1.0 (frexp carry)
        raise ValueError(f"quantize_multiplier_smaller_than_one_exp: m={mf!r} rounds to a shift of {shift} > 0")
    return big_m, shift


def quantize_multiplier_greater_than_one(m: float, *, single_rounding: bool = False) -> tuple[int, int]:
    """``QuantizeMultiplierGreaterThanOne``: requires ``m > 1``; returns ``shift >= 0``.

    The C function aborts (``TFLITE_CHECK``) when ``m <= 1``; here it raises ValueError.
    """
    mf = float(m)
    if not mf > 1.0 or not np.isfinite(mf):
        raise ValueError(f"quantize_multiplier_greater_than_one: m must be finite and > 1, found {mf!r}")
    return quantize_multiplier(mf, single_rounding=single_rounding)


def downscale_multiplier_to_int16(big_m: ArrayLike) -> np.ndarray:
    """Int32 multiplier to Q0.15: ``(M + 2**15) >> 16``, saturating to 32767.

    Mirrors ``DownScaleInt32ToInt16Multiplier`` (``common.h``, HARD_SWISH) and the
    reduction inside the int64-input MBQM (``M < 0x7FFF0000 ? (M + 2**15) >> 16 : 0x7FFF``);
    the two thresholds give the same value for every ``M`` in ``[0, 2**31)``.

    >>> downscale_multiplier_to_int16([1 << 30, 2**31 - 1])
    array([16384, 32767])
    """
    a = as_int64(big_m, "downscale_multiplier_to_int16", "M")
    require_range(a, 0, INT32_MAX, "downscale_multiplier_to_int16", "M")
    return scalar_or_array(np.minimum((a + (1 << 15)) >> 16, INT16_MAX))


# ---------------------------------------------------------------------------
# Bit-level helpers


def wrap_int32(x: ArrayLike) -> np.ndarray:
    """Reduce integers modulo 2**32 into ``[-2**31, 2**31)``: two's-complement int32 wrap-around.

    Used for gemmlowp fixed-point ``+``/``-``, which are plain (wrapping) int32 operations.
    """
    a = as_int64(x, "wrap_int32", "x")
    return scalar_or_array(((a + (1 << 31)) & 0xFFFFFFFF) - (1 << 31))


def count_leading_zeros_32(x: ArrayLike) -> np.ndarray:
    """Leading zero bits of ``x`` read as uint32 (``CountLeadingZeros<uint32_t>``); 32 for 0.

    >>> count_leading_zeros_32([0, 1, 1 << 30, -1])
    array([32, 31,  1,  0])
    """
    u = as_int64(x, "count_leading_zeros_32", "x") & 0xFFFFFFFF
    length = np.zeros(u.shape, dtype=np.int64)
    for step in (16, 8, 4, 2, 1):  # binary search for the bit length, integers only
        high = u >= (1 << step)
        u = np.where(high, u >> step, u)
        length += np.where(high, step, 0)
    length += u > 0
    return scalar_or_array(32 - length)


# ---------------------------------------------------------------------------
# gemmlowp primitives


def saturating_rounding_doubling_high_mul(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` on int32 (ARM ``SQRDMULH``).

    ``floor((a·b + 2**30) / 2**31)`` with an exact int64 product, i.e. ``a·b/2**31``
    rounded half *up* (ties toward +inf, not away from zero: ``SRDHM(-3, 2**30) = -1``);
    ``SRDHM(INT32_MIN, INT32_MIN) = INT32_MAX``. The C code's sign-dependent nudge and
    truncating division is algebraically the same floor.
    """
    func = "saturating_rounding_doubling_high_mul"
    a64, b64 = as_int64(a, func, "a"), as_int64(b, func, "b")
    require_range(a64, INT32_MIN, INT32_MAX, func, "a")
    require_range(b64, INT32_MIN, INT32_MAX, func, "b")
    high = (a64 * b64 + (1 << 30)) >> 31
    overflow = (a64 == INT32_MIN) & (b64 == INT32_MIN)
    return scalar_or_array(np.where(overflow, INT32_MAX, high))


def saturating_rounding_doubling_high_mul_16(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """The int16 ``SaturatingRoundingDoublingHighMul``: ``floor((a·b + 2**14) / 2**15)``.

    Saturates ``INT16_MIN · INT16_MIN`` to ``INT16_MAX``. Used by HARD_SWISH (§2.14).
    """
    func = "saturating_rounding_doubling_high_mul_16"
    a64, b64 = as_int64(a, func, "a"), as_int64(b, func, "b")
    require_range(a64, INT16_MIN, INT16_MAX, func, "a")
    require_range(b64, INT16_MIN, INT16_MAX, func, "b")
    high = (a64 * b64 + (1 << 14)) >> 15
    overflow = (a64 == INT16_MIN) & (b64 == INT16_MIN)
    return scalar_or_array(np.where(overflow, INT16_MAX, high))


def saturating_doubling_high_mul_16(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """The *non-rounding* int16 high multiply of ``reference/hard_swish.h``.

    ``(a·b) / 2**15`` with C truncating division (toward zero); ``INT16_MIN · INT16_MIN``
    saturates to ``INT16_MAX``.
    """
    func = "saturating_doubling_high_mul_16"
    a64, b64 = as_int64(a, func, "a"), as_int64(b, func, "b")
    require_range(a64, INT16_MIN, INT16_MAX, func, "a")
    require_range(b64, INT16_MIN, INT16_MAX, func, "b")
    prod = a64 * b64
    trunc = np.where(prod < 0, -((-prod) >> 15), prod >> 15)
    overflow = (a64 == INT16_MIN) & (b64 == INT16_MIN)
    return scalar_or_array(np.where(overflow, INT16_MAX, trunc))


def rounding_divide_by_pot(x: ArrayLike, exponent: ArrayLike) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: ``x / 2**exponent`` rounded half away from zero.

    ``mask = 2**e - 1``, ``rem = x & mask``, ``thr = (mask >> 1) + (x < 0)``,
    result ``(x >> e) + (rem > thr)``. ``exponent`` broadcasts against ``x`` (per-channel
    shifts). gemmlowp asserts ``0 <= e <= 31`` for int32 ``x``; this port accepts int64
    ``x`` and ``e`` up to 62, where the same formula is still rha(x / 2**e).

    >>> rounding_divide_by_pot([-3, 3, -6], [1, 1, 2])
    array([-2,  2, -2])
    """
    func = "rounding_divide_by_pot"
    x64, e = as_int64(x, func, "x"), as_int64(exponent, func, "exponent")
    require_range(e, 0, 62, func, "exponent")
    mask = np.left_shift(np.int64(1), e) - 1
    remainder = x64 & mask
    threshold = (mask >> 1) + (x64 < 0)
    return scalar_or_array((x64 >> e) + (remainder > threshold))


def saturating_left_shift(x: ArrayLike, shift: ArrayLike, bits: int = 32) -> np.ndarray:
    """``x · 2**shift`` clamped to the signed ``bits``-wide range.

    Equals gemmlowp ``SaturatingRoundingMultiplyByPOT`` for a positive exponent (used by
    ``Rescale``) and ``SaturatingLeftShift`` of ``reference/hard_swish.h`` (``bits=16``).
    ``x`` must fit the ``bits``-wide type and ``0 <= shift < bits``.
    """
    func = "saturating_left_shift"
    if bits not in (16, 32):
        raise ValueError(f"{func}: bits must be 16 or 32, found {bits}")
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    x64, s = as_int64(x, func, "x"), as_int64(shift, func, "shift")
    require_range(x64, lo, hi, func, "x")
    require_range(s, 0, bits - 1, func, "shift")
    return scalar_or_array(np.clip(x64 << s, lo, hi))


# ---------------------------------------------------------------------------
# MultiplyByQuantizedMultiplier and its helpers


def _mbqm_args(func: str, x: ArrayLike, big_m: ArrayLike, shift: ArrayLike):
    x64, m64, s64 = as_int64(x, func, "x"), as_int64(big_m, func, "M"), as_int64(shift, func, "shift")
    require_range(x64, INT32_MIN, INT32_MAX, func, "x")
    require_range(m64, 0, INT32_MAX, func, "M")
    return x64, m64, s64


def _shift_left_int32(x64: np.ndarray, left: np.ndarray, func: str) -> np.ndarray:
    """``x · 2**left`` that must fit int32 (LiteRT computes it in int32, no saturation)."""
    shifted = x64 << left
    if shifted.size and (shifted.min() < INT32_MIN or shifted.max() > INT32_MAX):
        bad = shifted.min() if shifted.min() < INT32_MIN else shifted.max()
        raise ValueError(
            f"{func}: x·2**shift = {int(bad)} overflows int32 (undefined behaviour in LiteRT); "
            "the accumulator or the multiplier is out of the kernel's range"
        )
    return shifted


def _mbqm_single(x64: np.ndarray, m64: np.ndarray, s64: np.ndarray, func: str) -> np.ndarray:
    total = 31 - s64
    out = (x64 * m64 + np.left_shift(np.int64(1), total - 1)) >> total
    require_range(out, INT32_MIN, INT32_MAX, func, "result (TFLITE_DCHECK)")
    return out


def multiply_by_quantized_multiplier(
    x: ArrayLike, big_m: ArrayLike, shift: ArrayLike, rounding: MultiplierRounding | str = "double"
) -> np.ndarray:
    """LiteRT ``MultiplyByQuantizedMultiplier(int32 x, M, shift)`` (``common.cc``), §1.4.

    * ``double`` (default build): ``RDBPOT(SRDHM(x · 2**left, M), right)`` with
      ``left = max(shift, 0)``, ``right = max(-shift, 0)`` — rhu at the 2**31 scale, then
      rha at ``2**right``. ``x · 2**left`` must fit int32.
    * ``single`` (``TFLITE_SINGLE_ROUNDING``): ``(x·M + 2**(t-1)) >> t`` with
      ``t = 31 - shift`` in int64 — one rhu.

    ``x`` is int32, ``M`` in ``[0, 2**31)``, ``shift`` in ``[-31, 30]``; ``M``/``shift``
    broadcast against ``x``. Returns int64 (int32 values).

    >>> (multiply_by_quantized_multiplier(1, (1 << 30) + 1, -1),
    ...  multiply_by_quantized_multiplier(1, (1 << 30) + 1, -1, "single"))
    (np.int64(1), np.int64(0))
    """
    func = "multiply_by_quantized_multiplier"
    x64, m64, s64 = _mbqm_args(func, x, big_m, shift)
    require_range(s64, -31, 30, func, "shift")
    if MultiplierRounding(rounding) is MultiplierRounding.SINGLE:
        return scalar_or_array(_mbqm_single(x64, m64, s64, func))
    left = np.maximum(s64, 0)
    right = np.maximum(-s64, 0)
    high = saturating_rounding_doubling_high_mul(_shift_left_int32(x64, left, func), m64)
    return rounding_divide_by_pot(high, right)


def multiply_by_quantized_multiplier_int64(x: ArrayLike, big_m: ArrayLike, shift: ArrayLike) -> np.ndarray:
    """LiteRT ``MultiplyByQuantizedMultiplier(int64 x, M, shift)`` (§1.5; same in both builds).

    ``M16 = M < 0x7FFF0000 ? (M + 2**15) >> 16 : 0x7FFF``, ``t = 15 - shift``,
    result ``(x·M16 + 2**(t-1)) >> t`` (one rhu at 15-bit multiplier precision).
    Requires ``|x| < 2**47``, ``M`` in ``[0, 2**31)``, ``shift`` in ``[-31, 7]``, and a
    result that fits int32. Used by the 16x8 paths with int64 accumulators.
    """
    func = "multiply_by_quantized_multiplier_int64"
    x64, m64, s64 = as_int64(x, func, "x"), as_int64(big_m, func, "M"), as_int64(shift, func, "shift")
    require_range(x64, -(1 << 47), (1 << 47) - 1, func, "x")
    require_range(m64, 0, INT32_MAX, func, "M")
    require_range(s64, -31, 7, func, "shift")
    m16 = np.where(m64 < 0x7FFF0000, (m64 + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - s64
    out = (x64 * m16 + np.left_shift(np.int64(1), total - 1)) >> total
    require_range(out, INT32_MIN, INT32_MAX, func, "result (TFLITE_DCHECK)")
    return scalar_or_array(out)


def multiply_by_quantized_multiplier_smaller_than_one_exp(
    x: ArrayLike, big_m: ArrayLike, shift: ArrayLike, rounding: MultiplierRounding | str = "double"
) -> np.ndarray:
    """``MultiplyByQuantizedMultiplierSmallerThanOneExp`` (``common.h``); ``shift <= 0``.

    Double build: ``RDBPOT(SRDHM(x, M), -shift)``. Single build: plain single-rounding MBQM.
    Used by ADD/SUB (§2.4).
    """
    func = "multiply_by_quantized_multiplier_smaller_than_one_exp"
    x64, m64, s64 = _mbqm_args(func, x, big_m, shift)
    require_range(s64, -31, 0, func, "shift")
    if MultiplierRounding(rounding) is MultiplierRounding.SINGLE:
        return scalar_or_array(_mbqm_single(x64, m64, s64, func))
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x64, m64), -s64)


def multiply_by_quantized_multiplier_greater_than_one(
    x: ArrayLike, big_m: ArrayLike, shift: ArrayLike, rounding: MultiplierRounding | str = "double"
) -> np.ndarray:
    """``MultiplyByQuantizedMultiplierGreaterThanOne`` (``common.h``); ``shift >= 0``.

    Double build: ``SRDHM(x · 2**shift, M)`` (``x · 2**shift`` must fit int32). Single
    build: plain single-rounding MBQM. Used by SOFTMAX (§2.12) and SUB with ``mo > 1``.
    """
    func = "multiply_by_quantized_multiplier_greater_than_one"
    x64, m64, s64 = _mbqm_args(func, x, big_m, shift)
    require_range(s64, 0, 30, func, "shift")
    if MultiplierRounding(rounding) is MultiplierRounding.SINGLE:
        return scalar_or_array(_mbqm_single(x64, m64, s64, func))
    return saturating_rounding_doubling_high_mul(_shift_left_int32(x64, s64, func), m64)
