"""``linalg.generic`` as upstream's ``--lower-quant-ops`` emits it for per-axis and sub-channel
types: an elementwise loop over the tensor, whose body reads one element of each input
(through ``indexing_maps``: the tensor's identity map, and for the scales and zero points the
map onto their smaller tensor) and ``linalg.yield``s the output element.

quantir's ops have no regions, so this op is a :class:`RegionOperation`: an ``Operation`` with
one ``body`` block (arguments ``%in...``/``%out``). The printer writes MLIR's custom form with
``#map`` aliases at the top of the module, and the parser reads it back (parallel loops only;
affine maps whose results are kept as their tokens, as ``d1 floordiv 4``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..attributes import Attribute
from ..core import Block, Operation
from ..opdef import OpDef, Operand, Result, Trait, close_dialect, register


@dataclass(frozen=True)
class AffineMapAttr(Attribute):
    """``affine_map<(d0, d1) -> (d0, d1 floordiv 4)>``: ``dims`` inputs and result expressions
    as MLIR prints them (``d1``, ``d1 floordiv 4``, ``0``)."""

    dims: int
    results: tuple[str, ...]

    def __str__(self) -> str:
        dims = ", ".join(f"d{i}" for i in range(self.dims))
        return f"affine_map<({dims}) -> ({', '.join(self.results)})>"


class RegionOperation(Operation):
    """An operation with one single-block region (``body``). For ``linalg.generic`` it also
    holds its ``indexing_maps`` and how many operands are inputs (the rest are outputs)."""

    __slots__ = ("body", "arg_hints", "maps", "num_inputs")

    def __init__(self, *args, body: Block, arg_hints: tuple[str, ...] = (),
                 maps: tuple[AffineMapAttr, ...] = (), num_inputs: int = 0, **kw):
        super().__init__(*args, **kw)
        self.body = body
        self.arg_hints = arg_hints   # SSA name hints of the body's arguments
        self.maps = maps
        self.num_inputs = num_inputs


GENERIC = register(OpDef(
    "linalg.generic", operands=(Operand("inputs_and_outputs", variadic=True),),   # split by num_inputs
    results=(Result("results", variadic=True),),
    traits=frozenset({Trait.PURE}), custom_syntax=True,
    summary="An elementwise loop nest; the body computes one output element."))

YIELD = register(OpDef(
    "linalg.yield", operands=(Operand("values", variadic=True),), results=(),
    traits=frozenset({Trait.TERMINATOR, Trait.PURE}), custom_syntax=True,
    summary="The output element(s) of a linalg.generic body."))


def generic(inputs, outputs, maps: tuple[AffineMapAttr, ...], body: Block, loc=None) -> RegionOperation:
    """``linalg.generic`` over ``inputs``/``outputs`` (all loops parallel), results typed as the outputs."""
    return RegionOperation(GENERIC, [*inputs, *outputs], [v.type for v in outputs], None, loc, body=body,
                           arg_hints=("in",) * len(inputs) + ("out",) * len(outputs), maps=tuple(maps),
                           num_inputs=len(inputs))


close_dialect("linalg")
