"""Converters of the NHWC window ops and FULLY_CONNECTED: CONV_2D, DEPTHWISE_CONV_2D,
MAX_POOL_2D, AVERAGE_POOL_2D, RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR run on the NCHW form of
their input; their outputs stay NCHW until an op needs the TFLite layout.

Filters become constants in the IR layout at import time: CONV_2D's OHWI -> OIHW,
DEPTHWISE_CONV_2D's ``[1, KH, KW, C_out]`` -> ``[C_out, 1, KH, KW]`` with ``group = C_in``
(its per-axis dimension 3 becomes 0). SAME/VALID padding becomes explicit pads with
:func:`~quantir.runtime.qkernels.tflite_pads`, which follows LiteRT's ``padding.h``.
"""
from __future__ import annotations

import numpy as np

from ...backends.tflite.schema import BuiltinOperator as OP
from ...backends.tflite.schema import FullyConnectedWeightsFormat, Padding
from ...backends.tflite.schema import TensorType as TFLType
from ...errors import ModelFormatError, UnsupportedOpError
from ...ir import Value
from ...ir.dialects import nn, qnn
from ...numerics import bias_qparams
from ...runtime.qkernels import tflite_pads
from ...types import IntegerType, TensorType, UniformQuantizedPerAxisType, UniformQuantizedType
from . import layout as L
from .importer import Converter, OpContext, fixed_point
from .tensors import F32, is_quantized

__all__ = ["CONVERTERS"]

NCHW = L.channels_first(4)
# to_tflite layouts of the filters once in the IR layout (``np.transpose(ir, p) == tflite``)
OIHW = L.channels_first(4)            # OHWI <-> OIHW
DEPTHWISE = L.inverse((3, 0, 1, 2))   # [1, KH, KW, C] <-> [C, 1, KH, KW]


def _rank(ctx: OpContext, i: int, rank: int, what: str) -> None:
    if ctx.rank(i) != rank:
        raise ModelFormatError(f"the {what} '{ctx.tensor(i).name}' must have rank {rank}, found shape "
                               f"{list(ctx.tensor(i).shape)}")


def _positive(what: str, values) -> tuple[int, ...]:
    values = tuple(int(v) for v in values)
    if any(v < 1 for v in values):
        raise ModelFormatError(f"{what} {values} must be positive")
    return values


def _pads(padding: Padding, spatial, kernel, strides, dilations=(1, 1)) -> dict:
    """LiteRT's padding as the qnn op's ``pads``, or ``auto_pad`` SAME_UPPER where SAME pads a
    dynamic size by an amount that follows the size (a stride above 1)."""
    if padding == Padding.VALID:
        return {"pads": (0, 0, 0, 0)}
    sizes = []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        if size is None:
            if s != 1:
                return {"auto_pad": "SAME_UPPER"}
            size = (k - 1) * d + 1   # with stride 1 the total padding is (k - 1) * d for every size
        sizes.append(size)
    return {"pads": tflite_pads("same", sizes, kernel, strides, dilations)}


def _weights(ctx: OpContext, i: int, perm: L.Perm, tag: str | None = None) -> Value:
    t = ctx.tensor(i)
    ctx.const(i, "weights")
    if t.type is not TFLType.INT8:
        raise UnsupportedOpError(f"weights '{t.name}' are {t.type.name}; quantir reads int8 weights")
    return ctx.constant(i, perm, tag=tag)


