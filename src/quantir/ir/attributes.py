"""Attributes: the compile-time values attached to operations, modelled on MLIR's builtin attributes.

Each class knows its own MLIR text form through ``quantir.text`` (the printer dispatches on the
class); here they are plain immutable data. Elements attributes hold numpy arrays *by reference*:
a 20 MB weight is never copied into a list. ``DenseElementsAttr`` is for constants printed inline
(``dense<...>``); ``DenseResourceAttr`` is the same data printed as a ``dense_resource`` blob.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..types import FloatType, IntegerType, IndexType, TensorType, Type


class Attribute:
    """Base class. Subclasses are frozen dataclasses, except elements attributes (arrays)."""


@dataclass(frozen=True)
class UnitAttr(Attribute):
    pass


@dataclass(frozen=True)
class BoolAttr(Attribute):
    value: bool


@dataclass(frozen=True)
class IntegerAttr(Attribute):
    value: int
    type: Type = IntegerType(64)  # i64 is MLIR's default and is elided when printed


@dataclass(frozen=True)
class FloatAttr(Attribute):
    value: float
    type: Type = FloatType("f64")  # f64 is the default and is elided when printed


@dataclass(frozen=True)
class StringAttr(Attribute):
    value: str


@dataclass(frozen=True)
class TypeAttr(Attribute):
    value: Type


@dataclass(frozen=True)
class SymbolRefAttr(Attribute):
    name: str


@dataclass(frozen=True)
class ArrayAttr(Attribute):
    value: tuple[Attribute, ...]


@dataclass(frozen=True)
class DictAttr(Attribute):
    value: tuple[tuple[str, Attribute], ...]  # sorted by name, as MLIR's DictionaryAttr

    def get(self, key: str) -> Attribute | None:
        return dict(self.value).get(key)


@dataclass(frozen=True)
class DenseArrayAttr(Attribute):
    """``array<i64: 1, 2>``: a 1-D list of scalars of one integer or float type."""

    element_type: Type
    value: tuple[Any, ...]


@dataclass(frozen=True, eq=False)
class DenseElementsAttr(Attribute):
    """``dense<...> : tensor<...>``. The array's dtype matches the element type's storage."""

    array: np.ndarray
    type: TensorType

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, DenseElementsAttr) and self.type == other.type
                and arrays_equal(self.array, other.array))

    def __hash__(self) -> int:
        # the first elements only: a huge (or lazy splat) array is never copied to be hashed
        return hash((self.type, np.asarray(self.array.flat[:16]).tobytes()))

    @property
    def splat(self) -> np.ndarray | None:
        """The one value of a lazy splat (see :func:`splat_value`), else None."""
        return splat_value(self.array)


@dataclass(frozen=True, eq=False)
class DenseResourceAttr(Attribute):
    """``dense_resource<key> : tensor<...>``. ``array`` is None when the blob was elided."""

    key: str
    type: TensorType
    array: np.ndarray | None = field(default=None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DenseResourceAttr) or self.type != other.type:
            return False
        if self.array is None or other.array is None:
            return self.array is None and other.array is None and self.key == other.key
        return np.array_equal(self.array, other.array)

    def __hash__(self) -> int:
        return hash((self.key, self.type))


ElementsAttr = DenseElementsAttr | DenseResourceAttr

# Splats. A splat is one value and a shape; a large one is held as a read-only broadcast view
# of that value (every stride 0: ``np.broadcast_to``), which costs one element whatever the
# shape (``dense<1.0> : tensor<536870912xf32>`` is 4 bytes, not 2 GiB). Everything that reads
# constants -- hashing, comparing, printing, folding -- asks ``splat_value`` first and works on
# the value, so a splat is never materialized by accident.
_CHUNK = 1 << 20


def splat_value(array: np.ndarray) -> np.ndarray | None:
    """The 0-d value of ``array`` when it is a lazy splat (a zero-stride view, or one element);
    None otherwise. Cheap: it never scans a materialized array."""
    if array.size == 0 or not (array.size == 1 or all(s == 0 for s in array.strides)):
        return None
    return np.asarray(array.flat[0]).astype(array.dtype)


def lazy_splat(value, shape, dtype) -> np.ndarray:
    """A read-only splat of ``value`` with ``shape``: one element of memory."""
    return np.broadcast_to(np.asarray(value, dtype=dtype).reshape(()), tuple(shape))


def uniform_value(array: np.ndarray) -> np.ndarray | None:
    """The one value of ``array`` when all its elements have the same bits (so -0.0 is not 0.0
    and NaNs compare by payload), else None. A lazy splat costs nothing; other arrays get three
    probes before any scan (most weights differ there), and the scan goes in chunks, without a
    full-size mask. The printer, CSE and the ONNX exporter all ask this."""
    if array.size == 0:
        return None
    value = splat_value(array)
    if value is not None:
        return value
    first = np.asarray(array.flat[0]).astype(array.dtype)
    probes = np.asarray(array.flat[[array.size // 2, array.size - 1]]).astype(array.dtype)
    if probes.tobytes() != first.tobytes() * 2:
        return None
    return first if arrays_equal(array, lazy_splat(first, array.shape, array.dtype)) else None


def arrays_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and bits, compared without materializing splats (or a full-size mask):
    a splat equals an array whose every element has the splat's bits."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    sa, sb = splat_value(a), splat_value(b)
    if sa is not None and sb is not None:
        return sa.tobytes() == sb.tobytes()
    if sa is not None:
        a, b, sb = b, a, sa          # b is now the splat, if either is
    flat_a = a.reshape(-1)           # materialized already (not a splat): a view or a cheap copy
    flat_b = b.reshape(-1) if sb is None else None
    for i in range(0, flat_a.size, _CHUNK):
        chunk_a = flat_a[i:i + _CHUNK]
        chunk_b = flat_b[i:i + _CHUNK] if flat_b is not None else np.broadcast_to(sb, chunk_a.shape)
        if np.ascontiguousarray(chunk_a).tobytes() != np.ascontiguousarray(chunk_b).tobytes():
            return False
    return True

# MLIR's default types for bare literals: `1` is i64, `1.0` is f64.
I64 = IntegerType(64)
F64 = FloatType("f64")
INDEX = IndexType()
