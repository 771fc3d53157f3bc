"""Exact reference arithmetic for the numerics tests: Python ints and Fractions only."""
from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import strategies as st

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

int16s = st.integers(INT16_MIN, INT16_MAX)
int32s = st.integers(INT32_MIN, INT32_MAX)
multipliers = st.integers(0, INT32_MAX)  # quantized multipliers M


def rha(v: Fraction) -> int:
    """Round half away from zero."""
    mag = math.floor(abs(v) + Fraction(1, 2))
    return -mag if v < 0 else mag


def rhu(v: Fraction) -> int:
    """Round half up: floor(v + 1/2)."""
    return math.floor(v + Fraction(1, 2))


def rhe(v: Fraction) -> int:
    """Round half to even (Python's round on a Fraction)."""
    return round(v)


def trunc(v: Fraction) -> int:
    return math.trunc(v)


def pow2(e: int) -> Fraction:
    return Fraction(2) ** e
