"""gemmlowp fixed-point transcendentals, and the LiteRT helpers built on them.

A gemmlowp ``FixedPoint<int32, I>`` is a raw int32 ``r`` standing for ``r / 2**(31 - I)``
(``I`` integer bits, ``31 - I`` fractional bits; "Q``I``.``31-I``"). Its arithmetic, as
in ``fixedpoint/fixedpoint.h``:

* ``a + b`` and ``a - b`` are plain int32 operations that wrap (:func:`wrap_int32`);
* ``a * b`` is :func:`saturating_rounding_doubling_high_mul` and *adds* integer bits
  (Q``Ia`` × Q``Ib`` is Q``Ia+Ib``);
* :func:`rescale` changes the number of integer bits, saturating or rounding.

Here raw values are int64 NumPy arrays holding int32 values, so every function is
vectorised. The functions are ports written from reading gemmlowp ``fixedpoint.h`` and
LiteRT ``common.h`` / ``quantization_util.cc``; the names match the C++ ones so the int8
SOFTMAX (§2.12) and L2_NORMALIZATION (§2.19) reference kernels read line for line.

Constants (raw int32 values, as in gemmlowp):

* ``exp(-1/8)`` = 1895147668 and ``1/3`` = 715827883 in Q0.31;
* ``exp(-2**k)`` for k = -2..4 = 1672461947, 1302514674, 790015084, 290630308,
  39332535, 720401, 242 in Q0.31;
* ``48/17`` = 1515870810 and ``-32/17`` = -1010580540 in Q2.29;
* ``sqrt(2)/2`` = 1518500250 in Q0.31; ``3/2`` = 2**28 + 2**27 in Q3.28.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from quantir.numerics._validate import INT32_MAX, INT32_MIN, as_int64, require_range, scalar_or_array
from quantir.numerics.fixedpoint import (
    count_leading_zeros_32,
    quantize_multiplier_greater_than_one,
    rounding_divide_by_pot,
    saturating_left_shift,
    saturating_rounding_doubling_high_mul as _mul,
    wrap_int32,
)

__all__ = [
    "rescale",
    "rounding_half_sum",
    "exp_on_interval_between_negative_one_quarter_and_0_excl",
    "exp_on_negative_values",
    "one_over_one_plus_x_for_x_in_0_1",
    "get_reciprocal",
    "get_inv_sqrt_quantized_multiplier_exp",
    "preprocess_softmax_scaling",
    "calculate_input_radius",
]

_EXP_MINUS_ONE_EIGHTH = 1895147668  # exp(-1/8), Q0.31
_ONE_THIRD = 715827883  # 1/3, Q0.31
# exp(-2**k) in Q0.31, for the barrel shifter of exp_on_negative_values.
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))
_FORTY_EIGHT_OVER_SEVENTEEN = 1515870810  # 48/17, Q2.29
_MINUS_THIRTY_TWO_OVER_SEVENTEEN = -1010580540  # -32/17, Q2.29
_HALF_SQRT_TWO = 1518500250  # sqrt(2)/2, Q0.31


def _raw(x: ArrayLike, func: str) -> np.ndarray:
    a = as_int64(x, func, "x")
    require_range(a, INT32_MIN, INT32_MAX, func, "x")
    return a


def _add(a, b):
    return wrap_int32(a + b)


def _sub(a, b):
    return wrap_int32(a - b)


def _check_integer_bits(bits: int, func: str) -> None:
    if not 0 <= bits <= 30:
        raise ValueError(f"{func}: integer bits must be in [0, 30], found {bits}")


def rescale(x: ArrayLike, src_integer_bits: int, dst_integer_bits: int) -> np.ndarray:
    """gemmlowp ``Rescale<dst>`` of a Q``src`` raw value: same real value, Q``dst`` format.

    More integer bits: :func:`rounding_divide_by_pot` (rha). Fewer: saturating left shift.
    """
    func = "rescale"
    _check_integer_bits(src_integer_bits, func)
    _check_integer_bits(dst_integer_bits, func)
    a = _raw(x, func)
    exponent = src_integer_bits - dst_integer_bits
    if exponent > 0:
        return saturating_left_shift(a, exponent)
    if exponent < 0:
        return rounding_divide_by_pot(a, -exponent)
    return scalar_or_array(a)


def rounding_half_sum(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """gemmlowp ``RoundingHalfSum`` (ARM ``VRHADD``): ``(a + b) / 2`` rounded half away from zero.

    C: ``sum = a + b`` in int64, ``(sum + sign(sum)) / 2`` with truncating division, where
    ``sign(0) = 1``.
    """
    func = "rounding_half_sum"
    s = _raw(a, func) + _raw(b, func)
    t = s + np.where(s >= 0, 1, -1)
    return scalar_or_array(np.where(t >= 0, t >> 1, -((-t) >> 1)))


def exp_on_interval_between_negative_one_quarter_and_0_excl(a: ArrayLike) -> np.ndarray:
    """``exp(a)`` for a Q0.31 ``a`` in [-1/4, 0); result Q0.31.

    Taylor expansion around -1/8 to the 4th order, in the exact operation order of
    gemmlowp: with ``x = a + 1/8``,
    ``exp(-1/8) + exp(-1/8)·(x + RDBPOT(((RDBPOT(x⁴, 2) + x³)·(1/3) + x²), 1))``.
    """
    a = _raw(a, "exp_on_interval_between_negative_one_quarter_and_0_excl")
    x = _add(a, 1 << 28)  # + 1/8 in Q0.31
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(_add(_mul(_add(x4_over_4, x3), _ONE_THIRD), x2), 1)
    return _add(_EXP_MINUS_ONE_EIGHTH, _mul(_EXP_MINUS_ONE_EIGHTH, _add(x, poly)))


def exp_on_negative_values(a: ArrayLike, integer_bits: int) -> np.ndarray:
    """gemmlowp ``exp_on_negative_values``: ``exp(a)`` for a Q``integer_bits`` ``a <= 0``; result Q0.31.

    Splits ``a`` into ``a mod 1/4 - 1/4`` (evaluated by the Taylor polynomial) and a
    remainder whose bits select the barrel-shifter factors ``exp(-2**k)``. For more than
    5 integer bits, ``a < -32`` gives 0; ``a == 0`` gives ``INT32_MAX`` (one in Q0.31).
    The SOFTMAX kernel calls it with 5 integer bits (Q5.26).
    """
    func = "exp_on_negative_values"
    if not 0 <= integer_bits <= 29:  # 1/4 must be representable: ConstantPOT<-2>
        raise ValueError(f"{func}: integer_bits must be in [0, 29], found {integer_bits}")
    a = _raw(a, func)
    fractional_bits = 31 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    a_mod_quarter_minus_quarter = _sub(a & (one_quarter - 1), one_quarter)
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        rescale(a_mod_quarter_minus_quarter, integer_bits, 0))
    remainder = _sub(a_mod_quarter_minus_quarter, a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (fractional_bits + exponent)
            result = np.where((remainder & bit) != 0, _mul(result, multiplier), result)
    if integer_bits > 5:
        clamp = -(1 << (36 - integer_bits))  # -32 in Q(integer_bits)
        result = np.where(a < clamp, 0, result)
    return scalar_or_array(np.where(a == 0, INT32_MAX, result))


def one_over_one_plus_x_for_x_in_0_1(a: ArrayLike) -> np.ndarray:
    """gemmlowp ``one_over_one_plus_x_for_x_in_0_1``: ``1 / (1 + a)`` for a Q0.31 ``a`` in [0, 1).

    Newton-Raphson division on ``d = (1 + a) / 2`` in Q2.29: start
    ``x = 48/17 - 32/17·d``, then three steps ``x += Rescale<2>(x·(1 - d·x))``; the
    result ``x / 2`` is returned in Q0.31.
    """
    a = _raw(a, "one_over_one_plus_x_for_x_in_0_1")
    half_denominator = rounding_half_sum(a, INT32_MAX)  # (a + one) / 2, Q0.31
    x = _add(_FORTY_EIGHT_OVER_SEVENTEEN, _mul(half_denominator, _MINUS_THIRTY_TWO_OVER_SEVENTEEN))
    one_q2 = 1 << 29
    for _ in range(3):
        one_minus_dx = _sub(one_q2, _mul(half_denominator, x))  # Q2.29
        x = _add(x, rescale(_mul(x, one_minus_dx), 4, 2))  # Q4 product back to Q2
    return rescale(x, 1, 0)  # ExactMulByPot<-1>: Q2 raw read as Q1, then Rescale<0>


def get_reciprocal(x: ArrayLike, x_integer_digits: int) -> tuple[np.ndarray, np.ndarray]:
    """LiteRT ``GetReciprocal`` (``common.h``): ``1/x`` for a positive Q``x_integer_digits`` ``x``.

    Returns ``(recip, num_bits_over_unit)``: ``x`` is normalised to ``1 + f`` with ``f`` in
    [0, 1) by a left shift of ``clz(x)`` bits, ``recip = 1/(1 + f)`` in Q0.31, and
    ``num_bits_over_unit = x_integer_digits - clz(x)``, so that
    ``1/x ≈ recip · 2**-num_bits_over_unit``. SOFTMAX calls it with the Q12.19 sum of
    exponentials and 12 integer digits.
    """
    func = "get_reciprocal"
    xs = _raw(x, func)
    if xs.size and int(xs.min()) <= 0:
        raise ValueError(f"{func}: x must be positive, found {int(xs.min())}")
    headroom_plus_one = count_leading_zeros_32(xs)
    num_bits_over_unit = x_integer_digits - headroom_plus_one
    shifted_minus_one = ((xs << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31)  # uint32 arithmetic
    return one_over_one_plus_x_for_x_in_0_1(shifted_minus_one), scalar_or_array(np.asarray(num_bits_over_unit))


def get_inv_sqrt_quantized_multiplier_exp(x: ArrayLike, reverse_shift: int) -> tuple[np.ndarray, np.ndarray]:
    """LiteRT ``GetInvSqrtQuantizedMultiplierExp`` (``common.h``): ``1/sqrt(x)`` as ``(M, shift)``.

    For ``x <= 1`` returns ``(INT32_MAX, 0)``. Otherwise ``x`` is brought into
    [2**27, 2**29) by dividing by 4 / shifting by bit pairs (tracking ``shift``, which
    starts at 11), five Newton-Raphson steps for ``1/sqrt`` run in Q3.28, the result is
    multiplied by ``sqrt(2)/2``; a negative ``shift`` is folded into ``M`` by a left shift,
    and finally ``shift *= reverse_shift``. L2_NORMALIZATION passes ``reverse_shift = -1``.
    """
    func = "get_inv_sqrt_quantized_multiplier_exp"
    xs = _raw(x, func)
    if xs.size and int(xs.min()) < 0:
        raise ValueError(f"{func}: x must be non-negative, found {int(xs.min())}")
    trivial = xs <= 1
    inp = np.where(trivial, 2, xs)  # any value > 1: these lanes are overwritten below
    shift = np.full(inp.shape, 11, dtype=np.int64)
    while True:
        big = inp >= (1 << 29)
        if not np.any(big):
            break
        inp = np.where(big, inp // 4, inp)
        shift = shift + big
    left_shift_bit_pairs = (count_leading_zeros_32(inp) - 1) // 2 - 1
    shift = shift - left_shift_bit_pairs
    inp = inp << (2 * left_shift_bit_pairs)
    fixed_input = inp >> 1  # Q3.28
    half_input = rounding_divide_by_pot(fixed_input, 1)
    half_three = (1 << 28) + (1 << 27)  # 1.5 in Q3.28
    est = np.full(inp.shape, 1 << 28, dtype=np.int64)  # 1.0 in Q3.28
    for _ in range(5):
        est3 = rescale(_mul(_mul(est, est), est), 9, 3)
        est = rescale(_sub(_mul(half_three, est), _mul(half_input, est3)), 6, 3)
    inv = _mul(est, _HALF_SQRT_TWO)
    negative = shift < 0
    inv = np.where(negative, wrap_int32(inv << np.where(negative, -shift, 0)), inv)
    shift = np.where(negative, 0, shift) * reverse_shift
    inv = np.where(trivial, INT32_MAX, inv)
    shift = np.where(trivial, 0, shift)
    return scalar_or_array(inv), scalar_or_array(shift)


def preprocess_softmax_scaling(
    beta: float, input_scale: float, input_integer_bits: int, *, single_rounding: bool = False
) -> tuple[int, int]:
    """LiteRT ``PreprocessSoftmaxScaling`` (``quantization_util.cc``) -> ``(M, left_shift)``.

    ``m = min(beta · input_scale · 2**(31 - input_integer_bits), max)`` in double, with
    ``max = 2**31 - 1`` (``2**30 - 1`` in single-rounding builds), then
    :func:`quantize_multiplier_greater_than_one`. Pass ``beta`` and ``input_scale`` as
    the float32 values the kernel holds. SOFTMAX uses 5 integer bits.
    """
    _check_integer_bits(input_integer_bits, "preprocess_softmax_scaling")
    max_real = float((1 << 30) - 1 if single_rounding else (1 << 31) - 1)
    real = min(float(beta) * float(input_scale) * float(1 << (31 - input_integer_bits)), max_real)
    return quantize_multiplier_greater_than_one(real, single_rounding=single_rounding)


def calculate_input_radius(input_integer_bits: int, input_left_shift: int, total_signed_bits: int = 31) -> int:
    """LiteRT ``CalculateInputRadius``: ``floor((2**ib - 1) · 2**(total - ib) / 2**left_shift)``.

    Computed with integers (the C double expression is exact). SOFTMAX uses
    ``diff_min = -calculate_input_radius(5, left_shift)``.
    """
    if not 0 <= input_integer_bits <= total_signed_bits or input_left_shift < 0:
        raise ValueError(
            "calculate_input_radius: need 0 <= input_integer_bits <= total_signed_bits and "
            f"input_left_shift >= 0, found {input_integer_bits}, {total_signed_bits}, {input_left_shift}")
    return (((1 << input_integer_bits) - 1) << (total_signed_bits - input_integer_bits)) >> input_left_shift
