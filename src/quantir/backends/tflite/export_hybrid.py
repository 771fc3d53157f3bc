"""Export rules for the dynamic-range ("hybrid") ops: float32 activations in and out, int8 weights
with their scales, as LiteRT's dynamic-range kernels take them.

=================================  ==========================================================
IR (``ir/dialects/hybrid.py``)     TFLite
=================================  ==========================================================
hybrid.fully_connected             FULLY_CONNECTED: float32 input, int8 ``[C_out, K]`` weights
                                   (quantized_dimension 0), float32 bias (or none), options
                                   keep_num_dims / asymmetric_quantize_inputs / activation
hybrid.batch_matmul                BATCH_MATMUL with a constant int8 rhs (per column N: its
                                   last axis, or -2 with adj_y)
hybrid.conv                        CONV_2D (OHWI filter, axis 0) or, when group == C_in,
                                   DEPTHWISE_CONV_2D (``[1, KH, KW, C_out]``, axis 3); float32
                                   bias (CONV_2D gets zeros when the op has none)
hybrid.embedding_lookup            EMBEDDING_LOOKUP (int8 table, one scale per row, axis 0);
                                   int64 ids are CAST to int32, ids of rank != 1 flattened by a
                                   RESHAPE and the rows reshaped back (to SHAPE(ids) + the row
                                   shape when a dim is dynamic)
=================================  ==========================================================

Weight zero points are written as 0 (the IR types say so: the symmetric quantization LiteRT's
hybrid kernels assume). Operator versions are those LiteRT's weight quantizer writes for these
forms (``UpdateInt8OperatorVersions``): FULLY_CONNECTED 9 (3 with symmetric inputs), CONV_2D 5,
DEPTHWISE_CONV_2D 6, BATCH_MATMUL 4 (1 with symmetric inputs), EMBEDDING_LOOKUP 3.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from quantir.backends.tflite.export import (Form, _act, _explicit_pad, _Exporter, _padding, _quantization, _what)
from quantir.backends.tflite.schema import (BatchMatMulOptions, BuiltinOperator, ConcatenationOptions, Conv2DOptions,
                                            DepthwiseConv2DOptions, FullyConnectedOptions, Padding, ReshapeOptions,
                                            ShapeOptions)
from quantir.backends.tflite.schema import TensorType as TFLiteTensorType
from quantir.errors import UnsupportedOpError
from quantir.ir import Operation, Value
from quantir.ir.dialects import quant
from quantir.ir.dialects.hybrid import (HYBRID_BATCH_MATMUL, HYBRID_CONV, HYBRID_EMBEDDING_LOOKUP,
                                            HYBRID_FULLY_CONNECTED)
from quantir.types import IntegerType

__all__ = ["HYBRID_RULES"]

OP = BuiltinOperator


def _weights(ex: _Exporter, op: Operation, perm: tuple[int, ...] | None = None, axis_map=None, tag: str = "") -> int:
    """The int8 constant weight of ``op`` (operand 1), transposed by ``perm``, with its scales."""
    w = op.operands[1]
    data = quant.stored_constant(w)
    if data is None:
        raise UnsupportedOpError(f"{_what(op)}: LiteRT's dynamic-range kernels need a constant int8 weight")
    data = np.asarray(data)
    if perm is not None:
        data = data.transpose(perm)
    return ex.constant(data, f"{w.name_hint or 'weights'}{tag}", _quantization(w, axis_map))


def _float_bias(ex: _Exporter, op: Operation, channels: int, zeros: bool) -> int:
    """The float32 bias tensor, zeros (``zeros``: the kernel wants one), or -1 (omitted)."""
    if len(op.operands) > 2:
        b = op.operands[2]
        data = quant.stored_constant(b)
        if data is None:
            raise UnsupportedOpError(f"{_what(op)}: the bias must be a constant")
        return ex.constant(np.asarray(data, np.float32), b.name_hint or "bias")
    if zeros:
        return ex.constant(np.zeros(channels, np.float32), f"{op.results[0].name_hint}/bias")
    return -1


def fully_connected(ex: _Exporter, op: Operation) -> None:
    asym = bool(op.attr("asymmetric_quantize_inputs"))
    inputs = [ex.get(op.operands[0], Form.ASIS), _weights(ex, op),
              _float_bias(ex, op, op.operands[1].type.shape[0], zeros=False)]
    ex.emit(OP.FULLY_CONNECTED, op, inputs, Form.ASIS,
            FullyConnectedOptions(fused_activation_function=_act(op), keep_num_dims=bool(op.attr("keep_num_dims")),
                                  asymmetric_quantize_inputs=asym), version=9 if asym else 3)


def batch_matmul(ex: _Exporter, op: Operation) -> None:
    asym = bool(op.attr("asymmetric_quantize_inputs"))
    ex.emit(OP.BATCH_MATMUL, op, [ex.get(op.operands[0], Form.ASIS), _weights(ex, op)], Form.ASIS,
            BatchMatMulOptions(adj_x=bool(op.attr("adj_x")), adj_y=bool(op.attr("adj_y")),
                               asymmetric_quantize_inputs=asym), version=4 if asym else 1)


def conv(ex: _Exporter, op: Operation) -> None:
    x, w = op.operands[0], op.operands[1]
    xs, ws = x.type.shape, w.type.shape
    group = int(op.attr("group") or 1)
    depthwise = group > 1 and group == xs[1] and ws[1] == 1
    strides = tuple(op.attr("strides") or (1, 1))
    dilations = tuple(op.attr("dilations") or (1, 1))
    src = ex.get(x, Form.NHWC)
    padding = _padding(op, xs[2:], ws[2:], strides, dilations)
    if padding is None:   # explicit pads: PAD with zeros; the run-time quantization keeps 0 exact
        src, padding = _explicit_pad(ex, x, src, op.attr("pads")), Padding.VALID
    common = dict(padding=padding, stride_w=strides[1], stride_h=strides[0], fused_activation_function=_act(op),
                  dilation_w_factor=dilations[1], dilation_h_factor=dilations[0])
    if depthwise:
        filt = _weights(ex, op, (1, 2, 3, 0), {0: 3}, "/1hwc")
        bias = _float_bias(ex, op, ws[0], zeros=False)
        ex.emit(OP.DEPTHWISE_CONV_2D, op, [src, filt] + ([bias] if bias >= 0 else []), Form.NHWC,
                DepthwiseConv2DOptions(depth_multiplier=ws[0] // xs[1], **common), version=6)
    else:   # CONV_2D, grouped too (its filter holds C_in / group channels): LiteRT's hybrid conv runs it
        filt = _weights(ex, op, (0, 2, 3, 1), None, "/ohwi")
        ex.emit(OP.CONV_2D, op, [src, filt, _float_bias(ex, op, ws[0], zeros=True)], Form.NHWC,
                Conv2DOptions(**common), version=5)


def _int32_ids(ex: _Exporter, ids: Value) -> int:
    """The ids as an int32 tensor (EMBEDDING_LOOKUP reads int32): a CAST of int64 ids."""
    src = ex.get(ids, Form.ASIS)
    if ids.type.element_type == IntegerType(32):
        return src
    shape, signature = ex._shape(ids, Form.ASIS)
    cast = ex.b.add_tensor(ex._name(f"{ids.name_hint or 'ids'}/i32"), shape, np.int32, shape_signature=signature)
    ex.b.add_operator(OP.CAST, [src], [cast])
    return cast


def embedding_lookup(ex: _Exporter, op: Operation) -> None:
    """EMBEDDING_LOOKUP reads 1-D ids: others are flattened (RESHAPE to [-1]) and the rows reshaped
    to ``ids.shape + row shape``, from the ids' SHAPE at run time when a dim is dynamic."""
    ids, table = op.operands
    y = op.results[0]
    name = y.name_hint or "embedding"
    src = _int32_ids(ex, ids)
    weights = _weights(ex, op)
    if len(ids.type.shape) == 1:
        ex.emit(OP.EMBEDDING_LOOKUP, op, [src, weights], Form.ASIS, version=3)
        return
    row = tuple(table.type.shape[1:])
    static, _ = ex._shape(ids, Form.ASIS)
    dynamic = None in ids.type.shape
    n = math.prod(static)
    flat = ex.b.add_tensor(ex._name(f"{ids.name_hint or 'ids'}/flat"), (n,), np.int32,
                           shape_signature=(-1,) if dynamic else ())
    ex.b.add_operator(OP.RESHAPE, [src, ex.int32([-1], f"{name}/flat_shape")], [flat], ReshapeOptions(new_shape=(-1,)))
    rows = ex.b.add_tensor(ex._name(f"{name}/rows"), (n, *row), np.float32,
                           shape_signature=(-1, *row) if dynamic else ())
    ex.b.add_operator(OP.EMBEDDING_LOOKUP, [flat, weights], [rows], version=3)
    out = ex.new_tensor(y, Form.ASIS)
    if not dynamic:
        ex.b.add_operator(OP.RESHAPE, [rows, ex.int32(tuple(y.type.shape), f"{name}/shape")], [out],
                          ReshapeOptions(new_shape=tuple(y.type.shape)))
        return
    rank = len(ids.type.shape)
    dims = ex.b.add_tensor(ex._name(f"{name}/ids_shape"), (rank,), np.int32)
    ex.b.add_operator(OP.SHAPE, [src], [dims], ShapeOptions(out_type=TFLiteTensorType.INT32))
    target = ex.b.add_tensor(ex._name(f"{name}/target"), (rank + len(row),), np.int32)
    ex.b.add_operator(OP.CONCATENATION, [dims, ex.int32(row, f"{name}/row_shape")], [target],
                      ConcatenationOptions(axis=0))
    ex.b.add_operator(OP.RESHAPE, [rows, target], [out], ReshapeOptions(new_shape=()))


HYBRID_RULES: dict[object, Callable[[_Exporter, Operation], None]] = {
    HYBRID_FULLY_CONNECTED: fully_connected, HYBRID_BATCH_MATMUL: batch_matmul, HYBRID_CONV: conv,
    HYBRID_EMBEDDING_LOOKUP: embedding_lookup,
}
