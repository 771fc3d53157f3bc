"""Constant folding (``fold-constants``) and identity removal (``remove-identities``).

Design notes
- An op folds when it is pure, has a kernel, and every operand is an ``arith.constant``;
  it is evaluated with the reference interpreter's kernels (the same code that runs the
  model, so folding cannot disagree with execution) and replaced by ``arith.constant``s that
  keep the results' name hints. ``nn.shape`` and ``nn.size`` fold from the operand's static
  type alone: this is what dissolves the Shape -> Gather -> Concat -> Reshape chains that
  exporters leave behind.
- This pass reaches down into ``runtime.kernels`` — the one place where ``passes`` uses a
  lower layer — because a second, folding-only copy of every kernel would drift from the
  real one. The import is deferred to keep ``import quantir.passes`` light.
- The importer folds eagerly, op by op, through :func:`fold_op`, so inputs that must be
  constant (Reshape's shape, Pad's pads, ...) are constant by the time they are read.
- Folding leaves the folded op's operands dead; ``canonicalize`` erases them (dead code
  elimination is its ``erase:`` rule).
- Folding is bounded, because a file's numbers choose the sizes: a 145-byte model can ask for
  ``ConstantOfShape([16, 2**15, 2**15])``. Splats stay lazy: an elementwise or data-movement op
  on splat operands (and ``constant_of_shape`` itself) folds to a splat view of one element,
  whatever its shape. A result with no more elements than the op's largest in-memory operand
  only rearranges or converts data the file itself holds (Transpose, Cast or DequantizeLinear
  of a 500 MB weight) and always folds. A larger result is *manufactured* from a few numbers
  (ConstantOfShape of a non-splat, Expand, Tile, Pad, Range, Concat): it folds only within
  ``max_bytes`` per op (64 MiB) and ``max_total_bytes`` per function body (256 MiB, all such
  folds together, so that 100 such ops cannot add up to 6 GB); beyond that the op stays
  unfolded and runs, under the interpreter's own limit, if it is ever executed. Nor is a lazy
  splat larger than ``max_bytes`` handed to any other kernel (MatMul would copy it, a
  reduction would read every element). Why not "the
  model's own initializer size" as the budget: the split above lets every large fold of real
  data through without knowing the model, and the running total lives with the block
  (``_MANUFACTURED``), so the importer's op-by-op folding gets the same bounds as this pass.
  Why "largest operand" and not "all operands": ``Concat(x, Neg(x))`` would then double
  without limit, two ops at a time.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from ..errors import QuantirError, ResourceError
from ..ir import DenseElementsAttr, Module, Operation, Value
from ..ir.attributes import DenseResourceAttr, lazy_splat, splat_value
from ..ir.dialects import arith, nn
from ..ir.opdef import Trait, elements_attr
from ..types import TensorType
from . import PassResult

_SHAPE_ONLY = {nn.SHAPE, nn.SIZE}
# ops whose result on a splat operand is the same splat in another shape
_SPLAT_MOVES = {nn.EXPAND, nn.TILE, nn.RESHAPE, nn.TRANSPOSE, nn.SQUEEZE, nn.UNSQUEEZE, nn.FLATTEN}
DEFAULT_MAX_FOLD_BYTES = 64 << 20          # manufactured by one op
DEFAULT_MAX_TOTAL_FOLD_BYTES = 256 << 20   # manufactured in one block, all ops together


def constant_value(v: Value) -> np.ndarray | None:
    """The array behind ``v`` when it is the result of an ``arith.constant``, else None."""
    op = getattr(v, "op", None)
    if op is None or op.opdef is not arith.CONSTANT:
        return None
    attr = op.attributes.get("value")
    if isinstance(attr, (DenseElementsAttr, DenseResourceAttr)):
        return attr.array
    from ..runtime.kernels.constant import constant
    return constant(op)


def make_constant(array: np.ndarray, like: Value | None = None, label: str | None = None) -> Operation:
    """An ``arith.constant`` holding ``array`` (by reference), typed like ``like`` when it fits."""
    array = np.asarray(array)
    attr = elements_attr(array)
    if like is not None and isinstance(like.type, TensorType) and like.type.element_type == attr.type.element_type:
        attr = DenseElementsAttr(array, TensorType(tuple(array.shape), like.type.element_type))
    op = arith.CONSTANT.build([], [attr.type], label=label, value=attr)
    if like is not None:
        op.results[0].name_hint = like.name_hint
    return op


def _static_dims(v: Value) -> bool:
    return isinstance(v.type, TensorType) and v.type.has_static_shape


def fold_op(op: Operation, max_bytes: int | None = DEFAULT_MAX_FOLD_BYTES,
            max_total_bytes: int | None = DEFAULT_MAX_TOTAL_FOLD_BYTES) -> list[np.ndarray] | None:
    """The values of ``op``'s results when they are known at compile time and within budget
    (see the module notes; None: no budget), else None."""
    if op.opdef is arith.CONSTANT or not op.opdef.has(Trait.PURE):
        return None
    from ..runtime.kernels import kernel_for
    kernel = kernel_for(op.opdef)
    if kernel is None:
        return None
    if op.opdef in _SHAPE_ONLY and op.operands and _static_dims(op.operands[0]):
        # the kernels read only .shape / .size: a zero-stride stand-in costs no memory
        args = [np.broadcast_to(np.zeros((), np.bool_), op.operands[0].type.shape)]
    else:
        args = [constant_value(v) for v in op.operands]
        if any(a is None for a in args):
            return None
        splats = _fold_splats(op, kernel, args)
        if splats is not None:
            return splats
    budget = _Budget.of(op, args, max_bytes, max_total_bytes)
    if budget.refused:
        return None
    from ..runtime.kernels.limits import tensor_limit
    try:
        with tensor_limit(budget.limit):
            out = kernel(op, *args)
    except (ResourceError, MemoryError):
        return None    # a result or scratch buffer of unknown size turned out over budget
    results = out if isinstance(out, tuple) else (out,)
    # a copy when the kernel returned a view (broadcast_to, transpose): the constant owns its
    # data; a lazy splat (every stride 0) stays one element
    arrays = [r if (r.flags.c_contiguous and r.base is None) or splat_value(r) is not None else r.copy()
              for r in map(np.asarray, results)]
    if not budget.spend(op, arrays):
        return None
    return arrays


@dataclass
class _Budget:
    """What folding one op may spend (see the module notes).

    A result no larger (in elements) than the op's largest in-memory operand only rearranges
    or converts data the file holds; any larger result is *manufactured* and must fit
    ``max_bytes`` and, with all the bytes manufactured before it in the same block, the
    block's ``max_total_bytes``."""

    limit: int | None
    refused: bool
    largest: int
    max_bytes: int | None
    max_total_bytes: int | None

    @classmethod
    def of(cls, op: Operation, args: list[np.ndarray], max_bytes: int | None,
           max_total_bytes: int | None) -> "_Budget":
        from ..ir.dialects.nn_base import element_dtype
        from ..runtime.kernels.limits import nbytes
        largest = max((a.size for a in args if splat_value(a) is None), default=1)
        budget = cls(None, False, largest, max_bytes, max_total_bytes)
        if max_bytes is None:
            return budget
        room = _room(op, max_bytes, max_total_bytes)
        limit, manufactured = room, 0
        for r in op.results:
            if not _static_dims(r):
                continue     # a result of unknown size is capped at ``room`` by the kernel's own check
            try:
                size = nbytes(r.type.shape, element_dtype(r.type))
            except QuantirError:
                continue
            if r.type.num_elements <= largest:
                limit = max(limit, size)
            else:
                manufactured += size
        # a kernel may materialize a lazy splat operand (matmul copies it, a reduction reads every
        # element): one larger than the budget is left to the interpreter's own checks
        splat_bytes = max((a.nbytes for a in args if a.size > 1 and splat_value(a) is not None), default=0)
        budget.limit, budget.refused = limit, manufactured > room or splat_bytes > max(max_bytes, limit)
        return budget

    def spend(self, op: Operation, arrays: list[np.ndarray]) -> bool:
        """Charge the manufactured results to the block; False when they turned out over budget."""
        if self.max_bytes is None:
            return True
        made = sum(a.nbytes for a in arrays if a.size > self.largest and splat_value(a) is None)
        if not made:
            return True
        if made > _room(op, self.max_bytes, self.max_total_bytes):
            return False
        if op.block is not None:
            _MANUFACTURED[op.block] = _MANUFACTURED.get(op.block, 0) + made
        return True


