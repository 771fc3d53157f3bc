"""--convert-fake-quant against TensorFlow's definition of fake quantization, exactly.

The reference (written here, from ``FakeQuantWithMinMaxArgs``'s definition, in fractions):
on the unsigned grid ``[qmin, qmax] = [narrow_range, 2^n - 1]``, ``scale = (max - min) / (qmax - qmin)``,
zero point ``qmin - min / scale`` clamped to the grid and rounded (half up: it is never negative),
then ``y = scale · clamp(floor(x / scale + 1/2), qmin - zp, qmax - zp)``.

The converted pair runs in quantir's interpreter (QUANTIZE then DEQUANTIZE). Two things differ, both
at the level of one rounding, and the test names each instead of allowing a tolerance:

* the scale is float32 (the one a deployed model stores): the test checks it is the float32
  nearest the exact scale, and the grid is then ``k · scale32``, ``y = f32(k · scale32)``;
* ties: TensorFlow rounds ``x / scale`` half up, QUANTIZE half away from zero. At an exact negative
  tie the pair gives one step lower. QUANTIZE rounds the float32 quotient, so an ``x / scale`` within
  half a float32 ulp of a tie may round either way; those inputs are counted, not compared.
Everywhere else the grid index and the output float are equal.
"""
from __future__ import annotations

from fractions import Fraction
from math import floor

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from quantir.errors import VerifyError
from quantir.passes.fake_quant import ConvertFakeQuant
from quantir.runtime import run
from quantir.text import parse_module

F32 = np.float32


def tf_grid(lo: float, hi: float, bits: int, narrow: bool) -> tuple[Fraction, int, int, int]:
    """(exact scale, zero point, qmin, qmax) on TensorFlow's unsigned grid."""
    qmin, qmax = int(narrow), 2 ** bits - 1
    scale = (Fraction(lo) - Fraction(hi)) / (qmin - qmax)
    z = qmin - Fraction(lo) / scale
    zp = qmin if z < qmin else qmax if z > qmax else floor(z + Fraction(1, 2))
    return scale, zp, qmin, qmax


def is_nearest_f32(s32: float, exact: Fraction) -> bool:
    up, down = np.nextafter(F32(s32), F32(np.inf)), np.nextafter(F32(s32), F32(0))
    d = abs(Fraction(s32) - exact)
    return F32(s32) == s32 and d <= abs(Fraction(float(up)) - exact) and d <= abs(Fraction(float(down)) - exact)


def f32_ulp(v: Fraction) -> Fraction:
    a = abs(float(v))
    return Fraction(float(np.spacing(F32(a)))) if a else Fraction(0)


def module_text(op: str, shape: str, attrs: str) -> str:
    return (f"func.func @main(%arg0: tensor<{shape}xf32>) -> tensor<{shape}xf32> {{\n"
            f"  %0 = \"{op}\"(%arg0) {{{attrs}}} : (tensor<{shape}xf32>) -> tensor<{shape}xf32>\n"
            f"  return %0 : tensor<{shape}xf32>\n}}\n")


def f32_attr(v: float) -> str:
    return f"{float(F32(v))!r} : f32"


def convert(text: str):
    m = parse_module(text)
    assert ConvertFakeQuant().run(m).stats
    qtype = m.main.ops[0].results[0].type.element_type
    return m, qtype


class Tally:
    def __init__(self):
        self.equal = self.negative_ties = self.near_ties = 0


