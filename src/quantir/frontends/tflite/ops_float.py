"""Converters of LiteRT's float32 operators into ``nn`` ops: what a dynamic-range model holds around
its hybrid ops (and what quantir's exporter writes for a float op), chosen by the importer when an
operator computes in float32 (a float32 tensor other than QUANTIZE's input or DEQUANTIZE's output).

Layouts as in the int8 import: convolutions and pools work in NCHW (as ``nn.conv`` does),
element-wise and binary ops and reductions in the layout their input already has, ops that read
the last axis or the shape (SOFTMAX, FULLY_CONNECTED, BATCH_MATMUL, reshapes) in the TFLite one.

- ADD / SUB / MUL / DIV (numpy broadcasting, with their fused activation), MAXIMUM / MINIMUM, POW, PRELU,
  SQUARED_DIFFERENCE ((a − b)·(a − b));
- element-wise SQRT, RSQRT (1 / SQRT), EXP, LOG, ABS, NEG, LOGISTIC, TANH, RELU, RELU6,
  RELU_N1_TO_1, RELU_0_TO_1, LEAKY_RELU, HARD_SWISH, GELU;
- MEAN, SUM, REDUCE_MAX, REDUCE_MIN, ARG_MAX, SQUARE; SOFTMAX (last axis; a beta other than 1 scales
  the input first);
- FULLY_CONNECTED (weights [N, K], optional bias, keep_num_dims or the flattening TFLite does),
  BATCH_MATMUL (adj_x / adj_y), BROADCAST_TO;
- EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL (bool results), SELECT_V2, TILE, FLOOR;
- CONV_2D, DEPTHWISE_CONV_2D (float32 filters, constant or computed), MAX_POOL_2D, AVERAGE_POOL_2D (in NCHW, as
  ``nn`` ops take them), RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR (as ONNX Resize), PAD, PADV2;
- the movement ops whose converters do not depend on the element type (RESHAPE, TRANSPOSE,
  SQUEEZE, EXPAND_DIMS, STRIDED_SLICE, SLICE, GATHER, CONCATENATION, SPLIT, SPLIT_V, SHAPE,
  CAST, RANGE, SPACE_TO_DEPTH), shared with the int8 import.
"""
from __future__ import annotations

import numpy as np

from ...backends.tflite.schema import ActivationFunctionType, FullyConnectedWeightsFormat
from ...backends.tflite.schema import BuiltinOperator as OP
from ...backends.tflite.schema import TensorType as TFLType
from ...errors import ModelFormatError, UnsupportedOpError
from ...ir import Value
from ...ir.dialects import nn
from ...ir.opdef import OpDef
from ...types import IntegerType
from . import layout as L
from .importer import Converter, OpContext
from .ops_select import cast, range_, shape
from .ops_shape import expand_dims, gather, reshape, slice_, space_to_depth, squeeze, strided_slice, transpose
from .ops_split import split, split_v
from .ops_tensor import _operand, _pick_layout, concatenation
from .ops_window import NCHW, _pads, _positive, _rank, _run_time_factors, conv_geometry
from .tensors import dims

__all__ = ["CONVERTERS"]

I64 = IntegerType(64)

_FUSED = {ActivationFunctionType.RELU: (nn.RELU, {}),
          ActivationFunctionType.RELU6: (nn.CLIP, {"min": 0.0, "max": 6.0}),
          ActivationFunctionType.RELU_N1_TO_1: (nn.CLIP, {"min": -1.0, "max": 1.0})}


def _inputs(ctx: OpContext, *slots: int) -> list[Value]:
    return [ctx.input(i, L.identity(ctx.rank(i))) for i in slots]


def _finish(ctx: OpContext, opdef: OpDef, operands: list[Value], fused=ActivationFunctionType.NONE,
            layout: L.Perm | None = None, **attrs) -> None:
    """Emit ``opdef`` as the output tensor (in ``layout``, the TFLite one by default), or through a
    helper then its fused activation."""
    out = layout or L.identity(ctx.out_rank)
    if fused == ActivationFunctionType.NONE:
        ctx.emit(opdef, operands, out, **attrs)
        return
    if fused not in _FUSED:
        raise UnsupportedOpError(f"fused activation {fused.name} is not supported (supported: RELU, RELU6, "
                                 "RELU_N1_TO_1)")
    act, act_attrs = _FUSED[fused]
    y = ctx.helper(opdef, operands, "before_activation", **attrs)
    ctx.emit(act, [y], out, **act_attrs)


