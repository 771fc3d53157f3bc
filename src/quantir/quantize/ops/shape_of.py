"""LiteRT SHAPE: the dims of a tensor, which reads no value of it.

An ONNX ``Shape`` of a tensor with static dims folds to a constant when the model is loaded;
what reaches the quantizer is the Shape of a tensor with a dynamic dim (the batch). The op is
``nn.shape`` itself, whose kernel reads only the array's dims, on the integer version of its
input when the producer is quantized. Its result is an i64 tensor that the float ops after it
read as it is (``output_quantized=False``). ONNX's ``start``/``end`` slice the dims; LiteRT's
SHAPE has no such option, so such a Shape stays float.
"""
from __future__ import annotations

from ...ir import Operation, Value
from ...ir.dialects import nn
from ...rewrite import Match
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..regions import QuantizerPattern, Region, rank, unary
from ..rules import ACT, ANY, OpSpec
from .registry import QuantOp, declare


def _check_shape(m: Match) -> str | None:
    op = m.ops["op"]
    x = op.operands[0]
    if rank(x) is None:
        return "the input must be a ranked tensor"
    end = op.attr("end")
    if (op.attr("start") or 0) != 0 or (end is not None and end != rank(x)):
        return "Shape with start/end has no LiteRT SHAPE form (it would need a STRIDED_SLICE of the dims)"
    return None


def lower_shape(lw: Lowerer, r: Region) -> Value:
    """``nn.shape`` of the integer input: quantizing a float tensor only to read its dims would
    add a QUANTIZE, so a float input is read as it is (its producer stays float anyway)."""
    op = r.match.ops["op"]
    x = r.match["x"]
    src = lw.input(x) if lw.quants.contains(x) else lw.floating(x)
    new = Operation(nn.SHAPE, [src], [r.output.type], {}, op.loc, op.label)
    return lw.emit(new).result


SHAPE = declare(QuantOp(
    nn.SHAPE, OP.SHAPE, OpSpec((ACT,), ANY, note="int32 or int64 output; no value of the input is read"),
    patterns=(QuantizerPattern("shape", unary(nn.SHAPE), lower_shape, check=_check_shape,
                               doc="Shape of a tensor with a dynamic dim"),),
    output_quantized=False))