def check_channel(x: np.ndarray, y: np.ndarray, lo: float, hi: float, bits: int, narrow: bool, signed: bool,
                  s32: float, zp_stored: int, tally: Tally) -> None:
    scale, zp, qmin, qmax = tf_grid(lo, hi, bits, narrow)
    assert is_nearest_f32(s32, scale), (s32, float(scale))
    assert zp_stored == zp - (2 ** (bits - 1) if signed else 0)
    kmin, kmax = qmin - zp, qmax - zp
    for xi, yi in zip(x.ravel().tolist(), y.ravel().tolist()):
        v = Fraction(xi) / Fraction(s32)
        k_tf = min(max(floor(v + Fraction(1, 2)), kmin), kmax)
        j = round(yi / s32)
        assert yi == float(F32(j * s32)), (xi, yi, j)    # the output is the grid point, rounded once
        half = floor(v) + Fraction(1, 2)
        if v == half and kmin <= floor(v) < kmax:
            # an exact tie inside the range: TensorFlow rounds up, QUANTIZE away from zero
            assert j == (k_tf - 1 if v < 0 else k_tf), (xi, j, k_tf)
            tally.negative_ties += v < 0
            tally.equal += v > 0
        elif abs(v - half) <= f32_ulp(v):
            # within an ulp of a tie: QUANTIZE's float32 quotient may round onto it
            assert j in (min(max(floor(v), kmin), kmax), min(max(floor(v) + 1, kmin), kmax)), (xi, j)
            tally.near_ties += 1
        else:
            assert j == k_tf, (xi, yi, j, k_tf, lo, hi)
            tally.equal += 1


finite_f32 = st.floats(-1e4, 1e4, width=32, allow_subnormal=False)


@st.composite
def fake_quant_case(draw, bits_choices=tuple(range(2, 9))):
    lo, hi = sorted((draw(finite_f32), draw(finite_f32)))
    assume(hi - lo >= 1e-6 * max(1.0, abs(lo), abs(hi)))
    bits = draw(st.sampled_from(bits_choices))
    narrow, signed = draw(st.booleans()), draw(st.booleans())
    return lo, hi, bits, narrow, signed


def inputs(draw, lo: float, hi: float, s32: float, n: int = 24) -> np.ndarray:
    w = hi - lo
    around = st.floats(min(lo, 0) - w / 4, max(hi, 0) + w / 4, allow_subnormal=False).map(lambda v: float(F32(v)))
    xs = draw(st.lists(around, min_size=n, max_size=n))
    # exact ties of x / scale, where the two roundings differ
    ks = draw(st.lists(st.integers(-260, 260), min_size=8, max_size=8))
    xs += [float(F32((k + 0.5) * s32)) for k in ks]
    return np.asarray(xs, F32)


TALLY = Tally()   # the property tests' counts (their examples vary run to run)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_per_tensor_matches_tensorflow_definition(data):
    lo, hi, bits, narrow, signed = data.draw(fake_quant_case())
    attrs = (f"min = {f32_attr(lo)}, max = {f32_attr(hi)}, num_bits = {bits}, narrow_range = {str(narrow).lower()}, "
             f"is_signed = {str(signed).lower()}")
    m, qt = convert(module_text("quant.const_fake_quant", "32", attrs))
    x = inputs(data.draw, lo, hi, qt.scale)
    y = run(m, {"arg0": x})["out0"]
    check_channel(x, y, lo, hi, bits, narrow, signed, qt.scale, qt.zero_point, TALLY)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_wide_signed_symmetric(data):
    """9-16 bits run in int16, which DEQUANTIZE takes with zero point 0 only: symmetric ranges."""
    a = data.draw(st.floats(2.0 ** -10, 1e4, width=32))
    bits, narrow = data.draw(st.integers(9, 16)), data.draw(st.booleans())
    attrs = f"min = {f32_attr(-a)}, max = {f32_attr(a)}, num_bits = {bits}, narrow_range = {str(narrow).lower()}, " \
            f"is_signed = true"
    m, qt = convert(module_text("quant.const_fake_quant", "32", attrs))
    assert qt.zero_point == 0
    x = inputs(data.draw, -a, a, qt.scale)
    check_channel(x, run(m, {"arg0": x})["out0"], -a, a, bits, narrow, True, qt.scale, 0, TALLY)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_per_axis_matches_tensorflow_definition(data):
    bits = data.draw(st.sampled_from([4, 8]))
    narrow, signed = data.draw(st.booleans()), data.draw(st.booleans())
    ranges = []
    for _ in range(3):
        lo, hi = sorted((data.draw(finite_f32), data.draw(finite_f32)))
        assume(hi - lo >= 1e-6 * max(1.0, abs(lo), abs(hi)))
        ranges.append((lo, hi))
    attrs = (f"min = [{', '.join(f32_attr(lo) for lo, _ in ranges)}], "
             f"max = [{', '.join(f32_attr(h) for _, h in ranges)}], "
             f"axis = 1, num_bits = {bits}, narrow_range = {str(narrow).lower()}, is_signed = {str(signed).lower()}")
    m, qt = convert(module_text("quant.const_fake_quant_per_axis", "16x3", attrs))
    assert qt.quantized_dimension == 1
    cols = [inputs(data.draw, lo, hi, s, n=8) for (lo, hi), s in zip(ranges, qt.scales)]
    x = np.stack(cols, axis=1)
    y = run(m, {"arg0": x})["out0"]
    for c, (lo, hi) in enumerate(ranges):
        check_channel(x[:, c], y[:, c], lo, hi, bits, narrow, signed, qt.scales[c], qt.zero_points[c], TALLY)


