"""The ``arith`` ops that upstream's ``--lower-quant-ops`` emits: float arithmetic, the
integer/float conversions and the integer min/max of its clamp (``arith.constant`` itself is in
:mod:`.arith`).

Each op has MLIR's custom form, named in :data:`SYNTAX` for the printer and parser:

* ``binary``: ``arith.divf %a, %b : T`` -- operands and result of one type;
* ``cast``: ``arith.fptosi %a : T1 to T2`` -- same shape, element types converted;
* ``unary``: ``math.roundeven %a : T`` (quantir's rounding option of the lowering).

They are elementwise on scalars and tensors alike.
"""
from __future__ import annotations

from ...types import FloatType, IndexType, IntegerType, TensorType, Type
from ..core import Operation
from ..opdef import OpDef, Operand, Result, Trait, TypeConstraint, register


def _element(t: Type) -> Type:
    return t.element_type if isinstance(t, TensorType) else t


def _like(pred, description: str) -> TypeConstraint:
    return TypeConstraint(f"{description}-like", lambda t: pred(_element(t)))


def _is_float(t: Type) -> bool:
    return isinstance(t, FloatType)


def _is_signless(t: Type) -> bool:
    return (isinstance(t, IntegerType) and t.signedness == "signless") or isinstance(t, IndexType)


FLOAT_LIKE = _like(_is_float, "floating-point")
SIGNLESS_LIKE = _like(_is_signless, "signless-integer")


def _verify_cast(op: Operation) -> str | None:
    a, b = op.operands[0].type, op.results[0].type
    same = (isinstance(a, TensorType) == isinstance(b, TensorType)
            and (not isinstance(a, TensorType) or a.shape == b.shape))
    return None if same else "requires the same shape for all operands and results"


_ELEMENTWISE = frozenset({Trait.PURE, Trait.SAME_OPERANDS_AND_RESULT_TYPE})

SYNTAX: dict[OpDef, str] = {}


def _binary(name: str, like: TypeConstraint, summary: str) -> OpDef:
    d = register(OpDef(f"arith.{name}", operands=(Operand("lhs", like), Operand("rhs", like)),
                       results=(Result("result", like),), traits=_ELEMENTWISE, custom_syntax=True,
                       summary=summary))
    SYNTAX[d] = "binary"
    return d


def _cast(name: str, src: TypeConstraint, dst: TypeConstraint, summary: str) -> OpDef:
    d = register(OpDef(f"arith.{name}", operands=(Operand("in", src),), results=(Result("out", dst),),
                       traits=frozenset({Trait.PURE}), verifier=_verify_cast, custom_syntax=True,
                       summary=summary))
    SYNTAX[d] = "cast"
    return d


ADDF = _binary("addf", FLOAT_LIKE, "Float addition.")
SUBF = _binary("subf", FLOAT_LIKE, "Float subtraction.")
MULF = _binary("mulf", FLOAT_LIKE, "Float multiplication.")
DIVF = _binary("divf", FLOAT_LIKE, "Float division.")
MAXSI = _binary("maxsi", SIGNLESS_LIKE, "Signed integer maximum.")
MINSI = _binary("minsi", SIGNLESS_LIKE, "Signed integer minimum.")
MAXUI = _binary("maxui", SIGNLESS_LIKE, "Unsigned integer maximum.")
MINUI = _binary("minui", SIGNLESS_LIKE, "Unsigned integer minimum.")

SITOFP = _cast("sitofp", SIGNLESS_LIKE, FLOAT_LIKE, "Signed integer to float.")
UITOFP = _cast("uitofp", SIGNLESS_LIKE, FLOAT_LIKE, "Unsigned integer to float.")
FPTOSI = _cast("fptosi", FLOAT_LIKE, SIGNLESS_LIKE, "Float to signed integer, rounding toward zero.")
FPTOUI = _cast("fptoui", FLOAT_LIKE, SIGNLESS_LIKE, "Float to unsigned integer, rounding toward zero.")

# quantir's rounding option for --lower-quant-ops (upstream's pass only truncates)
ROUNDEVEN = register(OpDef("math.roundeven", operands=(Operand("operand", FLOAT_LIKE),),
                           results=(Result("result", FLOAT_LIKE),), traits=_ELEMENTWISE, custom_syntax=True,
                           summary="Round to the nearest integer, ties to even (still a float)."))
SYNTAX[ROUNDEVEN] = "unary"
