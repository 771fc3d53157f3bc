"""Converters of the layout-agnostic ops: they run on whichever form their input already has.

- element-wise (QUANTIZE, DEQUANTIZE, LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU, RELU*): the
  output keeps the input's layout;
- ADD / SUB / MUL: in the layout of their first non-constant full-rank operand; the other
  operand follows (constants are transposed at import time, a lower-rank operand is first
  given leading unit dims, as numpy broadcasting would);
- ops with an axis (CONCATENATION, MEAN, SUM, PAD, PADV2): TFLite axis ``a`` is IR axis
  ``perm[a]``; SOFTMAX, LOG_SOFTMAX and L2_NORMALIZATION read the last axis and so need a
  layout that keeps it last.
"""
from __future__ import annotations

import numpy as np

from ...backends.tflite.schema import ActivationFunctionType
from ...backends.tflite.schema import BuiltinOperator as OP
from ...errors import ModelFormatError, UnsupportedOpError
from ...ir import Value
from ...ir.dialects import nn, qnn, quant
from ...types import QuantizedType, UniformQuantizedType
from . import layout as L
from .importer import Converter, OpContext, fixed_point
from .tensors import is_quantized

__all__ = ["CONVERTERS"]


def _per_tensor_int8(v: Value, what: str) -> None:
    q = v.type.element_type
    if not isinstance(q, UniformQuantizedType) or q.storage_width not in (8, 16):
        raise UnsupportedOpError(f"the {what} must be int8 or int16 quantized per tensor, found {v.type}")


def quantize(ctx: OpContext) -> None:
    perm = ctx.native_or_identity(0)
    x = ctx.input(0, perm)
    y = ctx.result_type(perm)
    if not isinstance(y.element_type, QuantizedType) or y.element_type.storage_width not in (8, 16):
        raise UnsupportedOpError(f"QUANTIZE to {y} is not supported; quantir reads int8 and int16 outputs")
    if isinstance(x.type.element_type, QuantizedType):
        # int8/int16 -> int8/int16: a rescale with one fixed-point multiplier
        _per_tensor_int8(x, "input of a requantizing QUANTIZE")
        if not isinstance(y.element_type, UniformQuantizedType):
            raise UnsupportedOpError("a requantizing QUANTIZE with per-axis output parameters is not supported")
        ctx.emit(qnn.REQUANTIZE, [x], perm, y, **fixed_point(qnn.requantize_real_multiplier(x.type, y)))
    else:
        ctx.emit(quant.QCAST, [x], perm, y)


def dequantize(ctx: OpContext) -> None:
    perm = ctx.native_or_identity(0)
    x = ctx.input(0, perm)
    if not isinstance(x.type.element_type, QuantizedType):
        raise UnsupportedOpError(f"DEQUANTIZE of {x.type} is not supported; quantir reads int8 inputs")
    ctx.emit(quant.DCAST, [x], perm)


def _unary(opdef, options_attrs=lambda o: {}, **fixed) -> Converter:
    def convert(ctx: OpContext) -> None:
        perm = ctx.native_or_identity(0)
        ctx.emit(opdef, [ctx.input(0, perm)], perm, **fixed, **options_attrs(ctx.options))
    return convert


def softmax(ctx: OpContext) -> None:
    native = ctx.native_or_identity(0)
    perm = native if not native or native[-1] == len(native) - 1 else L.identity(len(native))
    ctx.emit(qnn.SOFTMAX, [ctx.input(0, perm)], perm, beta=ctx.options.beta)


def _on_last_axis(opdef) -> Converter:
    """L2_NORMALIZATION, LOG_SOFTMAX: like SOFTMAX, in a layout that keeps the last axis last."""
    def convert(ctx: OpContext) -> None:
        act = getattr(ctx.options, "fused_activation_function", ActivationFunctionType.NONE)
        if act != ActivationFunctionType.NONE:
            raise UnsupportedOpError(f"{ctx.op_name} with fused activation {act.name} is not supported (LiteRT's "
                                     f"int8 kernel refuses it)")
        native = ctx.native_or_identity(0)
        perm = native if not native or native[-1] == len(native) - 1 else L.identity(len(native))
        ctx.emit(opdef, [ctx.input(0, perm)], perm)
    return convert


