"""quantir.numerics.gemmlowp16: gemmlowp's logistic and tanh on int16 raw values (the integer LSTM's gates).

Three kinds of check: hand-derived values and constants (against exact rational arithmetic); a second,
scalar port written line by line after gemmlowp's ``fixedpoint.h`` templates instantiated on ``int16_t``
(plain Python ints, explicit ``int16_t`` conversions) that the vectorised port must equal; and accuracy
against the real functions on all 65,536 inputs. The LSTM oracle test
(tests/runtime/qkernels/test_qk_unidirectional_lstm.py) then pins the composition to LiteRT.
"""
import doctest
import math
from fractions import Fraction

import numpy as np
import pytest

from quantir.numerics import gemmlowp16
from quantir.numerics.gemmlowp16 import (
    exp_on_negative_values_16,
    logistic_16,
    one_minus_x_over_one_plus_x_for_x_in_0_1_16,
    one_over_one_plus_x_for_x_in_0_1_16,
    rescale_constant_16,
    tanh_16,
    wrap_int16,
)

ALL = np.arange(-32768, 32768, dtype=np.int64)
SAMPLE = np.unique(np.concatenate([ALL[::97], [-32768, -32767, -1, 0, 1, 32766, 32767]]))

# ---------------------------------------------------------------------------
# A scalar port in the style of the C++ (one value, Python ints, int16_t conversions spelled out)


def _i16(v: int) -> int:            # static_cast<int16_t>
    return ((v + (1 << 15)) & 0xFFFF) - (1 << 15)


def _srdhm(a: int, b: int) -> int:  # SaturatingRoundingDoublingHighMul<int16_t>: nudge, truncating division
    if a == b == -32768:
        return 32767
    ab = a * b
    nudge = (1 << 14) if ab >= 0 else 1 - (1 << 14)
    n = ab + nudge
    return _i16(abs(n) // (1 << 15) * (1 if n >= 0 else -1))   # C division truncates toward zero


def _rdbpot(x: int, e: int) -> int:  # RoundingDivideByPOT
    mask = (1 << e) - 1
    return (x >> e) + ((x & mask) > ((mask >> 1) + (1 if x < 0 else 0)))


def _sat_lshift(x: int, e: int) -> int:  # SaturatingRoundingMultiplyByPOT<e > 0> on int16
    threshold = (1 << (15 - e)) - 1
    if x > threshold:
        return 32767
    if x < -threshold:
        return -32768
    return _i16(x << e)


def _const(c32: int) -> int:  # RescaleConstantInitializer<int16>
    return _i16(_rdbpot(c32, 16))


def _exp_interval(a: int) -> int:
    c, third = _const(1895147668), _const(715827883)
    x = _i16(a + (1 << 12))
    x2 = _srdhm(x, x)
    x3 = _srdhm(x2, x)
    x4 = _srdhm(x2, x2)
    poly = _rdbpot(_i16(_srdhm(_i16(_rdbpot(x4, 2) + x3), third) + x2), 1)
    return max(-32768, min(32767, c + _srdhm(c, _i16(x + poly))))   # AddSaturatingIf16Bit


def _exp_neg(a: int, ib: int) -> int:
    fb = 15 - ib
    quarter = 1 << (fb - 2)
    amq = _i16((a & (quarter - 1)) - quarter)
    result = _exp_interval(_sat_lshift(amq, ib) if ib else amq)
    remainder = _i16(amq - a)
    for k, m in ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401),
                 (4, 242)):
        if ib > k and remainder & (1 << (fb + k)):
            result = _srdhm(result, _const(m))
    if ib > 5 and a < _const(-(1 << (36 - ib))):
        result = 0
    return 32767 if a == 0 else result


