"""The selection ops in ONNX: MAXIMUM, MINIMUM, ARG_MAX, SHAPE and the comparisons, and the CAST of
integers into int8.

Each is its float ONNX op on the dequantized inputs; the QOperator export inherits these rather
than running the ops on the int8 tensors:

=====================  =========================================================================
qnn op                 ONNX
=====================  =========================================================================
maximum / minimum      Max / Min, then QuantizeLinear (inputs and output share parameters: exact)
equal, less, ...       Equal, Less, LessOrEqual, Greater, GreaterOrEqual; not_equal is Not(Equal);
                       a bool result, no QuantizeLinear
arg_max                ArgMax(axis, keepdims=0) (Cast to int32 for an i32 result)
nn.shape               Shape of the dequantized input (the dims are the same)
nn.cast                Cast of the integer input to float, then QuantizeLinear (scale 1, zero point 0:
                       the integers int8 holds come out as they are)
=====================  =========================================================================

With the inputs sharing one scale and zero point, dequantizing keeps the order and the ties of
the stored integers, so the float ops select, compare and index exactly as LiteRT does on them.
"""
from __future__ import annotations

from ...ir import Operation
from ...ir.dialects import nn, qnn
from ...types import FloatType, IntegerType
from .builder import Builder, base_name, is_quantized

_COMPARE = {qnn.EQUAL: nn.COMPARE["equal"], qnn.LESS: nn.COMPARE["less"],
            qnn.LESS_EQUAL: nn.COMPARE["less_or_equal"], qnn.GREATER: nn.COMPARE["greater"],
            qnn.GREATER_EQUAL: nn.COMPARE["greater_or_equal"]}


def _select(opdef):
    def convert(b: Builder, op: Operation) -> None:
        b.quantize(op.results[0], b.float_op(opdef, [b.dequantized(v) for v in op.operands], op))
    return convert


def _compare(opdef):
    def convert(b: Builder, op: Operation) -> None:
        r = op.results[0]
        y = b.emit(opdef, [b.dequantized(v) for v in op.operands], r.type, name=r.name_hint,
                   label=op.label or base_name(r), like=op)
        b.define(r, y)
    return convert


def not_equal(b: Builder, op: Operation) -> None:
    r = op.results[0]
    label = op.label or base_name(r)
    eq = b.emit(nn.COMPARE["equal"], [b.dequantized(v) for v in op.operands], r.type, name=f"{base_name(r)}_equal",
                label=f"{label}/equal", like=op)
    b.define(r, b.emit(nn.NOT, [eq], r.type, name=r.name_hint, label=label, like=op))


def arg_max(b: Builder, op: Operation) -> None:
    r = op.results[0]
    label = op.label or base_name(r)
    i64 = r.type.clone(element_type=IntegerType(64))
    y = b.emit(nn.ARG_MAX, [b.dequantized(op.operands[0])], i64,
               name=r.name_hint if r.type == i64 else f"{base_name(r)}_i64", label=label, like=op,
               axis=int(op.attr("axis")), keepdims=0)
    if r.type != i64:   # a .tflite ARG_MAX with int32 output
        y = b.emit(nn.CAST, [y], r.type, name=r.name_hint, label=f"{label}/cast", like=op, to=r.type.element_type)
    b.define(r, y)


def shape(b: Builder, op: Operation) -> None:
    # ONNX's Shape takes any element type: it reads the int8 tensor, no DequantizeLinear only for its dims
    r = op.results[0]
    b.define(r, b.emit(nn.SHAPE, [b.value(op.operands[0])], r.type, name=r.name_hint,
                       label=op.label or base_name(r), like=op, **{k: op.attr(k) for k in op.attributes}))


def integer_cast(b: Builder, op: Operation) -> None:
    r = op.results[0]
    if not is_quantized(r):   # a cast of the float or shape arithmetic: as it is
        b.clone(op)
        return
    b.quantize(r, b.float_op(nn.CAST, [b.value(op.operands[0])], op, to=FloatType("f32")))


QDQ = {
    qnn.MAXIMUM: _select(nn.VARIADIC["max"]),
    qnn.MINIMUM: _select(nn.VARIADIC["min"]),
    **{opdef: _compare(onnx_op) for opdef, onnx_op in _COMPARE.items()},
    qnn.NOT_EQUAL: not_equal,
    qnn.ARG_MAX: arg_max,
    nn.SHAPE: shape,
    nn.CAST: integer_cast,
}