def _operand(ctx: OpContext, i: int, perm: L.Perm) -> Value:
    """Input ``i`` broadcast-compatible with an output in layout ``perm``."""
    k, r = ctx.rank(i), len(perm)
    if k == r:
        return ctx.input(i, perm)
    if k > r:
        raise ModelFormatError(f"input {i} has rank {k}, more than the output's {r}")
    if L.is_identity(perm):
        return ctx.input(i, L.identity(k))   # numpy broadcasting aligns the trailing dims
    if ctx.is_const(i):
        return ctx.constant(i, perm, lead=r - k)
    x = ctx.helper(nn.UNSQUEEZE, [ctx.input(i, L.identity(k))], f"in{i}_rank{r}", axes=tuple(range(r - k)))
    return ctx.helper(nn.TRANSPOSE, [x], f"in{i}_{L.tag(perm)}", perm=L.transpose_perm(L.identity(r), perm))


def _pick_layout(ctx: OpContext, inputs, rank: int) -> L.Perm:
    """The native layout of the first non-constant input of full rank (the TFLite layout if none)."""
    for i in inputs:
        if ctx.has(i) and not ctx.is_const(i) and ctx.rank(i) == rank and ctx.native(i) is not None:
            return ctx.native(i)
    return L.identity(rank)


def _binary(opdef, fused: bool = True) -> Converter:
    """``fused``: the op's options carry a fused activation (SQUARED_DIFFERENCE's do not)."""
    def convert(ctx: OpContext) -> None:
        perm = _pick_layout(ctx, (0, 1), ctx.out_rank)
        operands = [_operand(ctx, 0, perm), _operand(ctx, 1, perm)]
        for i, v in enumerate(operands):   # e.g. a per-axis int32 bias wired into an ADD
            _per_tensor_int8(v, f"input {i} ('{ctx.imp.names[ctx.idx(i)]}') of {ctx.op_name}")
        attrs = {"activation": ctx.activation(ctx.options.fused_activation_function)} if fused else {}
        ctx.emit(opdef, operands, perm, **attrs)
    return convert


def concatenation(ctx: OpContext) -> None:
    o = ctx.options
    if o.fused_activation_function != ActivationFunctionType.NONE:
        raise UnsupportedOpError(f"CONCATENATION with fused activation {o.fused_activation_function.name} is not "
                                 f"supported (qnn.concat only copies)")
    r = ctx.out_rank
    inputs = range(len(ctx.op.inputs))
    for i in inputs:
        if ctx.rank(i) != r:
            raise ModelFormatError(f"input {i} has rank {ctx.rank(i)}, the output {r}")
    if not -r <= o.axis < r:
        raise ModelFormatError(f"axis {o.axis} is out of range for rank {r}")
    if not is_quantized(ctx.out_tensor):   # integers (the pieces of a run-time shape): nn.concat
        ctx.emit(nn.CONCAT, [ctx.input(i, L.identity(r)) for i in inputs], L.identity(r), axis=o.axis % r)
        return
    perm = _pick_layout(ctx, inputs, r)
    ctx.emit(qnn.CONCAT, [ctx.input(i, perm) for i in inputs], perm, axis=perm[o.axis % r])


def _axes(ctx: OpContext, i: int, rank: int, what: str) -> list[int]:
    axes = ctx.const_ints(i, what)
    if any(not -rank <= a < rank for a in axes):
        raise ModelFormatError(f"{what} {list(axes)} out of range for rank {rank}")
    return sorted({a % rank for a in axes})


def mean(ctx: OpContext, opdef=qnn.MEAN) -> None:   # SUM too
    perm = ctx.native_or_identity(0)
    axes = _axes(ctx, 1, len(perm), "axes")
    keep = ctx.options.keep_dims
    out_perm = perm if keep else L.drop_axes(perm, axes)
    ctx.emit(opdef, [ctx.input(0, perm)], out_perm, axes=sorted(perm[a] for a in axes), keepdims=int(keep))


