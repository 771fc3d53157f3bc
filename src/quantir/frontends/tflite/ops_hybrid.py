"""Converters for LiteRT's dynamic-range ("hybrid") operators: a float32 activation, int8 constant
weights with their scales, a float32 result (the importer picks these when ``Importer.is_hybrid``).

Each becomes one op of ``ir/dialects/hybrid.py`` with its weight imported as it is in the
file (per tensor or per axis, zero point and values included: ``quantir check`` judges them),
a float32 bias as a plain constant, and the operator's options as attributes:
FULLY_CONNECTED -> ``hybrid.fully_connected``, BATCH_MATMUL -> ``hybrid.batch_matmul``,
CONV_2D / DEPTHWISE_CONV_2D -> ``hybrid.conv`` (NCHW, OIHW filters, as the int8 converters
lay them out), EMBEDDING_LOOKUP -> ``hybrid.embedding_lookup``.
"""
from __future__ import annotations

from ...backends.tflite.schema import BuiltinOperator as OP
from ...backends.tflite.schema import FullyConnectedWeightsFormat
from ...backends.tflite.schema import TensorType as TFLType
from ...errors import ModelFormatError, UnsupportedOpError
from ...ir import Value
from ...ir.dialects.hybrid import (HYBRID_BATCH_MATMUL, HYBRID_CONV, HYBRID_EMBEDDING_LOOKUP,
                                       HYBRID_FULLY_CONNECTED)
from . import layout as L
from .importer import Converter, OpContext
from .ops_window import NCHW, _pads, _positive, _rank, conv_geometry

__all__ = ["CONVERTERS"]


def _int8_weight(ctx: OpContext, i: int, perm: L.Perm, tag: str | None = None) -> Value:
    t = ctx.tensor(i)
    ctx.const(i, "weights")
    if t.type is not TFLType.INT8:
        raise UnsupportedOpError(f"weights '{t.name}' are {t.type.name}; a dynamic-range op reads int8 weights")
    return ctx.constant(i, perm, tag=tag)


def _float_bias(ctx: OpContext, i: int, channels: int) -> list[Value]:
    if not ctx.has(i):
        return []
    t = ctx.tensor(i)
    ctx.const(i, "bias")
    if t.type is not TFLType.FLOAT32 or tuple(t.shape) != (channels,):
        raise ModelFormatError(f"the bias '{t.name}' of a dynamic-range op must be float32 [{channels}], found "
                               f"{t.type.name} {list(t.shape)}")
    return [ctx.constant(i, (0,))]


def fully_connected(ctx: OpContext) -> None:
    o = ctx.options
    if o.weights_format != FullyConnectedWeightsFormat.DEFAULT:
        raise UnsupportedOpError(f"weights_format {o.weights_format.name} is not supported (only DEFAULT)")
    _rank(ctx, 1, 2, "weights")
    c_out = ctx.tensor(1).shape[0]
    r = ctx.rank(0)
    native = ctx.native_or_identity(0)
    # rows are flattened in TFLite's order; with keep_num_dims any layout keeping the last axis last works
    perm = native if o.keep_num_dims and native[-1] == r - 1 else L.identity(r)
    x = ctx.input(0, perm)
    w = _int8_weight(ctx, 1, L.identity(2))
    ctx.emit(HYBRID_FULLY_CONNECTED, [x, w, *_float_bias(ctx, 2, c_out)], perm if o.keep_num_dims else L.identity(2),
             activation=ctx.activation(o.fused_activation_function), keep_num_dims=bool(o.keep_num_dims),
             asymmetric_quantize_inputs=bool(o.asymmetric_quantize_inputs))


def batch_matmul(ctx: OpContext) -> None:
    o = ctx.options
    a = ctx.input(0, L.identity(ctx.rank(0)))
    b = _int8_weight(ctx, 1, L.identity(ctx.rank(1)))
    ctx.emit(HYBRID_BATCH_MATMUL, [a, b], L.identity(ctx.out_rank), adj_x=bool(o.adj_x), adj_y=bool(o.adj_y),
             asymmetric_quantize_inputs=bool(o.asymmetric_quantize_inputs))


def _conv(ctx: OpContext, layout: L.Perm, tag: str, group: int, c_out: int, hw, khw) -> None:
    o = ctx.options
    x = ctx.input(0, NCHW)
    w = _int8_weight(ctx, 1, layout, tag)
    strides = _positive("strides", (o.stride_h, o.stride_w))
    dilations = _positive("dilations", (o.dilation_h_factor, o.dilation_w_factor))
    ctx.emit(HYBRID_CONV, [x, w, *_float_bias(ctx, 2, c_out)], NCHW, strides=strides, dilations=dilations,
             group=group, **_pads(o.padding, hw, khw, strides, dilations),
             activation=ctx.activation(o.fused_activation_function))


def conv_2d(ctx: OpContext) -> None:
    _conv(ctx, *conv_geometry(ctx, depthwise=False))


def depthwise_conv_2d(ctx: OpContext) -> None:
    _conv(ctx, *conv_geometry(ctx, depthwise=True))


def embedding_lookup(ctx: OpContext) -> None:
    _rank(ctx, 0, 1, "ids")
    ids = ctx.input(0, L.identity(1))
    table = _int8_weight(ctx, 1, L.identity(ctx.rank(1)))
    ctx.emit(HYBRID_EMBEDDING_LOOKUP, [ids, table], L.identity(ctx.out_rank))


CONVERTERS: dict[OP, Converter] = {
    OP.FULLY_CONNECTED: fully_connected, OP.BATCH_MATMUL: batch_matmul, OP.CONV_2D: conv_2d,
    OP.DEPTHWISE_CONV_2D: depthwise_conv_2d, OP.EMBEDDING_LOOKUP: embedding_lookup,
}
