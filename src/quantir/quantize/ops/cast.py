"""CAST of an integer tensor into int8: the masks a model takes as integer inputs.

Encoder exports read the attention mask as int64 and ``Cast`` it to float before computing with
it (the attention bias, mean pooling over the tokens). Its values are small integers, which an
int8 tensor with scale 1 and zero point 0 holds exactly; so the Cast becomes ``nn.cast`` to that
quantized type, which stores each integer as it is: LiteRT's CAST from int64, int32 or bool to
int8 (a C++ ``static_cast``, which wraps out-of-range values modulo 256 — as numpy's ``astype``
does in quantir's interpreter). The quantized ops after it read the mask through their own
requantization, like any other int8 input.

The pattern takes an integer (or bool) input and a float output. Whether the values fit is
known only after calibration: a Cast whose calibrated values leave [-128, 127] stays float
(position indices up to 511 would wrap). The row is not one of LiteRT's int8 spec (whose CAST is
not a quantized op); it is quantir's, and says what the output holds.
"""
from __future__ import annotations

from ...ir import Operation, Value
from ...ir.dialects import nn
from ...rewrite import Match, Pat
from ...types import FloatType, IntegerType, QuantizedType, element_type_of
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..regions import QuantizerPattern, Region
from ..rules import ANY, FIXED, OpSpec
from .registry import QuantOp, declare

INT8_LIMITS = (-128.0, 127.0)


def _check_cast(m: Match) -> str | None:
    op = m.ops["op"]
    src, dst = element_type_of(op.operands[0].type), element_type_of(op.results[0].type)
    if not isinstance(src, IntegerType):
        return f"a cast from {src} is not a cast of integers (only integer and bool inputs are stored as they are)"
    if not isinstance(dst, FloatType):
        return f"a cast to {dst} is integer arithmetic on shapes or indices, not a value to quantize"
    return None


def cast_range_check(region: Region, inputs: list[tuple[float, float]], output: tuple[float, float] | None
                     ) -> str | None:
    """After calibration: the values must fit int8 with scale 1, or LiteRT's CAST would wrap them."""
    if output is not None and (output[0] < INT8_LIMITS[0] or output[1] > INT8_LIMITS[1]):
        return (f"its calibrated values span [{output[0]:g}, {output[1]:g}]; stored as they are in int8 (scale 1) "
                f"values outside [-128, 127] would wrap, so it stays float")
    return None


def lower_cast(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    out = lw.out_type(r)
    return lw.emit(nn.CAST.build([lw.floating(op.operands[0])], [out], to=out.element_type), op).result


def integers_as_they_are(op: Operation) -> str | None:
    """``quantir check``: the cast's quantized type must hold the integers themselves."""
    q = element_type_of(op.results[0].type)
    if isinstance(q, QuantizedType) and (getattr(q, "scale", None) != 1.0 or getattr(q, "zero_point", None) != 0):
        return f"a CAST of integers into {q}: only scale 1 and zero point 0 store the integers as they are"
    return None


CAST = declare(QuantOp(
    nn.CAST, OP.CAST, OpSpec((ANY,), FIXED(1.0, 0), note="quantir's row: the integers themselves (scale 1, zp 0)"),
    patterns=(QuantizerPattern("integer_cast", Pat.op(nn.CAST, Pat.any("x"), name="op"), lower_cast, (),
                               check=_check_cast,
                               doc="Cast of an integer input (a mask) to float: int8 holding the integers"),),
    ir_limits=(integers_as_they_are,), calibrated_check=cast_range_check, qdq_ops=(nn.CAST,),
    doc="an integer or bool tensor stored in int8 with scale 1, zero point 0"))
