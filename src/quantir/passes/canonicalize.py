"""``canonicalize``: every registered op's ``fold`` to a fixed point, dead pure ops erased,
constants uniqued -- what ``mlir-opt --canonicalize`` does to the same IR.

Rules (counted per op kind in ``PassResult.stats``):

* ``fold:<op>``: ``OpDef.fold`` returned replacement values; the op's results are replaced and
  the op erased. For the quant casts (``quantir.ir.dialects.quant``)::

      dcast(qcast(x)) -> x
      qcast(dcast(y)) -> y          when y's type is the qcast's result type
      scast(scast(x)) -> x          when x's type comes back

* ``erase:<op>``: an op with ``Trait.PURE``, no used result and not a terminator is erased
  (MLIR's ``isOpTriviallyDead``); erasing it may make its operands' producers dead in turn.
* ``cse:arith.constant``: equal constants (same value and type) in a function are merged, as
  MLIR's ``OperationFolder`` does while filling the worklist; the kept constant moves to the
  front of the body unless it is already among the leading constants, which reproduces
  mlir-opt's op order exactly.

Iterates until nothing changes (at most ``max_iterations`` sweeps, MLIR's default is 10).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.attributes import DenseElementsAttr, DenseResourceAttr, FloatAttr, uniform_value
from ..ir.core import Block, Module, Operation
from ..ir.opdef import Trait
from . import PassResult

__all__ = ["Canonicalize", "CanonicalizeOptions", "canonicalize"]


@dataclass(frozen=True)
class CanonicalizeOptions:
    max_iterations: int = 10
    cse_constants: bool = True


class Canonicalize:
    name = "canonicalize"

    def __init__(self, options: CanonicalizeOptions | None = None):
        self.options = options or CanonicalizeOptions()

    def run(self, module: Module) -> PassResult:
        stats: dict[str, int] = {}
        modified = False
        for fn in module.functions:
            if fn.body is None:
                continue
            for _ in range(self.options.max_iterations):
                changed = self._constants(fn.body, stats) if self.options.cse_constants else False
                changed |= _fold_and_erase(fn.body, stats)
                modified |= changed
                if not changed:
                    break
        return PassResult(modified, stats)

    @staticmethod
    def _constants(block: Block, stats: dict[str, int]) -> bool:
        """One pass over the body that builds the new op order (a list per side) instead of
        moving ops one at a time: linear in the number of ops."""
        changed = False
        owned: set[int] = set()
        uniqued: dict[object, Operation] = {}
        moved: list[Operation] = []   # each goes to the front in turn, so they end up reversed
        rest: list[Operation] = []
        for op in block.ops:
            if not op.opdef.has(Trait.CONSTANT_LIKE) or len(op.results) != 1 or "value" not in op.attributes:
                rest.append(op)
                continue
            key = (_constant_key(op.attributes["value"]), op.results[0].type)
            kept = uniqued.get(key)
            if kept is not None:
                op.results[0].replace_all_uses_with(kept.results[0])
                block.detach(op)
                _bump(stats, "cse:" + op.name)
                changed = True
                continue
            before = rest[-1] if rest else (moved[0] if moved else None)   # the op now just before it
            if before is not None and id(before) not in owned:
                moved.append(op)
                changed = True
            else:
                rest.append(op)
            owned.add(id(op))
            uniqued[key] = op
        if changed:
            block.ops[:] = moved[::-1] + rest
        return changed


def _fold_and_erase(block: Block, stats: dict[str, int]) -> bool:
    """One bottom-up sweep (as MLIR's worklist order); producers of erased ops are revisited.

    Erased ops are detached at once (operands dropped, ``op.block = None``) and removed from
    the body in one pass at the end: ``list.remove`` per op made 30,000 folds quadratic."""
    changed = False
    worklist = list(block.ops)
    queued = {id(op) for op in worklist}
    while worklist:
        op = worklist.pop()
        queued.discard(id(op))
        if op.block is not block:
            continue
        producers = [v.op for v in op.operands if getattr(v, "op", None) is not None]
        if _trivially_dead(op):
            block.detach(op)
            _bump(stats, "erase:" + op.name)
        elif op.opdef.fold is not None and (values := op.opdef.fold(op)) is not None:
            for r, v in zip(op.results, values):
                r.replace_all_uses_with(v)
            block.detach(op)
            _bump(stats, "fold:" + op.name)
            producers += [v.op for v in values if getattr(v, "op", None) is not None]
        else:
            continue
        changed = True
        for p in producers:
            if id(p) not in queued and p.block is block:
                worklist.append(p)
                queued.add(id(p))
    if changed:
        block.ops[:] = [op for op in block.ops if op.block is block]
    return changed


def _trivially_dead(op: Operation) -> bool:
    return (op.opdef.has(Trait.PURE) and not op.opdef.has(Trait.TERMINATOR)
            and all(not r.uses for r in op.results))


def _constant_key(value) -> object:
    """Constants are equal when MLIR would unique their attributes to the same object.

    Never materializes a splat and never copies an array: a splat (lazy or not) is keyed by its
    one value, other data by a 256-bit digest of its bytes."""
    if isinstance(value, FloatAttr):
        import struct
        return ("float", value.type, struct.pack("<d", value.value))
    if isinstance(value, DenseElementsAttr):
        array = value.array
        splat = uniform_value(array)
        if splat is not None:
            return ("splat", value.type, array.dtype.str, splat.tobytes())
        return ("dense", value.type, array.dtype.str, _digest(array))
    if isinstance(value, DenseResourceAttr):
        return ("resource", value.key, value.type, id(value.array))
    return value


def _digest(array: np.ndarray) -> bytes:
    import hashlib
    data = array if array.flags.c_contiguous else np.ascontiguousarray(array)
    return hashlib.blake2b(memoryview(data).cast("B"), digest_size=32).digest()


def _bump(stats: dict[str, int], key: str) -> None:
    stats[key] = stats.get(key, 0) + 1


def canonicalize(module: Module, options: CanonicalizeOptions | None = None) -> bool:
    """Run :class:`Canonicalize` on ``module``; True if it changed. Counts are on
    ``Canonicalize().run(module).stats``."""
    return Canonicalize(options).run(module).modified