# Bytes manufactured by folding so far, per block: the importer folds op by op through
# ``fold_op``, so the running total lives with the block it was spent on.
_MANUFACTURED: "weakref.WeakKeyDictionary[object, int]" = weakref.WeakKeyDictionary()


def _room(op: Operation, max_bytes: int, max_total_bytes: int | None) -> int:
    """How many bytes ``op`` may still manufacture."""
    if max_total_bytes is None or op.block is None:
        return max_bytes
    return max(0, min(max_bytes, max_total_bytes - _MANUFACTURED.get(op.block, 0)))


def _fold_splats(op: Operation, kernel, args: list[np.ndarray]) -> list[np.ndarray] | None:
    """Lazy splat results when every operand is a splat and the op keeps splats splat."""
    from ..runtime.kernels.elementwise import SPLAT_ELEMENTWISE
    if op.opdef is not nn.CONSTANT_OF_SHAPE and op.opdef not in SPLAT_ELEMENTWISE and op.opdef not in _SPLAT_MOVES:
        return None
    if len(op.results) != 1 or not _static_dims(op.results[0]):
        return None
    if math.prod(op.results[0].type.shape) * 8 >= 1 << 63:
        return None                # numpy cannot index it, even as a view: leave it to the interpreter's check
    if op.opdef is nn.CONSTANT_OF_SHAPE:
        return [kernel(op)]        # a lazy splat already
    values = [splat_value(a) for a in args]
    if not values or any(v is None for v in values):
        return None
    shape = op.results[0].type.shape
    if op.opdef in _SPLAT_MOVES:
        value = values[0]
    else:
        one = kernel(op, *(v.reshape((1,) * a.ndim) for v, a in zip(values, args)))
        value = np.asarray(one).reshape(-1)[:1].reshape(())
    return [lazy_splat(value, shape, value.dtype)]