def _bias(ctx: OpContext, i: int, x: Value, w: Value, channels: int, int64: bool = False) -> list[Value]:
    """The int32 bias as a quantized constant, or nothing when the operator has none.

    A bias without quantization parameters gets the scale LiteRT effectively uses
    (input_scale × weight_scale): LiteRT's int8 kernels never read the bias scale. With
    ``int64`` (a 16x8 conv) the bias is int64, read into the IR's int32 when its values fit.
    """
    if not ctx.has(i):
        return []
    t = ctx.tensor(i)
    array = ctx.const(i, "bias")
    wide = int64 and t.type is TFLType.INT64
    if not wide and t.type is not TFLType.INT32:
        raise UnsupportedOpError(f"bias '{t.name}' is {t.type.name}; quantir reads int32 biases (int8 models)"
                                 + (" and int64 ones (16x8 convolutions)" if int64 else ""))
    if tuple(t.shape) != (channels,):
        raise ModelFormatError(f"bias '{t.name}' has shape {list(t.shape)}, expected [{channels}]")
    if wide:
        if array.size and (int(array.min()) < -2**31 or int(array.max()) >= 2**31):
            raise UnsupportedOpError(f"bias '{t.name}' has int64 values past int32 (up to {int(np.abs(array).max())}); "
                                     "quantir keeps biases in int32")
        array = array.astype(np.int32)
    elif is_quantized(t):
        return [ctx.constant(i, (0,))]
    scale = np.asarray(t.quantization.scale) if wide and is_quantized(t) else \
        bias_qparams(qnn.scales_of(x.type), qnn.scales_of(w.type))[0]
    scale = np.atleast_1d(scale)
    i32 = IntegerType(32)
    if scale.size == 1:
        q = UniformQuantizedType(storage_type=i32, expressed_type=F32, scale=float(scale[0]), zero_point=0)
    else:
        q = UniformQuantizedPerAxisType(storage_type=i32, expressed_type=F32, scales=tuple(map(float, scale)),
                                        zero_points=(0,) * scale.size, quantized_dimension=0)
    v = ctx.imp.stored_constant(np.ascontiguousarray(array), TensorType((channels,), q))
    v.name_hint = ctx.imp.constant_name(ctx.idx(i))
    return [v]


def conv_geometry(ctx: OpContext, depthwise: bool) -> tuple:
    """CONV_2D's or DEPTHWISE_CONV_2D's filter read against its input, as ``(filter layout, its
    tag, group, C_out, (H, W), (KH, KW))``; the int8, float and hybrid converters share it."""
    _rank(ctx, 0, 4, "input")
    _rank(ctx, 1, 4, "filter")
    _, h, w, c_in = ctx.dims(0)
    if not depthwise:
        c_out, kh, kw, c_group = ctx.tensor(1).shape
        if c_in is None or c_group <= 0 or c_in % c_group:
            raise ModelFormatError(f"the filter '{ctx.tensor(1).name}' has {c_group} input channels, which do not "
                                   f"divide the input's {c_in}")
        return OIHW, "oihw", c_in // c_group, c_out, (h, w), (kh, kw)
    one, kh, kw, c_out = ctx.tensor(1).shape
    if one != 1 or c_in is None or c_in < 1 or c_out % c_in:
        raise ModelFormatError(f"the depthwise filter '{ctx.tensor(1).name}' has shape {list(ctx.tensor(1).shape)}; "
                               f"expected [1, KH, KW, C_out] with C_out a multiple of the input's {c_in} channels")
    # output channel c * depth_multiplier + m reads input channel c: exactly group = C_in
    return DEPTHWISE, "c1hw", c_in, c_out, (h, w), (kh, kw)


def conv_2d(ctx: OpContext) -> None:
    _emit_conv(ctx, *conv_geometry(ctx, depthwise=False))


def depthwise_conv_2d(ctx: OpContext) -> None:
    _emit_conv(ctx, *conv_geometry(ctx, depthwise=True))


def _per_tensor_output(ctx: OpContext, y: TensorType) -> TensorType:
    # one output scale per tensor: the fixed-point multipliers are input × weight scale / output scale
    q = y.element_type
    if not isinstance(q, UniformQuantizedType):
        found = f"{len(q.scales)} per-axis scales" if isinstance(q, UniformQuantizedPerAxisType) else str(y)
        raise UnsupportedOpError(f"the output '{ctx.imp.names[ctx.out]}' must be int8 quantized per tensor, "
                                 f"found {found}")
    return y


