"""Transposed convolution: LiteRT TRANSPOSE_CONV.

int8 activations per tensor, int8 weights symmetric per output channel, int32 bias with scale
input × weight (the bias input exists since TFLite schema version 3; the reference kernel adds
it before requantizing), one fixed-point multiply per channel — the arithmetic of CONV_2D
(docs/numerics.md §2.24). The fused activation (TransposeConvOptions, schema version 4) takes a
following Relu/Clip.

ONNX ``ConvTranspose`` has explicit pads, ``output_padding`` and groups; TFLite has SAME/VALID
and one group. A 2-D ConvTranspose with one group and no dilation is exactly TRANSPOSE_CONV when
its begin pads and output size are what TFLite's rule gives for one of SAME/VALID (the rule
depends only on ``kernel + output_padding − pads``, not on the input size, so dynamic sizes
are fine); anything else stays float with the reason. Paddle exports put the bias in a
separate ``Add`` of a ``[1, C, 1, 1]`` constant: that form is matched too.

QOperator: ONNX Runtime (1.32) has no QLinearConvTranspose in the default or ``com.microsoft``
domain (only in its internal NHWC layout domain, which models cannot use), so the QOperator
export writes QLinearConv forms of it (``backends/onnx/qoperator.py``: ``transpose_conv``).

The qnn op keeps the weights output channel first, ``[C_out, C_in, KH, KW]`` (TFLite's OHWI in
NCHW order; ONNX stores ``[C_in, C_out, KH, KW]``), and the output size as
``stride·(in − 1) + kernel + adjust``.

16x8 (``int16=True``): int16 input and output with zero point 0, int8 weights. The bias stays int32
(quantir's quantized types stop at 32 bits), so the exporter writes ``quantized_bias_type`` INT32 and
LiteRT accumulates in int32, as for FULLY_CONNECTED; the interpreter refuses an accumulator that
could overflow it (docs/numerics.md §2.25).
"""
from __future__ import annotations

import numpy as np

from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...ir.dialects.nn_conv import conv_transpose_geometry
from ...rewrite import Match, Pat
from ...runtime.kernels import qnn_ops
from ...runtime.qkernels.transpose_conv import prepare_transpose_conv, transpose_conv
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer, fixed_point
from ..regions import QuantizerPattern, Region, clip_fusable, rank, with_activation
from ..rules import ACT, ANY, BIAS, WEIGHT, OpSpec, QuantizedOp
from ..views import qparams_of
from .conv import finest_conv_output_scale, check_conv_requantization
from .registry import QuantOp, SolverRules, declare

# -- patterns ---------------------------------------------------------------------------------------

_CT = Pat.op(nn.CONV_TRANSPOSE, Pat.any("x"), Pat.const("w"), Pat.const("b").optional(), name="op")
# ConvTranspose + a constant per-channel Add (Paddle's exported bias), in either operand order
_CT_BIAS = Pat.alt(Pat.op(nn.ADD, _CT.one_use(), Pat.const("bias_add_c"), name="bias_add"),
                   Pat.op(nn.ADD, Pat.const("bias_add_c"), _CT.one_use(), name="bias_add"))


