"""Passes: named transformations of a :class:`~quantir.ir.Module`, run in place.

The interface every pass follows (after onnx-ir's passes and MLIR's pass manager):

* a ``name`` (kebab-case, as on a command line: ``canonicalize``);
* typed options in a frozen dataclass given to the constructor (``options``);
* ``run(module) -> PassResult``: ``modified`` says whether the module changed, ``stats`` counts
  what happened per rule (``{"fold:quant.dcast": 2, "erase:quant.qcast": 1}``) so that reports
  and tests can say *why*. ``PassResult`` is truthy exactly when the module was modified.

>>> from quantir.passes import Canonicalize, run_passes
>>> # results = run_passes(module, [Canonicalize()])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Protocol, runtime_checkable

from ..ir.core import Module

__all__ = ["Pass", "PassResult", "run_passes", "Canonicalize", "CanonicalizeOptions", "canonicalize"]


@dataclass(frozen=True)
class PassResult:
    """What one run of a pass did."""

    modified: bool
    stats: dict[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.modified


@runtime_checkable
class Pass(Protocol):
    name: str
    options: Any

    def run(self, module: Module) -> PassResult: ...


def run_passes(module: Module, passes: Iterable[Pass]) -> list[PassResult]:
    """Run ``passes`` in order on ``module``; one result per pass."""
    return [p.run(module) for p in passes]


from .canonicalize import Canonicalize, CanonicalizeOptions, canonicalize  # noqa: E402
