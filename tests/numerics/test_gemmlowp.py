"""quantir.numerics.gemmlowp: fixed-point exp / reciprocal / inverse sqrt (numerics.md §2.12, §2.19).

Three kinds of check: hand-derived values; a second, scalar port written in the style of
the C++ (plain Python ints, one branch per element) that the vectorised port must equal
bit for bit; and accuracy against the real functions. The LiteRT oracle test
(test_litert_oracle.py) then pins the whole SOFTMAX/L2NORM composition to the interpreter.
"""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantir.numerics import (
    calculate_input_radius,
    exp_on_interval_between_negative_one_quarter_and_0_excl,
    exp_on_negative_values,
    get_inv_sqrt_quantized_multiplier_exp,
    get_reciprocal,
    one_over_one_plus_x_for_x_in_0_1,
    preprocess_softmax_scaling,
    quantize_multiplier,
    rescale,
    rounding_half_sum,
)

from ._compose import softmax_int8
from ._exact import INT32_MAX, INT32_MIN

# ---------------------------------------------------------------------------
# A scalar, C-style second port (reference for the vectorised one)


def _w(v: int) -> int:  # int32 wrap
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _mul(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    num = ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30))
    return (abs(num) >> 31) * (1 if num >= 0 else -1)


def _rdbpot(x: int, e: int) -> int:
    mask = (1 << e) - 1
    rem = x & mask
    thr = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if rem > thr else 0)


def _srmpot(x: int, e: int) -> int:  # SaturatingRoundingMultiplyByPOT<e>
    if e > 0:
        thr = (1 << (31 - e)) - 1
        return INT32_MAX if x > thr else INT32_MIN if x < -thr else x << e
    return _rdbpot(x, -e) if e < 0 else x


def _exp_quarter(a: int) -> int:
    c = 1895147668
    x = _w(a + (1 << 28))
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    t = _srmpot(_w(_mul(_w(_srmpot(x4, -2) + x3), 715827883) + x2), -1)
    return _w(c + _mul(c, _w(x + t)))


def _exp_neg(a: int, ib: int) -> int:
    fb = 31 - ib
    quarter = 1 << (fb - 2)
    amq = _w((a & (quarter - 1)) - quarter)
    result = _exp_quarter(_srmpot(amq, ib))
    remainder = _w(amq - a)
    for e, m in ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
                 (2, 39332535), (3, 720401), (4, 242)):
        if ib > e and remainder & (1 << (fb + e)):
            result = _mul(result, m)
    if ib > 5 and a < -(1 << (36 - ib)):
        result = 0
    return INT32_MAX if a == 0 else result


def _one_over(a: int) -> int:
    s = a + INT32_MAX
    s += 1 if s >= 0 else -1
    half_den = (abs(s) >> 1) * (1 if s >= 0 else -1)
    x = _w(1515870810 + _mul(half_den, -1010580540))
    for _ in range(3):
        x = _w(x + _srmpot(_mul(x, _w((1 << 29) - _mul(half_den, x))), 2))
    return _srmpot(x, 1)


def _recip(x: int, digits: int) -> tuple[int, int]:
    hp1 = 32 - x.bit_length()
    return _one_over(((x << hp1) & 0xFFFFFFFF) - (1 << 31)), digits - hp1


def _inv_sqrt(x: int, reverse: int) -> tuple[int, int]:
    if x <= 1:
        return INT32_MAX, 0
    shift = 11
    while x >= 1 << 29:
        x //= 4
        shift += 1
    pairs = ((32 - x.bit_length()) - 1) // 2 - 1
    shift -= pairs
    x <<= 2 * pairs
    half_in = _rdbpot(x >> 1, 1)
    est = 1 << 28
    for _ in range(5):
        est3 = _srmpot(_mul(_mul(est, est), est), 6)
        est = _srmpot(_w(_mul((1 << 28) + (1 << 27), est) - _mul(half_in, est3)), 3)
    inv = _mul(est, 1518500250)
    if shift < 0:
        inv, shift = _w(inv << -shift), 0
    return inv, shift * reverse


