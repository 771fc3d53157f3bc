"""Dataflow patterns and the rewrite engine (see ``pattern.py`` and ``engine.py``)."""
from .engine import NamedOps, Rewriter, Rule, RewriteStats, apply_rules, erase_dead
from .pattern import Match, Pat, match

__all__ = ["Match", "Pat", "match", "NamedOps", "Rewriter", "Rule", "RewriteStats", "apply_rules", "erase_dead"]
