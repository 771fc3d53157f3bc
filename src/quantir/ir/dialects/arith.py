"""``arith.constant``: the one constant op. Its value is an elements attribute (a numpy array
held by reference) or a scalar integer/float attribute."""
from __future__ import annotations

from ..attributes import DenseElementsAttr, DenseResourceAttr, FloatAttr, IntegerAttr
from ..core import Operation
from ..opdef import AttrKind, AttrSpec, OpDef, Trait, close_dialect, register


def _verify_constant(op: Operation) -> str | None:
    value = op.attributes.get("value")
    if value is None:
        return "requires attribute 'value'"
    result_type = op.results[0].type
    if isinstance(value, (DenseElementsAttr, DenseResourceAttr, IntegerAttr, FloatAttr)):
        if value.type != result_type:
            return (f"failed to verify that all of {{value, result}} have same type")
        return None
    return "value must be an integer, float, or elements attribute"


CONSTANT = register(OpDef(
    "arith.constant", attributes={"value": AttrSpec(AttrKind.ANY, required=True)},
    traits=frozenset({Trait.PURE, Trait.CONSTANT_LIKE}), verifier=_verify_constant,
    custom_syntax=True, summary="A compile-time constant."))