def pad(ctx: OpContext) -> None:
    perm = ctx.native_or_identity(0)
    r = len(perm)
    widths = np.asarray(ctx.const(1, "paddings"))
    if widths.shape != (r, 2):
        raise ModelFormatError(f"paddings have shape {list(widths.shape)}, expected [{r}, 2]")
    if np.any(widths < 0):
        raise ModelFormatError(f"paddings {widths.tolist()} must be non-negative")
    value = _pad_value(ctx) if ctx.has(2) else None
    inv = L.inverse(perm)   # IR axis j holds TFLite axis inv[j]
    pads = [int(widths[inv[j], 0]) for j in range(r)] + [int(widths[inv[j], 1]) for j in range(r)]
    extra = {} if value is None else {"value": value}
    ctx.emit(qnn.PAD, [ctx.input(0, perm)], perm, pads=pads, **extra)


def _pad_value(ctx: OpContext) -> int | None:
    """PADV2's constant_values as ``qnn.pad``'s stored ``value`` (None: the zero point, a plain PAD).

    LiteRT requires the constant to be quantized like the output, and so does this import."""
    t, out = ctx.tensor(2), ctx.out_tensor
    value = ctx.const(2, "constant_values").reshape(-1)
    q, q_out = t.quantization, out.quantization
    same_params = q is not None and q_out is not None and q.scale == q_out.scale and q.zero_point == q_out.zero_point
    if value.size != 1 or not same_params:
        raise UnsupportedOpError(f"PADV2 with constant_values {value.tolist()} (quantization "
                                 f"{q and (q.scale, q.zero_point)}) is not supported: the constant must be one "
                                 f"value quantized like the output ({q_out and (q_out.scale, q_out.zero_point)})")
    return None if int(value[0]) == q_out.zero_point[0] else int(value[0])


def batch_matmul(ctx: OpContext) -> None:
    """BATCH_MATMUL reads its operands' last two dims: both in their own (IR) layout."""
    a, b = (ctx.input(i, L.identity(ctx.rank(i))) for i in (0, 1))
    ctx.emit(qnn.BATCH_MATMUL, [a, b], L.identity(max(ctx.rank(0), ctx.rank(1))),
             adj_x=bool(ctx.options.adj_x), adj_y=bool(ctx.options.adj_y))


def _leaky(o) -> dict:
    return {"alpha": o.alpha}


CONVERTERS: dict[OP, Converter] = {
    OP.QUANTIZE: quantize,
    OP.DEQUANTIZE: dequantize,
    OP.LOGISTIC: _unary(qnn.LOGISTIC),
    OP.TANH: _unary(qnn.TANH),
    OP.RSQRT: _unary(qnn.RSQRT),
    OP.BATCH_MATMUL: batch_matmul,
    OP.HARD_SWISH: _unary(qnn.HARD_SWISH),
    OP.GELU: _unary(qnn.GELU, lambda o: {"approximate": bool(o.approximate)}),
    OP.LEAKY_RELU: _unary(qnn.LEAKY_RELU, _leaky),
    OP.RELU: _unary(qnn.CLAMP, activation="RELU"),
    OP.RELU6: _unary(qnn.CLAMP, activation="RELU6"),
    OP.RELU_N1_TO_1: _unary(qnn.CLAMP, activation="RELU_N1_TO_1"),
    OP.SOFTMAX: softmax,
    OP.ADD: _binary(qnn.ADD),
    OP.SUB: _binary(qnn.SUB),
    OP.MUL: _binary(qnn.MUL),
    OP.SQUARED_DIFFERENCE: _binary(qnn.SQUARED_DIFFERENCE, fused=False),
    OP.CONCATENATION: concatenation,
    OP.MEAN: mean,
    OP.SUM: lambda ctx: mean(ctx, qnn.REDUCE_SUM),
    OP.L2_NORMALIZATION: _on_last_axis(qnn.L2_NORMALIZATION),
    OP.LOG_SOFTMAX: _on_last_axis(qnn.LOG_SOFTMAX),
    OP.PAD: pad,
    OP.PADV2: pad,
}
