"""Dataflow patterns as data.

A pattern describes a value by how it was produced::

    conv = Pat.op(nn.CONV, Pat.any("x"), Pat.const("w"), Pat.const("b").optional(), name="conv")
    relu = Pat.op(nn.RELU, conv.one_use(), name="relu")

``match(pattern, value)`` returns a ``Match`` holding the named captures (values, ops and,
for constants, their arrays) or ``None``. Patterns are immutable and cheap to build; they never
mutate the IR. Operand lists match positionally; an ``optional()`` pattern may also match a
missing trailing operand.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from ..ir import Operation, OpResult, Value
from ..ir.dialects.arith import CONSTANT
from ..ir.opdef import OpDef


@dataclass
class Match:
    """Captures by name: ``values[name]`` is the matched Value; ``ops[name]`` its producer."""

    values: dict[str, Value] = field(default_factory=dict)
    ops: dict[str, Operation] = field(default_factory=dict)
    consts: dict[str, np.ndarray] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        if name in self.ops:
            return self.ops[name]
        return self.values[name]

    def __contains__(self, name: str) -> bool:
        return name in self.values or name in self.ops

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default

    def copy(self) -> "Match":
        return Match(dict(self.values), dict(self.ops), dict(self.consts))


@dataclass(frozen=True)
class Pat:
    kind: str                                   # "any" | "op" | "const" | "alt"
    name: str | None = None
    opdefs: tuple[OpDef, ...] = ()
    operands: tuple["Pat", ...] | None = None   # None: operands are not inspected
    alternatives: tuple["Pat", ...] = ()
    is_optional: bool = False
    single_use: bool = False
    where: Callable[[Value], bool] | None = None

    # -- constructors -----------------------------------------------------------------------
    @staticmethod
    def any(name: str | None = None, where: Callable[[Value], bool] | None = None) -> "Pat":
        """Any value (a block argument or any op's result)."""
        return Pat("any", name, where=where)

    @staticmethod
    def op(opdef: OpDef | Sequence[OpDef], *operands: "Pat", name: str | None = None,
           where: Callable[[Value], bool] | None = None, any_operands: bool = False) -> "Pat":
        """A result of an op of one of the given kinds, whose operands match ``operands``.
        With ``any_operands`` the operands are not inspected."""
        defs = tuple(opdef) if isinstance(opdef, (list, tuple)) else (opdef,)
        return Pat("op", name, opdefs=defs, operands=None if any_operands else tuple(operands), where=where)

    @staticmethod
    def const(name: str | None = None, where: Callable[[np.ndarray], bool] | None = None) -> "Pat":
        """A value produced by ``arith.constant`` with an array value; captures the array."""
        check = (lambda v: where(_const_array(v))) if where else None
        return Pat("const", name, where=check)

    @staticmethod
    def alt(*alternatives: "Pat", name: str | None = None) -> "Pat":
        """The first alternative that matches."""
        return Pat("alt", name, alternatives=tuple(alternatives))

    # -- modifiers ----------------------------------------------------------------------------
    def optional(self) -> "Pat":
        return replace(self, is_optional=True)

    def one_use(self) -> "Pat":
        """Only if the value has exactly one use: fusing it into its user must not change others."""
        return replace(self, single_use=True)

    def named(self, name: str) -> "Pat":
        return replace(self, name=name)


def _const_array(value: Value) -> np.ndarray | None:
    if isinstance(value, OpResult) and value.op.opdef is CONSTANT:
        array = getattr(value.op.attributes.get("value"), "array", None)
        return array
    return None


def match(pattern: Pat, value: Value) -> Match | None:
    """Match ``pattern`` against the dataflow graph that produced ``value``."""
    m = Match()
    return m if _match(pattern, value, m) else None


def _match(p: Pat, value: Value, m: Match) -> bool:
    if p.single_use and len(value.uses) != 1:
        return False
    if p.kind == "alt":
        for alt in p.alternatives:
            trial = m.copy()
            if _match(alt, value, trial):
                _merge(m, trial)
                if p.name:
                    m.values[p.name] = value
                return True
        return False
    if p.where is not None and not p.where(value):
        return False
    if p.kind == "const":
        array = _const_array(value)
        if array is None:
            return False
        if p.name:
            m.consts[p.name] = array
    elif p.kind == "op":
        if not isinstance(value, OpResult) or value.op.opdef not in p.opdefs:
            return False
        op = value.op
        if p.operands is not None and not _match_operands(p.operands, op.operands, m):
            return False
        if p.name:
            m.ops[p.name] = op
    if p.name:
        if p.name in m.values and m.values[p.name] is not value:
            return False   # the same name must bind the same value (a diamond)
        m.values[p.name] = value
    return True


def _match_operands(pats: tuple[Pat, ...], operands: list[Value], m: Match) -> bool:
    required = sum(1 for p in pats if not p.is_optional)
    if not required <= len(operands) <= len(pats):
        return False
    return all(_match(p, v, m) for p, v in zip(pats, operands))


def _merge(into: Match, other: Match) -> None:
    into.values.update(other.values)
    into.ops.update(other.ops)
    into.consts.update(other.consts)
