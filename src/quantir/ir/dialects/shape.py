"""The ``shape`` ops that upstream's ``--lower-quant-ops`` emits for unranked tensors, in MLIR's
custom form ``shape.X %v : T -> R`` (no SSA name hints):

* ``shape.shape_of %t : tensor<*xf32> -> tensor<?xindex>`` -- the extents as a 1-d tensor;
* ``shape.num_elements %s : tensor<?xindex> -> index`` -- their product;
* ``%head, %tail = "shape.split_at"(%s, %i)`` -- generic form, as mlir-opt prints it: the
  extents before and from index ``i`` (a per-axis cast of an unranked tensor is reshaped to
  ``?xCx?`` around its axis with them).
"""
from __future__ import annotations

from ...types import IndexType, TensorType
from ..opdef import OpDef, Operand, Result, Trait, TypeConstraint, close_dialect, register

_EXTENTS = TypeConstraint("1-d tensor of index", lambda t: isinstance(t, TensorType) and t.is_ranked
                          and t.rank == 1 and isinstance(t.element_type, IndexType))
_SHAPED = TypeConstraint("shaped of any type values", lambda t: isinstance(t, TensorType))

SHAPE_OF = register(OpDef(
    "shape.shape_of", operands=(Operand("arg", _SHAPED),), results=(Result("result", _EXTENTS),),
    traits=frozenset({Trait.PURE}), custom_syntax=True, summary="The shape of a tensor, as extents."))

NUM_ELEMENTS = register(OpDef(
    "shape.num_elements", operands=(Operand("shape", _EXTENTS),),
    results=(Result("result", TypeConstraint("index", lambda t: isinstance(t, IndexType))),),
    traits=frozenset({Trait.PURE}), custom_syntax=True, summary="The number of elements of a shape."))

SPLIT_AT = register(OpDef(
    "shape.split_at", operands=(Operand("operand", _EXTENTS),
                                Operand("index", TypeConstraint("index", lambda t: isinstance(t, IndexType)))),
    results=(Result("head", _EXTENTS), Result("tail", _EXTENTS)), traits=frozenset({Trait.PURE}),
    summary="The extents before and from an index (generic form; results named %head, %tail)."))

SYNTAX = {SHAPE_OF: "arrow", NUM_ELEMENTS: "arrow"}
RESULT_NAMES = {SPLIT_AT: ("head", "tail")}

close_dialect("shape")
