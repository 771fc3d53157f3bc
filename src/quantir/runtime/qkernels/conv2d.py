"""CONV_2D, int8 per-channel (``reference_integer_ops::ConvPerChannel``, docs/numerics.md §2.1).

For every output position and channel ``c``::

    acc = Σ_taps Σ_ic w[c, ic, kh, kw] · (x - zp_in) + bias[c]        (int32 in LiteRT)
    out = clamp(MBQM(acc, M[c], shift[c]) + zp_out, act_min, act_max)

Layout is NCHW with OIHW weights ``[C_out, C_in / groups, KH, KW]``; weight zero points
are 0 (LiteRT requires it). Padding is explicit; padding the input with ``zp_in``
reproduces LiteRT's skipped out-of-image taps exactly.

The sum is computed as im2col (``sliding_window_view`` on the ``zp_in``-padded input) times
the weight matrix in float BLAS, the bias riding along as a row of ones. Every product and
partial sum is an integer of magnitude at most ``max|x - zp_in|·Σ|w[c]| + |bias[c]|``, so
the result is exact whatever the summation order: in float32 when that bound is below 2**24,
otherwise in float64 (§6). With one group, a tile of several images (or a band of output
rows) is one GEMM ``W[C_out, K] @ cols[K, N·P]``, small enough for its result to be
requantized in cache by the exact float64 MBQM of ``_fast_requant``. Layers whose int32
accumulator may overflow (``255·Σ|w[c]| + |bias[c]|`` past int32) take the int64 path that
checks every value. A grouped convolution with one input channel per group (depthwise) is
handed to :func:`~quantir.runtime.qkernels.depthwise_conv2d.depthwise_conv2d`, except a single
input channel (a stem on gray images): its im2col is small and one GEMM beats the depthwise loops
run once per output channel (measured 10.5 -> 6.5 ms on 500 28x28 images, 16 channels). With
numba the im2col is a compiled loop (``_jit.im2col``).

**16x8** (int16 input and output, int8 weights; docs/numerics.md "int16x8 kernels"): prepare with
``storage=np.int16``. ``conv.cc`` Prepare requires zero point 0 on the input and the output. The
reference ``ConvPerChannel`` for int16 is a template on the bias type: with an int64 bias (the
default, and what LiteRT runs when the op has no ``quantized_bias_type``) it accumulates in int64
and requantizes with the 64-bit MBQM (15-bit multiplier, one rounding; §1.5); with an int32 bias
(an int32 ``bias`` array here; LiteRT reads it as int32 only when ``quantized_bias_type`` is INT32)
it accumulates in int32 (an overflow is refused) and requantizes with the 32-bit MBQM of the int8
kernel. Both clamp to the
int16 activation range (:func:`requantize_16x8`). The taps run as float BLAS where exact (float64
holds any realistic K: ``K·32768·128 < 2**53``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantir.numerics import conv_multiplier, multiply_by_quantized_multiplier_int64, saturate
from quantir.runtime.qkernels._common import (
    INT32_MAX,
    Activation,
    KernelParams,
    QKernelError,
    accumulator_bound,
    activation_range,
    batch_chunks,
    check_accumulator,
    check_bias,
    check_bias64,
    check_quantized,
    check_zero_point,
    clamp_range,
    exact_float_dtype,
    max_abs,
    quantize_channel_multipliers,
    requantize,
)
from quantir.runtime.qkernels import _jit
from quantir.runtime.qkernels._fast_requant import ExactFloatRequantizer, requantize_exact_float
from quantir.runtime.qkernels._window import out_hw, pad_hw, windows
from quantir.runtime.qkernels.padding import normalize_pads

__all__ = ["ConvParams", "prepare_conv2d", "conv2d", "requantize_16x8"]


@dataclass(frozen=True)
class ConvParams(KernelParams):
    """Requantization of CONV_2D / DEPTHWISE_CONV_2D: per-channel ``(M, shift)`` and the clamp."""

    multiplier: np.ndarray
    shift: np.ndarray
    output_zero_point: int
    act_min: int
    act_max: int


def prepare_conv2d(input_scale: float, weight_scales: Any, output_scale: float, output_zero_point: int,
                   activation: Activation = "none", *, channels: int | None = None,
                   op: str = "conv2d", storage: Any = np.int8, input_zero_point: int = 0) -> ConvParams:
    """``PopulateConvolutionQuantizationParams``: ``M[c]`` from ``double(s_in)·double(s_w[c])/double(s_out)``.

    A single weight scale (per-tensor) is broadcast to ``channels`` when given. ``storage=np.int16``
    prepares the 16x8 kernel: ``input_zero_point`` and the output zero point must be 0 (LiteRT's
    Prepare). The kernel picks the accumulator from the bias's dtype (module docstring).
    """
    wide = np.dtype(storage) == np.int16
    if wide and (int(input_zero_point) != 0 or int(output_zero_point) != 0):
        raise QKernelError(f"{op}: int16 input and output need zero point 0, found {input_zero_point} and "
                           f"{output_zero_point} (LiteRT's {op} Prepare: TF_LITE_ENSURE_EQ zero_point, 0)")
    ws = np.atleast_1d(np.asarray(weight_scales, dtype=np.float32)).reshape(-1)
    if channels is not None:
        if ws.size == 1:
            ws = np.repeat(ws, channels)
        elif ws.size != channels:
            raise ValueError(f"{op}: {ws.size} weight scales for {channels} output channels")
    zp = check_zero_point(output_zero_point, op, "output zero point")
    big_m, shift = quantize_channel_multipliers(conv_multiplier(input_scale, ws, output_scale), op)
    lo, hi = activation_range(activation, output_scale, zp, storage, op)
    return ConvParams(big_m, shift, zp, lo, hi)


def _per_channel(values: Any, channels: int, op: str, name: str) -> np.ndarray:
    a = np.asarray(values, dtype=np.int64).reshape(-1)
    if a.size == 1:
        return np.repeat(a, channels)
    if a.size != channels:
        raise ValueError(f"{op}: {name} has {a.size} values for {channels} output channels")
    return a


def conv2d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None, *, input_zero_point: int,
           output_zero_point: int, multiplier: Any, shift: Any, act_min: int = -128, act_max: int = 127,
           strides: Sequence[int] = (1, 1), pads: Sequence[int] = (0, 0, 0, 0),
           dilations: Sequence[int] = (1, 1), groups: int = 1) -> np.ndarray:
    """NCHW convolution; int8 (or int16: 16x8) input, returns ``[N, C_out, OH, OW]`` of the input's dtype."""
    op = "conv2d"
    x = check_quantized(x, op, "input", (np.int8, np.int16))
    weight = check_quantized(weight, op, "weight")
    if x.ndim != 4 or weight.ndim != 4:
        raise ValueError(f"{op}: input must be NCHW and weight OIHW (4-D), found {x.shape} and {weight.shape}")
    n, c_in, _, _ = x.shape
    c_out, c_per_group, kh, kw = weight.shape
    if groups < 1 or c_in % groups or c_out % groups or c_in // groups != c_per_group:
        raise ValueError(f"{op}: {c_in} input channels, groups={groups} and weight shape {weight.shape} disagree")
    if c_per_group == 1 and groups == c_in and c_in > 1:
        from quantir.runtime.qkernels.depthwise_conv2d import depthwise_conv2d

        return depthwise_conv2d(x, weight, bias, input_zero_point=input_zero_point,
                                output_zero_point=output_zero_point, multiplier=multiplier, shift=shift,
                                act_min=act_min, act_max=act_max, strides=strides, pads=pads, dilations=dilations)
    if x.dtype == np.int16:
        if int(input_zero_point) != 0 or int(output_zero_point) != 0:
            raise QKernelError(f"{op}: int16 input and output need zero point 0 (conv.cc Prepare)")
        lo, hi = clamp_range(act_min, act_max, np.int16, op)
        pads = normalize_pads(pads, op)
        oh, ow = out_hw(x.shape, (kh, kw), strides, dilations, pads, op)
        accumulator = "int32" if bias is not None and np.asarray(bias).dtype == np.int32 else "int64"
        b = check_bias64(bias, c_out, op) if accumulator == "int64" else check_bias(bias, c_out, op)
        return _conv2d_16x8(x, weight, b, _per_channel(multiplier, c_out, op, "multiplier"),
                            _per_channel(shift, c_out, op, "shift"), lo, hi, strides, pads, dilations, groups, (oh, ow),
                            accumulator, op)
    zp_in = check_zero_point(input_zero_point, op, "input zero point")
    zp_out = check_zero_point(output_zero_point, op, "output zero point")
    lo, hi = clamp_range(act_min, act_max, np.int8, op)
    pads = normalize_pads(pads, op)
    b = check_bias(bias, c_out, op)
    big_m = _per_channel(multiplier, c_out, op, "multiplier")
    sh = _per_channel(shift, c_out, op, "shift")
    oh, ow = out_hw(x.shape, (kh, kw), strides, dilations, pads, op)

    per_channel_l1 = np.abs(weight.reshape(c_out, -1).astype(np.int64)).sum(axis=1)
    b_abs = np.zeros(c_out, dtype=np.int64) if b is None else np.abs(b)
    if int((255 * per_channel_l1 + b_abs).max(initial=0)) > INT32_MAX:
        # LiteRT's int32 accumulator may overflow: the integer path checks every value.
        return _conv2d_int(x, weight, b, zp_in, zp_out, big_m, sh, lo, hi, strides, pads, dilations, groups,
                           (oh, ow), op)
    # |acc[c]| <= max|x - zp_in| · Σ|w[c]| + |bias[c]|: every product and partial sum of the GEMM is an
    # integer below this bound, so float32 BLAS is exact when it is below 2**24 (float64 otherwise).
    deviation = max(int(x.max(initial=zp_in)) - zp_in, zp_in - int(x.min(initial=zp_in)), 0)
    bound = deviation * per_channel_l1 + b_abs
    g, cg_out = groups, c_out // groups
    k = c_per_group * kh * kw
    p_out = oh * ow
    pointwise = kh == kw == 1 and tuple(strides) == (1, 1) and not any(pads)
    out = np.empty((n, c_out, oh, ow), dtype=np.int8)
    if g == 1 and _jit.AVAILABLE:
        requantizer = ExactFloatRequantizer(big_m, sh, zp_out, lo, hi, bound, c_out, bias=b)
        if requantizer.params is not None:
            # The compiled requantization adds the bias (exactly, in float64), so the GEMM holds only
            # the taps' sums: float32 unless they reach 2**24. With the bias in the GEMM, one large
            # bias (a channel whose weights quantized to almost nothing) made the whole layer float64.
            ftype = np.float32 if int((deviation * per_channel_l1).max(initial=0)) < (1 << 24) else np.float64
            return _conv2d_one_gemm(x, weight.reshape(c_out, k).astype(ftype), False, ftype, zp_in, requantizer,
                                    (kh, kw), strides, pads, dilations, pointwise, out)
    ftype = np.float32 if int(bound.max(initial=0)) < (1 << 24) else np.float64
    kb = k + (b is not None)       # the bias rides in the GEMM as a row of ones
    wmat = np.zeros((g, cg_out, kb), dtype=ftype)
    wmat[:, :, :k] = weight.reshape(g, cg_out, k)   # K ordered (ic, kh, kw)
    if b is not None:
        wmat[:, :, k] = b.reshape(g, cg_out)
    if g == 1:
        return _conv2d_one_gemm(x, wmat[0], b is not None, ftype, zp_in,
                                ExactFloatRequantizer(big_m, sh, zp_out, lo, hi, bound, c_out), (kh, kw), strides,
                                pads, dilations, pointwise, out)
    for chunk in batch_chunks(n, (c_in * kh * kw + 2 * c_out) * p_out):
        nb = chunk.stop - chunk.start
        cols = np.empty((nb, g, kb, p_out), dtype=ftype)  # im2col, NCHW-native: [N, G, K(+1), OH·OW]
        if pointwise:
            np.subtract(x[chunk].reshape(nb, g, c_per_group, p_out), ftype(zp_in), out=cols[:, :, :k])
        else:
            win = windows(pad_hw(x[chunk], pads, zp_in), (kh, kw), strides, dilations, (oh, ow))
            win = win.reshape(nb, g, c_per_group, oh, ow, kh, kw).transpose(0, 1, 2, 5, 6, 3, 4)
            # [N, G, C/G, KH, KW, OH, OW]: only splits cols' axes, so this stays a view to write into
            np.subtract(win, ftype(zp_in), out=cols[:, :, :k].reshape(nb, g, c_per_group, kh, kw, oh, ow))
        if b is not None:
            cols[:, :, k] = 1
        acc = np.matmul(wmat, cols).reshape(nb, c_out, p_out)  # exact integers
        q = requantize_exact_float(acc, big_m, sh, zp_out, lo, hi, bound, left_shift=True)
        if q is None:
            q = requantize(acc.astype(np.int64), big_m, sh, zp_out, lo, hi, channel_axis=1)
        out[chunk] = q.reshape(nb, c_out, oh, ow)
    return out


