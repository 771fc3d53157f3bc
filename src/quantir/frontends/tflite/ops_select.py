"""Converters of the selection ops: MAXIMUM, MINIMUM, the comparisons, ARG_MAX and SHAPE.

MAXIMUM, MINIMUM and the comparisons are element-wise with numpy broadcasting, like ADD: in
the layout of their first non-constant full-rank operand. ARG_MAX removes TFLite axis ``a``,
IR axis ``perm[a]``. SHAPE reads the dims in TFLite's layout (what LiteRT gives), so it reads
the TFLite-layout form of its input.
"""
from __future__ import annotations

from ...backends.tflite.schema import BuiltinOperator as OP
from ...backends.tflite.schema import TensorType as TFLType
from ...errors import ModelFormatError
from ...ir.dialects import nn, qnn
from ...types import IntegerType
from . import layout as L
from .importer import Converter, OpContext
from .ops_tensor import _operand, _per_tensor_int8, _pick_layout

__all__ = ["CONVERTERS"]


def _elementwise(opdef) -> Converter:
    def convert(ctx: OpContext) -> None:
        perm = _pick_layout(ctx, (0, 1), ctx.out_rank)
        operands = [_operand(ctx, 0, perm), _operand(ctx, 1, perm)]
        for i, v in enumerate(operands):
            _per_tensor_int8(v, f"input {i} ('{ctx.imp.names[ctx.idx(i)]}') of {ctx.op_name}")
        ctx.emit(opdef, operands, perm)
    return convert


def arg_max(ctx: OpContext) -> None:
    perm = ctx.native_or_identity(0)
    r = len(perm)
    axis = ctx.const_ints(1, "axis")
    if len(axis) != 1 or not -r <= axis[0] < r:
        raise ModelFormatError(f"axis {list(axis)} must be one value in [{-r}, {r})")
    a = axis[0] % r
    x = ctx.input(0, perm)
    _per_tensor_int8(x, f"input of {ctx.op_name}")
    ctx.emit(qnn.ARG_MAX, [x], L.drop_axes(perm, {a}), axis=perm[a])


def shape(ctx: OpContext) -> None:
    x = ctx.input(0, L.identity(ctx.rank(0)))
    if ctx.out_tensor.type is TFLType.INT32:   # nn.shape gives i64: cast to the file's int32
        dims = ctx.helper(nn.SHAPE, [x], "i64")
        ctx.emit(nn.CAST, [dims], L.identity(1), to=IntegerType(32))
    else:
        ctx.emit(nn.SHAPE, [x], L.identity(1))


def cast(ctx: OpContext) -> None:
    """CAST between integer types, or of an integer tensor into a quantized int8 one (which stores
    the integers as they are): ``nn.cast`` to the output tensor's type."""
    x = ctx.input(0, L.identity(ctx.rank(0)))
    rt = ctx.result_type(L.identity(ctx.out_rank))
    ctx.emit(nn.CAST, [x], L.identity(ctx.out_rank), to=rt.element_type)


def range_(ctx: OpContext) -> None:
    """RANGE of three scalars (start, limit, delta)."""
    ctx.emit(nn.RANGE, [ctx.input(i, L.identity(ctx.rank(i))) for i in range(3)], L.identity(1))


CONVERTERS: dict[OP, Converter] = {
    OP.MAXIMUM: _elementwise(qnn.MAXIMUM),
    OP.MINIMUM: _elementwise(qnn.MINIMUM),
    OP.EQUAL: _elementwise(qnn.EQUAL),
    OP.NOT_EQUAL: _elementwise(qnn.NOT_EQUAL),
    OP.LESS: _elementwise(qnn.LESS),
    OP.LESS_EQUAL: _elementwise(qnn.LESS_EQUAL),
    OP.GREATER: _elementwise(qnn.GREATER),
    OP.GREATER_EQUAL: _elementwise(qnn.GREATER_EQUAL),
    OP.ARG_MAX: arg_max,
    OP.SHAPE: shape,
    OP.CAST: cast,
    OP.RANGE: range_,
}
