"""Scalars in MLIR's spelling: floats in their own type, integers wrapped to their width."""
from __future__ import annotations

import math
import random
import re
import subprocess

import numpy as np
import pytest

from quantir.text.numbers import (bits_to_float, canonical_int, element_dtype, float_to_bits, format_float,
                                  format_float_bits, int_fits, round_float, storage_bytes)
from quantir.types import FloatType, IntegerType, bf16, f16, f32, f64, i1, i8, i64, index

U8 = IntegerType(8, "unsigned")
SI8 = IntegerType(8, "signed")


@pytest.mark.parametrize("value, ft, text", [
    (0.1, f32, "1.000000e-01"), (0.1, f16, "9.997550e-02"), (0.1, bf16, "1.000980e-01"),
    (0.1, f64, "1.000000e-01"), (1.0e38, f64, "9.9999999999999997E+37"),
    (12345678.0, f64, "0x41678C29C0000000"), (0.1234567, f32, "0.123456702"),
    (-0.0, f32, "-0.000000e+00"), (math.inf, f32, "0x7F800000"), (-math.inf, f16, "0xFC00"),
    (65504.0, f16, "6.550400e+04"), (1e-45, f32, "1.401300e-45"), (1e39, f32, "0x7F800000"),
])
def test_format_float(value, ft, text):
    assert format_float(value, ft) == text


def test_nan_payloads_survive_the_double():
    for ft, bits in [(f32, 0x7F800001), (f32, 0xFFC00000), (f16, 0x7C01), (bf16, 0x7F81), (f64, 0x7FF0000000000001)]:
        value = bits_to_float(bits, ft)
        assert math.isnan(value)
        assert float_to_bits(value, ft) == bits
        assert format_float(value, ft) == "0x%X" % bits


def test_round_float_is_the_type_rounding():
    assert round_float(0.1, f32) == float(np.float32(0.1))
    assert round_float(0.1, f16) == float(np.float16(0.1))
    assert round_float(1e39, f32) == math.inf
    assert round_float(0.1, f64) == 0.1


@pytest.mark.parametrize("value, t, expected", [
    (255, i8, -1), (-1, U8, 255), (128, SI8, -128), (1, i1, 1), (2, i1, 0), (1 << 63, i64, -(1 << 63)),
    (-1, index, -1),
])
def test_canonical_int(value, t, expected):
    assert canonical_int(value, t) == expected


@pytest.mark.parametrize("magnitude, negative, t, expected", [
    (255, False, i8, -1), (256, False, i8, None), (128, True, i8, -128), (129, True, i8, None),
    (0, True, i8, None), (1, True, i1, 1), (2, False, i1, None), (127, False, SI8, 127), (128, False, SI8, None),
    ((1 << 63), False, index, None), ((1 << 64) - 1, False, i64, -1),
])
def test_int_fits_is_mlirs_build_attribute_apint(magnitude, negative, t, expected):
    assert int_fits(magnitude, negative, t) == expected


def test_element_dtypes():
    assert element_dtype(i1) == np.bool_
    assert element_dtype(IntegerType(4)) == np.int8 and storage_bytes(IntegerType(4)) == 1
    assert element_dtype(U8) == np.uint8
    assert element_dtype(IntegerType(48)) == np.int64 and storage_bytes(IntegerType(48)) is None
    assert element_dtype(bf16) == np.uint16  # bit patterns
    assert element_dtype(FloatType("f8E4M3FN")) == np.uint8
    assert element_dtype(index) == np.int64
    with pytest.raises(ValueError):
        element_dtype(IntegerType(65))


@pytest.mark.oracle
def test_float_printing_matches_iree_opt(iree_opt):
    """Random bit patterns of each format: quantir's spelling equals iree-opt's."""
    rng = random.Random(7)
    lines, expected = [], []
    for name in ("f16", "bf16", "f32", "f64", "f8E4M3FN", "f8E5M2"):
        ft = FloatType(name)
        width = ft.bitwidth
        bits = [rng.getrandbits(width) for _ in range(150)]
        bits += [rng.getrandbits(width) & ~((1 << (width // 2)) - 1) for _ in range(50)]  # short mantissas
        lines.append(f'"test.op"() {{v = array<{name}: ' + ", ".join("0x%X" % b for b in bits) + ">} : () -> ()")
        expected.append([format_float_bits(b, ft) for b in bits])
    text = "func.func @f() {\n" + "\n".join(lines) + "\nreturn\n}\n"
    proc = subprocess.run([iree_opt, "--allow-unregistered-dialect"], input=text, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    got = [g.split(", ") for g in re.findall(r"array<\w+: ([^>]*)>", proc.stdout)]
    assert got == expected
