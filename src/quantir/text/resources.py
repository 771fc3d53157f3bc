"""The ``{-# dialect_resources: { builtin: { key: "0x..." } } #-}`` section.

A blob is ``0x`` + hex of a 4-byte little-endian alignment followed by the raw little-endian
data. ``dense_resource<key>`` attributes are created before the section (which comes last in
the file) is read; :meth:`ResourceSectionParser.fill_resources` then gives each its array: a
view of the decoded blob in the element type's dtype (:mod:`quantir.text.numbers`), no copy.
Keys without a blob (``__elided__``, or none given) keep ``array=None``.
"""
from __future__ import annotations

import re
import struct

import numpy as np

from ..ir.attributes import DenseResourceAttr
from ..types import Type
from ..types.lexer import Tok, Token
from .attr_parser import AttrParser
from .numbers import element_dtype, storage_bytes

__all__ = ["ResourceSectionParser"]

_HEX_DIGITS = re.compile(r"[0-9a-fA-F]*")


class ResourceSectionParser(AttrParser):
    def __init__(self, lexer):
        super().__init__(lexer)
        self.blobs: dict[str, tuple[Token, memoryview]] = {}

    def fill_resources(self) -> None:
        decoded: dict[tuple[str, Type], np.ndarray] = {}
        for attr, pos in self.resource_uses:
            if attr.key not in self.blobs:
                continue
            k = (attr.key, attr.type)
            if k not in decoded:
                decoded[k] = self._decode_blob(attr, pos)
            object.__setattr__(attr, "array", decoded[k])  # filled in once, right after parsing

    def parse_file_metadata(self) -> None:
        self.consume()

        def entry():
            t = self.tok
            if t.kind is not Tok.BARE_ID:
                raise self.error_here("expected identifier key in file metadata dictionary")
            self.consume()
            self.parse_token(Tok.COLON, "expected ':'")
            if t.text == "dialect_resources":
                self._resource_dict(self._builtin_resources)
            elif t.text == "external_resources":
                self._resource_dict(lambda name, pos: self._skip_resource_entries())
            else:
                raise self.error_at(t.pos, f"unknown key '{t.text}' in file metadata dictionary")

        self.comma_list_until(Tok.FILE_METADATA_END, "#-}", entry)

    def _decode_blob(self, attr: DenseResourceAttr, pos: int) -> np.ndarray:
        t = attr.type
        width = storage_bytes(t.element_type)
        if width is None or not t.has_static_shape:
            raise self.error_at(pos, f"quantir cannot hold the blob of 'dense_resource' of type '{t}'")
        _, data = self.blobs[attr.key]
        n = t.num_elements
        if len(data) != width * n:
            raise self.error_at(pos, f"blob '{attr.key}' has {len(data)} bytes, but type '{t}' needs {width * n}")
        dtype = element_dtype(t.element_type)
        wire = np.dtype(np.uint8) if dtype == np.bool_ else dtype.newbyteorder("<")
        array = np.frombuffer(data, dtype=wire)  # a view of the decoded blob: no copy
        if array.dtype != dtype:
            array = array.astype(dtype)
        return array.reshape(t.shape)

    def _resource_dict(self, body) -> None:
        self.parse_token(Tok.LBRACE, "expected '{'")

        def entry():
            t = self.tok
            if t.kind is not Tok.BARE_ID:
                raise self.error_here("expected identifier key for 'resource' entry")
            self.consume()
            self.parse_token(Tok.COLON, "expected ':'")
            self.parse_token(Tok.LBRACE, "expected '{'")
            body(t.text, t.pos)

        self.comma_list_until(Tok.RBRACE, "}", entry)

    def _builtin_resources(self, dialect: str, pos: int) -> None:
        if dialect != "builtin":
            raise self.error_at(pos, f"dialect '{dialect}' is unknown")

        def entry():
            key = self.keyword_or_string()
            if key is None:
                raise self.error_here("expected identifier key for 'resource' entry")
            self.parse_token(Tok.COLON, "expected ':'")
            v = self.consume()
            s = v.text[1:-1] if v.kind is Tok.STRING else ""
            hexdigits = s[2:]
            if not (v.kind is Tok.STRING and s.startswith("0x") and len(hexdigits) % 2 == 0
                    and _HEX_DIGITS.fullmatch(hexdigits)):
                raise self.error_at(v.pos, f"expected hex string blob for key '{key}'")
            raw = memoryview(bytearray.fromhex(hexdigits))  # writable, sliced without a copy
            if len(raw) < 4:
                raise self.error_at(v.pos, f"expected hex string blob for key '{key}' to encode alignment "
                                           "in first 4 bytes")
            align = struct.unpack("<I", raw[:4].tobytes())[0]
            if align and align & (align - 1):
                raise self.error_at(v.pos, f"expected hex string blob for key '{key}' to encode alignment "
                                           f"in first 4 bytes, but got non-power-of-2 value: {align}")
            self.blobs[key] = (v, raw[4:])

        self.comma_list_until(Tok.RBRACE, "}", entry)

    def _skip_resource_entries(self) -> None:
        def entry():
            if self.keyword_or_string() is None:
                raise self.error_here("expected identifier key for 'resource' entry")
            self.parse_token(Tok.COLON, "expected ':'")
            self.consume()

        self.comma_list_until(Tok.RBRACE, "}", entry)
