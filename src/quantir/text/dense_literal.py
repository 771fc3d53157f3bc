"""The literal of ``dense<...>`` (``TensorLiteralParser`` in MLIR's AttributeParser.cpp).

The tokens are collected first; once the type after ``:`` is known they become a numpy array
of the element type's dtype (:mod:`quantir.text.numbers`), each error pointing at the element
token as MLIR's do. A splat of a huge shape becomes a read-only broadcast view of one value.
"""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import numpy as np

from ..types import FloatType, IntegerType, ShapedType, Type
from ..types.lexer import Tok, Token
from .numbers import element_dtype, int_fits, storage_bytes

if TYPE_CHECKING:
    from .attr_parser import AttrParser

__all__ = ["TensorLiteral", "magnitude"]

MAX_DEPTH = 100
# Larger splats are a read-only broadcast view of one value (``ir.attributes.splat_value``):
# a few bytes of text must not become megabytes each (a file of 1,000 ``dense<1.0> :
# tensor<4194304xf64>`` lines would otherwise hold 32 GB).
MATERIALIZED_SPLAT_LIMIT = 1 << 10
_HEX_DIGITS = re.compile(r"[0-9a-fA-F]*")


def magnitude(text: str) -> int:
    """The value of an integer token (decimal, or hex with ``0x``)."""
    return int(text, 16) if text.startswith("0x") else int(text, 10)


