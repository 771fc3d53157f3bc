"""``arith.constant``: the one constant op. Its value is an elements attribute (a numpy array
held by reference) or a scalar integer/float attribute."""
from __future__ import annotations

from ...types import IntegerType, NoneType, Type
from ..attributes import BoolAttr, DenseElementsAttr, DenseResourceAttr, FloatAttr, IntegerAttr
from ..core import Operation
from ..opdef import AttrKind, AttrSpec, OpDef, Trait, register


def _value_type(value) -> Type:
    """The type MLIR gives the value: ``true`` is an ``i1`` IntegerAttr, a string has ``none``."""
    if isinstance(value, BoolAttr):
        return IntegerType(1)
    return getattr(value, "type", NoneType())


def _verify_constant(op: Operation) -> str | None:
    value = op.attributes.get("value")
    if value is None:
        return "requires attribute 'value'"
    result_type = op.results[0].type
    if _value_type(value) != result_type:
        return "failed to verify that all of {value, result} have same type"
    if isinstance(result_type, IntegerType) and result_type.signedness != "signless":
        return "integer return type must be signless"
    if not isinstance(value, (DenseElementsAttr, DenseResourceAttr, IntegerAttr, FloatAttr, BoolAttr)):
        return "value must be an integer, float, or elements attribute"
    return None


CONSTANT = register(OpDef(
    "arith.constant", attributes={"value": AttrSpec(AttrKind.ANY, required=True)},
    traits=frozenset({Trait.PURE, Trait.CONSTANT_LIKE}), verifier=_verify_constant,
    custom_syntax=True, summary="A compile-time constant."))

