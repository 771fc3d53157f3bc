"""Rules and the rewrite driver.

A ``Rule`` has a name, a pattern rooted at an op's result, an optional ``check`` that says
*why* a matched subgraph must not be rewritten (the report shows it to the user), and a
``rewrite`` that builds replacement ops through a ``Rewriter`` and returns the values that
replace the root op's results. The driver walks each function in order and applies the first
rule that matches and passes its check, counting hits, and remembers the reasons of rules
that matched but were refused.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..ir import Function, Module, Operation, Value, elements_attr
from ..ir.dialects import arith
from ..ir.opdef import Trait
from .pattern import Match, Pat, match


class Rewriter:
    """Inserts new ops before the op being rewritten."""

    def __init__(self, fn: Function, anchor: Operation):
        self.fn = fn
        self.anchor = anchor

    def insert(self, op: Operation) -> Operation:
        assert self.fn.body is not None
        if op.loc is None:
            op.loc = self.anchor.loc
        return self.fn.body.insert_before(self.anchor, op)

    def f32_constant(self, value, name: str | None = None) -> Value:
        """A float32 constant (``arith.constant``) inserted before the anchor, named ``name``."""
        attr = elements_attr(np.asarray(value, np.float32))
        c = self.insert(arith.CONSTANT.build([], [attr.type], value=attr)).result
        c.name_hint = name
        return c


class NamedOps:
    """What an expansion inserts before the op it rewrites (the anchor), named after it: each result
    ``<name>.<what>``, each op labelled ``<label>/<what>`` (an empty ``what``: the anchor's own name
    and label), so the summary and the integer trace tell which op every new value comes from."""

    def __init__(self, rw: Rewriter, anchor: Operation, default: str):
        self.rw = rw
        self.name = anchor.results[0].name_hint or default
        self.label = anchor.label or self.name

    def constant(self, value, what: str) -> Value:
        return self.rw.f32_constant(value, f"{self.name}.{what}")

    def op(self, opdef, operands, result_type, what: str, **attrs) -> Value:
        new = opdef.build(operands, [result_type], **attrs)
        new.label = f"{self.label}/{what}" if what else self.label
        out = self.rw.insert(new).result
        out.name_hint = f"{self.name}.{what}" if what else self.name
        return out


RewriteFn = Callable[[Rewriter, Match], "Sequence[Value] | None"]
CheckFn = Callable[[Match], "str | None"]


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: Pat
    rewrite: RewriteFn
    check: CheckFn | None = None
    doc: str = ""


@dataclass
class RewriteStats:
    hits: Counter = field(default_factory=Counter)
    # (rule name, root op) -> why the rule refused; kept once per pair across iterations
    refused: dict[tuple[str, Operation], str] = field(default_factory=dict)

    @property
    def modified(self) -> bool:
        return sum(self.hits.values()) > 0


def erase_dead(fn: Function) -> int:
    """Erase pure ops whose results are unused, in reverse order so chains go at once."""
    assert fn.body is not None
    erased = 0
    for op in reversed(list(fn.body.ops)):
        if op.opdef.has(Trait.PURE) and not op.opdef.has(Trait.TERMINATOR) and op.results \
                and not any(r.uses for r in op.results):
            fn.body.erase(op)
            erased += 1
    return erased


def apply_rules(target: Module | Function, rules: Sequence[Rule], *, max_iterations: int = 10) -> RewriteStats:
    """Apply rules to a fixed point (bounded), then erase dead pure ops."""
    fns = target.functions if isinstance(target, Module) else [target]
    stats = RewriteStats()
    for fn in fns:
        if fn.body is None:
            continue
        for _ in range(max_iterations):
            changed = False
            for op in list(fn.body.ops):
                if op.block is None or not op.results:   # a multi-result op matches at its first result
                    continue
                for rule in rules:
                    m = match(rule.pattern, op.results[0])
                    if m is None:
                        continue
                    reason = rule.check(m) if rule.check else None
                    if reason is not None:
                        stats.refused[(rule.name, op)] = reason
                        continue
                    replacement = rule.rewrite(Rewriter(fn, op), m)
                    if replacement is None:
                        continue
                    for old, new in zip(op.results, replacement):
                        if old is not new:
                            old.replace_all_uses_with(new)
                    stats.hits[rule.name] += 1
                    changed = True
                    break
            if not changed:
                break
            erase_dead(fn)   # only once a rule rewrote: an untouched function keeps every op
    return stats