def _emit_conv(ctx: OpContext, layout, suffix: str, group: int, c_out: int, hw, khw) -> None:
    """One qnn.conv (NCHW) from CONV_2D or DEPTHWISE_CONV_2D, whose options share these fields."""
    o = ctx.options
    x = ctx.input(0, NCHW)
    wt = _weights(ctx, 1, layout, suffix)
    strides = _positive("strides", (o.stride_h, o.stride_w))
    dilations = _positive("dilations", (o.dilation_h_factor, o.dilation_w_factor))
    y = _per_tensor_output(ctx, ctx.result_type(NCHW))
    wide = x.type.element_type.storage_type.width == 16
    if wide and ctx.has(2) and ctx.tensor(2).type is TFLType.INT32:
        raise UnsupportedOpError(f"bias '{ctx.tensor(2).name}' of a 16x8 convolution is int32 (LiteRT's int32-"
                                 "accumulator path with quantized_bias_type INT32); quantir's 16x8 conv is the "
                                 "int64-bias one")
    ctx.emit(qnn.CONV, [x, wt, *_bias(ctx, 2, x, wt, c_out, int64=wide)], NCHW, y, strides=strides,
             **_pads(o.padding, hw, khw, strides, dilations), dilations=dilations, group=group,
             activation=ctx.activation(o.fused_activation_function),
             **fixed_point(qnn.conv_real_multipliers(x.type, wt.type, y)))


def _computed_adjust(ctx: OpContext, strides, kernel) -> tuple[int, int]:
    """``adjust`` of a TRANSPOSE_CONV whose output_shape is computed as quantir writes it for dynamic
    sizes, ``ADD(MUL(SHAPE(input), [1, s_h, s_w, 0]), [0, k_h − s_h + a_h, k_w − s_w + a_w, C_out])``."""
    imp = ctx.imp
    producer = {o: op for op in imp.sg.operators for o in op.outputs}
    code = lambda op: imp.model.operator_codes[op.opcode_index].builtin_code  # noqa: E731
    add = producer.get(ctx.op.inputs[0])
    offset = None if add is None or code(add) != OP.ADD else imp.data(add.inputs[1])
    mul = None if offset is None else producer.get(add.inputs[0])
    scale = None if mul is None or code(mul) != OP.MUL else imp.data(mul.inputs[1])
    shape = None if scale is None else producer.get(mul.inputs[0])
    if (shape is None or code(shape) != OP.SHAPE or shape.inputs[0] != ctx.op.inputs[2]
            or [int(v) for v in scale.reshape(-1)] != [1, *strides, 0]):
        raise UnsupportedOpError("TRANSPOSE_CONV with a dynamic spatial size reads its output size only from "
                                 "SHAPE(input) · [1, s_h, s_w, 0] + offset (as quantir writes it)")
    offset = [int(v) for v in offset.reshape(-1)]
    return tuple(o - k + s for o, k, s in zip(offset[1:3], kernel, strides))  # type: ignore[return-value]

