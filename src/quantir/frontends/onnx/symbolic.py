"""Partial evaluation of shape arithmetic on dynamic dims (the batch dim, mostly).

Exporters write ``x.view(x.size(0), -1)`` as ``Shape(x) -> Gather(0) -> Unsqueeze ->
Concat([N], [-1]) -> Reshape(x, ...)``. With a dynamic batch, ``Shape(x)`` is not a
constant and ordinary folding stops. This module tracks such small int tensors element by
element: an element is an ``int`` or a :class:`Dim` ("dim ``index`` of ``value`` at run
time"), or an :class:`Expr` (integer arithmetic on such elements: ``d2 * d3`` of
``x.view(n, c, h * w)``), through Shape, Gather, Slice, Concat, Unsqueeze, Squeeze, Identity,
int Cast, 1-D Reshape, Mul/Add/Sub/Div on ints, and the ``Where(Equal(t, -1), ..., t)`` that
TorchScript writes around an ``expand`` target (a size is never -1).

A consumer that needs a constant shape (Reshape) then resolves it with
:func:`resolve_reshape`: ``Dim(data, i)`` at position ``i`` of a reshape of ``data`` itself,
or a dim :class:`DimClasses` proves the same size (the ops between pass it through), is ``0``
(copy that dim), and one remaining unknown entry is ``-1`` (the element count fixes it).
What does not resolve so is reshaped at run time (``nn.dynamic_reshape``), with the
elements known here as its result's static dims.
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
    if a is not None and a.dtype.kind in "iub" and a.ndim <= 1 and a.size <= 64:
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


def _reshape_1d(op, args, table):
    a = args[0]
    return SymTensor(a.items) if a is not None and tuple(op.attr("shape")) in ((-1,), (len(a.items),)) else None


def _equal(op, args, table):
    """Decided elementwise where it can be: a size is never negative (TorchScript's
    ``expand`` tests its target against -1), and two ints compare."""
    a, b = args
    if a is None or b is None or (len(a.items) != len(b.items) and 1 not in (len(a.items), len(b.items))):
        return None
    items = []
    for i in range(max(len(a.items), len(b.items))):
        x, y = _at(a, i), _at(b, i)
        if known(x) and known(y):
            items.append(int(x == y))
        elif (known(x) and x < 0) or (known(y) and y < 0):
            items.append(0)
        else:
            return None
    return SymTensor(tuple(items), a.scalar and b.scalar)


def _where(op, args, table):
    cond, x, y = args
    if cond is None or x is None or y is None or not all(known(c) for c in cond.items):
        return None
    length = max(len(cond.items), len(x.items), len(y.items))
    if any(len(t.items) not in (1, length) for t in (cond, x, y)):
        return None
    return SymTensor(tuple(_at(x, i) if _at(cond, i) else _at(y, i) for i in range(length)),
                     cond.scalar and x.scalar and y.scalar)


_RULES = {nn.SHAPE: _shape, nn.GATHER: _gather, nn.CONCAT: _concat, nn.UNSQUEEZE: _unsqueeze,
          nn.RESHAPE: _reshape_1d, nn.COMPARE["equal"]: _equal, nn.WHERE: _where,
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
        if et == IntegerType(1):   # a decided comparison of shape entries
            array = np.array(out.items, dtype=np.bool_)
            return array.reshape(()) if out.scalar else array
        if not isinstance(et, IntegerType) or et.width < 32:
            return None
        array = np.array(out.items, dtype=np.int64 if et.width == 64 else np.int32)
        return array.reshape(()) if out.scalar else array
    table[op.results[0]] = out
    return None


class DimClasses:
    """Which dynamic dims are provably the same size: a union-find over ``Dim``s, joined by the
    ops that pass a dim through unchanged (elementwise ops, transposes, copies of a reshape,
    the kept axes of a slice ...). PP-OCR writes ``Reshape(q, Shape(k))`` where q and k are
    slices of one tensor: their batch and sequence dims are one class, so the target is ``0``s."""

    def __init__(self) -> None:
        self.parent: dict[Dim, Dim] = {}

    def find(self, d: Dim) -> Dim:
        root = d
        while root in self.parent:
            root = self.parent[root]
        while d in self.parent and self.parent[d] is not root:   # path compression
            self.parent[d], d = root, self.parent[d]
        return root

    def union(self, a: Dim, b: Dim) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb

    def same(self, a, b) -> bool:
        return isinstance(a, Dim) and isinstance(b, Dim) and self.find(a) == self.find(b)


def join_named_dims(classes: DimClasses, args, inputs) -> None:
    """Dynamic dims of the graph inputs that share a ``dim_param`` are one class: a symbolic dim
    name stands for one size across the graph (exporters name the batch of every input alike)."""
    first: dict[str, Dim] = {}
    for arg, info in zip(args, inputs):
        dims = _dims(arg)
        for j, d in enumerate(info.type.tensor_type.shape.dim):
            if d.dim_param and dims is not None and j < len(dims) and dims[j] is None:
                classes.union(first.setdefault(d.dim_param, Dim(arg, j)), Dim(arg, j))


def _dims(v: Value) -> tuple | None:
    return getattr(v.type, "shape", None)


def _join(classes: DimClasses, out: Value, i: int, src: Value, j: int) -> None:
    """Result dim ``i`` of ``out`` is dim ``j`` of ``src`` (both dynamic, or nothing to record)."""
    a, b = _dims(out), _dims(src)
    if a is not None and b is not None and 0 <= i < len(a) and 0 <= j < len(b) and a[i] is None and b[j] is None:
        classes.union(Dim(out, i), Dim(src, j))


def _same_shape(op, classes, table):
    x, y = op.operands[0], op.results[0]
    if _dims(x) is not None and _dims(y) is not None and len(_dims(x)) == len(_dims(y)):
        for i in range(len(_dims(y))):
            _join(classes, y, i, x, i)


def _broadcast(op, classes, table):
    """A dynamic result dim is an operand's when every other operand has 1, nothing or the same
    class there (two different dynamic dims may broadcast a 1 at run time: nothing is known)."""
    y = op.results[0]
    out = _dims(y)
    shapes = [_dims(v) for v in op.operands]
    if out is None or any(s is None for s in shapes):
        return
    for i in range(len(out)):
        aligned = [(v, len(s) - len(out) + i) for v, s in zip(op.operands, shapes) if len(s) - len(out) + i >= 0]
        dynamic = [(v, j) for v, j in aligned if _dims(v)[j] is None]
        if not dynamic or any(_dims(v)[j] not in (None, 1) for v, j in aligned):
            continue
        first = Dim(*dynamic[0])
        if all(classes.same(first, Dim(v, j)) for v, j in dynamic[1:]):
            _join(classes, y, i, *dynamic[0])


def _transpose_dims(op, classes, table):
    x, y = op.operands[0], op.results[0]
    if _dims(x) is None:
        return
    perm = op.attr("perm") or tuple(reversed(range(len(_dims(x)))))
    for i, p in enumerate(perm):
        _join(classes, y, i, x, p % len(_dims(x)))


def _reshape_dims(op, classes, table):
    """A ``0`` copies its dim. The ``-1`` is the data's one other dynamic dim when the static
    sizes on both sides (copied dims left out) have the same product: the counts are equal."""
    if op.attr("allowzero"):
        return
    target, src = tuple(op.attr("shape")), _dims(op.operands[0])
    copied = {i for i, d in enumerate(target) if d == 0}
    for i in copied:
        _join(classes, op.results[0], i, op.operands[0], i)
    if src is None or target.count(-1) != 1:
        return
    rest = [j for j in range(len(src)) if j not in copied]
    dynamic = [j for j in rest if src[j] is None]
    if len(dynamic) != 1:
        return
    data_static = int(np.prod([src[j] for j in rest if src[j] is not None], dtype=np.int64))
    target_static = int(np.prod([d for i, d in enumerate(target) if i not in copied and d != -1], dtype=np.int64))
    if data_static == target_static:
        _join(classes, op.results[0], target.index(-1), op.operands[0], dynamic[0])


def _dynamic_reshape_dims(op, classes, table):
    target = table.get(op.operands[1])
    if target is None:
        return
    for i, item in enumerate(target.items):
        if isinstance(item, Dim):
            _join(classes, op.results[0], i, item.value, item.index)
        elif item == 0 and known(item) and not op.attr("allowzero"):
            _join(classes, op.results[0], i, op.operands[0], i)


def _dynamic_expand_dims(op, classes, table):
    """A result dim is the target's entry where the data has a static 1, and the data's dim where
    the target's entry is 1 or the same class."""
    x, y = op.operands[0], op.results[0]
    sx, sy, target = _dims(x), _dims(y), table.get(op.operands[1])
    if sx is None or sy is None or target is None or target.scalar:
        return
    for i, item in enumerate(target.items):
        i += len(sy) - len(target.items)
        j = i - (len(sy) - len(sx))
        if isinstance(item, Dim) and (j < 0 or sx[j] == 1):
            _join(classes, y, i, item.value, item.index)
        elif j >= 0 and sx[j] is None and (item == 1 or (isinstance(item, Dim) and classes.same(item, Dim(x, j)))):
            _join(classes, y, i, x, j)