# ---------------------------------------------------------------------------
# Hand-derived values


def test_exp_hand_values():
    assert exp_on_negative_values(0, 5) == INT32_MAX  # exp(0) = one
    assert exp_on_negative_values(np.array([0, 0]), 0).tolist() == [INT32_MAX, INT32_MAX]
    # a = -1/4 exactly: the quarter split leaves the Taylor argument at -1/4 and no barrel bit.
    quarter = -(1 << 24)  # -1/4 in Q5.26
    assert exp_on_negative_values(quarter, 5) == exp_on_interval_between_negative_one_quarter_and_0_excl(-(1 << 29))
    # Beyond -32 with more than 5 integer bits the result is clamped to 0.
    assert exp_on_negative_values(-(33 << 24), 7) == 0


def test_one_over_one_plus_x_hand_values():
    # x = 0: Newton converges to 2 in Q2.29, i.e. 1.0, which saturates Q0.31 to INT32_MAX.
    assert one_over_one_plus_x_for_x_in_0_1(0) == INT32_MAX
    # x = 1/2 -> 2/3, x = 1 - 2**-31 -> ~1/2.
    assert abs(int(one_over_one_plus_x_for_x_in_0_1(1 << 30)) - round(2 / 3 * 2**31)) <= 4
    assert abs(int(one_over_one_plus_x_for_x_in_0_1(INT32_MAX)) - (1 << 30)) <= 4


def test_get_reciprocal_hand_values():
    recip, bits = get_reciprocal(1 << 19, 12)  # 1.0 in Q12.19
    assert (recip, bits) == (INT32_MAX, 0)
    recip, bits = get_reciprocal(np.array([1 << 21, 3 << 19]), 12)  # 4.0 and 3.0
    assert bits.tolist() == [2, 1]
    assert recip[0] == INT32_MAX  # 1/4 = 1.0 · 2**-2
    with pytest.raises(ValueError, match="positive"):
        get_reciprocal(0, 12)


def test_inv_sqrt_hand_values():
    assert get_inv_sqrt_quantized_multiplier_exp(0, -1) == (INT32_MAX, 0)
    assert get_inv_sqrt_quantized_multiplier_exp(1, -1) == (INT32_MAX, 0)
    m, s = get_inv_sqrt_quantized_multiplier_exp(np.array([4, 16, 1 << 20]), -1)
    real = m / 2.0**31 * 2.0 ** s.astype(float)
    assert np.allclose(real, [1 / 2, 1 / 4, 2.0**-10], rtol=2e-6)


def test_softmax_scaling_and_radius():
    # beta = 1, s_in = 1/16: m = 2**-4 · 2**26 = 2**22 -> (2**30, 23); radius floor(31·2**26 / 2**23).
    assert preprocess_softmax_scaling(1.0, np.float32(1 / 16), 5) == (1 << 30, 23)
    assert calculate_input_radius(5, 23) == 248
    assert preprocess_softmax_scaling(1.0, np.float32(0.1), 5) == quantize_multiplier(float(np.float32(0.1)) * 2.0**26)
    # Huge beta·scale is capped at 2**31 - 1 (2**30 - 1 in single-rounding builds).
    assert preprocess_softmax_scaling(1.0, 1e6, 5) == quantize_multiplier(2.0**31 - 1)
    assert preprocess_softmax_scaling(1.0, 1e6, 5, single_rounding=True) == quantize_multiplier(2.0**30 - 1)
    with pytest.raises(ValueError, match="> 1"):
        preprocess_softmax_scaling(1.0, 1e-9, 5)  # LiteRT's CHECK aborts here


def test_softmax_four_equal_logits():
    # 0.25 · 256 - 128 = -64 (the §7 vector, here through the fixed-point reference path).
    assert softmax_int8(np.array([5, 5, 5, 5]), np.float32(0.1)).tolist() == [-64] * 4