def _fused(ctx: OpContext):
    o = ctx.options
    return getattr(o, "fused_activation_function", ActivationFunctionType.NONE) if o is not None else \
        ActivationFunctionType.NONE


def _binary(opdef: OpDef) -> Converter:
    """In the layout of the first full-rank computed operand, as the int8 ADD (a residual between
    two convs stays NCHW); a lower-rank operand broadcasts as numpy would."""
    def convert(ctx: OpContext) -> None:
        perm = _pick_layout(ctx, (0, 1), ctx.out_rank)
        _finish(ctx, opdef, [_operand(ctx, 0, perm), _operand(ctx, 1, perm)], _fused(ctx), perm)
    return convert


def squared_difference(ctx: OpContext) -> None:
    d = ctx.helper(nn.SUB, _inputs(ctx, 0, 1), "difference")
    _finish(ctx, nn.MUL, [d, d])


def _unary(opdef: OpDef, options=lambda o: {}, **fixed) -> Converter:
    """Element-wise: in whichever layout the input already has."""
    def convert(ctx: OpContext) -> None:
        perm = ctx.native_or_identity(0)
        _finish(ctx, opdef, [ctx.input(0, perm)], layout=perm, **fixed, **options(ctx.options))
    return convert


def rsqrt(ctx: OpContext) -> None:
    _finish(ctx, nn.UNARY["reciprocal"], [ctx.helper(nn.UNARY["sqrt"], _inputs(ctx, 0), "sqrt")])


def square(ctx: OpContext) -> None:
    (x,) = _inputs(ctx, 0)
    _finish(ctx, nn.MUL, [x, x])


def _gelu(o) -> dict:
    return {"approximate": "tanh" if o.approximate else "none"}


def _leaky(o) -> dict:
    return {"alpha": float(o.alpha)}


def _reduce(opdef: OpDef) -> Converter:
    """In the input's layout (TFLite axis ``a`` is IR axis ``perm[a]``); no axes: LiteRT reduces
    nothing (ONNX would reduce all), an ``nn.identity``."""
    def convert(ctx: OpContext) -> None:
        perm = ctx.native_or_identity(0)
        r = len(perm)
        axes = ctx.const_ints(1, "axes")
        if any(not -r <= a < r for a in axes):
            raise ModelFormatError(f"axes {list(axes)} out of range for rank {r}")
        x = ctx.input(0, perm)
        if not axes:
            ctx.emit(nn.IDENTITY, [x], perm)
            return
        axes = sorted({a % r for a in axes})
        keep = bool(ctx.options.keep_dims)
        _finish(ctx, opdef, [x], layout=perm if keep else L.drop_axes(perm, axes),
                axes=sorted(perm[a] for a in axes), keepdims=int(keep))
    return convert


def softmax(ctx: OpContext) -> None:
    (x,) = _inputs(ctx, 0)
    beta = float(ctx.options.beta)
    if beta != 1.0:   # softmax(beta·x): LiteRT scales the logits by beta
        x = ctx.helper(nn.MUL, [x, ctx.imp.plain_constant(np.asarray(beta, np.float32))], "scaled_logits")
    _finish(ctx, nn.SOFTMAX, [x], axis=-1)


def fully_connected(ctx: OpContext) -> None:
    """x [..., K] @ wᵀ (+ bias): ``nn.matmul`` with the weights transposed at import (a constant) or
    by an ``nn.transpose``; TFLite flattens the input to [-1, K] unless keep_num_dims."""
    o = ctx.options
    if o.weights_format != FullyConnectedWeightsFormat.DEFAULT:
        raise UnsupportedOpError(f"weights_format {o.weights_format.name} is not supported (only DEFAULT)")
    if ctx.rank(1) != 2:
        raise ModelFormatError(f"the weights have rank {ctx.rank(1)}, expected 2 ([N, K])")
    k = ctx.dims(1)[1]
    (x,) = _inputs(ctx, 0)
    if not o.keep_num_dims and ctx.rank(0) != 2:
        x = ctx.helper(nn.RESHAPE, [x], "flat", shape=(-1, k))
    w = ctx.constant(1, (1, 0), tag="kn") if ctx.is_const(1) else \
        ctx.helper(nn.TRANSPOSE, _inputs(ctx, 1), "weights_kn", perm=(1, 0))
    fused = _fused(ctx)
    if not ctx.has(2):
        _finish(ctx, nn.MATMUL, [x, w], fused)
        return
    y = ctx.helper(nn.MATMUL, [x, w], "matmul")
    _finish(ctx, nn.ADD, [y, *_inputs(ctx, 2)], fused)


