"""Partial evaluation of shape arithmetic on dynamic dims (the batch dim, mostly).

Exporters write ``x.view(x.size(0), -1)`` as ``Shape(x) -> Gather(0) -> Unsqueeze ->
Concat([N], [-1]) -> Reshape(x, ...)``. With a dynamic batch, ``Shape(x)`` is not a
constant and ordinary folding stops. This module tracks such small int tensors element by
element: an element is an ``int`` or a :class:`Dim` ("dim ``index`` of ``value`` at run
time"), or an :class:`Expr` (integer arithmetic on such elements: ``d2 * d3`` of
``x.view(n, c, h * w)``), through Shape, Gather, Slice, Concat, Unsqueeze, Squeeze, Identity,
int Cast, and Mul/Add/Sub/Div on ints.

A consumer that needs a constant shape (Reshape) then resolves it with
:func:`resolve_reshape`: ``Dim(data, i)`` at position ``i`` of a reshape of ``data`` itself
is ``0`` (copy that dim), and one remaining unknown entry is ``-1`` (the element count
fixes it). What does not resolve so is reshaped at run time (``nn.dynamic_reshape``), with
the elements known here as its result's static dims.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir import Operation, Value
from ...ir.dialects import nn
from ...ir.dialects.nn_index import slice_bounds
from ...ir.dialects.nn_shape import shape_slice
from ...types import IntegerType
from ...passes.fold_constants import constant_value


@dataclass(frozen=True, eq=False)
class Dim:
    value: Value
    index: int

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dim) and other.value is self.value and other.index == self.index

    def __hash__(self) -> int:
        return hash((id(self.value), self.index))


@dataclass(frozen=True)
class Expr:
    """``op`` (``mul``, ``add``, ``sub``, ``div``) of two elements, one of them unknown."""

    op: str
    lhs: object
    rhs: object


def known(item) -> bool:
    return isinstance(item, int)


# int results of the ONNX integer ops on the non-negative sizes and small constants seen here;
# Div on ints truncates toward zero (ONNX Runtime), which is floor division for sizes
_INT_OPS = {"mul": lambda a, b: a * b, "add": lambda a, b: a + b, "sub": lambda a, b: a - b,
            "div": lambda a, b: int(a / b) if b else None}


def combine(op: str, a, b):
    """``a op b`` with ints folded and the identities (x*1, x+0, x-0, x/1) removed."""
    if known(a) and known(b):
        return _INT_OPS[op](a, b)
    if (op == "mul" and b == 1) or (op in ("add", "sub") and b == 0) or (op == "div" and b == 1):
        return a
    if (op == "mul" and a == 1) or (op == "add" and a == 0):
        return b
    return Expr(op, a, b)


@dataclass(frozen=True)
class SymTensor:
    """A 0-d (``scalar``) or 1-D int tensor whose elements are ints or ``Dim``s."""

    items: tuple
    scalar: bool = False


def _sym(v: Value, table: dict) -> SymTensor | None:
    if v in table:
        return table[v]
    a = constant_value(v)
    if a is not None and a.dtype.kind in "iu" and a.ndim <= 1 and a.size <= 64:
        return SymTensor(tuple(int(x) for x in a.reshape(-1)), a.ndim == 0)
    return None


def _shape(op, args, table):
    x = op.operands[0]
    shape = x.type.shape
    if shape is None:
        return None
    start, end = shape_slice(len(shape), op.opdef.attr_values(op))
    return SymTensor(tuple(d if d is not None else Dim(x, k) for k, d in enumerate(shape))[start:end])


def _gather(op, args, table):
    data, idx = args
    if data is None or idx is None or data.scalar or op.attr("axis") not in (0, -1):
        return None
    if not all(known(i) for i in idx.items):
        return None
    picked = tuple(data.items[i] for i in idx.items)
    return SymTensor(picked, idx.scalar)


def _concat(op, args, table):
    if any(a is None or a.scalar for a in args):
        return None
    return SymTensor(tuple(x for a in args for x in a.items))


def _unsqueeze(op, args, table):
    a = args[0]
    return SymTensor(a.items) if a is not None and a.scalar and tuple(op.attr("axes")) in ((0,), (-1,)) else None


def _squeeze(op, args, table):
    a = args[0]
    return SymTensor(a.items, True) if a is not None and not a.scalar and len(a.items) == 1 else None


def _slice(op, args, table):
    a = args[0]
    if a is None or a.scalar:
        return None
    (start, stop, step), = slice_bounds((len(a.items),), op.opdef.attr_values(op)).values()
    return SymTensor(a.items[slice(start, None if stop < 0 else stop, step)])


def _at(t: SymTensor, i: int):
    """Element ``i`` of ``t`` broadcast to a longer tensor (one element repeats)."""
    return t.items[0] if len(t.items) == 1 else t.items[i]


def _binary(name):
    def rule(op, args, table):
        a, b = args
        if a is None or b is None:
            return None
        n, m = len(a.items), len(b.items)
        if n != m and 1 not in (n, m):
            return None
        length = max(n, m)
        items = tuple(combine(name, _at(a, i), _at(b, i)) for i in range(length))
        if any(x is None for x in items):
            return None
        return SymTensor(items, a.scalar and b.scalar)
    return rule


def _identity(op, args, table):
    return args[0]


def _cast(op, args, table):
    a = args[0]
    to = op.attr("to")
    return a if a is not None and isinstance(to, IntegerType) and to.width >= 32 else None


_RULES = {nn.SHAPE: _shape, nn.GATHER: _gather, nn.CONCAT: _concat, nn.UNSQUEEZE: _unsqueeze,
          nn.SQUEEZE: _squeeze, nn.SLICE: _slice, nn.CAST: _cast, nn.IDENTITY: _identity,
          **{opdef: _binary(name) for opdef, name in ((nn.MUL, "mul"), (nn.ADD, "add"), (nn.SUB, "sub"),
                                                      (nn.DIV, "div"))}}


def evaluate(op: Operation, table: dict) -> np.ndarray | None:
    """Record ``op``'s result in ``table`` when it is a partially known shape tensor; return it
    as an array when every element is known (``Gather(Shape(x), 2)`` of a static dim 2)."""
    rule = _RULES.get(op.opdef)
    if rule is None or len(op.results) != 1:
        return None
    args = [_sym(v, table) for v in op.operands]
    out = rule(op, args, table)
    if out is None:
        return None
    if all(known(x) for x in out.items):
        et = op.results[0].type.element_type
        if not isinstance(et, IntegerType) or et.width < 32:
            return None
        array = np.array(out.items, dtype=np.int64 if et.width == 64 else np.int32)
        return array.reshape(()) if out.scalar else array
    table[op.results[0]] = out
    return None


def resolve_reshape(data: Value, target: SymTensor, allowzero: int) -> tuple[int, ...] | None:
    """A constant Reshape target equivalent to the partially known ``target``, or None."""
    out: list[int | Dim] = []
    for pos, item in enumerate(target.items):
        if isinstance(item, Dim) and item.value is data and item.index == pos and not allowzero:
            out.append(0)
        else:
            out.append(item)
    unknown = [i for i, x in enumerate(out) if not known(x)]
    if not unknown:
        return tuple(out)
    if len(unknown) == 1 and -1 not in out:
        out[unknown[0]] = -1
        return tuple(out)
    return None


def static_length(target: Value, sym: SymTensor | None) -> int | None:
    """The length of a 1-D integer shape tensor, when it is known before running."""
    if sym is not None:
        return None if sym.scalar else len(sym.items)
    t = target.type
    shape = getattr(t, "shape", None)
    if not isinstance(getattr(t, "element_type", None), IntegerType) or shape is None or len(shape) != 1:
        return None
    return shape[0]


def reshape_dims(data: Value, target: SymTensor | None, length: int, allowzero: int) -> tuple[int, ...]:
    """The result dims of ``Reshape(data, target)`` known before running (``-1``: known only then):
    a known positive size, a dim ``0`` copies, and the one ``-1`` when every other size is known."""
    src = getattr(data.type, "shape", None)
    items = target.items if target is not None else (None,) * length
    dims: list[int] = []
    for pos, item in enumerate(items):
        if known(item) and (item > 0 or (item == 0 and allowzero)):
            dims.append(item)
        elif item == 0 and not allowzero and src is not None and pos < len(src) and src[pos] is not None:
            dims.append(src[pos])
        else:
            dims.append(-1)
    infer = [i for i, item in enumerate(items) if item == -1 and known(item)]
    if len(infer) == 1 and src is not None and None not in src:
        rest = [d for i, d in enumerate(dims) if i != infer[0]]
        total = int(np.prod(src, dtype=np.int64))
        size = int(np.prod(rest, dtype=np.int64)) if rest else 1
        if -1 not in rest and size > 0 and total % size == 0:
            dims[infer[0]] = total // size
    return tuple(dims)


def lookup(v: Value, table: dict) -> SymTensor | None:
    return table.get(v)


__all__ = ["Dim", "Expr", "SymTensor", "combine", "evaluate", "known", "resolve_reshape", "reshape_dims",
           "static_length", "lookup"]