# ---------------------------------------------------------------------------
# Vectorised port == scalar port


q026 = st.integers(-(1 << 31), 0)


@settings(max_examples=100, deadline=None)
@given(st.lists(q026, min_size=1, max_size=8), st.sampled_from([0, 1, 4, 5, 6, 12]))
def test_exp_on_negative_values_matches_scalar_port(xs, ib):
    assert exp_on_negative_values(np.array(xs), ib).tolist() == [_exp_neg(x, ib) for x in xs]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, INT32_MAX), min_size=1, max_size=8))
def test_one_over_one_plus_x_matches_scalar_port_and_real(xs):
    got = one_over_one_plus_x_for_x_in_0_1(np.array(xs))
    assert got.tolist() == [_one_over(x) for x in xs]
    real = 1 / (1 + np.array(xs) / 2**31)
    assert np.max(np.abs(got / 2**31 - real)) < 1e-8


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, INT32_MAX), min_size=1, max_size=8), st.sampled_from([0, 12, 31]))
def test_get_reciprocal_matches_scalar_port_and_real(xs, digits):
    recip, bits = get_reciprocal(np.array(xs), digits)
    assert list(zip(recip.tolist(), bits.tolist())) == [_recip(x, digits) for x in xs]
    real = recip / 2.0**31 * 2.0 ** (-bits.astype(float))
    x_real = np.array(xs, dtype=float) / 2.0 ** (31 - digits)  # x is Q(digits).(31 - digits)
    assert np.allclose(real, 1 / x_real, rtol=1e-8)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, INT32_MAX), min_size=1, max_size=8), st.sampled_from([-1, 1]))
def test_inv_sqrt_matches_scalar_port_and_real(xs, reverse):
    m, s = get_inv_sqrt_quantized_multiplier_exp(np.array(xs), reverse)
    assert list(zip(m.tolist(), s.tolist())) == [_inv_sqrt(x, reverse) for x in xs]
    big = np.array([x for x in xs if x > 1], dtype=float)
    if big.size:
        mm, ss = get_inv_sqrt_quantized_multiplier_exp(big.astype(np.int64), -1)
        # Five Newton steps in Q3.28 leave ~1.3e-6 relative error for small inputs (x = 32 gives
        # 1.24e-6): that is LiteRT's own precision, and the bit-exact check above is the real test.
        assert np.allclose(mm / 2.0**31 * 2.0 ** ss.astype(float), 1 / np.sqrt(big), rtol=5e-6)


@settings(max_examples=100, deadline=None)
@given(st.integers(-(32 << 26), 0))
def test_exp_accuracy_q5_26(a):
    got = int(exp_on_negative_values(a, 5)) / 2**31
    assert abs(got - math.exp(a / 2**26)) < 3e-7  # Taylor truncation of the 1/4-interval dominates


@settings(max_examples=100, deadline=None)
@given(st.integers(INT32_MIN, INT32_MAX), st.integers(INT32_MIN, INT32_MAX))
def test_rounding_half_sum(a, b):
    s = a + b
    t = s + (1 if s >= 0 else -1)
    assert rounding_half_sum(a, b) == (abs(t) >> 1) * (1 if t >= 0 else -1)
    assert abs(int(rounding_half_sum(a, b)) * 2 - s) <= 1


def test_rescale():
    assert rescale(1 << 30, 0, 12) == 1 << 18  # 0.5 in Q0.31 -> Q12.19
    assert rescale(INT32_MAX, 0, 12) == 1 << 19
    assert rescale(1 << 28, 3, 0) == INT32_MAX  # 1.0 in Q3.28 saturates in Q0.31
    assert rescale(-(1 << 26), 3, 1) == -(1 << 28)
    with pytest.raises(ValueError):
        rescale(1, 0, 31)
