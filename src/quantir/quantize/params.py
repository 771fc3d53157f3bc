"""The quantization parameters model: what the solver decides and the lowering consumes.

``ActParams`` are an activation tensor's int8 per-tensor parameters; ``WeightParams`` how the
constant operands of a conv/FC become integers (symmetric int8 weight scales per output channel,
and the float bias to quantize after bias correction). The weight math that both the solver and
the lowering need lives here: a region's weights in output-channel-first order, their scales,
the int8 values, and the expected outputs bias correction compares.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..ir import Value
from ..ir.dialects import nn
from ..ir.dialects.nn_conv import conv_transpose_geometry
from ..numerics import asymmetric_qparams, quantize_weights, symmetric_activation_qparams, symmetric_weight_qparams
from ..types import FloatType, IntegerType, TensorType, Type, UniformQuantizedType
from .regions import Region, conv_window

I8, F32 = IntegerType(8), FloatType("f32")


@dataclass(frozen=True)
class ActParams:
    """Per-tensor parameters of one activation tensor: int8 (asymmetric), or int16 (``bits=16``:
    LiteRT's 16x8 mode, symmetric with zero point 0)."""

    scale: float          # a float32 value
    zero_point: int
    fixed: bool = False   # imposed by the op (softmax ...), not calibrated
    rmin: float = 0.0     # the range they came from
    rmax: float = 0.0
    bits: int = 8         # storage width: 8 or 16


def range_params(lo: float, hi: float, bits: int = 8) -> tuple[float, int]:
    """(scale, zero point) of a calibrated range: int8 asymmetric (real 0 exact), or int16
    symmetric, ``amax / 32767`` with zero point 0. A zero range gets the int8 scale's 1/256, the
    same resolution for nothing to resolve (LiteRT's helper gives it a zero scale)."""
    if bits == 8:
        scale, zp = asymmetric_qparams(lo, hi)
        return float(scale), int(zp)
    if max(abs(lo), abs(hi)) > 0.0:
        return float(symmetric_activation_qparams(lo, hi, bits=16)[0]), 0
    return float(np.float32(asymmetric_qparams(lo, hi)[0] / np.float32(256.0))), 0


def region_bits(region: Region, activations: str) -> int:
    """The activation width ``region`` computes in: 16 under ``Config(activations="int16")`` where
    its declaration has a 16x8 kernel (``QuantOp.int16``), else 8."""
    return 16 if activations == "int16" and region.pattern.op.int16 and not clips_by_range(region) else 8


def clips_by_range(region: Region) -> bool:
    """Does ``region`` absorb a Clip that no fused activation expresses (Clip(-1, 2), say), leaving
    it to int8's asymmetric range, which saturates at both bounds? int16's symmetric range
    [-amax, amax] would let the values below the lower bound through. (A Clip(0, hi) is a RELU and
    the range's end: ``Region.activation``.)"""
    act = region.match.ops.get("act")
    return act is not None and act.opdef is nn.CLIP and region.activation == "NONE"


def at_width(params: ActParams, bits: int) -> ActParams:
    """``params`` re-derived for another storage width from the same range (an op with no int16
    kernel reads an int16 tensor through a requantize to int8, and the reverse)."""
    if params.bits == bits:
        return params
    scale, zp = range_params(params.rmin, params.rmax, bits)
    return ActParams(scale, zp, False, params.rmin, params.rmax, bits)


@dataclass(frozen=True, eq=False)
class WeightParams:
    """How the constant operands of one conv/FC become integers.

    ``scale``: float32 weight scales, shape ``(C_out,)`` per channel or ``()`` per tensor.
    ``bias``: float32 ``(C_out,)``, the bias to quantize (scale input × weight): the model's
    bias minus ``correction`` (None when the op has neither). ``correction``: float64
    ``(C_out,)``, the mean output error removed (see the module notes), or None.
    ``quantized``: the int8 weights (int64 array, output channel first) when already computed.
    """

    scale: np.ndarray
    bias: np.ndarray | None
    correction: np.ndarray | None = None
    quantized: np.ndarray | None = None


Params = Mapping[Value, "ActParams | WeightParams"]


def act_type(params: ActParams, like: Type) -> TensorType:
    """The int8 (int16) tensor type of an activation with ``params``, shaped like ``like``."""
    storage = I8 if params.bits == 8 else IntegerType(params.bits)
    q = UniformQuantizedType(storage_type=storage, expressed_type=F32, scale=params.scale, zero_point=params.zero_point)
    return TensorType(like.shape, q)


# -- weights ------------------------------------------------------------------------------------

def region_weights(region: Region) -> tuple[np.ndarray, np.ndarray | None]:
    """A conv/FC region's weights, output channel first, and its bias per output channel.

    Conv: ``(C_out, C_in / group, kh, kw)`` as stored. Gemm/MatMul: ``(C_out, K)``, with
    Gemm's ``transB``, ``alpha`` and ``beta`` applied. Bias: float32 ``(C_out,)`` or None.
    """
    w = np.asarray(region.match.consts["w"], np.float32)
    b = region.match.consts.get("b")
    if region.pattern.name.startswith("conv_transpose"):   # ONNX (C_in, C_out, kh, kw)
        w = np.ascontiguousarray(w.transpose(1, 0, 2, 3))
    elif region.pattern.name != "conv":
        op = region.match.ops["op"]
        if op.opdef is nn.GEMM:
            w = w if op.attr("trans_b") else w.T
            if op.attr("alpha") != 1.0:   # (no copy of a large FC weight for the usual alpha = 1)
                w = w * np.float32(op.attr("alpha"))
            if b is not None:
                b = np.asarray(b, np.float32) * np.float32(op.attr("beta"))
        else:
            w = w.T
        w = np.ascontiguousarray(w)
    added = region.match.consts.get("bias_add_c")   # a conv's or transposed conv's bias written as an Add
    if added is not None:
        added = np.broadcast_to(np.asarray(added, np.float32).reshape(-1), (w.shape[0],))
        b = added if b is None else np.broadcast_to(np.asarray(b, np.float32).reshape(-1), (w.shape[0],)) + added
    if b is not None:
        b = np.broadcast_to(np.asarray(b, np.float32).reshape(-1), (w.shape[0],)).copy()
    return w, b


def weight_params(w: np.ndarray, b: np.ndarray | None, input_scale: float, per_channel: bool,
                  correction: np.ndarray | None = None) -> WeightParams:
    """Symmetric int8 weight scales (raised so that ``|b| / (s_in · s_w) <= 2^30``) and the bias.

    A near-zero weight channel would otherwise get a tiny scale (the 1e-6 floor), a bias of
    billions of steps and an accumulator that overflows int32. ``correction`` is subtracted
    from the bias (a bias of zeros when the op has none).
    """
    axis = 0 if per_channel else None
    scale, _ = symmetric_weight_qparams(w, axis=axis)
    if b is not None:
        need = np.abs(np.asarray(b, np.float64)) / (np.float64(input_scale) * 2.0 ** 30)
        need = need if axis == 0 else need.max(initial=0.0)
        scale = np.maximum(np.asarray(scale, np.float64), need).astype(np.float32)
    return corrected(WeightParams(np.asarray(scale, np.float32), b), correction)


def corrected(wp: WeightParams, correction: np.ndarray | None, quantized: np.ndarray | None = None) -> WeightParams:
    """``wp`` with ``correction`` subtracted from its bias (the model's, or zeros)."""
    if correction is None:
        return wp
    base = np.zeros(correction.shape) if wp.bias is None else np.asarray(wp.bias, np.float64)
    return WeightParams(wp.scale, (base - correction).astype(np.float32), correction, quantized)


# Weights are quantized and compared with float in blocks of output channels of about this many
# elements: quantize_weights works in float64 with a few temporaries, so a whole VGG classifier
# (25088 x 4096) at once would take gigabytes. Results are the same element for element.
_BLOCK_ELEMENTS = 1 << 22


def _row_blocks(w: np.ndarray):
    rows = max(1, _BLOCK_ELEMENTS // max(1, int(np.prod(w.shape[1:], dtype=np.int64))))
    for i in range(0, w.shape[0], rows):
        yield slice(i, min(i + rows, w.shape[0]))


def quantized_weights(w: np.ndarray, wp: WeightParams) -> np.ndarray:
    """The int8 weights for ``wp``'s scales: symmetric, narrow range, per channel (dim 0) when
    the scale is an array."""
    if wp.quantized is not None:
        return wp.quantized
    per_channel = np.ndim(wp.scale) > 0
    out = np.empty(w.shape, np.int8)

    def block(rows: slice) -> None:
        out[rows] = quantize_weights(w[rows], wp.scale[rows] if per_channel else wp.scale,
                                     axis=0 if per_channel else None)
    blocks = list(_row_blocks(w))
    if len(blocks) > 1:   # numpy releases the GIL: blocks of a large weight on two threads, same result
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(block, blocks))
    else:
        block(blocks[0])
    return out


def dequantized(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``scale · q`` in float64, per output channel when ``scale`` is an array."""
    s = np.asarray(scale, np.float64)
    return q.astype(np.float64) * (s.reshape((-1,) + (1,) * (q.ndim - 1)) if np.ndim(s) else s)


def weight_error_output(region: Region, w: np.ndarray, q: np.ndarray, scale: np.ndarray,
                        taps: np.ndarray) -> np.ndarray:
    """``mean_output(region, dequantized(q, scale) - w, taps)`` for an FC, a block of rows at a
    time (a conv's weights are small: at once)."""
    if w.ndim != 2:
        return mean_output(region, dequantized(q, scale) - w, taps)
    per_channel = np.ndim(scale) > 0
    out = np.empty(w.shape[0])
    for rows in _row_blocks(w):
        diff = dequantized(q[rows], scale[rows] if per_channel else scale) - w[rows]
        out[rows] = diff @ taps
    return out


def expected_taps(region: Region, mean: np.ndarray) -> np.ndarray:
    """The mean input each weight of a conv/FC multiplies, from the input's per-position mean.

    Conv: ``(C_in, kh, kw)``, averaged over the output positions, with 0 for padding (exact:
    the window visits the same padded positions on every sample). FC: ``(K,)``, the mean over
    every axis but the last.
    """
    mean = np.asarray(mean, np.float64)
    if region.pattern.name.startswith("conv_transpose"):
        return _transposed_taps(region, mean)
    if region.pattern.name != "conv":
        return mean.reshape(-1, mean.shape[-1]).mean(axis=0)
    op = region.match.ops["op"]
    kh, kw = region.match.consts["w"].shape[2:]
    g = conv_window(op, (kh, kw), mean.shape[1:])   # the samples' size: SAME's pads may follow it
    top, left, bottom, right = g["pads"]
    (sh, sw), (dh, dw) = g["strides"], g["dilations"]
    padded = np.pad(mean, ((0, 0), (top, bottom), (left, right)))
    ho = (padded.shape[1] - dh * (kh - 1) - 1) // sh + 1
    wo = (padded.shape[2] - dw * (kw - 1) - 1) // sw + 1
    taps = np.empty((mean.shape[0], kh, kw))
    for i in range(kh):
        for j in range(kw):
            window = padded[:, i * dh: i * dh + sh * (ho - 1) + 1: sh, j * dw: j * dw + sw * (wo - 1) + 1: sw]
            taps[:, i, j] = window.mean(axis=(1, 2))
    return taps


def _transposed_taps(region: Region, mean: np.ndarray) -> np.ndarray:
    """``expected_taps`` of a transposed conv: tap ``(i, j)`` of input channel ``c`` adds the input
    pixels whose scatter lands inside the output, averaged over the output positions."""
    op = region.match.ops["op"]
    kernel = region.match.consts["w"].shape[2:]
    attrs = {k: op.attr(k) for k in ("strides", "dilations", "pads", "auto_pad", "output_padding", "output_shape")}
    out, begin, _ = conv_transpose_geometry(mean.shape[1:], kernel, attrs)
    strides = attrs["strides"] or (1, 1)
    taps = np.empty((mean.shape[0], *kernel))
    for i in range(kernel[0]):
        rows = [y for y in range(mean.shape[1]) if 0 <= y * strides[0] - begin[0] + i < out[0]]
        for j in range(kernel[1]):
            cols = [x for x in range(mean.shape[2]) if 0 <= x * strides[1] - begin[1] + j < out[1]]
            taps[:, i, j] = mean[:, rows][:, :, cols].sum(axis=(1, 2)) / max(out[0] * out[1], 1)
    return taps


def mean_output(region: Region, w: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """``E[W x]`` per output channel (no bias), from ``expected_taps``; float64 ``(C_out,)``."""
    w = np.asarray(w, np.float64)
    if w.ndim == 2:
        return w @ taps
    group = region.match.ops["op"].attr("group") or 1
    co, cig = w.shape[:2]
    return np.einsum("gocij,gcij->go", w.reshape(group, co // group, cig, *w.shape[2:]),
                     taps.reshape(group, cig, *w.shape[2:])).reshape(co)


# -- rounding that sees the inputs (Config.weight_rounding = "hessian") -----------------------------
# Rounding each weight to its nearest int8 step minimizes the error of every weight alone; what
# matters is the error of the layer's output, W·x, on the inputs the layer actually gets. With
# G = Σ p pᵀ over the input patches p on calibration samples, that error is the quadratic form
# Σ_c (w_c - ŵ_c)ᵀ G (w_c - ŵ_c) per output channel c. Optimal Brain Quantization / GPTQ
# (Frantar et al. 2022) rounds the inputs one at a time and moves each rounding error onto the
# weights not rounded yet, in the direction G says cancels it, using the Cholesky factor of G⁻¹.
# The scales stay LiteRT's (symmetric, narrow range, per channel, from the float weights); only
# which integer each weight gets changes. Measured with weights alone quantized (fp32 activations,
# 100 rendered lines): CTC strings equal to fp32 96 % -> 99 % (PP-OCRv6 tiny rec), 80 % -> 94 %
# (PP-OCRv5 rec). With int8 activations too (quantir's interpreter, 200 calibration lines) the gain
# did not carry over: 86 -> 88 % (v6 tiny), 64 -> 65 % (v6 small), 69 -> 63 % (v5), which is why
# nearest stays the rounding of all-int8 models; the Gram matrices come from float inputs, not the
# quantized ones the integer graph feeds the layer. With int16 activations the weights are most of the
# error left and it pays (PicoDet boxes 92.4 -> 96.9 %, EfficientNet-Lite0 agreement 96.5 -> 99.0 %):
# Config.weight_rounding="auto" measures it there and keeps it when it meets the budget (api.quantize).

HESSIAN_MAX_COLUMNS = 4096   # inputs per output channel (G is d x d float64: 128 MiB at the limit)
HESSIAN_DAMPING = 0.01       # of G's mean diagonal, added to its diagonal (a direction no sample moves)
_HESSIAN_BLOCK = 128         # columns rounded between two matrix updates of the rest (same result)


def hessian_applies(region: Region) -> bool:
    """Conv (not transposed) and FC regions whose weights have at most HESSIAN_MAX_COLUMNS inputs per
    output channel."""
    if not region.pattern.weighted or region.pattern.name.startswith("conv_transpose"):
        return False
    w = region.match.consts["w"]
    columns = int(np.prod(w.shape[1:])) if region.pattern.name == "conv" else int(region_weights(region)[0].shape[1])
    return columns <= HESSIAN_MAX_COLUMNS


def input_gram(region: Region, x: np.ndarray) -> np.ndarray:
    """``Σ p pᵀ`` over the samples of ``x`` (the region's float input) and every output position,
    ``p`` the inputs one output channel's weights multiply, in the order of ``region_weights``'
    rows: float64 ``(groups, d, d)`` (one group for FC)."""
    if region.pattern.name != "conv":
        flat = np.asarray(x, np.float64).reshape(-1, x.shape[-1])
        return (flat.T @ flat)[None]
    op = region.match.ops["op"]
    kh, kw = region.match.consts["w"].shape[2:]
    g = conv_window(op, (kh, kw), x.shape[2:])
    top, left, bottom, right = g["pads"]
    (sh, sw), (dh, dw) = g["strides"], g["dilations"]
    padded = np.pad(np.asarray(x, np.float32), ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, c, hp, wp = padded.shape
    ho, wo = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    cols = np.empty((n, c, kh, kw, ho, wo), np.float32)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (ho - 1) + 1, sh)
            cols[:, :, i, j] = padded[:, :, rows, j * dw: j * dw + sw * (wo - 1) + 1: sw]
    groups = op.attr("group") or 1
    cig = c // groups
    p = cols.reshape(n, groups, cig * kh * kw, ho * wo).transpose(1, 2, 0, 3).reshape(groups, cig * kh * kw, -1)
    p = p.astype(np.float64)
    return np.matmul(p, p.transpose(0, 2, 1))


def hessian_rounded(w: np.ndarray, scale: np.ndarray | float, gram: np.ndarray) -> np.ndarray:
    """int8 weights (``w``'s shape, output channel first) for the given scales, rounded to
    minimize the output error under ``gram`` (``input_gram``, one matrix per group of channels)."""
    co, groups = w.shape[0], gram.shape[0]
    flat = np.asarray(w, np.float64).reshape(co, -1)
    s = np.broadcast_to(np.asarray(scale, np.float64).reshape(-1), (co,))
    out = np.empty(flat.shape, np.int8)
    rows = co // groups
    for k in range(groups):
        r = slice(k * rows, (k + 1) * rows)
        out[r] = _optimal_brain_rounding(flat[r], s[r], gram[k])
    return out.reshape(w.shape)


def _optimal_brain_rounding(w: np.ndarray, s: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """GPTQ's column-by-column rounding of ``w`` (rows: output channels) with per-row scales ``s``;
    nearest rounding when ``gram`` is not positive definite even after damping."""
    nearest = np.clip(np.rint(w / s[:, None]), -127, 127)
    d = w.shape[1]
    h = np.array(gram, np.float64)
    diag = np.diag(h).copy()
    dead = diag <= 0.0                      # inputs that are zero on every sample: nothing to trade
    live_mean = float(diag[~dead].mean()) if (~dead).any() else 0.0
    if live_mean <= 0.0:
        return nearest
    h[dead, :] = 0.0
    h[:, dead] = 0.0
    h[np.diag_indices(d)] += np.where(dead, 1.0, 0.0) + HESSIAN_DAMPING * live_mean
    try:
        u = np.linalg.cholesky(np.linalg.inv(h)).T     # upper: G⁻¹ = uᵀ u
    except np.linalg.LinAlgError:
        return nearest
    work = w.astype(np.float64).copy()
    q = np.empty_like(work)
    for b0 in range(0, d, _HESSIAN_BLOCK):
        b1 = min(b0 + _HESSIAN_BLOCK, d)
        block = work[:, b0:b1].copy()
        errors = np.empty_like(block)
        for i in range(b1 - b0):
            col = block[:, i]
            q[:, b0 + i] = np.clip(np.rint(col / s), -127, 127)
            e = (col - q[:, b0 + i] * s) / u[b0 + i, b0 + i]
            block[:, i:] -= np.outer(e, u[b0 + i, b0 + i:b1])
            errors[:, i] = e
        work[:, b1:] -= errors @ u[b0:b1, b1:]
    return q
