"""MLIR's float printer, digit for digit (docs/mlir-quant-spec.md §4).

MLIR prints a float attribute or quantization parameter with ``printFloatValue``
(``mlir/lib/IR/AsmPrinter.cpp``), which tries three forms in turn:

1. ``APFloat::toString(str, 6, 0, false)``: exponent form with six digits after the point,
   kept only if parsing it back into the same format gives the identical bits;
2. ``APFloat::toString(str)``: up to ``2 + precision*59/196`` significant digits (17 for
   a double), trailing zeros dropped, plain notation for moderate exponents and an
   uppercase ``E`` otherwise, kept if it contains a ``.``;
3. the bit pattern as ``0x`` and uppercase hex digits.

APFloat's toString is not C's ``printf``: it first *truncates* the exact binary value to
about the requested number of digits with an integer division, then rounds the digit
string half-up. ``1.0e38`` therefore gives ``9.999990e+37`` in step 1, which does not
round-trip, although ``'%.6e' % 1e38`` would. :func:`apfloat_to_string` is a
transcription of ``toStringImpl`` with Python integers standing in for APInt.

Diagnostics print doubles with ``raw_ostream << double``, i.e. C's ``%e``, with ``INF``
and ``nan`` for the special values: :func:`format_mlir_float_e`.
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction
from functools import lru_cache

from .floatsem import DOUBLE, FloatSemantics, FVal, encode, fval_from_double, round_exact, round_to

__all__ = ["format_mlir_float", "format_mlir_float_e", "format_apfloat", "apfloat_to_string"]


def format_mlir_float(x: float) -> str:
    """How MLIR prints the double ``x`` (scales, calibrated min/max, f64 attributes).

    >>> format_mlir_float(0.25), format_mlir_float(1e38), format_mlir_float(12345678.0)
    ('2.500000e-01', '9.9999999999999997E+37', '0x41678C29C0000000')
    """
    return _format_double_bits(struct.unpack("<Q", struct.pack("<d", float(x)))[0])


@lru_cache(maxsize=8192)
def _format_double_bits(b: int) -> str:  # scales repeat: printing a module hits the cache
    return format_apfloat(fval_from_double(struct.unpack("<d", struct.pack("<Q", b))[0]), DOUBLE)


def format_mlir_float_e(x: float) -> str:
    """``raw_ostream << double``: C's ``%e``, with ``INF``/``-INF`` and ``nan``.

    >>> format_mlir_float_e(0.05), format_mlir_float_e(float("inf"))
    ('5.000000e-02', 'INF')
    """
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "-INF" if x < 0 else "INF"
    return "%e" % x


def format_apfloat(v: FVal, sem: FloatSemantics) -> str:
    """``printFloatValue`` for a value ``v`` of format ``sem`` (see the module docstring)."""
    if v.kind in ("zero", "finite"):
        s = apfloat_to_string(v, sem, 6, 0, False)
        if _parses_back_identically(s, v, sem):
            return s
        s = apfloat_to_string(v, sem)
        if "." in s:
            return s
    return "0x%X" % encode(sem, v)


def _parses_back_identically(text: str, v: FVal, sem: FloatSemantics) -> bool:
    if sem is DOUBLE:  # float() is correctly rounded, like APFloat's decimal parser
        return struct.pack("<d", float(text)) == struct.pack("<d", _as_double(v))
    q = Fraction(text)
    back = FVal("zero", text.startswith("-")) if q == 0 else round_exact(sem, q)
    return encode(sem, round_to(sem, back) if back.kind == "zero" else back) == encode(sem, v)


def _as_double(v: FVal) -> float:
    if v.kind == "zero":
        return -0.0 if v.neg else 0.0
    return float(v.value)


# -- APFloat::toString ---------------------------------------------------------------------

def apfloat_to_string(v: FVal, sem: FloatSemantics, format_precision: int = 0,
                      format_max_padding: int = 3, truncate_zero: bool = True) -> str:
    """``IEEEFloat::toString(Str, FormatPrecision, FormatMaxPadding, TruncateZero)``."""
    if v.kind == "inf":
        return "-Inf" if v.neg else "+Inf"
    if v.kind == "nan":
        return "NaN"
    if v.kind == "zero":
        out = "-" if v.neg else ""
        if format_max_padding:
            return out + "0"
        if truncate_zero:
            return out + "0.0E+0"
        return out + "0.0" + "0" * max(format_precision - 1, 0) + "e+00"
    return _to_string_impl(v.neg, v.exp, v.sig, sem.precision, format_precision,
                           format_max_padding, truncate_zero)


def _to_string_impl(is_neg: bool, exp: int, significand: int, semantics_precision: int,
                    format_precision: int, format_max_padding: int, truncate_zero: bool) -> str:
    out = ["-"] if is_neg else []
    if not format_precision:
        # 2 + floor(significandBits / lg_2(10)), Steele & White
        format_precision = 2 + semantics_precision * 59 // 196

    # Ignore trailing binary zeros.
    tz = (significand & -significand).bit_length() - 1
    exp += tz
    significand >>= tz

    # Change the exponent from 2^e to 10^e.
    if exp > 0:
        significand <<= exp
        exp = 0
    elif exp < 0:
        significand *= 5 ** (-exp)  # N * 2^-e == N * 5^e * 10^-e; exp stays the power of ten

    significand, exp = _adjust_int_to_precision(significand, exp, format_precision)

    # Fill the buffer: least significant digit first, trailing zeros dropped.
    digits = str(significand)
    kept = digits.rstrip("0")
    assert kept, "no characters in buffer!"
    exp += len(digits) - len(kept)
    buffer = list(reversed(kept))

    buffer, exp = _adjust_buffer_to_precision(buffer, exp, format_precision)
    n_digits = len(buffer)

    # Check whether we should use scientific notation.
    if not format_max_padding:
        scientific = True
    elif exp >= 0:
        # 765e3 --> 765000, but don't make the number look more precise than it is.
        scientific = exp > format_max_padding or n_digits + exp > format_precision
    else:
        msd = exp + (n_digits - 1)  # power of the most significant digit
        scientific = False if msd >= 0 else -msd > format_max_padding

    if scientific:
        exp += n_digits - 1
        out.append(buffer[n_digits - 1])
        out.append(".")
        if n_digits == 1 and truncate_zero:
            out.append("0")
        else:
            out.extend(buffer[n_digits - 1 - i] for i in range(1, n_digits))
        if not truncate_zero and format_precision > n_digits - 1:
            out.append("0" * (format_precision - n_digits + 1))
        out.append("E" if truncate_zero else "e")
        out.append("+" if exp >= 0 else "-")
        digits = str(abs(exp))
        if not truncate_zero and len(digits) < 2:
            digits = "0" + digits  # at least two exponent digits
        out.append(digits)
        return "".join(out)

    if exp >= 0:  # non-scientific, positive exponents
        out.extend(reversed(buffer))
        out.append("0" * exp)
        return "".join(out)

    # Non-scientific, negative exponents.
    n_whole = exp + n_digits
    i = 0
    if n_whole > 0:
        while i < n_whole:
            out.append(buffer[n_digits - i - 1])
            i += 1
        out.append(".")
    else:
        out.append("0.")
        out.append("0" * (-n_whole))
    while i < n_digits:
        out.append(buffer[n_digits - i - 1])
        i += 1
    return "".join(out)


def _adjust_int_to_precision(significand: int, exp: int, format_precision: int) -> tuple[int, int]:
    """Drop decimal digits by *truncating* division, as AdjustToPrecision(APInt&) does."""
    bits = significand.bit_length()
    bits_required = (format_precision * 196 + 58) // 59  # 196/59 over-estimates lg2(10)
    if bits <= bits_required:
        return significand, exp
    tens_removable = (bits - bits_required) * 59 // 196
    if not tens_removable:
        return significand, exp
    return significand // 10 ** tens_removable, exp + tens_removable


def _adjust_buffer_to_precision(buffer: list[str], exp: int, format_precision: int):
    """Round the digit buffer half-up to ``format_precision`` digits (AdjustToPrecision)."""
    n = len(buffer)
    if n <= format_precision:
        return buffer, exp
    first = n - format_precision  # the most significant figures are the last ones
    if buffer[first - 1] < "5":
        while first < n and buffer[first] == "0":
            first += 1
        return buffer[first:], exp + first
    buffer = list(buffer)
    i = first
    while i != n:  # decimal add-with-carry
        if buffer[i] == "9":
            first += 1
        else:
            buffer[i] = chr(ord(buffer[i]) + 1)
            break
        i += 1
    if first == n:  # carried through: exactly one digit of precision
        return ["1"], exp + first
    return buffer[first:], exp + first