@pytest.mark.parametrize("signed", [False, True])
def test_exact_ties_take_both_branches(signed):
    """[-8, 7.9375] at 8 bits: scale 1/16 and zero point 128 exactly, so every (k + 1/2)/16 is an
    exact tie: positive ones equal TensorFlow's, negative ones one step lower (half away from zero)."""
    attrs = (f"min = -8.0 : f32, max = 7.9375 : f32, num_bits = 8, narrow_range = false, "
             f"is_signed = {str(signed).lower()}")
    m, qt = convert(module_text("quant.const_fake_quant", "200", attrs))
    assert qt.scale == 1 / 16 and qt.zero_point == (0 if signed else 128)
    x = ((np.arange(-100, 100) + 0.5) / 16).astype(F32)
    tally = Tally()
    check_channel(x, run(m, {"arg0": x})["out0"], -8.0, 7.9375, 8, False, signed, qt.scale, qt.zero_point, tally)
    assert (tally.negative_ties, tally.equal, tally.near_ties) == (100, 100, 0)


def test_hand_checked():
    """[-1, 1] at 8 bits: zero point 127.5 -> 128 in both storages (the fork gives i8 -1); -0.5 steps ties."""
    for signed, zp in ((False, 128), (True, 0)):
        attrs = f"min = -1.0 : f32, max = 1.0 : f32, is_signed = {str(signed).lower()}"
        m, qt = convert(module_text("quant.const_fake_quant", "6", attrs))
        assert (qt.scale, qt.zero_point) == (float(F32(2 / 255)), zp)
        s = qt.scale
        x = np.array([-2.0, 2.0, 0.0, -1.5 * s, 1.5 * s, 0.3 * s], F32)
        y = run(m, {"arg0": x})["out0"]
        # clamps at -128 and 127 steps; -1.5 steps goes to -2 (TensorFlow: -1), +1.5 to 2
        assert (np.round(y / s).astype(int).tolist()) == [-128, 127, 0, -2, 2, 0]


def test_range_without_zero_and_degenerate():
    m, qt = convert(module_text("quant.const_fake_quant", "4", "min = 0.5 : f32, max = 2.0 : f32"))
    y = run(m, {"arg0": np.array([0.0, 0.25, 1.5, 2.0], F32)})["out0"]
    assert y.tolist() == [0.0, float(F32(43 * F32(1.5 / 255))), 1.5, 1.5]   # [0.5, 2] moved to [0, 1.5]
    m, qt = convert(module_text("quant.const_fake_quant", "4", "min = 0.0 : f32, max = 0.0 : f32"))
    assert (qt.scale, qt.zero_point) == (1.0, 0)
    # the fork's special case is exact for the zeros it is meant for, not for other values
    assert run(m, {"arg0": np.array([0.0, 0.4, -3.0, 3.0], F32)})["out0"].tolist() == [0.0, 0.0, 0.0, 3.0]


def test_min_above_max_is_refused_by_the_verifier():
    with pytest.raises(VerifyError, match=r"illegal min and max: \(1.0:-1.0\)"):
        parse_module(module_text("quant.const_fake_quant", "4", "min = 1.0 : f32, max = -1.0 : f32"))