def _dynamic_slice_dims(op, classes, table):
    """``buffer[:, :x.size(1)]``: a dim sliced from 0 by 1 to a run-time ``Dim`` is that dim.
    (Strictly ``min(dim, buffer size)``: exporters write it for buffers long enough, and a
    shorter buffer gives shapes that disagree downstream, refused there.)"""
    bounds = [table.get(v) if v is not None else None for v in op.operands[1:3]]
    consts = [constant_value(v) for v in op.operands[1:]]
    if bounds[1] is None or (len(op.operands) > 3 and consts[2] is None):
        return
    starts = bounds[0].items if bounds[0] is not None else (
        tuple(int(v) for v in consts[0].reshape(-1)) if consts[0] is not None else None)
    n = len(bounds[1].items)
    axes = tuple(int(v) for v in consts[2].reshape(-1)) if len(op.operands) > 3 else tuple(range(n))
    steps = tuple(int(v) for v in consts[3].reshape(-1)) if len(op.operands) > 4 and consts[3] is not None else (
        None if len(op.operands) > 4 else (1,) * n)
    if starts is None or steps is None or not len(starts) == len(axes) == len(steps) == n:
        return
    rank = len(_dims(op.results[0]) or ())
    for start, end, axis, step in zip(starts, bounds[1].items, axes, steps):
        if start == 0 and step == 1 and isinstance(end, Dim) and rank:
            _join(classes, op.results[0], axis % rank, end.value, end.index)