class TensorLiteral:
    """``TensorLiteralParser``: the tokens of ``dense<...>``, turned into an array once the
    type is known (errors point at the element token, as MLIR's do)."""

    def __init__(self, p: AttrParser):
        self.p = p
        self.hex: Token | None = None
        self.shape: list[int] | None = None  # None: a single (splat) element
        self.storage: list[tuple[bool, Token]] = []

    def parse(self) -> None:
        p = self.p
        if p.tok.kind is Tok.STRING:
            self.hex = p.consume()
        elif p.tok.kind is Tok.LSQUARE:
            self.shape = self._list(0)
        else:
            self._element()

    def _element(self) -> None:
        p = self.p
        t = p.tok
        if t.kind in (Tok.FLOAT, Tok.INTEGER, Tok.STRING) or (t.kind is Tok.BARE_ID and t.text in ("true", "false")):
            self.storage.append((False, p.consume()))
        elif t.kind is Tok.MINUS:
            p.consume()
            if p.tok.kind not in (Tok.FLOAT, Tok.INTEGER):
                raise p.error_here("expected integer or floating point literal")
            self.storage.append((True, p.consume()))
        elif t.kind is Tok.LPAREN:
            raise p.error_here("quantir does not support complex elements")
        else:
            raise p.error_here("expected element literal of primitive type")

    def _list(self, depth: int) -> list[int]:
        p = self.p
        if depth > MAX_DEPTH:
            raise p.error_here(f"tensor literals nested deeper than {MAX_DEPTH} levels are not supported")
        p.parse_token(Tok.LSQUARE, "expected '['")
        size = 0
        first: list[int] | None = None
        if p.consume_if(Tok.RSQUARE):
            return [0]

        def one():
            nonlocal size, first
            dims = self._list(depth + 1) if p.tok.kind is Tok.LSQUARE else (self._element() or [])
            size += 1
            if first is None:
                first = dims
            elif dims != first:
                raise p.error_here("tensor literal is invalid; ranks are not consistent between elements")

        one()
        while p.consume_if(Tok.COMMA):
            one()
        p.parse_token(Tok.RSQUARE, "expected ']'")
        return [size] + (first or [])

    # -- conversion ---------------------------------------------------------------------------
    def to_array(self, loc: int, type: ShapedType) -> np.ndarray:
        p = self.p
        et = type.element_type
        shape = tuple(type.shape)  # type: ignore[arg-type]
        try:
            dtype = element_dtype(et)
        except ValueError as e:
            raise p.error_at(loc, str(e)) from None
        if self.hex is not None:
            return self._hex_array(loc, type, dtype)
        if self.shape is not None and tuple(self.shape) != shape:
            raise p.error_at(loc, f"inferred shape of elements literal ([{', '.join(map(str, self.shape))}]) "
                                  f"does not match type ([{', '.join(map(str, shape))}])")
        n = math.prod(shape)
        if not self.storage:
            if n:
                raise p.error_at(loc, f"parsed zero elements, but type ('{type}') expected at least 1")
            return _allocate(p, loc, lambda: np.zeros(shape, dtype))
        if isinstance(et, FloatType):
            bits = [p.float_bits_from_token(t, neg, et) for neg, t in self.storage]
            if dtype.kind == "f":
                flat = np.array(bits, dtype=f"u{dtype.itemsize}").view(dtype)
            else:
                flat = np.array(bits, dtype=dtype)
        else:
            flat = np.array([self._int_value(neg, t, et) for neg, t in self.storage], dtype=dtype)
        if self.shape is None:
            return _splat(p, loc, flat[0], shape, dtype)
        return flat.reshape(shape)

    def _int_value(self, negative: bool, t: Token, et: Type) -> int | bool:
        p = self.p
        unsigned = isinstance(et, IntegerType) and et.signedness == "unsigned"
        if negative and unsigned:
            raise p.error_at(t.pos, "expected unsigned integer elements, but parsed negative value")
        if t.kind is Tok.FLOAT:
            raise p.error_at(t.pos, "expected integer elements, but parsed floating-point")
        if t.kind is Tok.BARE_ID:
            if not (isinstance(et, IntegerType) and et.width == 1):
                raise p.error_at(t.pos, "expected i1 type for 'true' or 'false' values")
            return t.text == "true"
        if t.kind is not Tok.INTEGER:
            raise p.error_at(t.pos, "integer constant out of range for type")
        v = int_fits(magnitude(t.text), negative, et)
        if v is None:
            raise p.error_at(t.pos, "integer constant out of range for type")
        return v

    def _hex_array(self, loc: int, type: ShapedType, dtype: np.dtype) -> np.ndarray:
        p = self.p
        t = self.hex
        assert t is not None
        s = t.text[1:-1]
        if not s.startswith("0x") or len(s) % 2 or not _HEX_DIGITS.fullmatch(s, 2):
            raise p.error_at(t.pos, "expected string containing hex digits starting with `0x`")
        width = storage_bytes(type.element_type)
        if width is None:
            raise p.error_at(loc, f"quantir cannot read hex elements of type '{type.element_type}'")
        data = bytes.fromhex(s[2:])
        n = type.num_elements
        shape = tuple(type.shape)  # type: ignore[arg-type]
        if len(data) == width * n:
            flat = np.frombuffer(data, dtype=_wire_dtype(dtype)).astype(dtype)
            return flat.reshape(shape)
        if len(data) == width:
            return _splat(p, loc, np.frombuffer(data, dtype=_wire_dtype(dtype)).astype(dtype)[0], shape, dtype)
        raise p.error_at(loc, f"elements hex data size is invalid for provided type: '{type}'")


def _allocate(p: AttrParser, loc: int, make):
    try:
        return make()
    except (ValueError, MemoryError, OverflowError):
        raise p.error_at(loc, "quantir cannot hold an elements attribute this large") from None


def _splat(p: AttrParser, loc: int, value, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """One value repeated: an array, or a read-only broadcast view when it would be huge."""
    if math.prod(shape) <= MATERIALIZED_SPLAT_LIMIT:
        return np.full(shape, value, dtype=dtype)
    return _allocate(p, loc, lambda: np.broadcast_to(np.array(value, dtype=dtype), shape))


def _wire_dtype(dtype: np.dtype) -> np.dtype:
    """The little-endian dtype of raw buffers (``bool`` read as bytes: any non-zero is true)."""
    if dtype == np.bool_:
        return np.dtype(np.uint8)
    return dtype.newbyteorder("<")