def transpose_conv(ctx: OpContext) -> None:
    """TRANSPOSE_CONV (output_shape, OHWI filter, input, bias): one qnn.transpose_conv whose output size
    is the result's (the output_shape input is not read: a computed one, as quantir writes for a dynamic
    batch, gives the same spatial dims), as ``stride·(in − 1) + kernel + adjust``."""
    _rank(ctx, 2, 4, "input")
    _rank(ctx, 1, 4, "filter")
    o = ctx.options
    _, h, w, c_in = ctx.dims(2)
    c_out, kh, kw, wc_in = ctx.tensor(1).shape
    if c_in is not None and wc_in != c_in:
        raise ModelFormatError(f"the filter '{ctx.tensor(1).name}' has {wc_in} input channels, the input {c_in}")
    x = ctx.input(2, NCHW)
    wt = _weights(ctx, 1, OIHW, "oihw")
    strides = _positive("strides", (o.stride_h, o.stride_w))
    y = _per_tensor_output(ctx, ctx.result_type(NCHW))
    out_hw = y.shape[2:]
    if None in (h, w) or None in out_hw:
        adjust = _computed_adjust(ctx, strides, (kh, kw))
    else:
        adjust = tuple(o_ - (s * (i - 1) + k) for o_, s, i, k in zip(out_hw, strides, (h, w), (kh, kw)))
    if (x.type.element_type.storage_type.width == 16 and ctx.has(3)
            and o.quantized_bias_type != TFLType.INT32):   # quantir's 16x8 TRANSPOSE_CONV: int32 bias, the option
        raise UnsupportedOpError(f"16x8 TRANSPOSE_CONV with a {ctx.tensor(3).type.name} bias and quantized_bias_type "
                                 f"{o.quantized_bias_type.name}: quantir reads the int32 bias with quantized_bias_type "
                                 "INT32 (LiteRT's int32 accumulator) only")
    ctx.emit(qnn.TRANSPOSE_CONV, [x, wt, *_bias(ctx, 3, x, wt, c_out)], NCHW, y, strides=strides, adjust=adjust,
             padding="SAME" if o.padding == Padding.SAME else "VALID",
             activation=ctx.activation(o.fused_activation_function),
             **fixed_point(qnn.conv_real_multipliers(x.type, wt.type, y)))

def fully_connected(ctx: OpContext) -> None:
    o = ctx.options
    if o.weights_format != FullyConnectedWeightsFormat.DEFAULT:
        raise UnsupportedOpError(f"weights_format {o.weights_format.name} is not supported (only DEFAULT)")
    _rank(ctx, 1, 2, "weights")
    c_out, k = ctx.tensor(1).shape
    shape, r = ctx.dims(0), ctx.rank(0)
    if r == 0:
        raise ModelFormatError(f"the input '{ctx.tensor(0).name}' is a scalar; FULLY_CONNECTED reads rows of K = {k}")
    native = ctx.native_or_identity(0)
    if not o.keep_num_dims and not (r == 2 and shape[-1] == k):
        # TFLite flattens the input to [-1, K]; reshape whichever form holds the same element order
        x = ctx.input(0, native if L.same_memory_order(shape, native) else L.identity(r))
        total = None if None in shape else int(np.prod(shape, dtype=np.int64))
        if total is not None and total % k:
            raise ModelFormatError(f"the input '{ctx.tensor(0).name}' ({total} elements) does not flatten "
                                   f"into rows of K = {k}")
        x = ctx.helper(nn.RESHAPE, [x], "flat", shape=(-1, k))
        perm = L.identity(2)
    else:
        # the op reads the last axis: any layout that keeps it last works
        perm = native if native[-1] == r - 1 else L.identity(r)
        x = ctx.input(0, perm)
    wt = _weights(ctx, 1, L.identity(2))
    y = _per_tensor_output(ctx, ctx.result_type(perm))
    ctx.emit(qnn.FULLY_CONNECTED, [x, wt, *_bias(ctx, 2, x, wt, c_out)], perm, y,
             activation=ctx.activation(o.fused_activation_function),
             **fixed_point(qnn.fc_real_multipliers(x.type, wt.type, y)))


def _pool(opdef) -> Converter:
    def convert(ctx: OpContext) -> None:
        o = ctx.options
        _rank(ctx, 0, 4, "input")
        _, h, w, _ = ctx.dims(0)
        kernel = _positive("filter size", (o.filter_height, o.filter_width))
        strides = _positive("strides", (o.stride_h, o.stride_w))
        ctx.emit(opdef, [ctx.input(0, NCHW)], NCHW, kernel_shape=kernel, strides=strides,
                 **_pads(o.padding, (h, w), kernel, strides), activation=ctx.activation(o.fused_activation_function))
    return convert


