"""quantir.numerics.fixedpoint: QuantizeMultiplier, SRDHM, RDBPOT, MBQM (numerics.md §1, §7)."""
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from quantir.numerics import (
    MultiplierRounding,
    count_leading_zeros_32,
    downscale_multiplier_to_int16,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_greater_than_one,
    multiply_by_quantized_multiplier_int64,
    multiply_by_quantized_multiplier_smaller_than_one_exp,
    quantize_multiplier,
    quantize_multiplier_greater_than_one,
    quantize_multiplier_smaller_than_one_exp,
    quantize_multipliers,
    rounding_divide_by_pot,
    saturating_doubling_high_mul_16,
    saturating_left_shift,
    saturating_rounding_doubling_high_mul,
    saturating_rounding_doubling_high_mul_16,
    wrap_int32,
)

from ._exact import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, int16s, int32s, multipliers, pow2, rha, rhu

SRDHM = saturating_rounding_doubling_high_mul
RDBPOT = rounding_divide_by_pot
MBQM = multiply_by_quantized_multiplier

# ---------------------------------------------------------------------------
# QuantizeMultiplier


@pytest.mark.parametrize("m, expected", [
    (0.5, (1073741824, 0)),            # QM 1
    (1.0, (1073741824, 1)),            # QM 2
    (0.75, (1610612736, 0)),           # QM 3
    (3.0, (1610612736, 2)),            # QM 4
    (0.1, (1717986918, -3)),           # QM 5
    (2.0**-32, (1073741824, -31)),     # QM 6
    (2.0**-33, (0, 0)),                # QM 6: flushed
    (1 - 2.0**-40, (1073741824, 1)),   # QM 7: f rounds to 1.0
    (0.0, (0, 0)),                     # QM 8
])
def test_quantize_multiplier_vectors(m, expected):
    assert quantize_multiplier(m) == expected
    assert isinstance(quantize_multiplier(m)[0], int)


def test_quantize_multiplier_single_rounding_saturates_large_exponents():
    assert quantize_multiplier(2.0**31) == (1 << 30, 32)
    assert quantize_multiplier(2.0**31, single_rounding=True) == (INT32_MAX, 30)
    assert quantize_multiplier(2.0**29, single_rounding=True) == (1 << 30, 30)
    assert quantize_multiplier(0.1, single_rounding=True) == quantize_multiplier(0.1)


def test_quantize_multiplier_negative_and_invalid():
    assert quantize_multiplier(-0.75) == (-1610612736, 0)  # LEAKY_RELU alpha < 0
    for bad in (math.nan, math.inf):
        with pytest.raises(ValueError, match="finite"):
            quantize_multiplier(bad)
    with pytest.raises(ValueError, match="scalar"):
        quantize_multiplier([0.5, 0.25])


def test_smaller_and_greater_than_one_helpers():
    assert quantize_multiplier_smaller_than_one_exp(0.1) == (1717986918, -3)
    assert quantize_multiplier_greater_than_one(3.0) == (1610612736, 2)
    for bad in (0.0, 1.0, 1.5, -0.25):
        with pytest.raises(ValueError, match=r"\(0, 1\)"):
            quantize_multiplier_smaller_than_one_exp(bad)
    with pytest.raises(ValueError, match="shift"):
        quantize_multiplier_smaller_than_one_exp(1 - 2.0**-40)  # rounds to 1.0: the C CHECK aborts
    for bad in (1.0, 0.5, math.inf):
        with pytest.raises(ValueError, match="> 1"):
            quantize_multiplier_greater_than_one(bad)


positive_multipliers = st.floats(min_value=2.0**-40, max_value=2.0**40, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(positive_multipliers)
def test_quantize_multiplier_is_within_half_ulp_of_31_bits(m):
    big_m, shift = quantize_multiplier(m)
    if m < 2.0**-32:
        assume(big_m != 0)
    if big_m == 0:
        assert m < 2.0**-31
        return
    assert (1 << 30) <= big_m < (1 << 31)
    approx = big_m * pow2(shift - 31)
    assert abs(approx - Fraction(m)) <= Fraction(m) * pow2(-31)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(positive_multipliers, st.just(0.0), st.floats(-4.0, -2.0**-20)), min_size=1, max_size=16),
       st.booleans())
def test_quantize_multipliers_vectorised_equals_scalar(ms, single):
    big_m, shift = quantize_multipliers(np.array(ms), single_rounding=single)
    assert big_m.dtype == np.int64 and shift.dtype == np.int64
    assert list(zip(big_m.tolist(), shift.tolist())) == [quantize_multiplier(m, single_rounding=single) for m in ms]


# ---------------------------------------------------------------------------
# SRDHM and friends


def test_srdhm_vectors():
    assert SRDHM(-3, 1 << 30) == -1  # -1.5 rounds toward +inf
    assert SRDHM(3, 1 << 30) == 2
    assert SRDHM(INT32_MIN, INT32_MIN) == INT32_MAX
    assert SRDHM(INT32_MIN, INT32_MAX) == -INT32_MAX


