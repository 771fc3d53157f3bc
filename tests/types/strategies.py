"""Hypothesis strategies for valid quantized types and for text derived from them."""
from __future__ import annotations

import math
from functools import lru_cache

from hypothesis import strategies as st

from quantir.types import (
    FLOAT_TYPE_NAMES, FloatType, any_quantized, calibrated, uniform, uniform_per_axis,
    uniform_sub_channel,
)
from quantir.types.quant import FLOAT_STORAGE_TYPES, QuantizedType

INT64 = (-(1 << 63), (1 << 63) - 1)
NICE_SCALES = [0.05, 1.0, 0.5, 0.25, 2.0, 0.00392156862745098, 1e-3, 0.1, 123456.7, 1e38, 12345678.0,
               0.123456789, 5.9604644775390625e-08, 3.0517578125e-05, 0.007874015748031496]


@st.composite
def storage_specs(draw, allow_float: bool = True):
    """(spelling, default_min, default_max) of a legal storage type."""
    if allow_float and draw(st.integers(0, 9)) == 0:
        name = draw(st.sampled_from(FLOAT_STORAGE_TYPES))
        m = int(FloatType(name).exact_max_finite)
        return name, -m, m
    prefix = draw(st.sampled_from(["i", "u", "si", "ui"]))
    width = draw(st.one_of(st.sampled_from([8, 8, 8, 4, 16, 32]), st.integers(1, 32)))
    if prefix in ("u", "ui"):
        return f"{prefix}{width}", 0, (1 << width) - 1
    return f"{prefix}{width}", -(1 << (width - 1)), (1 << (width - 1)) - 1


@st.composite
def storage_ranges(draw, lo: int, hi: int):
    if draw(st.booleans()):
        return None
    a = draw(st.integers(lo, hi - 1))
    b = draw(st.integers(a + 1, hi))
    return (a, b)


@lru_cache(maxsize=None)
def scales(expressed: str, allow_nan: bool = True) -> st.SearchStrategy[float]:
    """Legal scales of an expressed type: nice values, both ends of the range, anything."""
    t = FloatType(expressed)
    lo, hi = t.min_denormal, t.max_finite
    nice = [x for x in NICE_SCALES if lo <= x <= hi]
    parts = [st.sampled_from([lo, hi]),
             st.floats(min_value=lo, max_value=min(hi, 1.7976931348623157e308),
                       allow_nan=False, allow_infinity=False)]
    if nice:
        parts.append(st.sampled_from(nice))
    if allow_nan:
        parts.append(st.just(math.nan))
    return st.one_of(parts)


ZERO_POINTS = st.one_of(st.integers(-128, 255), st.integers(*INT64))


def zero_points():
    return ZERO_POINTS


expressed_names = st.sampled_from(FLOAT_TYPE_NAMES)


@st.composite
def uniform_types(draw):
    spelling, lo, hi = draw(storage_specs())
    et = draw(expressed_names)
    return uniform(spelling, et, scale=draw(scales(et)), zero_point=draw(zero_points()),
                   storage_range=draw(storage_ranges(lo, hi)))


@st.composite
def per_axis_types(draw):
    spelling, lo, hi = draw(storage_specs())
    et = draw(expressed_names)
    n = draw(st.integers(1, 5))
    return uniform_per_axis(spelling, et, axis=draw(st.one_of(st.integers(0, 4), st.integers(0, 2**31 - 1))),
                            scales=[draw(scales(et)) for _ in range(n)],
                            zero_points=[draw(zero_points()) for _ in range(n)],
                            storage_range=draw(storage_ranges(lo, hi)))


@st.composite
def sub_channel_types(draw, oracle_safe: bool = True):
    """Sub-channel types. ``oracle_safe`` avoids what iree-opt mishandles: float storage
    (it crashes) and 1-bit storage (it prints garbage zero points)."""
    spelling, lo, hi = draw(storage_specs(allow_float=not oracle_safe))
    if oracle_safe and spelling.lstrip("sui") == "1":
        spelling, lo, hi = "i8", -128, 127
    et = draw(expressed_names)
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    n = math.prod(shape)
    flat_s = [draw(scales(et, allow_nan=False)) for _ in range(n)]
    flat_z = [draw(st.integers(-300, 300)) for _ in range(n)]

    def nest(flat, dims):
        if len(dims) == 1:
            return list(flat)
        step = len(flat) // dims[0]
        return [nest(flat[i * step:(i + 1) * step], dims[1:]) for i in range(dims[0])]

    blocks = draw(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 64)), max_size=3))
    return uniform_sub_channel(spelling, et, block_sizes=blocks, scales=nest(flat_s, shape),
                               zero_points=nest(flat_z, shape), storage_range=draw(storage_ranges(lo, hi)))


@st.composite
def any_types(draw):
    spelling, lo, hi = draw(storage_specs())
    et = draw(st.one_of(st.none(), expressed_names))
    return any_quantized(spelling, et, storage_range=draw(storage_ranges(lo, hi)))


@st.composite
def calibrated_types(draw):
    et = draw(expressed_names)
    a = draw(st.floats(allow_nan=False, allow_infinity=False, width=64))
    b = draw(st.floats(allow_nan=False, allow_infinity=False, width=64).filter(lambda x: x != a))
    return calibrated(et, min(a, b), max(a, b))


def reparses(t: QuantizedType) -> bool:
    """Whether MLIR can read back what it prints for ``t``. Sub-channel scales print in the
    expressed type's own format, but are read back as doubles: a hex form is taken as a
    double's bits, and a 6-digit form of a value at the bottom of the range (f16's smallest
    subnormal prints as 5.960460e-08) reads back below the range. Known MLIR limitations."""
    from quantir.types import UniformQuantizedSubChannelType
    from quantir.types.floatfmt import format_apfloat
    from quantir.types.floatsem import fval_from_double, round_to
    from quantir.types.quant import scale_range_message

    if not isinstance(t, UniformQuantizedSubChannelType) or t.expressed_type.name == "f64":
        return True
    sem = t.expressed_type.semantics
    for s in t.scales:
        text = format_apfloat(round_to(sem, fval_from_double(s)), sem)
        if text.startswith("0x") or scale_range_message(float(text), t.expressed_type):
            return False
    return True


def quant_types(oracle_safe: bool = True) -> st.SearchStrategy[QuantizedType]:
    return st.one_of(uniform_types(), per_axis_types(), sub_channel_types(oracle_safe),
                     any_types(), calibrated_types())


@st.composite
def respelled(draw, t: QuantizedType) -> str:
    """Equivalent spellings: canonical, the ``!quant<...>`` form, or extra whitespace."""
    text = str(t)
    how = draw(st.integers(0, 2))
    if how == 1:
        head, rest = text.split("<", 1)
        return "!quant<" + head[len("!quant."):] + "<" + rest + ">"
    if how == 2:
        return text.replace(":", " : ").replace(",", " ,  ").replace("{", "{ ").replace("}", " }")
    return text


MUTATION_CHARS = list("<>{}():,.-+x0123456789 iuf*?!e") + ["0x", "1.0", "i8", "f32", "inf"]


@st.composite
def mutated(draw, text: str) -> str:
    """``text`` with one random edit: delete, insert or replace a character."""
    i = draw(st.integers(0, len(text) - 1))
    op = draw(st.integers(0, 2))
    if op == 0:
        return text[:i] + text[i + 1:]
    s = draw(st.sampled_from(MUTATION_CHARS))
    if op == 1:
        return text[:i] + s + text[i:]
    return text[:i] + s + text[i + 1:]
