"""Scalars as MLIR's text format spells them: floats in their own type's precision, integers
wrapped to their width, and the numpy dtypes that hold elements attributes.

Why a float needs its type to be printed: MLIR prints a ``FloatAttr`` or a dense element with
``printFloatValue`` on the *APFloat of the element type*, and its round-trip check parses the
short form back in that same format. So an f32 ``0.1`` prints ``1.000000e-01`` (it comes back
as the same f32), while the double ``0.1f`` would not. ``format_float`` does exactly that on
top of the type system's APFloat model (:mod:`quantir.types.floatsem`/``floatfmt``).

Values are held as Python floats (doubles): every format up to f64 embeds exactly in a double,
NaN payloads included (shifted into the double's fraction, never quietened here, so a
signalling f32 NaN written as ``0x7F800001`` prints back unchanged).

Storage of elements attributes (``DenseElementsAttr.array``/``DenseResourceAttr.array``):

=================  =====================================================================
element type        numpy dtype
=================  =====================================================================
i1                  bool
iN/siN (N <= 64)    int8/int16/int32/int64 (the smallest that holds N bits)
uiN (N <= 64)       uint8 ... uint64
index               int64
f16/f32/f64         float16/float32/float64
bf16, f8*, tf32...  the *bit patterns*, as uint8/uint16/uint32 (numpy has no such floats)
=================  =====================================================================
"""
from __future__ import annotations

import math
import struct

import numpy as np

from ..types import FloatType, IndexType, IntegerType, Type, format_mlir_float
from ..types.floatfmt import format_apfloat
from ..types.floatsem import FloatSemantics, FVal, encode, fval_from_double, round_to, to_double

__all__ = [
    "format_float", "format_float_bits", "float_to_bits", "bits_to_float", "round_float",
    "canonical_int", "int_fits", "element_dtype", "storage_bytes", "is_bit_pattern_float",
]


# -- floats -----------------------------------------------------------------------------------

