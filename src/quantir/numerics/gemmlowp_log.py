"""Fixed-point natural logarithm of LiteRT's ``common.h``, and LOG_SOFTMAX's scaling.

Written from reading ``log_x_for_x_greater_than_or_equal_to_1_impl`` (LiteRT
``kernels/internal/common.h``) and ``PreprocessLogSoftmaxScalingExp``
(``quantization_util.cc``); the conventions are those of :mod:`.gemmlowp` (raw int32 values
held in int64 arrays, ``*`` is SRDHM, ``+``/``-`` wrap).

How the logarithm works, for ``x >= 1`` in Q``I`` (``I`` integer bits): ``x`` is normalised
twice — by its leading zeros (``r_a = x·2**z / √2``) and by those of ``x/√2`` (``r_b``) — so
that one of the two mantissas ``r`` lies near ``√√½`` with exponent ``e`` (in Q``O+1``, with a
¼ correction either way); then ``log x = e·log 2 + log(r)``, where ``log r`` is a rational
approximation in ``q = 2(r - √√½)``:
``(q·r + q³·αn) / (1 + p·(αi + q + αd·q²) + αf·q)`` with ``p = (r + √√½)/2``, the division by
:func:`~quantir.numerics.one_over_one_plus_x_for_x_in_0_1`.

Constants (raw Q0.31): ``log 2`` = 1488522236, ``√√½`` = 1805811301, ``√½`` = 1518500250,
``¼`` = 536870912, ``αn`` = 117049297, ``αd`` = 127690142, ``αi`` = 1057819769,
``αf`` = 638450708.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from quantir.numerics._validate import INT32_MAX, INT32_MIN, as_int64, require_range, scalar_or_array
from quantir.numerics.fixedpoint import (
    count_leading_zeros_32,
    quantize_multiplier_smaller_than_one_exp,
    saturating_left_shift,
    saturating_rounding_doubling_high_mul as _mul,
    wrap_int32,
)
from quantir.numerics.gemmlowp import (
    one_over_one_plus_x_for_x_in_0_1,
    preprocess_softmax_scaling,
    rescale,
    rounding_half_sum,
)

__all__ = ["log_x_for_x_greater_than_or_equal_to_1", "preprocess_log_softmax_scaling_exp"]

_LOG_2 = 1488522236
_SQRT_SQRT_HALF = 1805811301
_SQRT_HALF = 1518500250
_ONE_QUARTER = 536870912
_ALPHA_N = 117049297
_ALPHA_D = 127690142
_ALPHA_I = 1057819769
_ALPHA_F = 638450708


def _saturating_add(a, b):
    return np.clip(a + b, INT32_MIN, INT32_MAX)


def _min_output_bits(input_bits: int) -> int:
    """``min_log_x_output_bits``: integer bits that hold ``log`` of any Q``input_bits`` value."""
    for threshold, bits in ((90, 7), (44, 6), (21, 5), (10, 4), (4, 3), (1, 2)):
        if input_bits > threshold:
            return bits
    return 1


def log_x_for_x_greater_than_or_equal_to_1(x: ArrayLike, input_integer_bits: int,
                                           output_integer_bits: int) -> np.ndarray:
    """``log(x)`` of a Q``input_integer_bits`` raw ``x >= 1``, as a Q``output_integer_bits`` raw value.

    LOG_SOFTMAX calls it with the Q12.19 sum of exponentials and 5 output integer bits.
    The output needs at least ``min_log_x_output_bits(input_integer_bits)`` integer bits (a
    ``static_assert`` in C++; a ValueError here) and at most 29 (the accumulator has one more).
    """
    func = "log_x_for_x_greater_than_or_equal_to_1"
    if not 0 <= input_integer_bits <= 31:
        raise ValueError(f"{func}: input integer bits must be in [0, 31], found {input_integer_bits}")
    if not _min_output_bits(input_integer_bits) <= output_integer_bits <= 29:
        raise ValueError(f"{func}: output integer bits must be in [{_min_output_bits(input_integer_bits)}, 29] "
                         f"for {input_integer_bits} input integer bits, found {output_integer_bits}")
    z_a = as_int64(x, func, "x")
    require_range(z_a, 1, INT32_MAX, func, "x")
    accum_bits = output_integer_bits + 1
    shifted_quarter = rescale(_ONE_QUARTER, 0, accum_bits)
    exponent_shift = 31 - accum_bits  # an integer exponent e as a Q(accum_bits) raw value: e·2**shift

    z_a_headroom_plus_1 = count_leading_zeros_32(z_a)
    r_a_tmp = saturating_left_shift(z_a, z_a_headroom_plus_1 - 1)
    r_a = saturating_left_shift(_mul(r_a_tmp, _SQRT_HALF), 1)
    z_a_pow_2_adj = _saturating_add(
        saturating_left_shift(input_integer_bits - z_a_headroom_plus_1, exponent_shift), shifted_quarter)

    z_b = _mul(z_a, _SQRT_HALF)
    z_b_headroom = count_leading_zeros_32(z_b) - 1
    r_b = saturating_left_shift(z_a, z_b_headroom)
    z_b_pow_2_adj = _saturating_add(
        saturating_left_shift(input_integer_bits - z_b_headroom, exponent_shift), -shifted_quarter)

    r = np.minimum(r_a, r_b)
    z_pow_2_adj = np.maximum(z_a_pow_2_adj, z_b_pow_2_adj)

    p = rounding_half_sum(r, _SQRT_SQRT_HALF)
    q = wrap_int32(r - _SQRT_SQRT_HALF)
    q = wrap_int32(q + q)
    common_sq = _mul(q, q)
    num = wrap_int32(_mul(q, r) + _mul(_mul(q, common_sq), _ALPHA_N))
    inner = wrap_int32(wrap_int32(_ALPHA_I + q) + _mul(_ALPHA_D, common_sq))
    denom_minus_one = wrap_int32(_mul(p, inner) + _mul(_ALPHA_F, q))
    recip_denom = one_over_one_plus_x_for_x_in_0_1(denom_minus_one)

    num_scaled = rescale(num, 0, accum_bits)
    total = wrap_int32(_mul(z_pow_2_adj, _LOG_2) + _mul(num_scaled, recip_denom))
    return scalar_or_array(np.asarray(rescale(total, accum_bits, output_integer_bits)))


def preprocess_log_softmax_scaling_exp(beta: float, input_scale: float, input_integer_bits: int
                                       ) -> tuple[int, int, int, int]:
    """``PreprocessLogSoftmaxScalingExp`` -> ``(M, left_shift, reverse_M, reverse_shift)``.

    ``(M, left_shift)`` is :func:`~quantir.numerics.preprocess_softmax_scaling`; the reverse
    multiplier maps a Q``input_integer_bits`` value back to input steps:
    ``QuantizeMultiplierSmallerThanOneExp(2**(31 - left_shift) / M)`` in double, so
    ``reverse_shift <= 0`` (an exponent: the MBQM shift to use, not LiteRT's negated copy).
    """
    big_m, left_shift = preprocess_softmax_scaling(beta, input_scale, input_integer_bits)
    reverse = float(1 << (31 - left_shift)) / float(big_m)
    reverse_m, reverse_shift = quantize_multiplier_smaller_than_one_exp(reverse)
    return big_m, left_shift, reverse_m, reverse_shift
