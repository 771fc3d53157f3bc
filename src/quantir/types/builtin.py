"""MLIR's builtin types: integers, floats, index, none, tensor, vector, memref, function.

Design notes:

* Types are immutable values. Two types are equal when they are of the same class and
  have the same parameters (floats compared by bit pattern, so a NaN scale equals
  itself); they hash accordingly and can key dicts.
* ``str(t)`` is the canonical MLIR spelling, exactly what ``mlir-opt``/``iree-opt``
  print; :func:`quantir.types.parse_type` reads it back.
* Constructors check what makes a type unprintable or meaningless (a negative width, a
  float name MLIR does not know) and raise :class:`~quantir.errors.VerifyError`.
  Diagnostics that MLIR emits while *parsing* (with a source position) come from the
  parser instead.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, fields
from fractions import Fraction
from functools import cache, reduce

import numpy as np

from ..errors import VerifyError
from .floatsem import SEMANTICS, FloatSemantics

__all__ = [
    "Type", "IntegerType", "FloatType", "IndexType", "NoneType", "ShapedType", "TensorType",
    "VectorType", "MemRefType", "FunctionType", "ComplexType", "TupleType", "OpaqueType",
    "FLOAT_TYPE_NAMES", "MAX_INTEGER_WIDTH",
    "i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "index",
]

MAX_INTEGER_WIDTH = 16777215  # IntegerType::kMaxWidth
FLOAT_TYPE_NAMES = tuple(SEMANTICS)  # every float keyword MLIR knows


def _key_of(x):
    if isinstance(x, float):
        return ("f", struct.pack("<d", x))
    if isinstance(x, tuple):
        return tuple(_key_of(e) for e in x)
    return x


class Type:
    """Base of all types: immutable, hashable, structural equality, ``str`` = MLIR text."""

    __slots__ = ()

    def _key(self) -> tuple:
        key = self.__dict__.get("_key_cache")  # types are immutable: compute the key once
        if key is None:
            key = tuple(_key_of(getattr(self, f.name)) for f in fields(self))  # type: ignore[arg-type]
            self.__dict__["_key_cache"] = key
        return key

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return type(self) is type(other) and self._key() == other._key()  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    def __str__(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


_frozen = dataclass(frozen=True, eq=False, repr=False)


@_frozen
class IntegerType(Type):
    """``iN`` (signless), ``siN`` (signed) or ``uiN`` (unsigned); 0 <= N <= 16777215."""

    width: int
    signedness: str = "signless"

    def __post_init__(self):
        if self.signedness not in ("signless", "signed", "unsigned"):
            raise VerifyError(f"invalid integer signedness {self.signedness!r}; "
                              "expected 'signless', 'signed' or 'unsigned'")
        if not isinstance(self.width, int) or not 0 <= self.width <= MAX_INTEGER_WIDTH:
            raise VerifyError(f"integer bitwidth is limited to {MAX_INTEGER_WIDTH} bits")

    def __str__(self) -> str:
        return {"signless": "i", "signed": "si", "unsigned": "ui"}[self.signedness] + str(self.width)

    @property
    def bitwidth(self) -> int:
        return self.width

    @property
    def is_signless(self) -> bool:
        return self.signedness == "signless"


@_frozen
class FloatType(Type):
    """A builtin float type by its MLIR name (``f32``, ``bf16``, ``f8E4M3FN``, ...).

    ``max_finite`` and ``min_denormal`` are exact values of the format rounded to a
    Python float, as MLIR's ``convertToDouble`` does (so ``f80``/``f128`` give ``inf`` and
    ``0.0``); ``exact_max_finite``/``exact_min_denormal`` are the exact Fractions.
    """

    name: str

    def __post_init__(self):
        if self.name not in SEMANTICS:
            raise VerifyError(f"unknown float type {self.name!r}; expected one of "
                              + ", ".join(FLOAT_TYPE_NAMES))

    def __str__(self) -> str:
        return self.name

    @property
    def semantics(self) -> FloatSemantics:
        return SEMANTICS[self.name]

    @property
    def bitwidth(self) -> int:
        return self.semantics.size_in_bits

    @property
    def exact_max_finite(self) -> Fraction:
        return self.semantics.largest

    @property
    def exact_min_denormal(self) -> Fraction:
        return self.semantics.smallest

    @property
    def max_finite(self) -> float:
        return _double_limits(self.name)[0]

    @property
    def min_denormal(self) -> float:
        return _double_limits(self.name)[1]

    @property
    def numpy_dtype(self):
        """The numpy dtype with this exact format, or None (bf16, f8, f128, ...)."""
        if self.name in ("f16", "f32", "f64"):
            return {"f16": np.dtype(np.float16), "f32": np.dtype(np.float32),
                    "f64": np.dtype(np.float64)}[self.name]
        if self.name == "f80" and np.finfo(np.longdouble).nmant == 63:
            return np.dtype(np.longdouble)
        return None


def _fraction_to_double(q: Fraction) -> float:
    try:
        return float(q)
    except OverflowError:
        return math.inf


@cache
def _double_limits(name: str) -> tuple[float, float]:
    """``(max_finite, min_denormal)`` of a float format, as doubles (computed once per format:
    scale verification asks for them once per per-channel scale)."""
    sem = SEMANTICS[name]
    return _fraction_to_double(sem.largest), _fraction_to_double(sem.smallest)


@_frozen
class IndexType(Type):
    """``index``."""

    def __str__(self) -> str:
        return "index"


@_frozen
class NoneType(Type):
    """``none``."""

    def __str__(self) -> str:
        return "none"


def _dims_str(shape) -> str:
    return "".join(("?" if d is None else str(d)) + "x" for d in shape)


class ShapedType(Type):
    """Common queries of tensor, vector and memref types. ``None`` marks a dynamic dim."""

    __slots__ = ()
    shape: tuple | None
    element_type: Type

    @property
    def is_ranked(self) -> bool:
        return self.shape is not None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def has_static_shape(self) -> bool:
        return self.shape is not None and all(d is not None for d in self.shape)

    @property
    def num_elements(self) -> int | None:
        """Product of the dims; None when unranked or any dim is dynamic."""
        if not self.has_static_shape:
            return None
        return reduce(lambda a, b: a * b, self.shape, 1)  # type: ignore[arg-type]

    def is_dynamic_dim(self, i: int) -> bool:
        return self.shape is not None and self.shape[i] is None

    def clone(self, shape=..., element_type: Type | None = None):
        """The same kind of type with another shape and/or element type."""
        raise NotImplementedError


def _check_element(t, kind: str) -> None:
    if not isinstance(t, Type):
        raise VerifyError(f"{kind} element type must be a Type, got {t!r}")


def _check_shape(shape, kind: str):
    if shape is None:
        return None
    shape = tuple(shape)
    for d in shape:
        if d is not None and (not isinstance(d, (int, np.integer)) or d < 0):
            raise VerifyError(f"invalid {kind} dimension {d!r}; expected a size >= 0 or None")
    return tuple(None if d is None else int(d) for d in shape)


def _valid_tensor_element(t: Type) -> bool:
    return not isinstance(t, (NoneType, TensorType, MemRefType, FunctionType))


@_frozen
class TensorType(ShapedType):
    """``tensor<2x?xf32>`` (ranked, ``None`` = ``?``), ``tensor<f32>`` (0-d), or
    ``tensor<*xf32>`` (``shape=None``)."""

    shape: tuple[int | None, ...] | None
    element_type: Type

    def __post_init__(self):
        object.__setattr__(self, "shape", _check_shape(self.shape, "tensor"))
        _check_element(self.element_type, "tensor")
        if not _valid_tensor_element(self.element_type):
            raise VerifyError("invalid tensor element type")

    def __str__(self) -> str:
        dims = "*x" if self.shape is None else _dims_str(self.shape)
        return f"tensor<{dims}{self.element_type}>"

    def clone(self, shape=..., element_type: Type | None = None) -> TensorType:
        return TensorType(self.shape if shape is ... else shape, element_type or self.element_type)


def _valid_vector_element(t: Type) -> bool:
    return isinstance(t, (IntegerType, FloatType, IndexType))


@_frozen
class VectorType(ShapedType):
    """``vector<4x[8]xf32>``: static positive dims, some of them scalable."""

    shape: tuple[int, ...]
    element_type: Type
    scalable_dims: tuple[bool, ...] = ()

    def __post_init__(self):
        if any(d is None or not isinstance(d, (int, np.integer)) for d in self.shape):
            raise VerifyError(f"vector dimensions must be integers, got {self.shape!r}")
        shape = tuple(int(d) for d in self.shape)
        object.__setattr__(self, "shape", shape)
        _check_element(self.element_type, "vector")
        scal = tuple(bool(s) for s in self.scalable_dims) or (False,) * len(shape)
        if len(scal) != len(shape):
            raise VerifyError("number of scalable flags does not match the vector rank")
        object.__setattr__(self, "scalable_dims", scal)
        msg = self.verify_message()
        if msg:
            raise VerifyError(msg)

    def verify_message(self) -> str | None:
        """MLIR's VectorType verifier, in its order."""
        if not _valid_vector_element(self.element_type):
            return "failed to verify 'elementType': VectorElementTypeInterface instance"
        if any(d <= 0 for d in self.shape):
            return "vector types must have positive constant sizes but got " + \
                ", ".join(str(d) for d in self.shape)
        return None

    def __str__(self) -> str:
        dims = "".join((f"[{d}]" if s else str(d)) + "x" for d, s in zip(self.shape, self.scalable_dims))
        return f"vector<{dims}{self.element_type}>"

    def clone(self, shape=..., element_type: Type | None = None) -> VectorType:
        if shape is ...:
            return VectorType(self.shape, element_type or self.element_type, self.scalable_dims)
        return VectorType(shape, element_type or self.element_type)