def _newton(a: int) -> int:
    s = a + 32767
    n = s + (1 if s >= 0 else -1)
    d = _i16(abs(n) // 2 * (1 if n >= 0 else -1))      # RoundingHalfSum<int16_t>: (sum + sign) / 2
    x = _i16(_const(1515870810) + _srdhm(d, _const(-1010580540)))
    for _ in range(3):
        x = _i16(x + _sat_lshift(_srdhm(x, _i16((1 << 13) - _srdhm(d, x))), 2))
    return x


def _logistic(a: int, ib: int) -> int:
    absolute = a if a > 0 else _i16(-a)
    positive = _sat_lshift(_newton(_exp_neg(_i16(-absolute), ib)), 1)
    if a == 0:
        return _const(1 << 30)
    return positive if a > 0 else _i16(32767 - positive)


def _tanh(a: int, ib: int) -> int:
    n = a if a < 0 else _i16(-a)
    t = _sat_lshift(_i16(_newton(_exp_neg(n, ib + 1)) - (1 << 13)), 2)
    if a == 0:
        return 0
    return _i16(-t) if a < 0 else t


# ---------------------------------------------------------------------------


def test_docstring_examples():
    assert doctest.testmod(gemmlowp16).failed == 0


def test_wrap_int16_is_modular():
    v = np.array([-(1 << 20) - 5, -32769, -32768, -1, 0, 32767, 32768, 65535, 1 << 40])
    assert wrap_int16(v).tolist() == [((int(x) + 32768) % 65536) - 32768 for x in v]


@pytest.mark.parametrize("c32", [1895147668, 715827883, 1672461947, 1302514674, 790015084, 290630308, 39332535,
                                 720401, 242, 1515870810, -1010580540, 1 << 30, -(1 << 30), -(1 << 29)])
def test_constants_round_half_away(c32):
    """The int32 constant divided by 2**16, rounded to nearest with ties away from zero (exact rationals)."""
    q = Fraction(c32, 1 << 16)
    expected = math.floor(abs(q) + Fraction(1, 2)) * (1 if q >= 0 else -1)
    assert rescale_constant_16(c32) == expected


def test_hand_values():
    assert int(logistic_16(0, 3)) == 16384                       # 1/2
    assert int(tanh_16(0, 3)) == 0
    assert int(exp_on_negative_values_16(0, 3)) == 32767         # One()
    assert int(one_over_one_plus_x_for_x_in_0_1_16(0)) == 32767  # 1/(1 + 0) = One()
    assert rescale_constant_16(1 << 30) == 16384


@pytest.mark.parametrize("ib", [0, 3, 6])
def test_logistic_matches_scalar_port(ib):
    assert logistic_16(SAMPLE, ib).tolist() == [_logistic(int(a), ib) for a in SAMPLE]


@pytest.mark.parametrize("ib", range(7))
def test_tanh_matches_scalar_port(ib):
    assert tanh_16(SAMPLE, ib).tolist() == [_tanh(int(a), ib) for a in SAMPLE]


def test_divisions_match_scalar_port():
    a = ALL[ALL >= 0][::41]
    assert one_over_one_plus_x_for_x_in_0_1_16(a).tolist() == [_sat_lshift(_newton(int(v)), 1) for v in a]
    assert one_minus_x_over_one_plus_x_for_x_in_0_1_16(a).tolist() == [
        _sat_lshift(_i16(_newton(int(v)) - (1 << 13)), 2) for v in a]


def test_logistic_accuracy():
    """Within 7/32768 of the sigmoid on every Q3.12 input (int16 arithmetic: a few steps of error). Not
    monotonic: where the barrel shifter's bits change, the value dips by up to 8 steps (from -5675 to -5674)."""
    got = logistic_16(ALL, 3)
    assert np.abs(got / 32768 - 1 / (1 + np.exp(-ALL / 4096.0))).max() < 7 / 32768
    assert np.diff(got).min() == -8 and got[-5674 + 32768] == got[-5675 + 32768] - 8


@pytest.mark.parametrize("ib", range(7))
def test_tanh_accuracy(ib):
    got = tanh_16(ALL, ib)
    assert np.abs(got / 32768 - np.tanh(ALL / 2.0 ** (15 - ib))).max() < 13 / 32768
    assert np.diff(got).min() >= -16   # not monotonic either
    assert np.array_equal(tanh_16(-ALL[1:], ib), -tanh_16(ALL[1:], ib))   # odd, except at -32768


def test_exp_accuracy():
    for ib in (1, 3, 4, 7):
        a = ALL[ALL <= 0]
        got = exp_on_negative_values_16(a, ib).astype(np.float64) / 32768
        assert np.abs(got - np.exp(a / 2.0 ** (15 - ib))).max() < 8 / 32768, ib
