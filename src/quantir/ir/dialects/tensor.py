"""The ``tensor`` ops that upstream's ``--lower-quant-ops`` emits, in MLIR's custom forms:

* ``tensor.splat %v : tensor<3x5xf32>``, or with one index operand per dynamic dimension
  ``tensor.splat %v[%dim, %dim_0] : tensor<?x5x?xf32>`` (SSA name hint ``splat``);
* ``tensor.dim %t, %c0 : tensor<?x5xf32>`` -- the size of one dimension, an ``index``
  (SSA name hint ``dim``);
* ``tensor.from_elements %n : tensor<1xindex>`` (hint ``from_elements``) and
  ``tensor.reshape %t(%shape) : (tensor<*xf32>, tensor<1xindex>) -> tensor<?xf32>`` (hint
  ``reshape``): how the lowering flattens an unranked tensor and gives it its shape back.
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

def _verify_from_elements(op: Operation) -> str | None:
    t = op.results[0].type
    if not t.has_static_shape or t.num_elements != len(op.operands):
        return f"'{t}' needs {t.num_elements} elements, got {len(op.operands)}"
    if any(v.type != t.element_type for v in op.operands):
        return "operand types must be the result's element type"
    return None


FROM_ELEMENTS = register(OpDef(
    "tensor.from_elements", operands=(Operand("elements", variadic=True),), results=(Result("result", _RANKED),),
    traits=frozenset({Trait.PURE}), verifier=_verify_from_elements, custom_syntax=True,
    summary="A static tensor of the operands, in row-major order."))


def _verify_reshape(op: Operation) -> str | None:
    src, out = op.operands[0].type, op.results[0].type
    if src.element_type != out.element_type:
        return "element types of source and destination tensor types should be the same"
    return None


RESHAPE = register(OpDef(
    "tensor.reshape", operands=(Operand("source", _TENSOR), Operand("shape", _TENSOR)),
    results=(Result("result", _TENSOR),), traits=frozenset({Trait.PURE}), verifier=_verify_reshape,
    custom_syntax=True, summary="The source's elements in the shape given by a 1-d index tensor."))

def _verify_empty(op: Operation) -> str | None:
    t = op.results[0].type
    if len(op.operands) != sum(d is None for d in t.shape):
        return "incorrect number of dynamic sizes, has %d, expected %d" % (
            len(op.operands), sum(d is None for d in t.shape))
    return None


EMPTY = register(OpDef(
    "tensor.empty", operands=(Operand("dynamicSizes", _INDEX, variadic=True),), results=(Result("result", _RANKED),),
    traits=frozenset({Trait.PURE}), verifier=_verify_empty, custom_syntax=True,
    summary="A tensor of unspecified contents: the output operand of a linalg.generic."))

ASM_NAMES = {SPLAT: "splat", DIM: "dim", FROM_ELEMENTS: "from_elements", RESHAPE: "reshape"}

close_dialect("tensor")