def _double_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def _bits_double(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", b & 0xFFFF_FFFF_FFFF_FFFF))[0]


def _layout(sem: FloatSemantics) -> tuple[int, int, int]:
    """(mantissa bits, exponent bits, bias) of an IEEE-like encoding."""
    mant_bits = sem.precision if sem.explicit_int_bit else sem.precision - 1
    return mant_bits, sem.size_in_bits - 1 - mant_bits, 1 - sem.min_exponent


def decode_bits(sem: FloatSemantics, bits: int) -> FVal:
    """The value a bit pattern of format ``sem`` encodes (inverse of ``floatsem.encode``)."""
    size, p = sem.size_in_bits, sem.precision
    if sem.name == "f8E8M0FNU":
        return FVal("nan") if bits == 0xFF else FVal("finite", False, 1, bits - 127)
    mant_bits, exp_bits, bias = _layout(sem)
    neg = bool(bits >> (size - 1) & 1)
    field = bits >> mant_bits & ((1 << exp_bits) - 1)
    mant = bits & ((1 << mant_bits) - 1)
    if sem.nan_encoding == "negative_zero" and bits == 1 << (size - 1):
        return FVal("nan", True)
    if sem.nan_encoding == "all_ones" and sem.nonfinite == "nan_only" \
            and bits & ((1 << (size - 1)) - 1) == (1 << (size - 1)) - 1:
        return FVal("nan", neg)
    if sem.nonfinite == "ieee" and field == (1 << exp_bits) - 1:
        frac = mant & ((1 << (p - 1)) - 1)
        return FVal("nan", neg, payload=frac) if frac else FVal("inf", neg)
    if sem.explicit_int_bit:
        if field == 0:
            return FVal("finite", neg, mant, sem.min_exponent - (p - 1)) if mant else FVal("zero", neg)
        return FVal("finite", neg, mant, field - bias - (p - 1))
    if field == 0:
        if mant == 0:
            return FVal("zero", neg)
        return FVal("finite", neg, mant, sem.min_exponent - (p - 1))
    return FVal("finite", neg, mant | (1 << (p - 1)), field - bias - (p - 1))


def float_to_bits(value: float, ft: FloatType) -> int:
    """The bit pattern of ``value`` rounded (to nearest, ties to even) into ``ft``."""
    if ft.name == "f64":
        return _double_bits(value)
    sem = ft.semantics
    if math.isnan(value) and sem.nonfinite == "ieee":
        # keep the payload as written: shift it back out of the double's fraction
        d = _double_bits(value)
        fbits = sem.precision - 1
        payload = (d & ((1 << 52) - 1)) >> (52 - fbits)
        return encode(sem, FVal("nan", bool(d >> 63), payload=payload or 1 << (fbits - 1)))
    return encode(sem, round_to(sem, fval_from_double(value)))


def bits_to_float(bits: int, ft: FloatType) -> float:
    """The double holding the value of a bit pattern of ``ft`` (NaN payloads shifted in)."""
    if ft.name == "f64":
        return _bits_double(bits)
    sem = ft.semantics
    v = decode_bits(sem, bits)
    if v.kind == "nan":
        if sem.nonfinite == "ieee":
            payload = v.payload << (52 - (sem.precision - 1))
            return _bits_double((int(v.neg) << 63) | (0x7FF << 52) | payload)
        return -math.nan if v.neg else math.nan
    return to_double(v)


def round_float(value: float, ft: FloatType) -> float:
    """``value`` rounded into ``ft`` and back: what MLIR stores for ``FloatAttr::get(ft, value)``."""
    if ft.name == "f64":
        return float(value)
    return bits_to_float(float_to_bits(value, ft), ft)


def format_float_bits(bits: int, ft: FloatType) -> str:
    """``printFloatValue`` for a bit pattern of ``ft``."""
    if ft.name == "f64":
        return format_mlir_float(_bits_double(bits))
    v = decode_bits(ft.semantics, bits)
    if v.kind in ("nan", "inf"):
        return "0x%X" % bits
    return format_apfloat(v, ft.semantics)


def format_float(value: float, ft: FloatType) -> str:
    """How MLIR prints ``value`` as a float of type ``ft``.

    >>> from quantir.types import f16, f32, f64
    >>> format_float(0.1, f32), format_float(0.1, f16), format_float(0.1, f64)
    ('1.000000e-01', '9.997550e-02', '1.000000e-01')
    >>> format_float(float("inf"), f32)
    '0x7F800000'
    """
    if ft.name == "f64":
        return format_mlir_float(float(value))
    return format_float_bits(float_to_bits(float(value), ft), ft)


# -- integers ---------------------------------------------------------------------------------

def _int_width(t: Type) -> int:
    return 64 if isinstance(t, IndexType) else t.width  # type: ignore[union-attr]


def canonical_int(value: int, t: Type) -> int:
    """The value MLIR's APInt of type ``t`` reads back: signless and signed integers wrap to
    signed values (``255 : i8`` is ``-1``), unsigned ones to ``[0, 2**N)``; ``i1`` is 0 or 1."""
    w = _int_width(t)
    if w == 0:
        return 0
    v = int(value) & ((1 << w) - 1)
    if w == 1:
        return v
    if isinstance(t, IntegerType) and t.signedness == "unsigned":
        return v
    return v - (1 << w) if v >> (w - 1) else v


def int_fits(magnitude: int, negative: bool, t: Type) -> int | None:
    """MLIR's ``buildAttributeAPInt``: the value of ``[-]magnitude`` as type ``t``, or None when
    out of range. Signless integers accept ``[-2**(N-1), 2**N)``; ``-0`` is out of range."""
    w = _int_width(t)
    if magnitude >> w:
        return None
    if w == 0:
        return None if negative else 0
    if negative:
        v = (-magnitude) & ((1 << w) - 1)
        if not v >> (w - 1):
            return None
        return canonical_int(v, t)
    signed = isinstance(t, IndexType) or (isinstance(t, IntegerType) and t.signedness == "signed")
    if signed and magnitude >> (w - 1):
        return None
    return canonical_int(magnitude, t)


# -- elements storage -------------------------------------------------------------------------

def is_bit_pattern_float(t: Type) -> bool:
    """A float type whose elements are held as raw bit patterns (no numpy dtype)."""
    return isinstance(t, FloatType) and t.name not in ("f16", "f32", "f64")


def element_dtype(t: Type) -> np.dtype:
    """The numpy dtype that holds elements of type ``t`` (table in the module docstring).

    Raises ValueError for element types quantir cannot hold in an array.
    """
    if isinstance(t, IndexType):
        return np.dtype(np.int64)
    if isinstance(t, IntegerType):
        if t.width == 1:
            return np.dtype(np.bool_)
        if not 1 <= t.width <= 64:
            raise ValueError(f"quantir holds integer elements of 1 to 64 bits, not '{t}'")
        bits = 8 if t.width <= 8 else 16 if t.width <= 16 else 32 if t.width <= 32 else 64
        return np.dtype(f"{'uint' if t.signedness == 'unsigned' else 'int'}{bits}")
    if isinstance(t, FloatType):
        if t.name in ("f16", "f32", "f64"):
            return np.dtype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[t.name])
        bits = t.bitwidth
        if bits > 32:
            raise ValueError(f"quantir cannot hold elements of type '{t}'")
        return np.dtype(np.uint8 if bits <= 8 else np.uint16 if bits <= 16 else np.uint32)
    raise ValueError(f"quantir cannot hold elements of type '{t}'")


def storage_bytes(t: Type) -> int | None:
    """Bytes per element in MLIR's raw buffers (hex ``dense`` strings, resource blobs), when
    that matches :func:`element_dtype`'s item size; None otherwise (``i48``, ``tf32``)."""
    try:
        dt = element_dtype(t)
    except ValueError:
        return None
    if isinstance(t, IntegerType) and t.width == 1:
        return 1
    width = 64 if isinstance(t, IndexType) else t.width if isinstance(t, IntegerType) else t.bitwidth
    nbytes = (width + 7) // 8
    return nbytes if nbytes == dt.itemsize else None