def _conv2d_one_gemm(x, wmat, has_bias, ftype, zp_in, requantizer, kernel, strides, pads, dilations, pointwise, out):
    """groups == 1: im2col laid out ``[K(+1), N, rows·OW]`` so that a tile (several images, or a
    band of output rows of one large image) is ONE GEMM (``W[C_out, K] @ cols``) whose result
    still fits in cache when it is requantized (channel-major, straight into NCHW). The bias is
    either a row of ``wmat`` (``has_bias``) or the requantizer's."""
    n, c_in = x.shape[:2]
    c_out, kb = wmat.shape
    k = kb - has_bias
    kh, kw = kernel
    _, _, oh, ow = out.shape
    per_row = (kb + 2 * c_out) * ow           # floats per output row: cols, result, requantization
    if per_row * oh <= TILE:
        images, rows = max(1, TILE // (per_row * oh)), oh
    else:
        images, rows = 1, max(1, TILE // per_row)
    padded = None
    # One scratch for every tile's im2col and GEMM result: fresh ~1 MiB arrays per tile cost page
    # faults (measured: a third of a 7x7 layer's time).
    most = min(n, images) * min(oh, rows) * ow
    cols_buf, acc_buf = np.empty(kb * most, dtype=ftype), np.empty(c_out * most, dtype=ftype)
    for n0 in range(0, n, images):
        chunk = slice(n0, min(n, n0 + images))
        nb = chunk.stop - chunk.start
        if not pointwise and _jit.AVAILABLE:
            padded = np.ascontiguousarray(pad_hw(x[chunk], pads, zp_in))
        elif not pointwise:
            # [N, C, OH, OW, KH, KW]
            padded = windows(pad_hw(x[chunk], pads, zp_in), kernel, strides, dilations, (oh, ow))
        for r0 in range(0, oh, rows):
            r1 = min(oh, r0 + rows)
            tile = (r1 - r0) * ow
            cols = cols_buf[:kb * nb * tile].reshape(kb, nb, tile)
            if pointwise and _jit.AVAILABLE:   # a band of rows is a strided view: the loop reads it as is
                _jit.pointwise_cols(x[chunk].reshape(nb, c_in, oh * ow)[:, :, r0 * ow:r1 * ow], ftype(zp_in), cols)
            elif pointwise:
                np.subtract(x[chunk, :, r0:r1].reshape(nb, c_in, tile).transpose(1, 0, 2), ftype(zp_in),
                            out=cols[:k])
            elif _jit.AVAILABLE:
                _jit.im2col(padded, ftype(zp_in), kh, kw, *strides, *dilations, r0, r1, cols[:k])
            else:
                np.subtract(padded[:, :, r0:r1].transpose(1, 4, 5, 0, 2, 3), ftype(zp_in),  # [C, KH, KW, N, rows, OW]
                            out=cols[:k].reshape(c_in, kh, kw, nb, r1 - r0, ow))
            if has_bias:
                cols[k] = 1
            acc = np.matmul(wmat, cols.reshape(kb, nb * tile), out=acc_buf[:c_out * nb * tile].reshape(c_out, nb * tile)
                            ).reshape(c_out, nb, tile)   # exact integers
            # straight into the output (a band of rows is a strided view of it)
            if requantizer(acc, channel_major=True,
                           out=out[chunk].reshape(nb, c_out, oh * ow)[:, :, r0 * ow:r1 * ow]) is not None:
                continue
            # no float plan (so the bias is in the GEMM): LiteRT's integers, with their checks
            r = requantizer
            q = requantize(acc.transpose(1, 0, 2).astype(np.int64), r.multiplier, r.shift, r.zero_point, r.act_min,
                           r.act_max, channel_axis=1)
            out[chunk, :, r0:r1] = q.reshape(nb, c_out, r1 - r0, ow)
    return out


TILE = 1 << 19   # floats per GEMM tile (cols + result + requantization): ~2 MiB, the size of L2


def _conv2d_int(x, weight, b, zp_in, zp_out, big_m, sh, lo, hi, strides, pads, dilations, groups, out_hw_, op):
    """The int64 path, for layers whose int32 accumulator may overflow: every value is checked."""
    n, c_in, _, _ = x.shape
    c_out, c_per_group, kh, kw = weight.shape
    oh, ow = out_hw_
    g, cg_out = groups, c_out // groups
    k = c_per_group * kh * kw
    p_out = oh * ow
    # Exact BLAS: float32 when the worst-case partial sum stays below 2**24, else float64.
    w_max = max_abs(weight)
    ftype = exact_float_dtype(k, 255, w_max, op)
    wmat = weight.reshape(g, cg_out, k).astype(ftype)  # [G, C_out/G, K], K ordered (ic, kh, kw)
    # When no input can overflow the int32 accumulator, skip the per-element check.
    overflow_possible = accumulator_bound(k, 255, w_max, b) > INT32_MAX
    acc_type = np.int64 if overflow_possible else np.int32
    pointwise = kh == kw == 1 and tuple(strides) == (1, 1) and not any(pads)
    out = np.empty((n, c_out, oh, ow), dtype=np.int8)
    for chunk in batch_chunks(n, (c_in * kh * kw + c_out) * p_out):
        nb = chunk.stop - chunk.start
        cols = np.empty((nb, g, k, p_out), dtype=ftype)  # im2col, NCHW-native: [N, G, K, OH·OW]
        if pointwise:
            np.subtract(x[chunk].reshape(nb, g, c_per_group, p_out), ftype(zp_in), out=cols)
        else:
            win = windows(pad_hw(x[chunk], pads, zp_in), (kh, kw), strides, dilations, (oh, ow))
            np.subtract(win.transpose(0, 1, 4, 5, 2, 3), ftype(zp_in),  # [N, C, KH, KW, OH, OW]
                        out=cols.reshape(nb, c_in, kh, kw, oh, ow))
        acc = np.matmul(wmat, cols).reshape(nb, c_out, p_out).astype(acc_type)  # exact integers
        if b is not None:
            acc += b.astype(acc_type)[:, None]
        if overflow_possible:
            check_accumulator(acc, op)
        out[chunk] = requantize(acc, big_m, sh, zp_out, lo, hi, channel_axis=1).reshape(nb, c_out, oh, ow)
    return out


def requantize_16x8(acc: np.ndarray, multiplier: np.ndarray, shift: np.ndarray, act_min: int, act_max: int,
                    op: str, accumulator: str = "int64") -> np.ndarray:
    """``clamp(MBQM64(acc, M[c], shift[c]), act_min, act_max)`` as int16, channels on axis 1.

    The 64-bit MBQM requires ``|acc| < 2**47`` and a result within int32 (LiteRT's DCHECKs; past
    them its release build wraps), and a shift within [-31, 7] (a multiplier below 128): quantir
    refuses the rest with ``QKernelError``. With an int32
    accumulator it is the int8 kernel's check for overflow and 32-bit MBQM instead.
    """
    if accumulator == "int32":
        check_accumulator(acc, op)
        return requantize(acc, multiplier, shift, 0, act_min, act_max, np.int16, channel_axis=1)
    view = (1, -1) + (1,) * (acc.ndim - 2)
    try:
        scaled = multiply_by_quantized_multiplier_int64(acc, multiplier.reshape(view), shift.reshape(view))
    except ValueError as e:
        raise QKernelError(f"{op}: {e}") from None
    return saturate(np.asarray(scaled), act_min, act_max).astype(np.int16)


def _conv2d_16x8(x, weight, b, big_m, sh, lo, hi, strides, pads, dilations, groups, out_hw_, accumulator, op):
    """int16 taps as exact float BLAS (im2col in bands of output rows), the int64 bias, then the 64-bit MBQM."""
    n, c_in = x.shape[:2]
    c_out, c_per_group, kh, kw = weight.shape
    oh, ow = out_hw_
    g, cg_out = groups, c_out // groups
    k = c_per_group * kh * kw
    ftype = exact_float_dtype(k, 32768, max_abs(weight), op)
    wmat = weight.reshape(g, cg_out, k).astype(ftype)   # K ordered (ic, kh, kw)
    # zero point 0: padding with 0 is LiteRT's skipped out-of-image taps
    win = windows(pad_hw(x, pads, 0), (kh, kw), strides, dilations, (oh, ow))   # [N, C, OH, OW, KH, KW]
    rows = max(1, TILE // max(1, (k * g + 3 * c_out) * ow))
    out = np.empty((n, c_out, oh, ow), dtype=np.int16)
    for i in range(n):
        for r0 in range(0, oh, rows):
            r1 = min(oh, r0 + rows)
            band = win[i, :, r0:r1].reshape(g, c_per_group, r1 - r0, ow, kh, kw).transpose(0, 1, 4, 5, 2, 3)
            cols = band.astype(ftype).reshape(g, k, (r1 - r0) * ow)      # [G, K, rows·OW]
            acc = np.matmul(wmat, cols).reshape(c_out, r1 - r0, ow).astype(np.int64)   # exact integers
            if b is not None:
                acc += b[:, None, None]
            out[i, :, r0:r1] = requantize_16x8(acc[None], big_m, sh, lo, hi, op, accumulator)[0]
    return out
