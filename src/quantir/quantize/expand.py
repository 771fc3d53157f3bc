"""Expansion: float ops that no LiteRT builtin computes, rewritten into ops that some do.

A declaration may lower a float op to a small integer subgraph. quantir does it in the float
graph, before calibration (``quantize.ops.EXPANSIONS``, run by the ``rewrite`` engine): the op
becomes float ops that other declarations quantize, computing the same float32 values. Each
interior value is then an ordinary value of the graph that calibration observes, the solver
gives its own parameters, and the integer trace and ``CalibrationInfo`` show; the integer
subgraph is what those ops lower to. A user's exclusion (``Config.exclude``, by the op's label
or name, or by the expansion's name) keeps the op whole and float.
"""
from __future__ import annotations

import dataclasses

from ..ir import Function
from ..rewrite import Match, RewriteStats, Rule, apply_rules, match
from .attention_mask import ADDITIVE_ATTENTION_MASK, BOUND_ATTENTION_MASK
from .config import Config
from .ops import EXPANSIONS
from .ops.normalization import LAYER_NORM_UNUSED


def _rules(config: Config) -> list[Rule]:
    """The declared expansions, less the LayerNorm form ``config.layer_norm`` does not choose, and
    the attention-mask rewrites (``quantize.attention_mask``)."""
    unused = LAYER_NORM_UNUSED[config.layer_norm]
    rules = [*EXPANSIONS, ADDITIVE_ATTENTION_MASK, BOUND_ATTENTION_MASK]
    return [_respecting(r, config) for r in rules if r.name not in unused]


def _respecting(rule: Rule, config: Config) -> Rule:
    def check(m: Match) -> str | None:
        op = m.ops.get("op")
        if rule.name in config.exclude or (op is not None and config.excludes(op.label, op.name)):
            return "excluded by the configuration"
        return rule.check(m) if rule.check else None
    return dataclasses.replace(rule, check=check)


def would_expand(fn: Function, config: Config) -> bool:
    """Does any expansion apply to ``fn`` (without changing it)?"""
    rules = _rules(config)
    for op in fn.ops:
        if not op.results:
            continue
        for rule in rules:
            m = match(rule.pattern, op.results[0])
            if m is not None and rule.check(m) is None:
                return True
    return False


def expand(fn: Function, config: Config) -> RewriteStats:
    """Apply every declared expansion to ``fn`` in place."""
    return apply_rules(fn, _rules(config))
