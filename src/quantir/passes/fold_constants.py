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
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import DenseElementsAttr, Module, Operation, Value
from ..ir.attributes import DenseResourceAttr
from ..ir.dialects import arith, nn
from ..ir.opdef import Trait, elements_attr
from ..types import TensorType
from . import PassResult

_SHAPE_ONLY = {nn.SHAPE, nn.SIZE}


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


def fold_op(op: Operation) -> list[np.ndarray] | None:
    """The values of ``op``'s results when they are known at compile time, else None."""
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
    out = kernel(op, *args)
    results = out if isinstance(out, tuple) else (out,)
    # a copy when the kernel returned a view (broadcast_to, transpose): the constant owns its data
    return [r if r.flags.c_contiguous and r.base is None else r.copy() for r in map(np.asarray, results)]


def replace_with_constants(op: Operation, arrays: list[np.ndarray]) -> list[Operation]:
    """Insert one constant per result before ``op``, redirect the uses, erase ``op``."""
    block = op.block
    made = []
    for r, a in zip(op.results, arrays):
        c = make_constant(a, like=r, label=op.label)
        block.insert_before(op, c)
        r.replace_all_uses_with(c.results[0])
        made.append(c)
    block.erase(op)
    return made


@dataclass(frozen=True)
class FoldConstantsOptions:
    """``max_elements``: leave results larger than this unfolded (None: no limit)."""

    max_elements: int | None = None


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
            for op in list(fn.body.ops):
                if op.block is None:
                    continue
                values = fold_op(op)
                if values is None or (limit is not None and any(v.size > limit for v in values)):
                    continue
                replace_with_constants(op, values)
                _bump(stats, "fold:" + op.name)
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
                    fn.body.erase(op)
                    _bump(stats, "erase:" + op.name)
        return PassResult(bool(stats), stats)


def _bump(stats: dict[str, int], key: str, n: int = 1) -> None:
    stats[key] = stats.get(key, 0) + n