def batch_matmul(ctx: OpContext) -> None:
    a, b = _inputs(ctx, 0, 1)
    o = ctx.options
    for flag, v, i in ((o.adj_x, a, 0), (o.adj_y, b, 1)):
        if flag:
            r = ctx.rank(i)
            swapped = tuple(range(r - 2)) + (r - 1, r - 2)
            t = ctx.helper(nn.TRANSPOSE, [v], f"in{i}_adjoint", perm=swapped)
            a, b = (t, b) if i == 0 else (a, t)
    _finish(ctx, nn.MATMUL, [a, b])


def broadcast_to(ctx: OpContext) -> None:
    """A constant target: ``nn.expand``; a run-time one: ``nn.dynamic_expand`` (i64 shape)."""
    (x,) = _inputs(ctx, 0)
    if ctx.is_const(1):
        _finish(ctx, nn.EXPAND, [x], shape=ctx.const_vector(1, "shape"))
        return
    target = ctx.input(1, L.identity(1))
    if target.type.element_type != I64:
        target = ctx.helper(nn.CAST, [target], "shape_i64", to=I64)
    _finish(ctx, nn.DYNAMIC_EXPAND, [x, target], dims=tuple(-1 if d is None else d for d in dims(ctx.out_tensor)))


def arg_max(ctx: OpContext) -> None:
    """``nn.arg_max`` (keepdims 0; i64), cast to an int32 output when the file asks for one."""
    r = ctx.rank(0)
    axis = ctx.const_ints(1, "axis")
    if len(axis) != 1 or not -r <= axis[0] < r:
        raise ModelFormatError(f"axis {list(axis)} must be one value in [{-r}, {r})")
    out = L.identity(ctx.out_rank)
    if ctx.result_type(out).element_type == I64:
        ctx.emit(nn.ARG_MAX, _inputs(ctx, 0), out, axis=axis[0] % r, keepdims=0)
        return
    indices = ctx.helper(nn.ARG_MAX, _inputs(ctx, 0), "i64", axis=axis[0] % r, keepdims=0)
    ctx.emit(nn.CAST, [indices], out, to=ctx.result_type(out).element_type)


def _compare(name: str, negate: bool = False) -> Converter:
    """EQUAL, LESS, ... of float32 operands: ``nn.<name>`` (an i1 result); NOT_EQUAL is ``nn.not`` of equal."""
    def convert(ctx: OpContext) -> None:
        operands = _inputs(ctx, 0, 1)
        if negate:
            _finish(ctx, nn.NOT, [ctx.helper(nn.COMPARE[name], operands, name)])
        else:
            _finish(ctx, nn.COMPARE[name], operands)
    return convert


def select_v2(ctx: OpContext) -> None:
    """SELECT_V2 (broadcasting): ``nn.where``."""
    _finish(ctx, nn.WHERE, _inputs(ctx, 0, 1, 2))


def tile(ctx: OpContext) -> None:
    _finish(ctx, nn.TILE, _inputs(ctx, 0), repeats=ctx.const_vector(1, "multiples"))


# LiteRT's (align_corners, half_pixel_centers) as ONNX's coordinate and nearest modes: the same
# sampling (bilinear: the same source coordinate, clamped alike; nearest: the index rules the
# quantizer's Resize declaration pairs, floor((o + ½)·in/out) for half-pixel centers)
_BILINEAR_MODES = {(False, False): "asymmetric", (False, True): "half_pixel", (True, False): "align_corners"}
_NEAREST_MODES = {(False, False): ("asymmetric", "floor"), (False, True): ("half_pixel", "round_prefer_ceil"),
                  (True, False): ("align_corners", "round_prefer_ceil")}


