"""QDQ export: each ``qnn`` op as its float ONNX op between DequantizeLinear and QuantizeLinear.

This is the layout ``onnxruntime.quantization`` writes with ``QuantFormat.QDQ`` and fuses back
into integer kernels when it loads the model (DQ → Conv → Q is QLinearConv, DQ → Gemm → Q is
QGemm, DQ → Add → Q is QLinearAdd, DQ → MaxPool/Reshape → Q drops the pair, ...).

=====================  =========================================================================
qnn op                 float ONNX op(s) (inputs DequantizeLinear'd, result QuantizeLinear'd)
=====================  =========================================================================
conv                   Conv (int8 per-channel weights, axis 0; int32 bias with scale s_in·s_w)
fully_connected        Gemm(transB=1) for 2-D inputs; MatMul (weights transposed, axis 1) + Add
add / sub / mul        Add / Sub / Mul
average_pool           AveragePool (count_include_pad=0, as LiteRT)
max_pool               MaxPool
mean                   GlobalAveragePool (axes H, W kept), else ReduceMean
concat                 Concat
pad                    Pad (constant 0.0, which quantizes to the zero point)
resize_bilinear        Resize(linear; half_pixel / align_corners / asymmetric)
resize_nearest         Resize(nearest) in the ONNX mode that copies LiteRT's pixels, else Gather
                       along H then W with LiteRT's indices (see ``nearest``); exact either way
softmax                Softmax(axis=-1) (Mul by beta first when beta != 1)
logistic / tanh        Sigmoid / Tanh
hard_swish             HardSwish
leaky_relu             LeakyRelu(alpha)
clamp                  Relu / Clip(0, 6) / Clip(-1, 1) (nothing when the clamp is a no-op)
requantize             nothing: the DequantizeLinear of the input feeds the QuantizeLinear
reduce_sum             ReduceSum(axes, keepdims)
l2_normalization       LpNormalization(axis=-1, p=2)
log_softmax            LogSoftmax(axis=-1)
data movement (nn)     the same nn op on the dequantized input (Reshape, Flatten, Transpose ...)
unidirectional_lstm    LSTM (forward/reverse), int8 W and R per gate, then Squeeze (recurrent.py)
=====================  =========================================================================

Fused activations (``activation`` of conv, fully_connected, add, sub, mul, pools, clamp) are
emitted as Relu / Clip before the QuantizeLinear only when they clamp more than the int8 range
does (see ``builder.activation_range``).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ...errors import UnsupportedOpError
from ...ir import Operation, Value
from ...ir.dialects import nn, qnn, quant
from ...numerics import resize_nearest_indices
from ...types import TensorType, UniformQuantizedPerAxisType
from . import recurrent, select, space_batch
from .builder import (Builder, activation_of, activation_range, base_name, constant_array, float_type, is_quantized,
                      qtype, same_params)

_ACTIVATION_BOUNDS = {"relu6": (0.0, 6.0), "relu_n1_to_1": (-1.0, 1.0)}


def activation(b: Builder, x: Value, op: Operation) -> Value:
    """``op``'s fused clamp in float, before the output QuantizeLinear, when it is not a no-op."""
    if activation_range(op) is None:
        return x
    act = activation_of(op)
    if act == "relu":
        return b.float_op(nn.RELU, [x], op, suffix="/relu")
    lo, hi = _ACTIVATION_BOUNDS[act]
    return b.float_op(nn.CLIP, [x], op, suffix="/clip", min=lo, max=hi)


def finish(b: Builder, op: Operation, y: Value) -> None:
    """Activation, then QuantizeLinear to the qnn result's type."""
    b.quantize(op.results[0], activation(b, y, op))


def _attrs(op: Operation, *names: str) -> dict:
    return {n: op.attr(n) for n in names if op.attr(n) is not None}


# -- converters -----------------------------------------------------------------------------------