def _kept_axes(op, classes, table, removed: bool):
    """Squeeze (``removed``) or Unsqueeze: the other dims keep their order."""
    x, y = op.operands[0], op.results[0]
    if _dims(x) is None or _dims(y) is None:
        return
    long = _dims(x) if removed else _dims(y)
    axes = {a % len(long) for a in (op.attr("axes") or ())}
    if removed and not axes:
        return
    kept = [i for i in range(len(long)) if i not in axes]
    for short_i, long_i in enumerate(kept):
        if removed:
            _join(classes, y, short_i, x, long_i)
        else:
            _join(classes, y, long_i, x, short_i)


def _reduce_dims(op, classes, table):
    """The axes a reduction keeps pass their dims through (shifted left without ``keepdims``)."""
    from ...ir.dialects.nn_reduce import reduced_axes

    x, y = op.operands[0], op.results[0]
    if _dims(x) is None:
        return
    axes = reduced_axes(len(_dims(x)), {k: op.attr(k) for k in ("axes", "noop_with_empty_axes")})
    kept = [i for i in range(len(_dims(x))) if i not in axes]
    for out_i, in_i in enumerate(kept):
        _join(classes, y, in_i if op.attr("keepdims") else out_i, x, in_i)


def _gather_dims(op, classes, table):
    """Gather's result is data[:axis] + indices + data[axis + 1:] (an embedding lookup keeps the ids' dims)."""
    data, idx, y = op.operands[0], op.operands[1], op.results[0]
    if _dims(data) is None or _dims(idx) is None:
        return
    axis = op.attr("axis") % len(_dims(data))
    for i in range(axis):
        _join(classes, y, i, data, i)
    for i in range(len(_dims(idx))):
        _join(classes, y, axis + i, idx, i)
    for i in range(axis + 1, len(_dims(data))):
        _join(classes, y, i + len(_dims(idx)) - 1, data, i)


