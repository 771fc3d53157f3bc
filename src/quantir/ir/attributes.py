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
                and np.array_equal(self.array, other.array))

    def __hash__(self) -> int:
        return hash((self.type, self.array.tobytes()[:64]))


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

# MLIR's default types for bare literals: `1` is i64, `1.0` is f64.
I64 = IntegerType(64)
F64 = FloatType("f64")
INDEX = IndexType()