def _resize(nearest: bool) -> Converter:
    """RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR: ``nn.resize`` (NCHW) to the constant or declared
    size, or by the factors of quantir's run-time size (dynamic H, W)."""
    def convert(ctx: OpContext) -> None:
        o = ctx.options
        _rank(ctx, 0, 4, "input")
        flags = (bool(o.align_corners), bool(o.half_pixel_centers))
        if flags not in _BILINEAR_MODES:
            raise UnsupportedOpError(f"{ctx.op_name} with both align_corners and half_pixel_centers has no ONNX "
                                     "Resize equivalent")
        if nearest:
            cmode, nmode = _NEAREST_MODES[flags]
            modes = dict(mode="nearest", coordinate_transformation_mode=cmode, nearest_mode=nmode)
        else:
            modes = dict(mode="linear", coordinate_transformation_mode=_BILINEAR_MODES[flags])
        out = ctx.out_tensor
        if ctx.has(1) and ctx.is_const(1):
            sizes = ctx.const_ints(1, "size")
        elif out.shape_signature and min(out.shape_signature[1:3]) < 1:
            factors = _run_time_factors(ctx)
            if factors is None:
                raise UnsupportedOpError("a size computed at run time for a dynamic output is read only as "
                                         "SHAPE(input) → STRIDED_SLICE [1:3] → MUL by constant factors")
            _finish(ctx, nn.RESIZE, [ctx.input(0, NCHW)], layout=NCHW, scales=(1.0, 1.0, *map(float, factors)),
                    **modes)
            return
        else:   # computed at run time for a static output: the declared size
            sizes = tuple(out.shape[1:3])
        if len(sizes) != 2 or min(sizes) < 1:
            raise ModelFormatError(f"the output size must be two positive values, found {list(sizes)}")
        n, _, _, c = ctx.tensor(0).shape
        _finish(ctx, nn.RESIZE, [ctx.input(0, NCHW)], layout=NCHW, sizes=(n, c, *sizes), **modes)
    return convert


def _conv(depthwise: bool) -> Converter:
    """CONV_2D ([C_out, KH, KW, C_in / group] filter) or DEPTHWISE_CONV_2D ([1, KH, KW, C_out], group
    C_in): ``nn.conv`` in NCHW with the constant filter laid out OIHW at import, bias and padding as
    the int8 import reads them."""
    def convert(ctx: OpContext) -> None:
        if ctx.tensor(1).type is not TFLType.FLOAT32:
            raise UnsupportedOpError(f"the filter '{ctx.tensor(1).name}' is {ctx.tensor(1).type.name}; a float "
                                     f"{ctx.op_name} reads a float32 filter")
        layout, tag, group, _, (h, w), khw = conv_geometry(ctx, depthwise)
        o = ctx.options
        strides = _positive("strides", (o.stride_h, o.stride_w))
        dilations = _positive("dilations", (o.dilation_h_factor, o.dilation_w_factor))
        # a constant filter is laid out at import; a computed one (the DEQUANTIZE of int8 weights that
        # TF's converter writes for weight-only quantization) by the importer's cached transpose
        filt = ctx.constant(1, layout, tag=tag) if ctx.is_const(1) else ctx.input(1, layout)
        operands = [ctx.input(0, NCHW), filt]
        if ctx.has(2):
            operands.append(ctx.constant(2, (0,)))
        _finish(ctx, nn.CONV, operands, o.fused_activation_function, NCHW, strides=strides, dilations=dilations,
                group=group, **_pads(o.padding, (h, w), khw, strides, dilations))
    return convert


def _pool(opdef: OpDef) -> Converter:
    """MAX_POOL_2D / AVERAGE_POOL_2D: LiteRT's average leaves padded taps out (count_include_pad 0)."""
    def convert(ctx: OpContext) -> None:
        o = ctx.options
        _rank(ctx, 0, 4, "input")
        _, h, w, _ = ctx.dims(0)
        kernel = _positive("filter size", (o.filter_height, o.filter_width))
        strides = _positive("strides", (o.stride_h, o.stride_w))
        _finish(ctx, opdef, [ctx.input(0, NCHW)], o.fused_activation_function, NCHW, kernel_shape=kernel,
                strides=strides, **_pads(o.padding, (h, w), kernel, strides))
    return convert


