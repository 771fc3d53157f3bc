"""Binary floating-point formats as LLVM's APFloat describes them, computed exactly.

Why this exists: MLIR prints, checks and rounds quantization parameters with APFloat,
whose answers depend on each format's parameters (``fltSemantics`` in
``llvm/lib/Support/APFloat.cpp``): the scale range check uses the smallest subnormal and
the largest finite value, sub-channel scales are rounded to the expressed type, and the
printer round-trips decimal text through the format. Every value here is an exact
:class:`fractions.Fraction`; nothing goes through a Python float unless asked.

A value inside a format is a :class:`FVal`: a category, a sign and, for finite values,
``sig * 2**exp`` (any representation of the same number; printing normalises it).
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "FloatSemantics", "FVal", "SEMANTICS", "DOUBLE", "semantics",
    "fval_from_double", "round_to", "round_exact", "encode", "to_double",
]


@dataclass(frozen=True)
class FloatSemantics:
    """One row of APFloat's semantics table.

    ``max_exponent``/``min_exponent`` are the IEEE emax/emin (2**emin is the smallest
    normal); ``precision`` counts the significand bits including the integer bit.
    ``nonfinite`` is ``"ieee"`` (Inf and NaN), ``"nan_only"`` (no Inf) or
    ``"finite_only"``; ``nan_encoding`` is ``"ieee"``, ``"all_ones"`` or
    ``"negative_zero"`` (the FNUZ formats).
    """

    name: str
    max_exponent: int
    min_exponent: int
    precision: int
    size_in_bits: int
    nonfinite: str = "ieee"
    nan_encoding: str = "ieee"
    has_zero: bool = True
    has_signed_repr: bool = True
    explicit_int_bit: bool = False  # x87 80-bit extended keeps the integer bit

    @property
    def largest(self) -> Fraction:
        """Largest finite value, exactly (APFloat::getLargest)."""
        sig = (1 << self.precision) - 1
        if self.nonfinite == "nan_only" and self.nan_encoding == "all_ones" and self.precision > 1:
            sig &= ~1  # the all-ones pattern is NaN
        return _scaled(sig, self.max_exponent - (self.precision - 1))

    @property
    def smallest(self) -> Fraction:
        """Smallest positive value, subnormal where the format has them (APFloat::getSmallest)."""
        return _scaled(1, self.min_exponent - (self.precision - 1))

    @property
    def has_inf(self) -> bool:
        return self.nonfinite == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.nonfinite != "finite_only"

    @property
    def default_print_precision(self) -> int:
        """Significant digits APFloat::toString uses when asked for 0 (enough to round-trip)."""
        return 2 + self.precision * 59 // 196


def _scaled(sig: int, exp: int) -> Fraction:
    return Fraction(sig << exp) if exp >= 0 else Fraction(sig, 1 << -exp)


_S = FloatSemantics
SEMANTICS: dict[str, FloatSemantics] = {s.name: s for s in [
    _S("f16", 15, -14, 11, 16),
    _S("bf16", 127, -126, 8, 16),
    _S("f32", 127, -126, 24, 32),
    _S("f64", 1023, -1022, 53, 64),
    _S("f80", 16383, -16382, 64, 80, explicit_int_bit=True),
    _S("f128", 16383, -16382, 113, 128),
    _S("tf32", 127, -126, 11, 19),
    _S("f8E5M2", 15, -14, 3, 8),
    _S("f8E5M2FNUZ", 15, -15, 3, 8, "nan_only", "negative_zero"),
    _S("f8E4M3", 7, -6, 4, 8),
    _S("f8E4M3FN", 8, -6, 4, 8, "nan_only", "all_ones"),
    _S("f8E4M3FNUZ", 7, -7, 4, 8, "nan_only", "negative_zero"),
    _S("f8E4M3B11FNUZ", 4, -10, 4, 8, "nan_only", "negative_zero"),
    _S("f8E3M4", 3, -2, 5, 8),
    _S("f8E8M0FNU", 127, -127, 1, 8, "nan_only", "all_ones", has_zero=False, has_signed_repr=False),
    _S("f6E3M2FN", 4, -2, 3, 6, "finite_only"),
    _S("f6E2M3FN", 2, 0, 4, 6, "finite_only"),
    _S("f4E2M1FN", 2, 0, 2, 4, "finite_only"),
]}
DOUBLE = SEMANTICS["f64"]


def semantics(name: str) -> FloatSemantics:
    return SEMANTICS[name]


@dataclass(frozen=True)
class FVal:
    """A value of some format: ``kind`` is ``zero``, ``finite``, ``inf`` or ``nan``.

    Finite values are ``(-1)**neg * sig * 2**exp``. ``payload`` keeps a NaN's fraction
    bits (already shifted to the format) so that hex printing matches APFloat.
    """

    kind: str
    neg: bool = False
    sig: int = 0
    exp: int = 0
    payload: int = 0

    @property
    def value(self) -> Fraction:
        if self.kind == "zero":
            return Fraction(0)
        if self.kind != "finite":
            raise ValueError(f"{self.kind} has no exact value")
        v = _scaled(self.sig, self.exp)
        return -v if self.neg else v


def fval_from_double(x: float) -> FVal:
    """Decode a Python float (an IEEE double) exactly, keeping NaN payloads."""
    bits = struct.unpack("<Q", struct.pack("<d", x))[0]
    neg = bool(bits >> 63)
    e = (bits >> 52) & 0x7FF
    frac = bits & ((1 << 52) - 1)
    if e == 0x7FF:
        return FVal("nan", neg, payload=frac) if frac else FVal("inf", neg)
    if e == 0:
        return FVal("finite", neg, frac, -1074) if frac else FVal("zero", neg)
    return FVal("finite", neg, frac | (1 << 52), e - 1075)


def round_to(sem: FloatSemantics, v: FVal) -> FVal:
    """Convert ``v`` into format ``sem`` rounding to nearest, ties to even.

    Mirrors APFloat::convert for the cases MLIR reaches: in-range and overflowing finite
    values (overflow gives Inf, NaN for NaN-only formats, the largest value for
    finite-only ones), zeros, infinities and NaNs (payload truncated, made quiet).
    """
    if v.kind == "nan":
        return _convert_nan(sem, v)
    if v.kind == "inf":
        if sem.has_inf:
            return v
        return FVal("nan", v.neg) if sem.has_nan else _largest(sem, v.neg)
    if v.kind == "zero":
        return _zero(sem, v.neg)
    return round_exact(sem, v.value)


def round_exact(sem: FloatSemantics, x: Fraction) -> FVal:
    """Round the exact rational ``x`` into ``sem``, to nearest with ties to even.

    This is APFloat's decimal parser (``APFloat(sem, "1.5e-3")``), which rounds correctly.
    """
    neg = x < 0
    if x == 0:
        return _zero(sem, False)
    q = abs(x)
    p = sem.precision
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if _scaled(1, e) > q:
        e -= 1  # now 2**e <= q < 2**(e+1)
    e = max(e, sem.min_exponent)
    quantum_exp = e - (p - 1)
    n = q / _scaled(1, quantum_exp)
    m = _round_half_even(n)
    if m == 0:
        return _zero(sem, neg)
    if m >> p:  # carried into a new binade
        m >>= 1
        quantum_exp += 1
        e += 1
    if e > sem.max_exponent or (sem.nan_encoding == "all_ones" and sem.nonfinite == "nan_only"
                                and e == sem.max_exponent and m == (1 << p) - 1 and p > 1):
        return _overflow(sem, neg)
    return FVal("finite", neg and sem.has_signed_repr, m, quantum_exp)


def _round_half_even(n: Fraction) -> int:
    fl = n.numerator // n.denominator
    rem = n - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl & 1):
        return fl + 1
    return fl


def _zero(sem: FloatSemantics, neg: bool) -> FVal:
    if not sem.has_zero:  # E8M0: APFloat has no zero; the smallest value stands in
        return FVal("finite", False, 1, sem.min_exponent - (sem.precision - 1))
    return FVal("zero", neg and sem.nan_encoding != "negative_zero")


def _largest(sem: FloatSemantics, neg: bool) -> FVal:
    lg = sem.largest
    return FVal("finite", neg, lg.numerator, 0) if lg.denominator == 1 else \
        FVal("finite", neg, lg.numerator, -(lg.denominator.bit_length() - 1))


def _overflow(sem: FloatSemantics, neg: bool) -> FVal:
    if sem.has_inf:
        return FVal("inf", neg)
    if sem.has_nan:
        return FVal("nan", neg)
    return _largest(sem, neg)


def _convert_nan(sem: FloatSemantics, v: FVal) -> FVal:
    if sem.nonfinite != "ieee":
        return FVal("nan", v.neg)  # single NaN encoding, payload irrelevant
    fbits = sem.precision - 1 if not sem.explicit_int_bit else sem.precision - 1
    payload = v.payload >> (52 - fbits) if fbits <= 52 else v.payload << (fbits - 52)
    payload |= 1 << (fbits - 1)  # quiet bit: APFloat quiets signalling NaNs on convert
    return FVal("nan", v.neg, payload=payload)


def encode(sem: FloatSemantics, v: FVal) -> int:
    """The bit pattern of ``v`` (already a value of ``sem``), as APFloat::bitcastToAPInt."""
    p, size = sem.precision, sem.size_in_bits
    if sem.name == "f8E8M0FNU":
        if v.kind == "nan":
            return 0xFF
        return _exact_log2(v) + 127
    mant_bits = p if sem.explicit_int_bit else p - 1
    exp_bits = size - 1 - mant_bits
    bias = 1 - sem.min_exponent
    sign = (1 << (size - 1)) if v.neg else 0
    all_ones_exp = (1 << exp_bits) - 1
    if v.kind == "zero":
        return sign
    if v.kind == "inf":
        mant = (1 << (p - 1)) if sem.explicit_int_bit else 0
        return sign | (all_ones_exp << mant_bits) | mant
    if v.kind == "nan":
        if sem.nan_encoding == "negative_zero":
            return 1 << (size - 1)
        if sem.nan_encoding == "all_ones":
            return sign | (1 << (size - 1)) - 1
        mant = v.payload | ((1 << (p - 1)) if sem.explicit_int_bit else 0)
        return sign | (all_ones_exp << mant_bits) | mant
    # finite, non-zero: normalise to p bits of significand
    sig, exp = v.sig, v.exp
    shift = p - sig.bit_length()
    if shift >= 0:
        sig, exp = sig << shift, exp - shift  # now 2**(p-1) <= sig < 2**p
    else:  # more bits than needed: only trailing zeros, since v is a value of sem
        sig, exp = sig >> -shift, exp - shift
    e = exp + (p - 1)
    if e < sem.min_exponent:  # subnormal
        sig >>= sem.min_exponent - e
        field = 0
    else:
        field = e + bias
    mant = sig if sem.explicit_int_bit else sig & ((1 << (p - 1)) - 1)
    return sign | (field << mant_bits) | mant


def _exact_log2(v: FVal) -> int:
    sig, exp = v.sig, v.exp
    while sig and not sig & 1:
        sig >>= 1
        exp += 1
    return exp


def to_double(v: FVal) -> float:
    """The Python float nearest to ``v`` (inf beyond the double range)."""
    if v.kind == "nan":
        return math.nan
    if v.kind == "inf":
        return -math.inf if v.neg else math.inf
    if v.kind == "zero":
        return -0.0 if v.neg else 0.0
    try:
        return float(v.value)
    except OverflowError:
        return -math.inf if v.neg else math.inf
