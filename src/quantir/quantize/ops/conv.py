"""Convolutions and fully-connected layers: LiteRT CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED.

int8 activations per tensor, int8 weights symmetric per output channel (narrow range), int32
bias with scale input × weight; the requantization is one fixed-point multiply per channel
(the ``multiplier``/``shift`` attributes). The solver's weight parameters (``params``) give
the scales and the bias-corrected float bias.

All three have LiteRT's 16x8 path (int16 activations, zero point 0; ``int16=True``). The IR
keeps the bias in int32 (quant types stop at 32 bits); a 16x8 conv's is LiteRT's int64 bias
(written so, int64 accumulator and 64-bit MBQM: DEPTHWISE_CONV_2D takes no other), a 16x8
FULLY_CONNECTED's stays int32 with ``quantized_bias_type`` INT32.
"""
from __future__ import annotations

import numpy as np

from ...errors import CalibrationError, quote_name
from ...ir import Operation, Value
from ...ir.dialects import nn, qnn
from ...numerics import conv_multiplier, quantize_multipliers
from ...rewrite import Match, Pat
from ...runtime.kernels import qnn_ops
from ..builtins import BuiltinOperator as OP
from ..views import qparams_of
from ..lower import Lowerer, fixed_point
from ..params import ActParams, WeightParams, region_weights
from ..regions import (QuantizerPattern, Region, clip_fusable, dynamic_padding_reason, lowered_window, rank,
                       with_activation)
from ..rules import ACT, BIAS, WEIGHT, OpSpec, QuantizedOp
from .registry import QuantOp, SolverRules, declare


# -- patterns ---------------------------------------------------------------------------------------

_CONV_OP = Pat.op(nn.CONV, Pat.any("x"), Pat.const("w"), Pat.const("b").optional(), name="op")
# Conv + a constant per-channel Add (Paddle writes a conv's bias so), in either operand order: one
# CONV_2D whose int32 bias holds both, rather than an int8 conv output then an int8 ADD of the
# bias quantized per tensor (on PP-OCRv6 tiny rec each such Add cost about 3 dB of SQNR)
_CONV = Pat.alt(Pat.op(nn.ADD, _CONV_OP.one_use(), Pat.const("bias_add_c"), name="bias_add"),
                Pat.op(nn.ADD, Pat.const("bias_add_c"), _CONV_OP.one_use(), name="bias_add"), _CONV_OP)
_GEMM = Pat.op(nn.GEMM, Pat.any("x"), Pat.const("w"), Pat.const("b").optional(), name="op")
_MATMUL = Pat.op(nn.MATMUL, Pat.any("x"), Pat.const("w"), name="op")
# MatMul + constant bias Add (PyTorch's Linear exported without Gemm), in either operand order
_MATMUL_BIAS = Pat.alt(Pat.op(nn.ADD, _MATMUL.one_use(), Pat.const("b"), name="bias_add"),
                       Pat.op(nn.ADD, Pat.const("b"), _MATMUL.one_use(), name="bias_add"))


def _check_conv(m: Match) -> str | None:
    w = m.consts["w"]
    if w.ndim != 4:
        return f"only 2-D convolutions are quantized ({w.ndim - 2}-D found)"
    if rank(m["x"]) != 4:
        return "the input must be a 4-D NCHW tensor"
    c = m.consts.get("bias_add_c")
    if c is not None and not per_channel_constant(c, w.shape[0]):
        return f"the Add after the Conv has a constant of shape {list(c.shape)}, not one value per output channel"
    return dynamic_padding_reason(m.ops["op"], w.shape[2:]) or clip_fusable(m)


def per_channel_constant(c: np.ndarray, channels: int) -> bool:
    """A constant that broadcasts over an NCHW result as one value per channel (or one value)."""
    return c.size == 1 or (c.ndim in (3, 4) and c.shape[-3] == channels and c.size == channels)


def _check_gemm(m: Match) -> str | None:
    op = m.ops["op"]
    if op.opdef is nn.GEMM:
        if op.attr("trans_a"):
            return "Gemm with transA=1 is not a fully-connected layer"
        if rank(m["x"]) != 2:
            return "Gemm input must be 2-D"
        b = m.consts.get("b")
        w = m.consts["w"]
        channels = w.shape[0] if op.attr("trans_b") else w.shape[1]
        if b is not None and b.size not in (1, channels):
            return f"Gemm bias of shape {b.shape} is not per output channel"
    elif m.consts["w"].ndim != 2:
        return "MatMul weights must be a 2-D constant"
    return clip_fusable(m)


