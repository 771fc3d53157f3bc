"""The ``tensor`` ops that upstream's ``--lower-quant-ops`` emits, in MLIR's custom forms:

* ``tensor.splat %v : tensor<3x5xf32>``, or with one index operand per dynamic dimension
  ``tensor.splat %v[%dim, %dim_0] : tensor<?x5x?xf32>`` (SSA name hint ``splat``);
* ``tensor.dim %t, %c0 : tensor<?x5xf32>`` -- the size of one dimension, an ``index``
  (SSA name hint ``dim``).
"""
from __future__ import annotations

from ...types import IndexType, TensorType
from ..core import Operation
from ..opdef import OpDef, Operand, Result, Trait, TypeConstraint, close_dialect, register

_INDEX = TypeConstraint("index", lambda t: isinstance(t, IndexType))
_RANKED = TypeConstraint("ranked tensor of any type values", lambda t: isinstance(t, TensorType) and t.is_ranked)
_TENSOR = TypeConstraint("tensor of any type values", lambda t: isinstance(t, TensorType))


def _verify_splat(op: Operation) -> str | None:
    value, *sizes = op.operands
    t = op.results[0].type
    if value.type != t.element_type:
        return "failed to verify that operand type matches element type of result"
    if len(sizes) != sum(d is None for d in t.shape):
        return "incorrect number of dynamic sizes, has %d, expected %d" % (
            len(sizes), sum(d is None for d in t.shape))
    return None


SPLAT = register(OpDef(
    "tensor.splat", operands=(Operand("input"), Operand("dynamicSizes", _INDEX, variadic=True)),
    results=(Result("aggregate", _RANKED),), traits=frozenset({Trait.PURE}), verifier=_verify_splat,
    custom_syntax=True, summary="A tensor with every element equal to the scalar operand."))

DIM = register(OpDef(
    "tensor.dim", operands=(Operand("source", _TENSOR), Operand("index", _INDEX)),
    results=(Result("result", _INDEX),), traits=frozenset({Trait.PURE}), custom_syntax=True,
    summary="The size of one dimension of a tensor."))

ASM_NAMES = {SPLAT: "splat", DIM: "dim"}

close_dialect("tensor")
