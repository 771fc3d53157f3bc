"""Shared pieces of the ``nn`` dialect: type constraints, shape arithmetic, a ``define`` helper.

Design notes
- ``nn`` ops follow ONNX semantics (NCHW, numpy broadcasting, ONNX attribute defaults).
  Type rules (``OpDef.infer``) compute result types from operand types and attribute
  values only; ONNX inputs that decide a result shape (Reshape's ``shape``, Slice's
  ``starts`` ...) are therefore attributes here, filled in by the importer from constants.
- A dimension is an ``int`` or ``None`` (dynamic, printed ``?``). Every rule accepts
  dynamic dims and propagates ``None`` where the size cannot be known.
- Rules raise ``ShapeError`` for operands that do not fit and ``UnsupportedOpError`` for
  attribute values quantir does not implement, so the importer reports both at import
  time, never as a wrong number at run time.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ...errors import ShapeError, UnsupportedOpError
from ...types import FloatType, IntegerType, QuantizedType, TensorType, Type
from ..opdef import AttrKind, AttrSpec, OpDef, Operand, Result, Trait, TypeConstraint, register

Dim = int | None
Shape = tuple[Dim, ...]

PURE = frozenset({Trait.PURE})
I1 = IntegerType(1)
I32 = IntegerType(32)
I64 = IntegerType(64)
F32 = FloatType("f32")

TENSOR = TypeConstraint("tensor of any type values", lambda t: isinstance(t, TensorType))
FLOAT_TENSOR = TypeConstraint(
    "tensor of floating-point values",
    lambda t: isinstance(t, TensorType) and isinstance(t.element_type, FloatType))
INT_TENSOR = TypeConstraint(
    "tensor of integer values",
    lambda t: isinstance(t, TensorType) and isinstance(t.element_type, IntegerType))


# -- attribute spec shorthands ----------------------------------------------------------------

def INT(default: int | None = None, required: bool = False) -> AttrSpec:
    return AttrSpec(AttrKind.INT, required, default)


def FLOAT(default: float | None = None, required: bool = False) -> AttrSpec:
    return AttrSpec(AttrKind.FLOAT, required, default)


def STRING(default: str | None = None, required: bool = False) -> AttrSpec:
    return AttrSpec(AttrKind.STRING, required, default)


def INTS(default: tuple[int, ...] | None = None, required: bool = False) -> AttrSpec:
    return AttrSpec(AttrKind.INTS, required, default)


def FLOATS(default: tuple[float, ...] | None = None) -> AttrSpec:
    return AttrSpec(AttrKind.FLOATS, False, default)


def ELEMENTS(required: bool = False) -> AttrSpec:
    return AttrSpec(AttrKind.ELEMENTS, required)


def TYPE(required: bool = False) -> AttrSpec:
    return AttrSpec(AttrKind.TYPE, required)


def define(name: str, operands: Sequence[str | Operand], results: Sequence[str | Result] = ("y",),
           attributes: Mapping[str, AttrSpec] | None = None, infer: Callable | None = None,
           verifier: Callable | None = None, summary: str = "", traits: frozenset = PURE) -> OpDef:
    """Register ``nn.<name>``; bare strings are tensor operands/results of any element type."""
    ops = tuple(o if isinstance(o, Operand) else Operand(o, TENSOR) for o in operands)
    res = tuple(r if isinstance(r, Result) else Result(r, TENSOR) for r in results)
    return register(OpDef(f"nn.{name}", operands=ops, results=res, attributes=dict(attributes or {}),
                          traits=traits, verifier=verifier, infer=infer, summary=summary))


def opt(name: str) -> Operand:
    return Operand(name, TENSOR, optional=True)


def variadic(name: str) -> Operand:
    return Operand(name, TENSOR, variadic=True)


def variadic_results(name: str) -> Result:
    return Result(name, TENSOR, variadic=True)


# -- element types ----------------------------------------------------------------------------

def element_dtype(t: Type) -> np.dtype:
    """The numpy dtype that stores ``t`` (a tensor's element type, or the type itself)."""
    et = t.element_type if isinstance(t, TensorType) else t
    if isinstance(et, QuantizedType) and et.storage_numpy_dtype is not None:
        return np.dtype(et.storage_numpy_dtype)   # quantized tensors hold their stored integers
    if isinstance(et, FloatType) and et.numpy_dtype is not None:
        return np.dtype(et.numpy_dtype)
    if isinstance(et, IntegerType):
        if et.width == 1:
            return np.dtype(np.bool_)
        if et.width in (8, 16, 32, 64):
            return np.dtype(("u" if et.signedness == "unsigned" else "i") + str(et.width // 8))
        if 1 < et.width < 8:   # sub-byte storage (int4 weights) is held one value per byte
            return np.dtype("u1" if et.signedness == "unsigned" else "i1")
    raise UnsupportedOpError(f"element type '{et}' has no numpy storage type")


def tensor(shape: Iterable[Dim] | None, element_type: Type) -> TensorType:
    return TensorType(None if shape is None else tuple(shape), element_type)


def shape_of(t: Type) -> Shape | None:
    return t.shape if isinstance(t, TensorType) else None


def elt(t: Type) -> Type:
    return t.element_type if isinstance(t, TensorType) else t


def rank_of(t: Type, what: str = "operand") -> int:
    """The rank of a ranked tensor type; raises for unranked operands of rank-dependent rules."""
    s = shape_of(t)
    if s is None:
        raise ShapeError(f"{what} must be a ranked tensor, got '{t}'")
    return len(s)


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for rank {rank} (expected [{-rank}, {rank - 1}])")
    return axis + rank if axis < 0 else axis


def normalize_axes(axes: Iterable[int], rank: int, what: str = "axes") -> tuple[int, ...]:
    out = tuple(normalize_axis(a, rank, what) for a in axes)
    if len(set(out)) != len(out):
        raise ShapeError(f"{what} {tuple(axes)} repeat an axis")
    return out


def dim_mul(a: Dim, b: Dim) -> Dim:
    return None if a is None or b is None else a * b


def prod(dims: Iterable[Dim]) -> Dim:
    out: Dim = 1
    for d in dims:
        out = dim_mul(out, d)
    return out


def broadcast_shapes(*shapes: Shape | None) -> Shape | None:
    """Numpy (multidirectional) broadcasting, with dynamic dims.

    A dynamic dim against 1 stays dynamic; against n it becomes n (the only size it can
    legally have at run time).
    """
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ShapeError(f"shapes {' and '.join(_fmt(s) for s in shapes)} do not broadcast "
                             f"(dim {i} of the result: {sorted(known)})")
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def _fmt(shape: Shape) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


fmt_shape = _fmt


def same_element_type(types: Sequence[Type], what: str = "operands") -> Type:
    ets = {elt(t) for t in types}
    if len(ets) != 1:
        raise ShapeError(f"{what} must share one element type, got {', '.join(sorted(str(e) for e in ets))}")
    return ets.pop()


def require_float(t: Type, what: str) -> None:
    if not isinstance(elt(t), FloatType):
        raise UnsupportedOpError(f"{what} must have a float element type, got '{elt(t)}'")


def check_choice(value: Any, choices: Iterable[Any], what: str) -> None:
    choices = tuple(choices)
    if value not in choices:
        raise UnsupportedOpError(f"{what} = {value!r} is not supported (supported: "
                                 f"{', '.join(repr(c) for c in choices)})")
