"""gemmlowp's fixed-point logistic and tanh on **int16** raw values (the integer LSTM's gates).

LiteRT's full-integer LSTM (``lstm_eval.cc``, 8x8_16 path) evaluates its gates with
``tensor_utils::ApplySigmoid`` / ``ApplyTanh`` (``reference/portable_tensor_utils.cc``), which
call gemmlowp's generic ``logistic`` and ``tanh`` (``fixedpoint/fixedpoint.h``) instantiated on
``FixedPoint<int16_t, I>``: a raw int16 ``r`` standing for ``r / 2**(15 - I)``. The algorithm is
the one of the int32 functions in :mod:`quantir.numerics.gemmlowp`; what the 16-bit instantiation
changes, and this module reproduces:

* every ``+``/``-``/unary ``-`` returns ``int16_t`` and wraps (:func:`wrap_int16`), except the
  final add of the exp polynomial, ``AddSaturatingIf16Bit``, which saturates for int16;
* ``a * b`` is the int16 ``SaturatingRoundingDoublingHighMul``
  (:func:`~quantir.numerics.saturating_rounding_doubling_high_mul_16`);
* ``Rescale`` to fewer integer bits is a saturating int16 left shift;
* the constants are written in gemmlowp as int32 raw values and cut to int16 by
  ``RescaleConstantInitializer`` (:func:`rescale_constant_16`): ``int16(RDBPOT(c, 16))``;
* ``One()`` of a format with no integer bits is 32767, of Q``I`` with ``I > 0`` it is
  ``2**(15 - I)``.

Raw values are int64 NumPy arrays holding int16 values; the functions are vectorised. A function
of one int16 value, they are cheap to tabulate over all 65,536 inputs (the LSTM kernel does).
Tested against the real functions and a scalar C-style port in ``tests/numerics/test_gemmlowp16.py``.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from quantir.numerics._validate import INT16_MAX, INT16_MIN, as_int64, require_range, scalar_or_array
from quantir.numerics.fixedpoint import (
    rounding_divide_by_pot,
    saturating_left_shift,
    saturating_rounding_doubling_high_mul_16 as _mul,
)
# gemmlowp's int32 raw constants, cut to int16 where they are used (rescale_constant_16)
from quantir.numerics.gemmlowp import (  # noqa: F401  (the same constants in both widths)
    _EXP_BARREL,
    _EXP_MINUS_ONE_EIGHTH,
    _FORTY_EIGHT_OVER_SEVENTEEN,
    _MINUS_THIRTY_TWO_OVER_SEVENTEEN,
    _ONE_THIRD,
    rounding_half_sum,
)
from quantir.numerics.rounding import saturate

__all__ = [
    "wrap_int16",
    "rescale_constant_16",
    "rescale_16",
    "exp_on_interval_between_negative_one_quarter_and_0_excl_16",
    "exp_on_negative_values_16",
    "one_over_one_plus_x_for_x_in_0_1_16",
    "one_minus_x_over_one_plus_x_for_x_in_0_1_16",
    "logistic_16",
    "tanh_16",
]

_ONE_HALF = 1 << 30  # 0.5, Q0.31


def wrap_int16(x: ArrayLike) -> np.ndarray:
    """``static_cast<int16_t>`` of an integer: reduce modulo 2**16 into ``[-2**15, 2**15)``.

    The int16 gemmlowp operators (``Add``, ``Sub``, ``Neg`` on ``int16_t``) compute in ``int`` and
    convert the result back to ``int16_t``; GCC and Clang wrap (two's complement).

    >>> wrap_int16([32768, -32769, 100])
    array([-32768,  32767,    100])
    """
    a = as_int64(x, "wrap_int16", "x")
    return scalar_or_array(((a + (1 << 15)) & 0xFFFF) - (1 << 15))


def rescale_constant_16(int32_value: int) -> int:
    """gemmlowp ``RescaleConstantInitializer<FixedPoint<int16_t, I>>``: an int32 raw constant cut
    to int16, ``static_cast<int16_t>(RoundingDivideByPOT(c, 16))`` (rounding half away from zero).

    >>> rescale_constant_16(1 << 30), rescale_constant_16(1895147668)
    (16384, 28918)
    """
    return int(wrap_int16(rounding_divide_by_pot(int(int32_value), 16)))


def _raw16(x: ArrayLike, func: str) -> np.ndarray:
    a = as_int64(x, func, "x")
    require_range(a, INT16_MIN, INT16_MAX, func, "x")
    return a


def _check_integer_bits(bits: int, func: str, hi: int = 14) -> None:
    if not 0 <= bits <= hi:
        raise ValueError(f"{func}: integer bits must be in [0, {hi}], found {bits}")


def rescale_16(x: ArrayLike, src_integer_bits: int, dst_integer_bits: int) -> np.ndarray:
    """gemmlowp ``Rescale<dst>`` of a raw int16 Q``src``: fewer integer bits is a saturating left shift
    (``SaturatingRoundingMultiplyByPOT`` with a positive exponent), more is ``RoundingDivideByPOT``."""
    func = "rescale_16"
    _check_integer_bits(src_integer_bits, func)
    _check_integer_bits(dst_integer_bits, func)
    a = _raw16(x, func)
    exponent = src_integer_bits - dst_integer_bits
    if exponent > 0:
        return saturating_left_shift(a, exponent, bits=16)
    if exponent < 0:
        return rounding_divide_by_pot(a, -exponent)
    return scalar_or_array(a)


def _add_saturating(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``AddSaturatingIf16Bit`` for int16: the sum clamped to the int16 range."""
    return saturate(a + b, INT16_MIN, INT16_MAX)


def exp_on_interval_between_negative_one_quarter_and_0_excl_16(a: ArrayLike) -> np.ndarray:
    """``exp(a)`` for a raw int16 Q0.15 ``a`` in [-1/4, 0); result Q0.15.

    gemmlowp's Taylor expansion around -1/8 in its operation order, with ``x = a + 1/8``:
    ``exp(-1/8) +sat exp(-1/8)·(x + RDBPOT(((RDBPOT(x⁴, 2) + x³)·(1/3) + x²), 1))``; the inner sums
    wrap as int16, the last one saturates (``AddSaturatingIf16Bit``).
    """
    a = _raw16(a, "exp_on_interval_between_negative_one_quarter_and_0_excl_16")
    constant_term = rescale_constant_16(_EXP_MINUS_ONE_EIGHTH)
    one_third = rescale_constant_16(_ONE_THIRD)
    x = wrap_int16(a + (1 << 12))  # + ConstantPOT<-3>: 1/8 in Q0.15
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    inner = wrap_int16(_mul(wrap_int16(x4_over_4 + x3), one_third) + x2)
    poly = rounding_divide_by_pot(inner, 1)
    return _add_saturating(np.int64(constant_term), _mul(constant_term, wrap_int16(x + poly)))


def exp_on_negative_values_16(a: ArrayLike, integer_bits: int) -> np.ndarray:
    """gemmlowp ``exp_on_negative_values`` on a raw int16 Q``integer_bits`` ``a <= 0``; result Q0.15.

    ``a`` is split into ``(a mod 1/4) - 1/4``, evaluated by
    :func:`exp_on_interval_between_negative_one_quarter_and_0_excl_16`, and a remainder whose bits
    select the barrel-shifter factors ``exp(-2**k)`` (k = -2..4, those with ``k < integer_bits``).
    With more than 5 integer bits, ``a < -32`` gives 0; ``a == 0`` gives 32767 (``One()``).
    """
    func = "exp_on_negative_values_16"
    _check_integer_bits(integer_bits, func, hi=13)  # ConstantPOT<-2> needs 15 - I - 2 >= 0
    a = _raw16(a, func)
    fractional_bits = 15 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_quarter = wrap_int16((a & (one_quarter - 1)) - one_quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl_16(
        rescale_16(a_mod_quarter_minus_quarter, integer_bits, 0))
    remainder = wrap_int16(a_mod_quarter_minus_quarter - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (fractional_bits + exponent)
            result = np.where((remainder & bit) != 0, _mul(result, rescale_constant_16(multiplier)), result)
    if integer_bits > 5:
        clamp = rescale_constant_16(-(1 << (36 - integer_bits)))  # -32 in Q(integer_bits)
        result = np.where(a < clamp, 0, result)
    return scalar_or_array(np.where(a == 0, INT16_MAX, result))


def _newton_reciprocal_half(half_denominator: np.ndarray) -> np.ndarray:
    """The Newton-Raphson loop shared by the two divisions: ``x ≈ 1/d`` in Q2.13 for ``d`` in
    Q0.15, ``x = 48/17 - 32/17·d`` then three steps ``x += Rescale<2>(x·(1 - d·x))``."""
    one_q2 = 1 << 13  # F2::One()
    x = wrap_int16(rescale_constant_16(_FORTY_EIGHT_OVER_SEVENTEEN)
                   + _mul(half_denominator, rescale_constant_16(_MINUS_THIRTY_TWO_OVER_SEVENTEEN)))
    for _ in range(3):
        one_minus_dx = wrap_int16(one_q2 - _mul(half_denominator, x))  # Q2.13
        x = wrap_int16(x + rescale_16(_mul(x, one_minus_dx), 4, 2))  # Q4 product back to Q2
    return x


def one_over_one_plus_x_for_x_in_0_1_16(a: ArrayLike) -> np.ndarray:
    """gemmlowp ``one_over_one_plus_x_for_x_in_0_1`` on raw int16 Q0.15: ``1 / (1 + a)``, Q0.15.

    ``d = RoundingHalfSum(a, One())``, the Newton-Raphson reciprocal of ``d`` in Q2.13, then
    ``Rescale<0>(ExactMulByPot<-1>(x))`` (the raw ``x`` read as Q1, saturating left shift by 1).
    """
    a = _raw16(a, "one_over_one_plus_x_for_x_in_0_1_16")
    x = _newton_reciprocal_half(rounding_half_sum(a, INT16_MAX))
    return rescale_16(x, 1, 0)


def one_minus_x_over_one_plus_x_for_x_in_0_1_16(a: ArrayLike) -> np.ndarray:
    """gemmlowp ``one_minus_x_over_one_plus_x_for_x_in_0_1`` on raw int16 Q0.15: ``(1 - a) / (1 + a)``.

    The same reciprocal as :func:`one_over_one_plus_x_for_x_in_0_1_16`, then ``Rescale<0>(x - One())``
    from Q2.13 (a saturating left shift by 2).
    """
    a = _raw16(a, "one_minus_x_over_one_plus_x_for_x_in_0_1_16")
    x = _newton_reciprocal_half(rounding_half_sum(a, INT16_MAX))
    return rescale_16(wrap_int16(x - (1 << 13)), 2, 0)


def logistic_16(a: ArrayLike, integer_bits: int) -> np.ndarray:
    """gemmlowp ``logistic`` of a raw int16 Q``integer_bits``; result Q0.15 (``ApplySigmoid`` uses Q3.12).

    For ``a > 0``: ``1 / (1 + exp(-a))`` via :func:`exp_on_negative_values_16` and
    :func:`one_over_one_plus_x_for_x_in_0_1_16`; for ``a < 0``: ``One() - logistic(-a)`` (int16 wrap;
    ``-(-32768)`` wraps to -32768 as in C); ``a == 0`` gives 1/2 (16384).
    """
    func = "logistic_16"
    _check_integer_bits(integer_bits, func, hi=13)
    a = _raw16(a, func)
    positive = a > 0
    abs_input = np.where(positive, a, wrap_int16(-a))
    if_positive = one_over_one_plus_x_for_x_in_0_1_16(exp_on_negative_values_16(wrap_int16(-abs_input),
                                                                                 integer_bits))
    if_negative = wrap_int16(INT16_MAX - if_positive)
    one_half = rescale_constant_16(_ONE_HALF)
    return scalar_or_array(np.where(a == 0, one_half, np.where(positive, if_positive, if_negative)))


def tanh_16(a: ArrayLike, integer_bits: int) -> np.ndarray:
    """gemmlowp ``tanh`` of a raw int16 Q``integer_bits``; result Q0.15 (``ApplyTanh(integer_bits)``).

    ``n = -|a|`` (int16 wrap), ``t = (1 - e) / (1 + e)`` with ``e = exp(2n)`` evaluated as the same raw
    value read with one more integer bit (``ExactMulByPot<1>``); the result is ``-t`` for ``a < 0``,
    ``t`` for ``a > 0`` and 0 for ``a == 0``.
    """
    func = "tanh_16"
    _check_integer_bits(integer_bits, func, hi=12)
    a = _raw16(a, func)
    negative = a < 0
    n = np.where(negative, a, wrap_int16(-a))
    t = one_minus_x_over_one_plus_x_for_x_in_0_1_16(exp_on_negative_values_16(n, integer_bits + 1))
    return scalar_or_array(np.where(a == 0, 0, np.where(negative, wrap_int16(-t), t)))
