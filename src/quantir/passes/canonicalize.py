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

from ..ir.attributes import DenseElementsAttr, DenseResourceAttr, FloatAttr
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
        changed = False
        owned: set[int] = set()
        uniqued: dict[object, Operation] = {}
        for op in list(block.ops):
            if not op.opdef.has(Trait.CONSTANT_LIKE) or len(op.results) != 1 or "value" not in op.attributes:
                continue
            key = (_constant_key(op.attributes["value"]), op.results[0].type)
            kept = uniqued.get(key)
            if kept is not None:
                op.results[0].replace_all_uses_with(kept.results[0])
                block.erase(op)
                _bump(stats, "cse:" + op.name)
                changed = True
                continue
            i = block.ops.index(op)
            if i != 0 and id(block.ops[i - 1]) not in owned:
                block.ops.pop(i)
                block.ops.insert(0, op)
                changed = True
            owned.add(id(op))
            uniqued[key] = op
        return changed


def _fold_and_erase(block: Block, stats: dict[str, int]) -> bool:
    """One bottom-up sweep (as MLIR's worklist order); producers of erased ops are revisited."""
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
            block.erase(op)
            _bump(stats, "erase:" + op.name)
        elif op.opdef.fold is not None and (values := op.opdef.fold(op)) is not None:
            for r, v in zip(op.results, values):
                r.replace_all_uses_with(v)
            block.erase(op)
            _bump(stats, "fold:" + op.name)
            producers += [v.op for v in values if getattr(v, "op", None) is not None]
        else:
            continue
        changed = True
        for p in producers:
            if id(p) not in queued and p.block is block:
                worklist.append(p)
                queued.add(id(p))
    return changed


def _trivially_dead(op: Operation) -> bool:
    return (op.opdef.has(Trait.PURE) and not op.opdef.has(Trait.TERMINATOR)
            and all(not r.uses for r in op.results))


def _constant_key(value) -> object:
    """Constants are equal when MLIR would unique their attributes to the same object."""
    if isinstance(value, FloatAttr):
        import struct
        return ("float", value.type, struct.pack("<d", value.value))
    if isinstance(value, DenseElementsAttr):
        return ("dense", value.type, value.array.dtype.str, value.array.tobytes())
    if isinstance(value, DenseResourceAttr):
        return ("resource", value.key, value.type, id(value.array))
    return value


def _bump(stats: dict[str, int], key: str) -> None:
    stats[key] = stats.get(key, 0) + 1


def canonicalize(module: Module, options: CanonicalizeOptions | None = None) -> bool:
    """Run :class:`Canonicalize` on ``module``; True if it changed. Counts are on
    ``Canonicalize().run(module).stats``."""
    return Canonicalize(options).run(module).modified