def _c_srdhm(a: int, b: int, bits: int = 32) -> int:
    """gemmlowp's C code, literally: sign-dependent nudge and truncating division."""
    lo = -(1 << (bits - 1))
    if a == b == lo:
        return -lo - 1
    ab = a * b
    nudge = (1 << (bits - 2)) if ab >= 0 else 1 - (1 << (bits - 2))
    num = ab + nudge
    return (abs(num) >> (bits - 1)) * (1 if num >= 0 else -1)


@settings(max_examples=200, deadline=None)
@given(int32s, int32s)
def test_srdhm_is_floor_of_product_plus_half(a, b):
    got = SRDHM(a, b)
    expected = INT32_MAX if a == b == INT32_MIN else math.floor(Fraction(a * b + (1 << 30), 1 << 31))
    assert got == expected == _c_srdhm(a, b)


@settings(max_examples=200, deadline=None)
@given(int16s, int16s)
def test_srdhm16_and_sdhm16(a, b):
    rounding = saturating_rounding_doubling_high_mul_16(a, b)
    truncating = saturating_doubling_high_mul_16(a, b)
    if a == b == INT16_MIN:
        assert rounding == truncating == INT16_MAX
        return
    assert rounding == math.floor(Fraction(a * b + (1 << 14), 1 << 15)) == _c_srdhm(a, b, 16)
    assert truncating == math.trunc(Fraction(a * b, 1 << 15))


def test_int_ranges_are_enforced():
    with pytest.raises(ValueError, match=r"a must be in \[-2147483648, 2147483647\], found 2147483648"):
        SRDHM(1 << 31, 1)
    with pytest.raises(ValueError, match="int16|32767"):
        saturating_rounding_doubling_high_mul_16(1 << 15, 1)
    with pytest.raises(TypeError, match="integer"):
        SRDHM(1.5, 2)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(int32s, int32s), min_size=1, max_size=16))
def test_srdhm_vectorised_equals_scalar(pairs):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    assert SRDHM(a, b).tolist() == [int(SRDHM(x, y)) for x, y in pairs]


# ---------------------------------------------------------------------------
# RoundingDivideByPOT


def test_rdbpot_vectors():
    assert RDBPOT([-3, 3, -6], [1, 1, 2]).tolist() == [-2, 2, -2]
    assert RDBPOT(12345, 0) == 12345


@settings(max_examples=200, deadline=None)
@given(st.integers(-(1 << 62), (1 << 62) - 1), st.integers(0, 62))
def test_rdbpot_is_round_half_away(x, e):
    assume(e <= 31 or x != 0)
    assert RDBPOT(x, e) == rha(Fraction(x) / pow2(e))


def test_rdbpot_per_channel_broadcast():
    x = np.arange(-8, 8).reshape(4, 4)
    e = np.array([0, 1, 2, 3])
    got = RDBPOT(x, e)
    assert got.tolist() == [[int(RDBPOT(int(v), int(s))) for v, s in zip(row, e)] for row in x]
    with pytest.raises(ValueError, match="exponent"):
        RDBPOT(1, -1)


def test_saturating_left_shift():
    assert saturating_left_shift([1, -1, 1 << 20, -(1 << 20)], 11).tolist() == [2048, -2048, INT32_MAX, INT32_MIN]
    assert saturating_left_shift(-(1 << 10), 5, bits=16) == INT16_MIN
    assert saturating_left_shift(1000, 6, bits=16) == INT16_MAX


# ---------------------------------------------------------------------------
# MultiplyByQuantizedMultiplier


@pytest.mark.parametrize("x, m, shift, double, single", [
    (-2, 1 << 30, -1, -1, 0),          # 11: real -0.5
    (1, (1 << 30) + 1, -1, 1, 0),      # 12: real 0.25000000023, the double-rounding artefact
    (2, 1 << 30, -1, 1, 1),            # 13: real 0.5
])
def test_mbqm_vectors(x, m, shift, double, single):
    assert MBQM(x, m, shift) == double
    assert MBQM(x, m, shift, "double") == double
    assert MBQM(x, m, shift, MultiplierRounding.SINGLE) == single


def _exact_double(x: int, m: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    high = rhu(Fraction(x * (1 << left) * m, 1 << 31))
    return rha(Fraction(high) / pow2(right))


def _exact_single(x: int, m: int, shift: int) -> int:
    return rhu(Fraction(x * m) * pow2(shift - 31))


shifts = st.integers(-31, 30)


@settings(max_examples=200, deadline=None)
@given(int32s, multipliers, st.integers(-31, 0))
def test_mbqm_double_and_single_match_fractions(x, m, shift):
    assert MBQM(x, m, shift) == _exact_double(x, m, shift)
    assert MBQM(x, m, shift, "single") == _exact_single(x, m, shift)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(1 << 15), 1 << 15), multipliers, st.integers(0, 15))
def test_mbqm_left_shift_match_fractions(x, m, shift):
    assume(abs(x) << shift <= INT32_MAX)
    assert MBQM(x, m, shift) == _exact_double(x, m, shift)
    single = _exact_single(x, m, shift)
    if INT32_MIN <= single <= INT32_MAX:
        assert MBQM(x, m, shift, "single") == single


