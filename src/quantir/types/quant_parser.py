"""The ``quant`` dialect's type parser (``mlir/lib/Dialect/Quant/IR/TypeParser.cpp``).

Called by :meth:`TypeParser.parse_extended_type` with the lexer on the first token of the
body (``uniform`` in both ``!quant.uniform<...>`` and ``!quant<uniform<...>>``). Checks
that MLIR makes while parsing report at the literal they concern (storage min/max, scale
range, ranks of a scale list); checks made by the type verifier afterwards
(``illegal quantized dimension: -1``, ``illegal storage min and storage max: (5:5)``)
report at the type's name, as MLIR's ``getChecked`` does.
"""
from __future__ import annotations

import re

from ..errors import ParseError, VerifyError
from .builtin import FloatType, IntegerType, Type
from .lexer import Tok
from .parser import MAX_NESTING, TypeParser, add_followup
from .quant import (
    FLOAT_STORAGE_TYPES, MAX_STORAGE_BITS, AnyQuantizedType, CalibratedQuantizedType,
    UniformQuantizedPerAxisType, UniformQuantizedSubChannelType, UniformQuantizedType,
    scale_range_message,
)

__all__ = ["parse_quant_type", "parse_storage_type"]

_DIGITS = re.compile(r"[0-9]+\Z")


def parse_quant_type(p: TypeParser) -> Type:
    name_loc = p.tok.pos
    name = p.parse_keyword()
    parse = {"uniform": _parse_uniform, "any": _parse_any, "calibrated": _parse_calibrated}.get(name)
    if parse is None:
        raise p.error_at(name_loc, f"unknown quantized type {name}")
    return parse(p, name_loc)


def _checked(p: TypeParser, name_loc: int, cls, **kwargs) -> Type:
    """``parser.getChecked<T>(...)``: verifier failures are reported at the type's name."""
    try:
        return cls(**kwargs)
    except VerifyError as e:
        raise p.error_at(name_loc, e.message) from None


def parse_storage_type(p: TypeParser) -> tuple[Type, bool]:
    """``iN``/``siN``/``uiN``/a float storage type, or the keyword ``uN``: (type, is_signed).

    ``u8`` gives the signless ``i8`` with ``is_signed=False``.
    """
    loc = p.tok.pos
    t = p.parse_optional_type()
    if t is not None:
        if isinstance(t, IntegerType):
            signed, width = t.signedness != "unsigned", t.width
        elif isinstance(t, FloatType) and t.name in FLOAT_STORAGE_TYPES:
            signed, width = True, t.bitwidth
        else:
            raise p.error_at(loc, "illegal storage type prefix")
    else:
        word = p.parse_keyword()
        if not word.startswith("u"):
            raise p.error_at(loc, "illegal storage type prefix")
        digits = word[1:]
        if not _DIGITS.match(digits) or len(digits) > 10 or int(digits) > 0xFFFFFFFF:
            raise p.error_at(loc, "expected storage type width")
        signed, width, t = False, int(digits), None
    if width == 0 or width > MAX_STORAGE_BITS:
        raise p.error_at(loc, f"illegal storage type size: {width}")
    return (t if t is not None else IntegerType(width)), signed


def _parse_storage_spec(p: TypeParser) -> dict:
    storage, signed = parse_storage_type(p)
    probe = AnyQuantizedType(storage_type=storage, is_signed=signed)  # knows the default range
    lo, hi = probe.default_storage_min, probe.default_storage_max
    if p.consume_if(Tok.LESS):
        min_loc = p.tok.pos
        lo = p.parse_integer(64)
        p.parse_token(Tok.COLON, "expected ':'")
        max_loc = p.tok.pos
        hi = p.parse_integer(64)
        p.parse_token(Tok.GREATER, "expected '>'")
        if lo < probe.default_storage_min:
            raise p.error_at(min_loc, f"illegal storage type minimum: {lo}")
        if hi > probe.default_storage_max:
            raise p.error_at(max_loc, f"illegal storage type maximum: {hi}")
    return dict(storage_type=storage, is_signed=signed, storage_min=lo, storage_max=hi)


def _parse_float_type(p: TypeParser) -> FloatType:
    """``parseType(FloatType&)``: any type, then ``invalid kind of type specified``."""
    loc = p.tok.pos
    t = p.parse_type()
    if not isinstance(t, FloatType):
        raise p.error_at(loc, "invalid kind of type specified")
    return t


def _parse_quant_params(p: TypeParser, expressed: FloatType) -> tuple[float, int]:
    """``scale (':' zero-point)?``; the scale range is checked right after the literal."""
    scale = p.parse_float()
    msg = scale_range_message(scale, expressed)
    if msg:
        raise p.error_at(p.tok.pos, msg)
    zero_point = p.parse_integer(64) if p.consume_if(Tok.COLON) else 0
    return scale, zero_point