def _slice_dims(op, classes, table):
    x, y = op.operands[0], op.results[0]
    if _dims(x) is None:
        return
    rank = len(_dims(x))
    sliced = {a % rank for a in (op.attr("axes") or range(len(op.attr("starts"))))}
    for i in range(rank):
        if i not in sliced:
            _join(classes, y, i, x, i)


def _batch_dim(op, classes, table):
    _join(classes, op.results[0], 0, op.operands[0], 0)


def _concat_dims(op, classes, table):
    y = op.results[0]
    if _dims(y) is None:
        return
    axis = op.attr("axis") % len(_dims(y))
    for v in op.operands:
        for i in range(len(_dims(y))):
            if i != axis:
                _join(classes, y, i, v, i)


def _matmul_dims(op, classes, table):
    a, b = op.operands
    y = op.results[0]
    sa, sb, sy = _dims(a), _dims(b), _dims(y)
    if sa is None or sb is None or sy is None or len(sa) < 2 or len(sb) < 2:
        return
    _join(classes, y, len(sy) - 2, a, len(sa) - 2)
    _join(classes, y, len(sy) - 1, b, len(sb) - 1)
    if len(sb) == 2:   # a weight matrix: the leading dims are a's
        for i in range(len(sa) - 2):
            _join(classes, y, i, a, i)


def _gemm_dims(op, classes, table):
    a, b = op.operands[0], op.operands[1]
    _join(classes, op.results[0], 0, a, 1 if op.attr("trans_a") else 0)
    _join(classes, op.results[0], 1, b, 0 if op.attr("trans_b") else 1)


_SAME_SHAPE = (*nn.UNARY.values(), nn.CAST, nn.DROPOUT, nn.SOFTMAX, nn.LOG_SOFTMAX, nn.HARDMAX,
               nn.LP_NORMALIZATION, nn.LAYER_NORMALIZATION, nn.BATCH_NORMALIZATION, nn.INSTANCE_NORMALIZATION,
               nn.LRN, nn.IS_NAN, nn.IS_INF)
_BROADCAST = (*nn.BINARY.values(), *nn.COMPARE.values(), *nn.VARIADIC.values(), nn.WHERE, nn.PRELU)
_DIM_RULES = {**{d: _same_shape for d in _SAME_SHAPE}, **{d: _broadcast for d in _BROADCAST},
              nn.TRANSPOSE: _transpose_dims, nn.RESHAPE: _reshape_dims, nn.DYNAMIC_RESHAPE: _dynamic_reshape_dims,
              nn.DYNAMIC_EXPAND: _dynamic_expand_dims, nn.DYNAMIC_SLICE: _dynamic_slice_dims,
              nn.SQUEEZE: lambda op, c, t: _kept_axes(op, c, t, True),
              nn.UNSQUEEZE: lambda op, c, t: _kept_axes(op, c, t, False),
              nn.SLICE: _slice_dims, nn.CONCAT: _concat_dims, nn.MATMUL: _matmul_dims, nn.GEMM: _gemm_dims,
              **{d: _reduce_dims for d in nn.REDUCE.values()}, nn.GATHER: _gather_dims,
              **{d: _batch_dim for d in (nn.CONV, nn.CONV_TRANSPOSE, nn.MAX_POOL, nn.AVERAGE_POOL,
                                         nn.GLOBAL_AVERAGE_POOL, nn.GLOBAL_MAX_POOL)}}


def relate(op: Operation, classes: DimClasses, table: dict) -> None:
    """Record which dynamic dims of ``op``'s first result are dims of its operands."""
    rule = _DIM_RULES.get(op.opdef)
    if rule is not None and op.results and op.operands:
        rule(op, classes, table)


def resolve_reshape(data: Value, target: SymTensor, allowzero: int,
                    classes: DimClasses | None = None) -> tuple[int, ...] | None:
    """A constant Reshape target equivalent to the partially known ``target``, or None."""
    out: list[int | Dim] = []
    for pos, item in enumerate(target.items):
        copies = isinstance(item, Dim) and ((item.value is data and item.index == pos) or
                                            (classes is not None and classes.same(item, Dim(data, pos))))
        if copies and not allowzero:
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


__all__ = ["Dim", "DimClasses", "Expr", "SymTensor", "combine", "evaluate", "join_named_dims", "known", "lookup",
           "relate",
           "reshape_dims", "resolve_reshape", "static_length"]