def conv(b: Builder, op: Operation) -> None:
    y = b.float_op(nn.CONV, [b.dequantized(v) for v in op.operands], op,
                   **_attrs(op, "strides", "pads", "dilations", "group", "auto_pad"))
    finish(b, op, y)


def fully_connected(b: Builder, op: Operation) -> None:
    x, w, *bias = op.operands
    xf = b.dequantized(x)
    bf = [b.dequantized(v) for v in bias]
    if x.type.shape is not None and len(x.type.shape) == 2:
        finish(b, op, b.float_op(nn.GEMM, [xf, b.dequantized(w), *bf], op, trans_b=1))
        return
    # MatMul takes [K, N] weights: the stored integers transposed, per-axis on dimension 1
    y = b.float_op(nn.MATMUL, [xf, _transposed_weights(b, w)], op, suffix="/matmul" if bf else "")
    if bf:
        y = b.float_op(nn.ADD, [y, bf[0]], op)
    finish(b, op, y)


def _transposed_weights(b: Builder, w: Value) -> Value:
    ints = constant_array(b.value(w))
    if ints is None:
        raise UnsupportedOpError(f"qnn.fully_connected with weights '{w.name_hint}' that are not a constant has no "
                                 f"QDQ export for inputs of rank other than 2")
    q = qtype(w.type)
    if isinstance(q, UniformQuantizedPerAxisType):
        q = dataclasses.replace(q, quantized_dimension=1)
    t = TensorType(ints.shape[::-1], q)
    wt = b.stored_constant(ints.T, t, f"{w.name_hint}_transposed")
    return b.emit(quant.DCAST, [wt], float_type(t), name=f"{base_name(w)}_transposed__dq",
                  label=f"{base_name(w)}_transposed/dequantize")


