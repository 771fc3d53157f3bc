"""MLIR's float printer (spec §4) and the ``%e`` form of diagnostics."""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quantir.types import format_mlir_float, format_mlir_float_e
from quantir.types.floatfmt import apfloat_to_string, format_apfloat
from quantir.types.floatsem import DOUBLE, SEMANTICS, encode, fval_from_double, round_exact, round_to


def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def read_back(text: str) -> float:
    """How MLIR's parser reads a printed scale: a float literal, or hex = double bits."""
    if text.startswith("0x"):
        return struct.unpack("<d", struct.pack("<Q", int(text, 16)))[0]
    return float(text)


@pytest.mark.parametrize("x,text", [
    (0.25, "2.500000e-01"), (0.05, "5.000000e-02"), (1.0, "1.000000e+00"), (2.0, "2.000000e+00"),
    (0.0, "0.000000e+00"), (-0.0, "-0.000000e+00"), (-2.5, "-2.500000e+00"),
    (0.123456789, "0.123456789"), (0.0039215686274509803, "0.0039215686274509803"),
    (123456.7, "123456.7"), (1.0e38, "9.9999999999999997E+37"),
    (5.9604644775390625e-8, "5.9604644775390625E-8"), (12345678.0, "0x41678C29C0000000"),
    (math.nan, "0x7FF8000000000000"), (math.inf, "0x7FF0000000000000"), (-math.inf, "0xFFF0000000000000"),
    (1234567.0, "0x4132D68700000000"), (0.000123456789, "1.23456789E-4"), (100000.5, "100000.5"),
    (12345678.9, "12345678.9"), (1.0e20, "1.000000e+20"), (1e-5, "1.000000e-05"), (1000.5, "1.000500e+03"),
    (5e-324, "4.940660e-324"), (1.7976931348623157e308, "1.7976931348623157E+308"),
    (0.001953125, "0.001953125"), (100000000.0, "1.000000e+08"),
])
def test_format_mlir_float_examples(x, text):
    assert format_mlir_float(x) == text


def test_step_one_is_apfloat_rounding_not_printf():
    assert "%.6e" % 1e38 == "1.000000e+38"  # C would round-trip ...
    assert apfloat_to_string(fval_from_double(1e38), DOUBLE, 6, 0, False) == "9.999990e+37"  # APFloat does not


@pytest.mark.parametrize("name,x,text", [
    ("f16", 0.1, "9.997550e-02"), ("bf16", 0.1, "1.000980e-01"), ("tf32", 3.3, "3.300780e+00"),
    ("f8E4M3FN", 0.001953125, "1.953130e-03"), ("f8E4M3FN", 0.1, "1.015630e-01"),
    ("f80", 0.1, "0.100000000000000005551"), ("f128", 0.1, "0.100000000000000005551115123125782702"),
    ("f32", 16777217.0, "0x4B800000"), ("f32", 1e38, "9.99999968E+37"), ("f32", 0.333333333, "0.333333343"),
    ("f8E8M0FNU", 1e30, "1.267650e+30"), ("f8E8M0FNU", 0.09375, "1.250000e-01"),
    ("f4E2M1FN", 1.75, "2.000000e+00"), ("f16", 65504.0, "6.550400e+04"), ("f16", 1.0e-7, "1.192090e-07"),
    ("f16", math.nan, "0x7E00"), ("f80", math.nan, "0x7FFFC000000000000000"),
    ("f8E4M3FN", math.nan, "0x7F"), ("f8E5M2FNUZ", math.nan, "0x80"), ("f8E8M0FNU", math.nan, "0xFF"),
])
def test_format_in_other_formats(name, x, text):
    """Sub-channel scales are printed in the expressed type's own format (oracle values)."""
    sem = SEMANTICS[name]
    assert format_apfloat(round_to(sem, fval_from_double(x)), sem) == text


@pytest.mark.parametrize("x,text", [
    (0.05, "5.000000e-02"), (1.401298464324817e-45, "1.401298e-45"), (3.4028234663852886e38, "3.402823e+38"),
    (math.inf, "INF"), (-math.inf, "-INF"), (math.nan, "nan"), (0.0, "0.000000e+00"),
    (5.263544247e-315, "5.263544e-315"), (65504.0, "6.550400e+04"),
])
def test_format_e(x, text):
    assert format_mlir_float_e(x) == text


@settings(max_examples=500)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_finite_double_round_trips_bit_exactly(x):
    assert bits(read_back(format_mlir_float(x))) == bits(x)


@settings(max_examples=500)
@given(st.integers(0, 2**64 - 1))
def test_every_bit_pattern_round_trips(b):
    x = struct.unpack("<d", struct.pack("<Q", b))[0]
    text = format_mlir_float(x)
    if math.isnan(x) or math.isinf(x):
        assert text == "0x%016X" % b
    assert bits(read_back(text)) == b
    assert text.startswith("0x") or "." in text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_exponent_form_has_six_digits_when_used(x):
    text = format_mlir_float(x)
    if "e" in text:
        mantissa, exp = text.lstrip("-").split("e")
        assert len(mantissa) == 8 and exp[0] in "+-" and len(exp) >= 3


@pytest.mark.parametrize("name", sorted(SEMANTICS))
def test_format_round_trips_in_every_format(name):
    """Each printed value reads back (decimal, correctly rounded) to the same value."""
    sem = SEMANTICS[name]
    for x in [sem.smallest, sem.largest, Fraction(1, 10), 1, Fraction(33, 10), Fraction(1, 1000), 250]:
        v = round_exact(sem, Fraction(x))
        text = format_apfloat(v, sem)
        if not text.startswith("0x"):
            assert encode(sem, round_exact(sem, Fraction(text))) == encode(sem, v)


def test_seeded_sweep_of_bit_patterns():
    """A cheap, wide sweep besides hypothesis: 20000 random doubles of every magnitude."""
    import random

    rng = random.Random(20240601)
    for _ in range(20000):
        b = rng.getrandbits(64)
        x = struct.unpack("<d", struct.pack("<Q", b))[0]
        assert bits(read_back(format_mlir_float(x))) == b