def _parse_param_list(p: TypeParser, expressed: FloatType, scales: list, zero_points: list,
                      depth: int = 0) -> list[int]:
    """Elements up to and including the closing ``}`` (the ``{`` is consumed); returns the
    dims of the (possibly nested) list."""
    if depth > MAX_NESTING:
        raise p.error_here(f"scale lists nested deeper than {MAX_NESTING} levels are not supported")
    size, inner = 0, None
    while True:
        if p.consume_if(Tok.LBRACE):
            dims = _parse_param_list(p, expressed, scales, zero_points, depth + 1)
        else:
            s, z = _parse_quant_params(p, expressed)
            scales.append(s)
            zero_points.append(z)
            dims = []
        size += 1
        if inner is None:
            inner = dims
        elif dims != inner:
            raise p.error_at(p.tok.pos, "tensor literal is invalid; ranks are not consistent between elements")
        if not p.consume_if(Tok.COMMA):
            break
    p.parse_token(Tok.RBRACE, "expected '}'")
    return [size, *inner]


def _parse_block_sizes(p: TypeParser) -> list[tuple[int, int]]:
    """``d:b (, d:b)* }`` or ``}`` (the ``{`` is consumed)."""
    if p.consume_if(Tok.RBRACE):
        return []
    blocks = []
    while True:
        d = p.parse_integer(32)
        p.parse_token(Tok.COLON, "expected ':'")
        blocks.append((d, p.parse_integer(64)))
        if not p.consume_if(Tok.COMMA):
            break
    p.parse_token(Tok.RBRACE, "expected '}'")
    return blocks


def _parse_uniform(p: TypeParser, name_loc: int) -> Type:
    p.parse_token(Tok.LESS, "expected '<'")
    spec = _parse_storage_spec(p)
    p.parse_token(Tok.COLON, "expected ':'")
    expressed = _parse_float_type(p)
    kind, axis, blocks = "layer", None, None
    if p.consume_if(Tok.COLON):
        if p.consume_if(Tok.LBRACE):
            kind, blocks = "sub", _parse_block_sizes(p)
        else:
            kind, axis = "axis", p.parse_integer(32)
    p.parse_token(Tok.COMMA, "expected ','")
    if kind == "layer":
        scale, zero_point = _parse_quant_params(p, expressed)
    else:
        p.parse_token(Tok.LBRACE, "expected '{'")
        scales: list[float] = []
        zero_points: list[int] = []
        dims = _parse_param_list(p, expressed, scales, zero_points)
    p.parse_token(Tok.GREATER, "expected '>'")
    if kind == "layer":
        return _checked(p, name_loc, UniformQuantizedType, expressed_type=expressed, **spec,
                        scale=scale, zero_point=zero_point)
    if kind == "axis":
        return _checked(p, name_loc, UniformQuantizedPerAxisType, expressed_type=expressed, **spec,
                        scales=tuple(scales), zero_points=tuple(zero_points), quantized_dimension=axis)
    return _checked(p, name_loc, UniformQuantizedSubChannelType, expressed_type=expressed, **spec,
                    scales=tuple(scales), zero_points=tuple(zero_points), block_sizes=tuple(blocks),
                    shape=tuple(dims))


def _parse_any(p: TypeParser, name_loc: int) -> Type:
    p.parse_token(Tok.LESS, "expected '<'")
    spec = _parse_storage_spec(p)
    expressed = _parse_float_type(p) if p.consume_if(Tok.COLON) else None
    p.parse_token(Tok.GREATER, "expected '>'")
    return _checked(p, name_loc, AnyQuantizedType, expressed_type=expressed, **spec)


def _parse_calibrated(p: TypeParser, name_loc: int) -> Type:
    p.parse_token(Tok.LESS, "expected '<'")
    type_loc = p.tok.pos
    try:
        expressed = _parse_float_type(p)
    except ParseError as e:
        raise add_followup(e, "error", p.source.location(type_loc), "expecting float expressed type")
    try:
        p.parse_token(Tok.LESS, "expected '<'")
        lo = p.parse_float()
        p.parse_token(Tok.COLON, "expected ':'")
        hi = p.parse_float()
        p.parse_token(Tok.GREATER, "expected '>'")
    except ParseError as e:
        raise add_followup(e, "error", p.source.location(type_loc), "calibrated values must be present")
    p.parse_token(Tok.GREATER, "expected '>'")
    return _checked(p, name_loc, CalibratedQuantizedType, expressed_type=expressed, min=lo, max=hi)