def pad(ctx: OpContext) -> None:
    """PAD (with 0) / PADV2 (one constant value): ``nn.pad`` with ONNX's [begins..., ends...]."""
    r = ctx.rank(0)
    widths = np.asarray(ctx.const(1, "paddings")).astype(np.int64)
    if widths.shape != (r, 2) or np.any(widths < 0):
        raise ModelFormatError(f"paddings {widths.tolist()} must be [{r}, 2] non-negative amounts")
    value = 0.0
    if ctx.has(2):
        values = ctx.const(2, "constant_values").reshape(-1)
        if values.size != 1:
            raise ModelFormatError(f"constant_values has {values.size} values, expected one")
        value = float(values[0])
    _finish(ctx, nn.PAD, _inputs(ctx, 0), pads=[int(v) for v in widths[:, 0]] + [int(v) for v in widths[:, 1]],
            constant_value=value)


CONVERTERS: dict[OP, Converter] = {
    OP.ADD: _binary(nn.ADD), OP.SUB: _binary(nn.SUB), OP.MUL: _binary(nn.MUL), OP.DIV: _binary(nn.DIV),
    OP.POW: _binary(nn.BINARY["pow"]), OP.PRELU: _binary(nn.PRELU), OP.MAXIMUM: _binary(nn.VARIADIC["max"]),
    OP.MINIMUM: _binary(nn.VARIADIC["min"]), OP.SQUARED_DIFFERENCE: squared_difference,
    OP.SQRT: _unary(nn.UNARY["sqrt"]), OP.RSQRT: rsqrt, OP.EXP: _unary(nn.UNARY["exp"]),
    OP.LOG: _unary(nn.UNARY["log"]), OP.ABS: _unary(nn.UNARY["abs"]), OP.NEG: _unary(nn.UNARY["neg"]),
    OP.SQUARE: square, OP.LOGISTIC: _unary(nn.UNARY["sigmoid"]), OP.TANH: _unary(nn.UNARY["tanh"]),
    OP.RELU: _unary(nn.RELU), OP.RELU6: _unary(nn.CLIP, min=0.0, max=6.0),
    OP.RELU_N1_TO_1: _unary(nn.CLIP, min=-1.0, max=1.0), OP.RELU_0_TO_1: _unary(nn.CLIP, min=0.0, max=1.0),
    OP.LEAKY_RELU: _unary(nn.UNARY["leaky_relu"], _leaky),
    OP.HARD_SWISH: _unary(nn.UNARY["hard_swish"]), OP.GELU: _unary(nn.UNARY["gelu"], _gelu),
    OP.MEAN: _reduce(nn.REDUCE_MEAN), OP.SUM: _reduce(nn.REDUCE["sum"]), OP.REDUCE_MAX: _reduce(nn.REDUCE["max"]),
    OP.REDUCE_MIN: _reduce(nn.REDUCE["min"]), OP.SOFTMAX: softmax, OP.ARG_MAX: arg_max,
    OP.FULLY_CONNECTED: fully_connected, OP.BATCH_MATMUL: batch_matmul, OP.BROADCAST_TO: broadcast_to,
    OP.EQUAL: _compare("equal"), OP.NOT_EQUAL: _compare("equal", negate=True), OP.LESS: _compare("less"),
    OP.LESS_EQUAL: _compare("less_or_equal"), OP.GREATER: _compare("greater"),
    OP.GREATER_EQUAL: _compare("greater_or_equal"), OP.SELECT_V2: select_v2, OP.TILE: tile,
    OP.FLOOR: _unary(nn.UNARY["floor"]),
    OP.CONV_2D: _conv(depthwise=False), OP.DEPTHWISE_CONV_2D: _conv(depthwise=True),
    OP.MAX_POOL_2D: _pool(nn.MAX_POOL), OP.AVERAGE_POOL_2D: _pool(nn.AVERAGE_POOL), OP.PAD: pad, OP.PADV2: pad,
    OP.RESIZE_BILINEAR: _resize(nearest=False), OP.RESIZE_NEAREST_NEIGHBOR: _resize(nearest=True),
    # movement: the same converters as the int8 import, which do not depend on the element type
    OP.RESHAPE: reshape, OP.TRANSPOSE: transpose, OP.SQUEEZE: squeeze, OP.EXPAND_DIMS: expand_dims,
    OP.STRIDED_SLICE: strided_slice, OP.SLICE: slice_, OP.GATHER: gather, OP.CONCATENATION: concatenation,
    OP.SPLIT: split, OP.SPLIT_V: split_v, OP.SHAPE: shape, OP.CAST: cast, OP.RANGE: range_,
    OP.SPACE_TO_DEPTH: space_to_depth,
}
