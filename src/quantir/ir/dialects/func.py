"""``func.return``. (``func.func`` itself is ``quantir.ir.Function``.)"""
from __future__ import annotations

from ..core import Operation
from ..opdef import OpDef, Operand, Trait, close_dialect, register


def _verify_return(op: Operation) -> str | None:
    # The function-level check (operand types vs the signature) lives in ir.verify,
    # which knows the enclosing function.
    return None


RETURN = register(OpDef(
    "func.return", operands=(Operand("operands", variadic=True),), results=(),
    traits=frozenset({Trait.TERMINATOR, Trait.PURE}), verifier=_verify_return,
    custom_syntax=True, summary="Return from a function; the operands are the function results."))

close_dialect("func")