def replace_with_constants(op: Operation, arrays: list[np.ndarray]) -> list[Operation]:
    """Insert one constant per result before ``op``, redirect the uses, erase ``op``."""
    block = op.block
    made = _constants_for(op, arrays)
    for c in made:
        block.insert_before(op, c)
    block.erase(op)
    return made


def _constants_for(op: Operation, arrays: list[np.ndarray]) -> list[Operation]:
    """One constant per result of ``op``, its uses redirected there; the caller places them."""
    made = [make_constant(a, like=r, label=op.label) for r, a in zip(op.results, arrays)]
    for r, c in zip(op.results, made):
        r.replace_all_uses_with(c.results[0])
    return made


@dataclass(frozen=True)
class FoldConstantsOptions:
    """``max_elements``: leave results larger than this unfolded (None: no limit).
    ``max_bytes`` / ``max_total_bytes``: what folding may manufacture per op / per function
    body (see the module notes; None: no budget)."""

    max_elements: int | None = None
    max_bytes: int | None = DEFAULT_MAX_FOLD_BYTES
    max_total_bytes: int | None = DEFAULT_MAX_TOTAL_FOLD_BYTES


class FoldConstants:
    """Evaluate every op whose operands are constants (one sweep in program order, which
    reaches a fixed point because each op's operands precede it). Stats: ``fold:<op>``."""

    name = "fold-constants"

    def __init__(self, options: FoldConstantsOptions | None = None):
        self.options = options or FoldConstantsOptions()

    def run(self, module: Module) -> PassResult:
        stats: dict[str, int] = {}
        limit = self.options.max_elements
        for fn in module.functions:
            if fn.body is None:
                continue
            body = fn.body
            new_ops: list[Operation] = []   # the body rebuilt in one pass: no list.insert/remove per fold
            for op in list(body.ops):
                if op.block is None:
                    continue
                values = fold_op(op, self.options.max_bytes, self.options.max_total_bytes)
                if values is None or (limit is not None and any(v.size > limit for v in values)):
                    new_ops.append(op)
                    continue
                for c in _constants_for(op, values):
                    c.block = body
                    new_ops.append(c)
                body.detach(op)
                _bump(stats, "fold:" + op.name)
            body.ops[:] = new_ops
        return PassResult(bool(stats), stats)


@dataclass(frozen=True)
class RemoveIdentitiesOptions:
    pass


class RemoveIdentities:
    """``nn.identity(x) -> x`` and inference ``nn.dropout(x) -> x`` (when its mask is unused).

    The removed op's tensor name moves to ``x`` when ``x`` has none. Stats: ``erase:<op>``.
    """

    name = "remove-identities"

    def __init__(self, options: RemoveIdentitiesOptions | None = None):
        self.options = options or RemoveIdentitiesOptions()

    def run(self, module: Module) -> PassResult:
        stats: dict[str, int] = {}
        for fn in module.functions:
            for op in list(fn.ops):
                if op.opdef is nn.IDENTITY or (op.opdef is nn.DROPOUT and all(not r.uses for r in op.results[1:])):
                    src, out = op.operands[0], op.results[0]
                    if src.name_hint is None:
                        src.name_hint = out.name_hint
                    out.replace_all_uses_with(src)
                    fn.body.detach(op)   # erased; the body is compacted once below
                    _bump(stats, "erase:" + op.name)
            if fn.body is not None and stats:
                fn.body.ops[:] = [op for op in fn.body.ops if op.block is fn.body]
        return PassResult(bool(stats), stats)


def _bump(stats: dict[str, int], key: str, n: int = 1) -> None:
    stats[key] = stats.get(key, 0) + n