def _valid_memref_element(t: Type) -> bool:
    return isinstance(t, (IntegerType, FloatType, IndexType, ComplexType, MemRefType, VectorType))


@_frozen
class MemRefType(ShapedType):
    """``memref<4x?xf32>`` / ``memref<*xf32>``, optionally with an integer memory space.

    Layout attributes are not modelled (quantir only needs memrefs for diagnostics).
    """

    shape: tuple[int | None, ...] | None
    element_type: Type
    memory_space: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "shape", _check_shape(self.shape, "memref"))
        _check_element(self.element_type, "memref")
        if not _valid_memref_element(self.element_type):
            raise VerifyError("invalid memref element type")

    def __str__(self) -> str:
        dims = "*x" if self.shape is None else _dims_str(self.shape)
        space = "" if self.memory_space is None else f", {self.memory_space}"
        return f"memref<{dims}{self.element_type}{space}>"

    def clone(self, shape=..., element_type: Type | None = None) -> MemRefType:
        return MemRefType(self.shape if shape is ... else shape,
                          element_type or self.element_type, self.memory_space)


@_frozen
class FunctionType(Type):
    """``(i8, f32) -> f32``; several results, none, or a function result get parens."""

    inputs: tuple[Type, ...]
    results: tuple[Type, ...]

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "results", tuple(self.results))
        for t in self.inputs + self.results:
            _check_element(t, "function")

    def __str__(self) -> str:
        ins = ", ".join(map(str, self.inputs))
        if len(self.results) == 1 and not isinstance(self.results[0], FunctionType):
            return f"({ins}) -> {self.results[0]}"
        return f"({ins}) -> (" + ", ".join(map(str, self.results)) + ")"