@settings(max_examples=100, deadline=None)
@given(st.lists(int32s, min_size=1, max_size=6),
       st.lists(st.tuples(multipliers, st.integers(-31, 0)), min_size=1, max_size=4))
def test_mbqm_per_channel_vectorised_equals_scalar(xs, channels):
    acc = np.array(xs)[:, None] + np.zeros(len(channels), dtype=np.int64)
    big_m = np.array([c[0] for c in channels])
    shift = np.array([c[1] for c in channels])
    for mode in ("double", "single"):
        got = MBQM(acc, big_m, shift, mode)
        assert got.shape == acc.shape
        assert got.tolist() == [[int(MBQM(x, int(m), int(s), mode)) for m, s in zip(big_m, shift)] for x in xs]


def test_mbqm_contract_violations_raise():
    with pytest.raises(ValueError, match="overflows int32"):
        MBQM(1 << 20, 1 << 30, 12)  # x * 2**12 does not fit int32
    with pytest.raises(ValueError, match="M must be"):
        MBQM(1, -5, 0)
    with pytest.raises(ValueError, match="shift must be"):
        MBQM(1, 1 << 30, -32)
    with pytest.raises(ValueError, match="x must be"):
        MBQM(1 << 31, 1 << 30, 0)
    with pytest.raises(ValueError, match="TFLITE_DCHECK"):
        MBQM(1 << 30, INT32_MAX, 5, "single")
    with pytest.raises(ValueError):
        MBQM(1, 1 << 30, 0, "triple")


@settings(max_examples=200, deadline=None)
@given(int32s, multipliers, st.integers(-31, 0))
def test_smaller_than_one_exp_helper(x, m, shift):
    assert multiply_by_quantized_multiplier_smaller_than_one_exp(x, m, shift) == MBQM(x, m, shift)
    assert multiply_by_quantized_multiplier_smaller_than_one_exp(x, m, shift, "single") == MBQM(x, m, shift, "single")


@settings(max_examples=200, deadline=None)
@given(st.integers(-4096, 4096), multipliers, st.integers(0, 18))
def test_greater_than_one_helper(x, m, shift):
    got = multiply_by_quantized_multiplier_greater_than_one(x, m, shift)
    assert got == MBQM(x, m, shift) == SRDHM(x << shift, m)
    single = _exact_single(x, m, shift)
    if INT32_MIN <= single <= INT32_MAX:
        assert multiply_by_quantized_multiplier_greater_than_one(x, m, shift, "single") == single
    with pytest.raises(ValueError):
        multiply_by_quantized_multiplier_greater_than_one(x, m, -1)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(1 << 47), (1 << 47) - 1), multipliers, st.integers(-31, 7))
def test_mbqm_int64_matches_fractions(x, m, shift):
    m16 = (m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF
    expected = rhu(Fraction(x * m16) * pow2(shift - 15))
    if INT32_MIN <= expected <= INT32_MAX:
        assert multiply_by_quantized_multiplier_int64(x, m, shift) == expected
    else:
        with pytest.raises(ValueError, match="TFLITE_DCHECK"):
            multiply_by_quantized_multiplier_int64(x, m, shift)


def test_per_channel_conv_requantize_vector():
    # s_in = f32(0.02), s_w = f32(0.003), s_out = f32(0.05): m = 0.0011999999657273295.
    m = 0.0011999999657273295
    assert float(np.float64(np.float32(0.02)) * np.float64(np.float32(0.003)) / np.float64(np.float32(0.05))) == m
    big_m, shift = quantize_multiplier(m)
    assert (big_m, shift) == (1319413916, -9)
    assert MBQM([12345, 1000, -1000, -777], big_m, shift).tolist() == [15, 1, -1, -1]


def test_fc_per_tensor_vector():
    assert quantize_multiplier(0.0011999999518040574) == (1319413900, -9)


# ---------------------------------------------------------------------------
# Bit helpers and the int16 multiplier


def test_downscale_multiplier_to_int16_thresholds_agree():
    ms = np.array([0, 1 << 30, 0x7FFF0000 - 1, 0x7FFF0000, INT32_MAX - (1 << 15) - 1,
                   INT32_MAX - (1 << 15), INT32_MAX - (1 << 15) + 1, INT32_MAX])
    hard_swish = [32767 if m >= INT32_MAX - (1 << 15) else (m + (1 << 15)) >> 16 for m in ms.tolist()]
    int64_mbqm = [(m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF for m in ms.tolist()]
    assert downscale_multiplier_to_int16(ms).tolist() == hard_swish == int64_mbqm
    with pytest.raises(ValueError):
        downscale_multiplier_to_int16(-1)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(1 << 40), 1 << 40))
def test_wrap_and_clz(x):
    wrapped = wrap_int32(x)
    assert INT32_MIN <= wrapped <= INT32_MAX and (wrapped - x) % (1 << 32) == 0
    u = x & 0xFFFFFFFF
    assert count_leading_zeros_32(x) == 32 - u.bit_length()
