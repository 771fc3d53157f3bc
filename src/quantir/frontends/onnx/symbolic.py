"""Partial evaluation of shape arithmetic on dynamic dims (the batch dim, mostly).

Exporters write ``x.view(x.size(0), -1)`` as ``Shape(x) -> Gather(0) -> Unsqueeze ->
Concat([N], [-1]) -> Reshape(x, ...)``. With a dynamic batch, ``Shape(x)`` is not a
constant and ordinary folding stops. This module tracks such small int tensors element by
element: an element is an ``int`` or a :class:`Dim` ("dim ``index`` of ``value`` at run
time"), through Shape, Gather, Slice, Concat, Unsqueeze, Squeeze and int Cast.

A consumer that needs a constant shape (Reshape) then resolves it with
:func:`resolve_reshape`: ``Dim(data, i)`` at position ``i`` of a reshape of ``data`` itself
is ``0`` (copy that dim), and one remaining unknown entry is ``-1`` (the element count
fixes it). Anything else stays unsupported.
"""
from __future__ import annotations

from dataclasses import dataclass

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
    if any(isinstance(i, Dim) for i in idx.items):
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


def _cast(op, args, table):
    a = args[0]
    to = op.attr("to")
    return a if a is not None and isinstance(to, IntegerType) and to.width >= 32 else None


_RULES = {nn.SHAPE: _shape, nn.GATHER: _gather, nn.CONCAT: _concat, nn.UNSQUEEZE: _unsqueeze,
          nn.SQUEEZE: _squeeze, nn.SLICE: _slice, nn.CAST: _cast}


def evaluate(op: Operation, table: dict) -> None:
    """Record ``op``'s result in ``table`` when it is a partially known shape tensor."""
    rule = _RULES.get(op.opdef)
    if rule is None or len(op.results) != 1:
        return
    args = [_sym(v, table) for v in op.operands]
    out = rule(op, args, table)
    if out is not None and any(isinstance(x, Dim) for x in out.items):
        table[op.results[0]] = out


def resolve_reshape(data: Value, target: SymTensor, allowzero: int) -> tuple[int, ...] | None:
    """A constant Reshape target equivalent to the partially known ``target``, or None."""
    out: list[int | Dim] = []
    for pos, item in enumerate(target.items):
        if isinstance(item, Dim) and item.value is data and item.index == pos and not allowzero:
            out.append(0)
        else:
            out.append(item)
    unknown = [i for i, x in enumerate(out) if isinstance(x, Dim)]
    if not unknown:
        return tuple(out)
    if len(unknown) == 1 and -1 not in out:
        out[unknown[0]] = -1
        return tuple(out)
    return None


def lookup(v: Value, table: dict) -> SymTensor | None:
    return table.get(v)


__all__ = ["Dim", "SymTensor", "evaluate", "resolve_reshape", "lookup"]