# -- lowerings ---------------------------------------------------------------------------------------

def _weighted(lw: Lowerer, r: Region):
    """The integer input, int8 weights and int32 bias (or None) of a conv/FC region, its weights
    as floats (output channel first) and its output type."""
    x = lw.input(r.match["x"])
    w_arr, wp = lw.weight_params(r, x)
    w = lw.weights(w_arr, wp)
    b = lw.bias(wp.bias, x, w, w_arr.shape[0])
    return [x, w] + ([b] if b is not None else []), w_arr, lw.out_type(r)


def lower_conv(lw: Lowerer, r: Region) -> Value:
    conv = r.match.ops["op"]
    operands, w_arr, y_t = _weighted(lw, r)
    x, w = operands[:2]
    attrs = lowered_window(conv, w_arr.shape[2:])
    op = qnn.CONV.build(operands, [y_t], group=conv.attr("group") or 1, activation=r.activation, **attrs,
                        **fixed_point(qnn.conv_real_multipliers(x.type, w.type, y_t)))
    return lw.emit(op, conv).result


def lower_fc(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    operands, _, y_t = _weighted(lw, r)
    x, w = operands[:2]
    new = qnn.FULLY_CONNECTED.build(operands, [y_t], activation=r.activation,
                                    **fixed_point(qnn.fc_real_multipliers(x.type, w.type, y_t)))
    return lw.emit(new, op).result


# -- the solver's rules: what LiteRT's conv kernel cannot requantize -----------------------------------

_MARGIN = 1.0 + 2.0 ** -10   # float32 rounding of the scale must not land back on the limit


def _worst_accumulators(region: Region, s_in: float, wp: WeightParams, channels: np.ndarray | None = None,
                        steps: float = 255.0) -> np.ndarray:
    """Per output channel (or those in ``channels``), the largest ``|acc|`` the int8 weights and
    bias allow: every input at ``steps`` from its zero point (255 for int8, 65535 for int16), with
    each weight's sign."""
    w, _ = region_weights(region)
    scales = np.broadcast_to(np.asarray(wp.scale, np.float64).reshape(-1), (w.shape[0],))
    rows = np.arange(w.shape[0]) if channels is None else channels
    worst = np.empty(len(rows))
    for i, c in enumerate(rows):
        w_steps = np.minimum(np.rint(np.abs(w[c].astype(np.float64)) / scales[c]), 127.0).sum()
        b_steps = 0.0 if wp.bias is None else abs(float(wp.bias[c])) / (np.float64(s_in) * scales[c])
        worst[i] = steps * w_steps + b_steps
    return worst


def finest_conv_output_scale(region: Region, s_in: float, wp: WeightParams) -> float:
    """The smallest output scale for which no channel's ``worst acc · 2**shift`` overflows int32
    (``2**shift <= 2·m``). Used only for a degenerate (zero) output range: it carries no value to
    keep, and the kernel cannot go finer; a real range is never widened (see below)."""
    scales = np.asarray(wp.scale, np.float64).reshape(-1)
    need = np.float64(s_in) * scales * 2.0 * _worst_accumulators(region, s_in, wp) / (2.0 ** 31 - 1)
    return float(need.max(initial=0.0)) * _MARGIN


def check_conv_requantization(region: Region, s_in: float, wp: WeightParams, out: ActParams) -> None:
    """Refuse a conv whose requantization LiteRT cannot compute: a channel multiplier
    ``m = s_in · s_w / s_out`` above 1 is applied as ``acc · 2**shift`` in int32 (double-rounding
    MBQM), undefined behaviour once that overflows.

    With a real output range it takes weights out of all proportion to it (a clipped output of
    [0, 6] after weights of 1e9): every non-zero accumulator saturates. Widening the output range
    (per tensor) would zero every other channel, and LiteRT's converter would emit the overflow
    silently; so the layer is named with its numbers, and the user fixes the weights or keeps the
    layer float. Only channels with ``m > 1`` (none in ordinary models) are looked at, with the
    worst accumulator their int8 weights and bias allow. A 16x8 output (int64 accumulator) is
    requantized by the 64-bit MBQM instead: its shift must stay at most 7 and ``acc·m`` within int32.
    """
    wide = out.bits == 16
    scales = np.broadcast_to(np.asarray(wp.scale, np.float32).reshape(-1), (region_weights(region)[0].shape[0],))
    m = np.asarray(conv_multiplier(np.float32(s_in), scales, np.float32(out.scale)), np.float64)
    if not np.any(m > 1.0):
        return
    _, shift = quantize_multipliers(m)
    flagged = np.flatnonzero(shift > 0)
    worst = _worst_accumulators(region, s_in, wp, flagged, 65535.0 if wide else 255.0)
    if wide:
        over = (shift[flagged] > 7) | (worst * m[flagged] > 2.0 ** 31 - 1)
    else:
        over = worst * 2.0 ** shift[flagged].astype(np.float64) > 2.0 ** 31 - 1
    if not over.any():
        return
    i = int(np.argmax(over))
    c, acc = int(flagged[i]), float(worst[i])
    w_max = float(np.abs(region_weights(region)[0][c]).max(initial=0.0))
    raise CalibrationError(
        f"conv {quote_name(region.label)}: output channel {c} cannot be requantized in int32: its multiplier "
        f"input scale × weight scale / output scale = {s_in:.4g} × {float(scales[c]):.4g} / {out.scale:.4g} "
        f"= {m[c]:.4g} shifts the accumulator left by {int(shift[c])} bits, which overflows "
        f"{'the 16x8 kernel' if wide else 'int32 (undefined behaviour in LiteRT)'} for accumulators up to "
        f"{acc:.4g}; its weights (|w| up to {w_max:.4g}) are out "
        f"of proportion with the output range [{out.rmin:.4g}, {out.rmax:.4g}]. Check this layer's weights, or "
        f"keep it float with --exclude {quote_name(region.label)}")


# -- the spec view: weight axes in TFLite's layout -------------------------------------------------------

def _is_depthwise(op: Operation) -> bool:
    w = op.operands[1].type
    x = op.operands[0].type
    return (w.is_ranked and x.is_ranked and w.shape[1] == 1 and (op.attr("group") or 1) == x.shape[1]
            and x.shape[1] not in (None, 1))


def conv_view(op: Operation) -> QuantizedOp:
    """IR OIHW -> TFLite OHWI (conv) or [1, KH, KW, C] (depthwise): axes reported in TFLite's terms."""
    depthwise = _is_depthwise(op)
    kind = "DEPTHWISE_CONV_2D" if depthwise else "CONV_2D"
    axis_map = {0: 3, 1: 0, 2: 1, 3: 2} if depthwise else {0: 0, 1: 3, 2: 1, 3: 2}
    inputs = [qparams_of(op.operands[0]), qparams_of(op.operands[1], axis_map)]
    inputs += [qparams_of(v) for v in op.operands[2:]]
    return QuantizedOp(kind, op.label or op.name, tuple(inputs), tuple(qparams_of(r) for r in op.results))


# -- the declarations ----------------------------------------------------------------------------------

CONV = declare(QuantOp(
    qnn.CONV, OP.CONV_2D, OpSpec((ACT, WEIGHT(0), BIAS), ACT),
    patterns=(QuantizerPattern("conv", with_activation(_CONV), lower_conv, check=_check_conv, weighted=True,
                               doc="Conv (+bias) (+per-channel bias Add) (+Relu/Relu6/Clip); depthwise when "
                                   "group == C_in"),),
    kernel=qnn_ops.conv, int16=True,
    rows={OP.DEPTHWISE_CONV_2D: OpSpec((ACT, WEIGHT(3), BIAS), ACT)},
    view=conv_view,
    solver=SolverRules(degenerate_floor=finest_conv_output_scale, check_weights=check_conv_requantization),
    qdq_ops=(nn.CONV,),
    doc="2-D convolution, grouped and depthwise, per-channel int8 weights"))

FULLY_CONNECTED = declare(QuantOp(
    qnn.FULLY_CONNECTED, OP.FULLY_CONNECTED, OpSpec((ACT, WEIGHT(0), BIAS), ACT),
    patterns=(QuantizerPattern("matmul_bias", with_activation(_MATMUL_BIAS), lower_fc, check=_check_gemm,
                               weighted=True, doc="MatMul with constant weights + constant bias Add (+activation)"),
              QuantizerPattern("gemm", with_activation(Pat.alt(_GEMM, _MATMUL)), lower_fc, check=_check_gemm,
                               weighted=True, doc="Gemm or MatMul with constant weights (+activation)")),
    kernel=qnn_ops.fully_connected, int16=True,
    qdq_ops=(nn.GEMM, nn.MATMUL),
    doc="fully-connected over the last dim"))