def transpose_conv(b: Builder, op: Operation) -> None:
    """ONNX ConvTranspose: weights back to [C_in, C_out, KH, KW] (per-axis on dimension 1); TFLite's
    pads as ONNX pads, and an output larger than ``stride·(in − 1) + kernel`` as output_padding."""
    x, w, *bias = op.operands
    ints = constant_array(b.value(w))
    if ints is None:
        raise UnsupportedOpError(f"qnn.transpose_conv with weights '{w.name_hint}' that are not a constant has no "
                                 "QDQ export")
    q = qtype(w.type)
    if isinstance(q, UniformQuantizedPerAxisType):
        q = dataclasses.replace(q, quantized_dimension=1)
    t = TensorType((ints.shape[1], ints.shape[0], *ints.shape[2:]), q)
    wt = b.stored_constant(ints.transpose(1, 0, 2, 3), t, f"{w.name_hint}_cin_first")
    wf = b.emit(quant.DCAST, [wt], float_type(t), name=f"{base_name(w)}_cin_first__dq",
                label=f"{base_name(w)}_cin_first/dequantize")
    adjust = [int(a) for a in op.attr("adjust")]
    begin = [max(-a, 0) // 2 for a in adjust]
    end = [max(-a, 0) - p for a, p in zip(adjust, begin)]
    y = b.float_op(nn.CONV_TRANSPOSE, [b.dequantized(x), wf, *(b.dequantized(v) for v in bias)], op,
                   strides=list(op.attr("strides")), pads=begin + end, output_padding=[max(a, 0) for a in adjust])
    finish(b, op, y)

def _float(opdef, **fixed):
    """A qnn op that is one float op over all its dequantized operands."""
    def convert(b: Builder, op: Operation) -> None:
        attrs = {k: (v(op) if callable(v) else v) for k, v in fixed.items()}
        attrs = {k: v for k, v in attrs.items() if v is not None}
        finish(b, op, b.float_op(opdef, [b.dequantized(v) for v in op.operands], op, **attrs))
    return convert


def rsqrt(b: Builder, op: Operation) -> None:
    """RSQRT as Sqrt then Reciprocal (ONNX has no Rsqrt); 1/sqrt(0) = inf quantizes to 127, as LiteRT's."""
    root = b.float_op(nn.UNARY["sqrt"], [b.dequantized(op.operands[0])], op, suffix="/sqrt")
    finish(b, op, b.float_op(nn.UNARY["reciprocal"], [root], op))


def squared_difference(b: Builder, op: Operation) -> None:
    """SQUARED_DIFFERENCE as Sub, then Mul of the difference by itself (ONNX has no such op)."""
    d = b.float_op(nn.SUB, [b.dequantized(v) for v in op.operands], op, suffix="/difference")
    finish(b, op, b.float_op(nn.MUL, [d, d], op))


def batch_matmul(b: Builder, op: Operation) -> None:
    """BATCH_MATMUL as MatMul, after a Transpose of the last two dims of an operand with adj_x / adj_y."""
    operands = []
    for v, adj in zip(op.operands, (op.attr("adj_x"), op.attr("adj_y"))):
        if not adj:
            operands.append(b.dequantized(v))
            continue
        n, s = len(v.type.shape), v.type.shape   # transposed on int8 (data movement), then dequantized
        t = v.type.clone(shape=(*s[:-2], s[-1], s[-2]))
        xt = b.emit(nn.TRANSPOSE, [b.value(v)], t, name=f"{base_name(v)}__adj", label=f"{op.label or base_name(v)}/adj",
                    like=op, perm=(*range(n - 2), n - 1, n - 2))
        operands.append(b.emit(quant.DCAST, [xt], float_type(t), name=f"{base_name(v)}__adj__dq",
                               label=f"{base_name(v)}/adj/dequantize"))
    finish(b, op, b.float_op(nn.MATMUL, operands, op))


def pad_constant(op: Operation) -> float | None:
    """A PADV2 value as the float Pad constant ``scale · (value - zp)``; None (0.0) for the zero point."""
    value = op.attr("value")
    q = qtype(op.results[0].type)
    if value is None or int(value) == int(q.zero_point):
        return None
    return float(np.float32(q.scale) * np.float32(int(value) - int(q.zero_point)))


def _pool(opdef):
    return _float(opdef, kernel_shape=lambda op: op.attr("kernel_shape"), strides=lambda op: op.attr("strides"),
                  pads=lambda op: op.attr("pads"), auto_pad=lambda op: op.attr("auto_pad"))


def is_global_mean(op: Operation) -> bool:
    """qnn.mean over H and W of an NCHW tensor: GlobalAveragePool."""
    shape = op.operands[0].type.shape
    return shape is not None and len(shape) == 4 and tuple(op.attr("axes")) in ((2, 3), (-2, -1))


def mean(b: Builder, op: Operation) -> None:
    x = b.dequantized(op.operands[0])
    if is_global_mean(op) and op.attr("keepdims"):
        y = b.float_op(nn.GLOBAL_AVERAGE_POOL, [x], op)
    else:
        y = b.float_op(nn.REDUCE_MEAN, [x], op, axes=tuple(op.attr("axes")), keepdims=int(op.attr("keepdims")))
    finish(b, op, y)


def resize_bilinear(b: Builder, op: Operation) -> None:
    mode = ("align_corners" if op.attr("align_corners") else
            "half_pixel" if op.attr("half_pixel_centers") else "asymmetric")
    shape = op.operands[0].type.shape
    factors = tuple(float(f) for f in op.attr("factors") or ())
    if not factors and (shape is None or None in shape[2:]):
        raise UnsupportedOpError(f"{op.describe()}: Resize needs a static spatial input size, got "
                                 f"{op.operands[0].type}")
    y = b.float_op(nn.RESIZE, [b.dequantized(op.operands[0])], op, mode="linear",
                   coordinate_transformation_mode=mode,
                   scales=(1.0, 1.0, *(factors or (resize_scale(n, m) for n, m in zip(shape[2:], op.attr("sizes"))))))
    finish(b, op, y)


def resize_scale(size_in: int, size_out: int) -> float:
    """The float32 scale whose Resize output is ``size_out`` (``floor(size_in · scale)``) and whose
    coordinates are those ``sizes`` would give (``size_out / size_in``).

    Scales rather than ``sizes`` with ``axes``: the batch and channel dims are often dynamic, and
    ONNX Runtime 1.32's NHWC layout transformer breaks a Resize with ``axes`` (the session fails
    with "Number of elements of input 'sizes' (0) does not match the number of axes (2)")."""
    s = np.float32(size_out / size_in)
    while int(np.float32(size_in) * s) < size_out:   # one ulp up when the quotient rounded down
        s = np.nextafter(s, np.float32(np.inf))
    return float(s)


# LiteRT's nearest modes as ONNX modes that pick the same pixels in exact arithmetic:
#   floor(o · in/out),  floor((o + ½)/s - ½ + ½) = floor((o + ½) · in/out),  round(o · (in-1)/(out-1))
_NEAREST_AS_ONNX = {(False, False): ("asymmetric", "floor"), (False, True): ("half_pixel", "round_prefer_ceil"),
                    (True, False): ("align_corners", "round_prefer_ceil")}


def ort_nearest_indices(size_in: int, size_out: int, scale: float, cmode: str,
                        nearest_mode: str) -> np.ndarray | None:
    """The input index ONNX Runtime's CPU Resize copies per output index, for the modes of
    ``_NEAREST_AS_ONNX`` and the float32 ``scale`` of the model; None where it is not certain.

    ONNX Runtime forms each coordinate in float32 (``upsamplebase.h``: ``o / s``,
    ``(o + 0.5) / s - 0.5``, ``o · (in - 1) / (out - 1)``) and rounds it (``floor``, or
    ``std::round`` for round_prefer_ceil). But measured against ONNX Runtime 1.32 that float32
    formula is not a reliable model next to a rounding boundary: for 7 -> 2 rows, asymmetric,
    ``1 / float32(2/7)`` is 3.4999998 in float32, yet round_prefer_ceil copies row 4 (while
    19.499998 from 26 -> 28 goes to row 19). So the coordinate is computed in float64 (exact to
    far below a float32 ulp) and trusted when it is on a boundary exactly (2x upsampling: ``3 /
    2``) or at least 16 float32 ulps away from one; in between the result is uncertain and the
    caller copies with Gather instead (tests/backends/onnx/test_resize_nearest_export.py checks
    every certain claim against ONNX Runtime).
    """
    o = np.arange(size_out, dtype=np.float64)
    s = float(np.float32(scale))
    if cmode == "asymmetric":
        x = o / s
    elif cmode == "half_pixel":
        x = (o + 0.5) / s - 0.5
    elif size_out > 1:   # align_corners: from the lengths, not the scale
        x = o * (size_in - 1) / (size_out - 1)
    else:
        x = np.zeros(1)
    boundary = np.rint(x) if nearest_mode == "floor" else np.floor(x) + 0.5   # the nearest one: k, or k + 1/2
    gap = np.abs(x - boundary)
    if np.any((gap > 0) & (gap < 16 * np.spacing(np.abs(boundary).astype(np.float32)))):
        return None
    index = np.floor(x) if nearest_mode == "floor" else np.floor(x + 0.5)   # ties below 0 clamp to 0 anyway
    return np.clip(index, 0, size_in - 1).astype(np.int64)


def nearest(b: Builder, op: Operation, x: Value, out_t: TensorType) -> Value:
    """qnn.resize_nearest ``op`` on ``x``, of type ``out_t`` (float for QDQ, the stored integers
    for QOperator)."""
    # ONNX Runtime picks Resize's pixels in float32 arithmetic of its own, which can round an
    # index differently from LiteRT's where the exact coordinate is an integer or a half. Resize
    # is written when its indices are certain and equal LiteRT's on both axes; otherwise (and for
    # align_corners with half_pixel_centers, which no ONNX mode expresses) two Gathers with
    # LiteRT's index arrays copy the same pixels.
    shape = op.operands[0].type.shape
    r = op.results[0]
    flags = (bool(op.attr("align_corners")), bool(op.attr("half_pixel_centers")))
    if op.attr("factors") and flags in ((False, False), (False, True)):
        # power-of-two factors (quantize.ops.resize.dynamic_nearest_mode): ONNX Runtime's float32
        # coordinates o / f and (o + 1/2) / f - 1/2 are exact, so its mode picks LiteRT's pixels at every size
        modes = _NEAREST_AS_ONNX[flags]
        return b.emit(nn.RESIZE, [x], out_t, name=base_name(r), label=op.label or base_name(r), like=op,
                      mode="nearest", coordinate_transformation_mode=modes[0], nearest_mode=modes[1],
                      scales=(1.0, 1.0, *(float(f) for f in op.attr("factors"))))
    if shape is None or None in shape[2:]:
        raise UnsupportedOpError(f"{op.describe()}: Resize needs a static spatial input size, got "
                                 f"{op.operands[0].type}")
    sizes = [int(n) for n in op.attr("sizes")]
    litert = [resize_nearest_indices(n, m, align_corners=flags[0], half_pixel_centers=flags[1])
              for n, m in zip(shape[2:], sizes)]
    modes = _NEAREST_AS_ONNX.get(flags)
    if modes is not None:
        scales = [resize_scale(n, m) for n, m in zip(shape[2:], sizes)]
        ort = [ort_nearest_indices(n, m, s, *modes) for n, m, s in zip(shape[2:], sizes, scales)]
        if all(got is not None and np.array_equal(got, want) for got, want in zip(ort, litert)):
            return b.emit(nn.RESIZE, [x], out_t, name=base_name(r), label=op.label or base_name(r), like=op,
                          mode="nearest", coordinate_transformation_mode=modes[0], nearest_mode=modes[1],
                          scales=(1.0, 1.0, *scales))
    rows_t = out_t.clone(shape=(*r.type.shape[:3], shape[3]))
    rows = b.emit(nn.GATHER, [x, b.const(litert[0], f"{base_name(r)}_rows")], rows_t, name=f"{base_name(r)}_rows",
                  label=f"{op.label or base_name(r)}/rows", like=op, axis=2)
    return b.emit(nn.GATHER, [rows, b.const(litert[1], f"{base_name(r)}_cols")], out_t, name=base_name(r),
                  label=f"{op.label or base_name(r)}/cols", like=op, axis=3)


def resize_nearest(b: Builder, op: Operation) -> None:
    x, r = op.operands[0], op.results[0]
    b.quantize(r, nearest(b, op, dequantized_as(b, x, r), float_type(r.type)))


def softmax(b: Builder, op: Operation) -> None:
    x = b.dequantized(op.operands[0])
    beta = float(op.attr("beta"))
    if beta != 1.0:
        x = b.float_op(nn.MUL, [x, b.const(np.asarray(beta, np.float32), f"{base_name(op.results[0])}_beta")], op,
                       suffix="/beta")
    finish(b, op, b.float_op(nn.SOFTMAX, [x], op, axis=-1))


def clamp(b: Builder, op: Operation) -> None:
    """A standalone clamp: its activation on the dequantized input (a rescale when NONE)."""
    finish(b, op, b.dequantized(op.operands[0]))


def requantize(b: Builder, op: Operation) -> None:
    b.quantize(op.results[0], b.dequantized(op.operands[0]))


def data_movement(b: Builder, op: Operation) -> None:
    """An ``nn`` op moving stored integers: the same op on the dequantized operand.

    The stored integers keep their meaning under the *result's* parameters; when the operand's
    differ (a quantizer that did not couple them), the operand is dequantized with the
    result's so the float graph moves the same integers the interpreter does."""
    if not any(is_quantized(v) for v in (*op.operands, *op.results)):
        b.clone(op)
        return
    r = op.results[0]
    operands = [dequantized_as(b, v, r) if i == 0 else b.dequantized(v) for i, v in enumerate(op.operands)]
    types = [float_type(r.type) if is_quantized(r) else r.type for r in op.results]
    for old, r in zip(op.results, b.clone(op, operands=operands, result_types=types)):
        if is_quantized(old):   # the float result, quantized back: that QuantizeLinear is the source's version
            r.name_hint = base_name(old)
            b.quantize(old, r)


def dequantized_as(b: Builder, v: Value, r: Value) -> Value:
    """``v`` dequantized with the parameters of ``r``, the result of an op that copies stored integers:
    the float graph then moves the integers the interpreter moves even if a quantizer left the
    operand's parameters different."""
    if not (is_quantized(v) and is_quantized(r)) or same_params(v.type, r.type):
        return b.dequantized(v)
    return b.emit(nn.DEQUANTIZE_LINEAR, [b.value(v), b.scale(r), b.zero_point(r)], float_type(v.type),
                  name=f"{base_name(v)}__dq_as_{base_name(r)}", label=f"{base_name(v)}/dequantize",
                  like=r.op)


CONVERT = {
    qnn.CONV: conv,
    qnn.TRANSPOSE_CONV: transpose_conv,
    qnn.FULLY_CONNECTED: fully_connected,
    qnn.ADD: _float(nn.ADD),
    qnn.SUB: _float(nn.SUB),
    qnn.MUL: _float(nn.MUL),
    qnn.AVERAGE_POOL: _pool(nn.AVERAGE_POOL),
    qnn.MAX_POOL: _pool(nn.MAX_POOL),
    qnn.MEAN: mean,
    qnn.CONCAT: _float(nn.CONCAT, axis=lambda op: op.attr("axis")),
    qnn.PAD: _float(nn.PAD, pads=lambda op: op.attr("pads"), constant_value=lambda op: pad_constant(op)),
    qnn.RESIZE_BILINEAR: resize_bilinear,
    qnn.RESIZE_NEAREST: resize_nearest,
    qnn.SOFTMAX: softmax,
    qnn.LOGISTIC: _float(nn.UNARY["sigmoid"]),
    qnn.TANH: _float(nn.UNARY["tanh"]),
    qnn.HARD_SWISH: _float(nn.UNARY["hard_swish"]),
    qnn.GELU: _float(nn.UNARY["gelu"], approximate=lambda op: "tanh" if op.attr("approximate") else "none"),
    qnn.LEAKY_RELU: _float(nn.UNARY["leaky_relu"], alpha=lambda op: op.attr("alpha")),
    qnn.CLAMP: clamp,
    qnn.REQUANTIZE: requantize,
    qnn.REDUCE_SUM: _float(nn.REDUCE["sum"], axes=lambda op: tuple(op.attr("axes")),
                           keepdims=lambda op: int(op.attr("keepdims"))),
    qnn.L2_NORMALIZATION: _float(nn.LP_NORMALIZATION, axis=-1, p=2),
    qnn.LOG_SOFTMAX: _float(nn.LOG_SOFTMAX, axis=-1),
    qnn.RSQRT: rsqrt,
    qnn.SQUARED_DIFFERENCE: squared_difference,
    qnn.BATCH_MATMUL: batch_matmul,
    **{opdef: data_movement for opdef in qnn.DATA_MOVEMENT},
    **space_batch.QDQ,   # no ONNX op: Pad / Reshape / Transpose / Slice (space_batch.py)
    **select.QDQ,        # maximum, minimum, arg_max, shape and the comparisons (select.py)
    **recurrent.QDQ,     # unidirectional_lstm: LSTM (recurrent.py)
}

__all__ = ["CONVERT", "activation", "finish", "is_global_mean", "nearest", "ort_nearest_indices"]