@_frozen
class ComplexType(Type):
    """``complex<f32>``; the element must be an integer or float type."""

    element_type: Type

    def __post_init__(self):
        if not isinstance(self.element_type, (IntegerType, FloatType)):
            raise VerifyError("invalid element type for complex")

    def __str__(self) -> str:
        return f"complex<{self.element_type}>"


@_frozen
class TupleType(Type):
    """``tuple<i8, f32>``."""

    types: tuple[Type, ...]

    def __post_init__(self):
        object.__setattr__(self, "types", tuple(self.types))

    def __str__(self) -> str:
        return "tuple<" + ", ".join(map(str, self.types)) + ">"


@_frozen
class OpaqueType(Type):
    """A type of a dialect quantir does not know, kept as text: ``!foo.bar<1, 2>``."""

    dialect: str
    data: str

    def __str__(self) -> str:
        if _simple_enough_for_pretty_form(self.data):
            return f"!{self.dialect}.{self.data}"
        return f"!{self.dialect}<{self.data}>"


def _simple_enough_for_pretty_form(s: str) -> bool:
    if not s or not (s[0].isascii() and s[0].isalpha()):
        return False
    i = 0
    while i < len(s) and s[i].isascii() and (s[i].isalnum() or s[i] in "._"):
        i += 1
    rest = s[i:]
    return not rest or (rest[0] == "<" and rest[-1] == ">")


i1, i8, i16, i32, i64 = (IntegerType(w) for w in (1, 8, 16, 32, 64))
f16, bf16, f32, f64 = (FloatType(n) for n in ("f16", "bf16", "f32", "f64"))
index = IndexType()