def tflite_geometry(op: Operation) -> tuple[dict | None, str | None]:
    """``({"strides", "adjust", "padding"}, None)`` when the 2-D ConvTranspose ``op`` is a
    TRANSPOSE_CONV, else ``(None, why not)``."""
    w_shape = op.operands[1].type.shape
    kernel = tuple(w_shape[2:])
    attrs = {k: op.attr(k) for k in ("strides", "dilations", "pads", "auto_pad", "output_padding", "output_shape")}
    if (op.attr("group") or 1) != 1:
        return None, f"group {op.attr('group')}: TFLite TRANSPOSE_CONV has no groups"
    if any(d != 1 for d in (attrs["dilations"] or ())):
        return None, f"dilations {tuple(attrs['dilations'])}: TFLite TRANSPOSE_CONV has no dilation"
    if op.attr("kernel_shape") and tuple(op.attr("kernel_shape")) != kernel:
        return None, f"kernel_shape {tuple(op.attr('kernel_shape'))} differs from the weights' {kernel}"
    spatial = op.operands[0].type.shape[2:]
    if attrs["output_shape"] and None in spatial:
        return None, "output_shape with a dynamic input size: the pads follow the run-time size"
    # the rule below does not depend on the input size: any size stands in for a dynamic one
    sizes = tuple(16 if d is None else d for d in spatial)
    out, begin, end = conv_transpose_geometry(sizes, kernel, attrs)
    strides = tuple(attrs["strides"] or (1, 1))
    adjust = tuple(o - (s * (i - 1) + k) for o, s, i, k in zip(out, strides, sizes, kernel))
    # VALID: no begin pad and 0 <= adjust < s; SAME: begin = max(-adjust, 0) // 2 and 0 < k + adjust <= s
    # (the forward conv of the output size must give back the input size: LiteRT's Prepare checks it)
    for padding in ("VALID", "SAME"):
        if padding == "VALID":
            fits = all(b == 0 and 0 <= a < s for b, a, s in zip(begin, adjust, strides))
        else:
            fits = all(b == max(-a, 0) // 2 and 0 < k + a <= s for b, a, s, k in zip(begin, adjust, strides, kernel))
        if fits:
            return {"strides": strides, "adjust": adjust, "padding": padding}, None
    return None, (f"pads {tuple(begin) + tuple(end)} with output_padding {tuple(attrs['output_padding'] or (0, 0))} "
                  f"(kernel {kernel}, strides {strides}) are neither TFLite's SAME nor VALID for TRANSPOSE_CONV")


def _check(m: Match) -> str | None:
    w = m.consts["w"]
    if w.ndim != 4:
        return f"only 2-D transposed convolutions are quantized ({w.ndim - 2}-D found)"
    if rank(m["x"]) != 4:
        return "the input must be a 4-D NCHW tensor"
    _, reason = tflite_geometry(m.ops["op"])
    if reason:
        return reason
    c = m.consts.get("bias_add_c")
    if c is not None and not _per_channel(c, w.shape[1]):
        return f"the Add after ConvTranspose has a constant of shape {list(c.shape)}, not one value per channel"
    return clip_fusable(m)


def _per_channel(c: np.ndarray, channels: int) -> bool:
    """A constant that broadcasts over an NCHW result as one value per channel (or one value)."""
    if c.size == 1:
        return True
    return c.ndim in (3, 4) and c.shape[-3] == channels and c.size == channels


def added_bias(region: Region) -> np.ndarray | None:
    """The per-channel values of a bias Add after the ConvTranspose, or None."""
    c = region.match.consts.get("bias_add_c")
    if c is None:
        return None
    return np.asarray(c, np.float32).reshape(-1)


# -- lowering -----------------------------------------------------------------------------------------

def lower_transpose_conv(lw: Lowerer, r: Region) -> Value:
    ct = r.match.ops["op"]
    x = lw.input(r.match["x"])
    w_arr, wp = lw.weight_params(r, x)      # [C_out, C_in, KH, KW]
    w = lw.weights(w_arr, wp)
    b = lw.bias(wp.bias, x, w, w_arr.shape[0])
    y_t = lw.out_type(r)
    geometry, _ = tflite_geometry(ct)
    op = qnn.TRANSPOSE_CONV.build([x, w] + ([b] if b is not None else []), [y_t], activation=r.activation,
                                  **geometry, **fixed_point(qnn.conv_real_multipliers(x.type, w.type, y_t)))
    return lw.emit(op, ct).result


# -- interpreter binding, spec view -------------------------------------------------------------------

def output_hw(op: Operation, x_hw, kernel_hw) -> tuple[int, int]:
    return tuple(s * (i - 1) + k + a for s, i, k, a in  # type: ignore[return-value]
                 zip(op.attr("strides"), x_hw, kernel_hw, op.attr("adjust")))


def transpose_conv_kernel(op: Operation, x, w, b=None):
    xv, wv, y = op.operands[0], op.operands[1], op.results[0]
    channels = w.shape[0]
    # 16x8: the IR's bias is int32, which the kernel takes as LiteRT's quantized_bias_type INT32 (the
    # exporter writes it); without a bias LiteRT's accumulator is int64, and so is the kernel's
    wide = dict(storage=np.int16, input_zero_point=qnn_ops.zero_point_of(xv)) if x.dtype == np.int16 else {}
    p = qnn_ops.prepare_once(op, lambda: prepare_transpose_conv(
        qnn_ops.scale_of(xv), np.atleast_1d(qnn.scales_of(wv.type)), qnn_ops.scale_of(y), qnn_ops.zero_point_of(y),
        qnn_ops.activation_of(op), channels=channels, **wide), key=channels)
    return transpose_conv(x, w, b, input_zero_point=qnn_ops.zero_point_of(xv), strides=tuple(op.attr("strides")),
                          output_hw=output_hw(op, x.shape[2:], w.shape[2:]), padding=op.attr("padding").lower(),
                          **p.as_kwargs())


def transpose_conv_view(op: Operation) -> QuantizedOp:
    """TFLite's input order: output_shape (int32), weights OHWI, input, bias."""
    inputs = (None, qparams_of(op.operands[1], {0: 0, 1: 3, 2: 1, 3: 2}), qparams_of(op.operands[0]),
              *(qparams_of(v) for v in op.operands[2:]))
    return QuantizedOp("TRANSPOSE_CONV", op.label or op.name, inputs, tuple(qparams_of(r) for r in op.results))


TRANSPOSE_CONV = declare(QuantOp(
    qnn.TRANSPOSE_CONV, OP.TRANSPOSE_CONV, OpSpec((ANY, WEIGHT(0), ACT, BIAS), ACT),
    patterns=(QuantizerPattern("conv_transpose_bias", with_activation(_CT_BIAS), lower_transpose_conv, check=_check,
                               weighted=True, priority=-1,
                               doc="ConvTranspose + constant per-channel Add (+Relu/Relu6/Clip)"),
              QuantizerPattern("conv_transpose", with_activation(_CT), lower_transpose_conv, check=_check,
                               weighted=True, doc="ConvTranspose (+bias) (+Relu/Relu6/Clip), SAME/VALID-shaped")),
    kernel=transpose_conv_kernel, int16=True,
    view=transpose_conv_view,
    solver=SolverRules(degenerate_floor=finest_conv_output_scale, check_weights=check_conv_requantization),
    qdq_ops=(nn.CONV_TRANSPOSE,),
    doc="2-D transposed convolution, per-channel int8 weights"))
