"""quantir.numerics.rounding: rounding modes, saturation, integer rounding division."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantir.numerics import (
    Rounding,
    div_round_half_away,
    round_half_away,
    round_half_even,
    round_half_up,
    round_to_int,
    round_toward_zero,
    saturate,
    storage_range,
)

from ._exact import rha, rhe, rhu, trunc

TIES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5])


def test_ties_per_mode():
    assert round_half_even(TIES).tolist() == [-2, -2, 0, 0, 2, 2]
    assert round_half_away(TIES).tolist() == [-3, -2, -1, 1, 2, 3]
    assert round_half_up(TIES).tolist() == [-2, -1, 0, 1, 2, 3]
    assert round_toward_zero(TIES).tolist() == [-2, -1, 0, 0, 1, 2]


def test_no_floor_plus_half_error_just_below_one_half():
    # floor(x + 0.5) gives 1 for these: x + 0.5 rounds up to 1.0.
    below64 = np.nextafter(0.5, 0.0)
    below32 = np.nextafter(np.float32(0.5), np.float32(0.0))
    for x in (below64, below32, -below64, -below32):
        assert round_half_away(x) == 0
        assert round_half_up(x) == 0
    assert round_half_up(-0.5) == 0 and round_half_up(np.float32(-0.5)) == 0


def test_dtype_and_scalars():
    out = round_half_away(np.array([1.5], dtype=np.float32))
    assert out.dtype == np.int64
    assert np.ndim(round_half_away(2.5)) == 0 and round_half_away(2.5) == 3
    assert round_half_even(np.array([3, -4], dtype=np.int8)).tolist() == [3, -4]  # integers pass through
    assert round_to_int(2.5, "half_even") == 2 and round_to_int(2.5, Rounding.HALF_AWAY) == 3


@pytest.mark.parametrize("fn", [round_half_even, round_half_away, round_half_up, round_toward_zero])
def test_non_finite_and_huge_raise(fn):
    for bad in (np.nan, np.inf, -np.inf, 2.0**63):
        with pytest.raises(ValueError, match="round"):
            fn(np.array([0.0, bad]))


finite64 = st.floats(min_value=-2.0**62, max_value=2.0**62, allow_nan=False)
finite32 = st.floats(min_value=-2.0**62, max_value=2.0**62, allow_nan=False, width=32)
halves = st.integers(-(1 << 40), 1 << 40).map(lambda k: k / 2.0)  # many exact ties


@settings(max_examples=200, deadline=None)
@given(st.one_of(finite64, halves))
def test_float64_modes_match_exact(x):
    fx = Fraction(x)
    assert round_half_away(x) == rha(fx)
    assert round_half_up(x) == rhu(fx)
    assert round_half_even(x) == rhe(fx)
    assert round_toward_zero(x) == trunc(fx)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite32, min_size=1, max_size=8))
def test_float32_modes_match_exact_and_vectorised(xs):
    a = np.array(xs, dtype=np.float32)
    exact = [Fraction(float(v)) for v in a]
    assert round_half_away(a).tolist() == [rha(v) for v in exact]
    assert round_half_up(a).tolist() == [rhu(v) for v in exact]
    assert round_half_even(a).tolist() == [rhe(v) for v in exact]
    assert [int(round_half_away(v)) for v in a] == round_half_away(a).tolist()


def test_storage_range():
    assert storage_range(8, True) == (-128, 127)
    assert storage_range(8, True, narrow=True) == (-127, 127)
    assert storage_range(8, False) == (0, 255)
    assert storage_range(4, True) == (-8, 7)
    assert storage_range(32, True) == (-(2**31), 2**31 - 1)
    with pytest.raises(ValueError):
        storage_range(0, False)


def test_saturate():
    assert saturate([-300, -128, 5, 127, 300], -128, 127).tolist() == [-128, -128, 5, 127, 127]
    with pytest.raises(TypeError):
        saturate([1.5], -1, 1)  # floats never enter integer paths
    with pytest.raises(ValueError):
        saturate([1], 2, 1)


def test_average_pool_rounding_vectors():
    # numerics.md §7: sum -5 with n = 2 -> -3; 5 / 2 -> 3; 4 / 3 -> 1.
    assert div_round_half_away([-5, 5, 4], [2, 2, 3]).tolist() == [-3, 3, 1]


def _c_avg(total: int, n: int) -> int:
    """The LiteRT expression, with C truncating division."""
    num = total + n // 2 if total > 0 else total - n // 2
    return (abs(num) // n) * (1 if num >= 0 else -1)  # C '/' truncates toward zero


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**40), 2**40), st.integers(1, 2**21))
def test_div_round_half_away_matches_c_and_exact(total, n):
    got = div_round_half_away(total, n)
    assert got == rha(Fraction(total, n))
    assert got == _c_avg(total, n)
