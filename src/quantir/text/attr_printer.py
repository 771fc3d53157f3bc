"""Attributes as MLIR's ``AsmPrinter`` spells them, and the ``dense_resource`` blob table.

Rules reproduced here (checked against ``iree-opt``):

* integers print their APInt value for the type (``255 : i8`` prints ``-1 : i8``), ``i1`` as
  ``true``/``false``; floats with :func:`~quantir.text.numbers.format_float` in their own type;
* the ``: type`` of an integer or float is elided inside arrays when it is the default
  (``i64``, ``f64``), never inside dictionaries;
* dictionaries sort by name; unit entries print as the bare name; names and symbols that are
  not bare identifiers are quoted and escaped (``\\0A``, ``\\22``, ``\\\\``);
* ``dense<...>``: all-equal elements print as a splat, no elements as ``dense<>``, more than
  100 elements as a hex string of the little-endian bytes, otherwise nested lists;
* large elements (more than ``threshold`` elements, splats excepted) print as blobs
  (``mode="resource"``) or as ``dense_resource<__elided__>`` (``mode="elide"``, like
  ``--mlir-elide-elementsattrs-if-larger``; ``dense_resource`` attributes keep their blobs).
"""
from __future__ import annotations

import struct
from typing import Iterable, Mapping

import numpy as np

from ..ir.attributes import (ArrayAttr, Attribute, BoolAttr, DenseArrayAttr, DenseElementsAttr,
                             DenseResourceAttr, DictAttr, FloatAttr, IntegerAttr, StringAttr,
                             SymbolRefAttr, TypeAttr, UnitAttr, uniform_value)
from ..types import FloatType, IndexType, IntegerType, Type
from .numbers import canonical_int, format_float, format_float_bits, is_bit_pattern_float, storage_bytes

__all__ = ["AttrPrinter", "ResourceTable", "escape_string", "keyword_or_string", "is_bare_identifier",
           "HEX_ELEMENTS_LIMIT", "blob_hex"]

HEX_ELEMENTS_LIMIT = 100  # MLIR prints a dense attribute of more elements as a hex string
ELIDED_KEY = "__elided__"
_I64 = IntegerType(64)
_F64 = FloatType("f64")


def escape_string(s: str) -> str:
    """``llvm::printEscapedString`` on the UTF-8 bytes (undecodable bytes kept as surrogates)."""
    out = []
    for b in s.encode("utf-8", "surrogateescape"):
        if b == 0x5C:
            out.append("\\\\")
        elif 0x20 <= b < 0x7F and b != 0x22:
            out.append(chr(b))
        else:
            out.append("\\%02X" % b)
    return "".join(out)


def is_bare_identifier(s: str) -> bool:
    if not s or not (s[0].isascii() and (s[0].isalpha() or s[0] == "_")):
        return False
    return all(c.isascii() and (c.isalnum() or c in "_$.") for c in s[1:])


def keyword_or_string(s: str) -> str:
    return s if is_bare_identifier(s) else f'"{escape_string(s)}"'


def _little_endian_bytes(array: np.ndarray) -> bytes:
    if array.dtype == np.bool_:
        array = array.view(np.uint8)
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()


def blob_hex(array: np.ndarray, element_type: Type) -> str:
    """A resource blob: ``0x`` + the 4-byte little-endian alignment + the raw data, in hex."""
    align = storage_bytes(element_type) or array.dtype.itemsize
    return "0x" + (struct.pack("<I", align) + _little_endian_bytes(array)).hex().upper()


class ResourceTable:
    """The ``dense_resource`` blobs referenced while printing, keyed in first-use order.

    Keys are kept, except that two different arrays never share one: the later gets MLIR's
    uniqued name (``key_1``, ``key_2``...). Inline elements promoted to blobs are named
    ``elements``, ``elements_1``...
    """

    def __init__(self) -> None:
        self.blobs: dict[str, tuple[np.ndarray, Type]] = {}
        self.declared: set[str] = set()       # keys printed, with or without a blob
        self._key_of_array: dict[int, str] = {}

    def _unique(self, key: str) -> str:
        if key not in self.declared:
            return key
        n = 1
        while f"{key}_{n}" in self.declared:
            n += 1
        return f"{key}_{n}"

    def key_for(self, key: str | None, array: np.ndarray | None, element_type: Type) -> str:
        if array is None:
            self.declared.add(key)  # type: ignore[arg-type]
            return key  # type: ignore[return-value]
        known = self._key_of_array.get(id(array))
        if known is not None:
            return known
        if key is not None and key in self.blobs:
            other = self.blobs[key][0]
            if other.shape == array.shape and other.dtype == array.dtype and np.array_equal(other, array):
                self._key_of_array[id(array)] = key
                return key
        key = self._unique(key or "elements")
        self.declared.add(key)
        self.blobs[key] = (array, element_type)
        self._key_of_array[id(array)] = key
        return key

    def section(self) -> str:
        """The trailing ``{-# dialect_resources ... #-}`` block, or '' without blobs."""
        if not self.blobs:
            return ""
        entries = ",\n".join(f'      {keyword_or_string(k)}: "{blob_hex(a, t)}"'
                             for k, (a, t) in self.blobs.items())
        return ("\n{-#\n  dialect_resources: {\n    builtin: {\n" + entries
                + "\n    }\n  }\n#-}\n")