def _producer(ctx: OpContext, idx: int, code: OP):
    """The operator that writes tensor ``idx`` if it is a ``code``, else None."""
    imp = ctx.imp
    for op in imp.sg.operators:
        if idx in op.outputs:
            return op if imp.model.operator_codes[op.opcode_index].builtin_code == code else None
    return None


def _run_time_factors(ctx: OpContext) -> tuple[int, ...] | None:
    """The factors of a size computed as quantir writes it for dynamic H, W (``SHAPE(input) →
    STRIDED_SLICE [1:3] → MUL by constants``), else None."""
    imp = ctx.imp
    mul = _producer(ctx, ctx.idx(1), OP.MUL)
    if mul is None or len(mul.inputs) != 2 or imp.data(mul.inputs[1]) is None:
        return None
    cut = _producer(ctx, mul.inputs[0], OP.STRIDED_SLICE)
    if cut is None or [np.asarray(imp.data(i)).reshape(-1).tolist() if imp.data(i) is not None else None
                       for i in cut.inputs[1:]] != [[1], [3], [1]]:
        return None
    shape = _producer(ctx, cut.inputs[0], OP.SHAPE)
    if shape is None or shape.inputs[0] != ctx.idx(0):
        return None
    factors = tuple(int(f) for f in np.asarray(imp.data(mul.inputs[1])).reshape(-1))
    return factors if len(factors) == 2 and min(factors) >= 1 else None


def _resize(opdef):
    """RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR: H and W to a constant (or declared) size, or
    by the factors of quantir's run-time size (dynamic H, W)."""
    def convert(ctx: OpContext) -> None:
        o = ctx.options
        _rank(ctx, 0, 4, "input")
        out = ctx.out_tensor
        if ctx.has(1) and ctx.is_const(1):
            sizes = ctx.const_ints(1, "size")
        elif out.shape_signature and min(out.shape_signature[1:3]) < 1:
            factors = _run_time_factors(ctx)
            if factors is None:
                raise UnsupportedOpError("a size computed at run time for a dynamic output is read only as "
                                         "SHAPE(input) → STRIDED_SLICE [1:3] → MUL by constant factors")
            ctx.emit(opdef, [ctx.input(0, NCHW)], NCHW, factors=factors, align_corners=o.align_corners,
                     half_pixel_centers=o.half_pixel_centers)
            return
        else:  # a size computed at run time: the declared output shape is all there is
            sizes = tuple(out.shape[1:3])
        if len(sizes) != 2 or min(sizes) < 1:
            raise ModelFormatError(f"the output size must be two positive values, found {list(sizes)}")
        n, _, _, c = ctx.tensor(0).shape
        if len(out.shape) != 4 or tuple(out.shape) != (n, *sizes, c):
            raise ModelFormatError(f"the output '{out.name}' has shape {list(out.shape)}, expected "
                                   f"{[n, *sizes, c]} from the input and the size")
        ctx.emit(opdef, [ctx.input(0, NCHW)], NCHW, sizes=sizes, align_corners=o.align_corners,
                 half_pixel_centers=o.half_pixel_centers)
    return convert


CONVERTERS: dict[OP, Converter] = {
    OP.CONV_2D: conv_2d,
    OP.DEPTHWISE_CONV_2D: depthwise_conv_2d,
    OP.TRANSPOSE_CONV: transpose_conv,
    OP.FULLY_CONNECTED: fully_connected,
    OP.MAX_POOL_2D: _pool(qnn.MAX_POOL),
    OP.AVERAGE_POOL_2D: _pool(qnn.AVERAGE_POOL),
    OP.RESIZE_BILINEAR: _resize(qnn.RESIZE_BILINEAR),
    OP.RESIZE_NEAREST_NEIGHBOR: _resize(qnn.RESIZE_NEAREST),
}