class AttrPrinter:
    """Prints attributes; owns the resource table of one printed module."""

    def __init__(self, large_elements: str = "inline", threshold: int = 16):
        if large_elements not in ("resource", "elide", "inline"):
            raise ValueError(f"large_elements must be 'resource', 'elide' or 'inline', not {large_elements!r}")
        self.mode = large_elements
        self.threshold = threshold
        self.resources = ResourceTable()

    # -- dictionaries -------------------------------------------------------------------------
    def named(self, name: str, attr: Attribute) -> str:
        if isinstance(attr, UnitAttr):
            return keyword_or_string(name)
        return f"{keyword_or_string(name)} = {self.attr(attr)}"

    def dict_body(self, items: Iterable[tuple[str, Attribute]]) -> str:
        ordered = sorted(items, key=lambda kv: kv[0].encode("utf-8", "surrogateescape"))
        return ", ".join(self.named(k, v) for k, v in ordered)

    def attr_dict(self, attrs: Mapping[str, Attribute], elided: Iterable[str] = ()) -> str:
        """``printOptionalAttrDict``: `` {a = 1 : i64, b}`` or the empty string."""
        skip = set(elided)
        items = [(k, v) for k, v in attrs.items() if k not in skip]
        return f" {{{self.dict_body(items)}}}" if items else ""

    # -- one attribute ------------------------------------------------------------------------
    def attr(self, a: Attribute, elide_type: bool = False) -> str:
        if isinstance(a, UnitAttr):
            return "unit"
        if isinstance(a, BoolAttr):
            return "true" if a.value else "false"
        if isinstance(a, IntegerAttr):
            return self._integer(a, elide_type)
        if isinstance(a, FloatAttr):
            text = format_float(a.value, a.type)  # type: ignore[arg-type]
            # the type stays after a hex literal, which alone would read back as an integer
            return text if elide_type and a.type == _F64 and not text.startswith("0x") else f"{text} : {a.type}"
        if isinstance(a, StringAttr):
            return f'"{escape_string(a.value)}"'
        if isinstance(a, TypeAttr):
            return str(a.value)
        if isinstance(a, SymbolRefAttr):
            return "@" + keyword_or_string(a.name)
        if isinstance(a, ArrayAttr):
            return "[" + ", ".join(self.attr(e, elide_type=True) for e in a.value) + "]"
        if isinstance(a, DictAttr):
            return "{" + self.dict_body(a.value) + "}"
        if isinstance(a, DenseArrayAttr):
            return self._dense_array(a)
        if isinstance(a, DenseElementsAttr):
            return self._dense(a)
        if isinstance(a, DenseResourceAttr):
            return self._dense_resource(a)
        from ..ir.dialects.linalg import AffineMapAttr
        if isinstance(a, AffineMapAttr):   # inline: only linalg.generic's maps get #map aliases
            return str(a)
        raise TypeError(f"cannot print attribute {a!r}")

    def _integer(self, a: IntegerAttr, elide_type: bool) -> str:
        t = a.type
        if isinstance(t, IntegerType) and t.width == 1 and t.signedness == "signless":
            return "true" if canonical_int(a.value, t) else "false"
        text = str(canonical_int(a.value, t)) if isinstance(t, (IntegerType, IndexType)) else str(a.value)
        return text if elide_type and t == _I64 else f"{text} : {t}"

    def _dense_array(self, a: DenseArrayAttr) -> str:
        t = a.element_type
        if not a.value:
            return f"array<{t}>"
        if isinstance(t, FloatType):
            items = [format_float(v, t) for v in a.value]
        elif isinstance(t, IntegerType) and t.width == 1:
            items = ["true" if v else "false" for v in a.value]
        else:
            items = [str(canonical_int(v, t)) for v in a.value]
        return f"array<{t}: {', '.join(items)}>"

    def _is_large(self, array: np.ndarray) -> bool:
        return array.size > self.threshold and uniform_value(array) is None

    def _dense(self, a: DenseElementsAttr) -> str:
        et = a.type.element_type
        if self.mode != "inline" and self._is_large(a.array):
            if self.mode == "elide":
                return f"dense_resource<{ELIDED_KEY}> : {a.type}"
            if storage_bytes(et) is not None:
                key = self.resources.key_for(None, a.array, et)
                return f"dense_resource<{keyword_or_string(key)}> : {a.type}"
        return f"dense<{dense_body(a.array, et)}> : {a.type}"

    def _dense_resource(self, a: DenseResourceAttr) -> str:
        key = self.resources.key_for(a.key, a.array, a.type.element_type)
        return f"dense_resource<{keyword_or_string(key)}> : {a.type}"


def _element_strings(flat: np.ndarray, et: Type) -> list[str]:
    if isinstance(et, IntegerType) and et.width == 1:
        return ["true" if v else "false" for v in flat.tolist()]
    if isinstance(et, FloatType):
        bits = flat if is_bit_pattern_float(et) else flat.view(f"u{flat.dtype.itemsize}")
        return [format_float_bits(int(b), et) for b in bits.tolist()]
    if isinstance(et, IntegerType) and et.width not in (8, 16, 32, 64):
        return [str(canonical_int(v, et)) for v in flat.tolist()]
    return [str(v) for v in flat.tolist()]


def dense_body(array: np.ndarray, et: Type) -> str:
    """What goes between ``dense<`` and ``>``."""
    if array.size == 0:
        return ""
    if uniform_value(array) is not None:
        return _element_strings(np.asarray(array.flat[0:1]), et)[0]
    flat = array.reshape(-1)
    if flat.size > HEX_ELEMENTS_LIMIT:
        return '"0x' + _little_endian_bytes(flat).hex().upper() + '"'
    items = _element_strings(flat, et)
    for d in reversed(array.shape[1:]):
        items = ["[" + ", ".join(items[i:i + d]) + "]" for i in range(0, len(items), d)]
    return "[" + ", ".join(items) + "]"
