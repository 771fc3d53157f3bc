"""DEPTHWISE_CONV_2D, int8 per-channel (``reference_integer_ops::DepthwisePerChannel``, §2.2).

NCHW input ``[N, C_in, H, W]``, weights ``[C_out, 1, KH, KW]`` with
``C_out = C_in · depth_multiplier``; output channel ``oc`` reads input channel
``oc // depth_multiplier`` (ONNX grouped-conv order, the same as TFLite's
``oc = ic·mult + m``). Per output::

    acc = Σ_taps w[oc, kh, kw] · (x[ic] - zp_in) + bias[oc]
    out = clamp(MBQM(acc, M[oc], shift[oc]) + zp_out, act_min, act_max)

The parameters come from :func:`~quantir.runtime.qkernels.conv2d.prepare_conv2d`. Three
paths, the same integers:

* when ``K·255·max|w| + max|bias|`` may exceed int32: integer taps in int64, every value
  checked against LiteRT's int32 range (``_depthwise_int``);
* with numba: compiled float taps (exact: see the numpy path) and requantization (``_jit``):
  per channel over stride phases on large images, channels innermost on small ones
  (``SMALL_IMAGE``);
* otherwise numpy: float taps over the flattened batch (exact: every partial sum is an
  integer below the per-channel bound ``max|x - zp|·Σ|w[c]| + |bias[c]|``, float32 below
  2**24), then the exact float64 requantization of ``_fast_requant``.

**16x8** (int16 input and output, parameters prepared with ``storage=np.int16``): the reference
``DepthwiseConvPerChannel`` for int16 accumulates in int64 (``depthwise_conv.cc`` Prepare takes
only an int64 bias) and requantizes with the 64-bit MBQM, clamped to int16
(:func:`~quantir.runtime.qkernels.conv2d.requantize_16x8`); the taps run in int64 (``_depthwise_16x8``).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from quantir.runtime.qkernels._common import (
    INT32_MAX,
    QKernelError,
    accumulator_bound,
    batch_chunks,
    check_accumulator,
    check_bias,
    check_bias64,
    check_quantized,
    check_zero_point,
    clamp_range,
    max_abs,
    requantize,
)
from quantir.runtime.qkernels import _jit
from quantir.runtime.qkernels._fast_requant import float_plan, requantize_exact_float
from quantir.runtime.qkernels._window import out_hw, pad_hw
from quantir.runtime.qkernels.padding import normalize_pads

__all__ = ["depthwise_conv2d"]

SMALL_IMAGE = 400   # output positions up to which the compiled loop runs channels-last (measured: 14x14 and
#                     smaller gain, 28x28 loses)


def depthwise_conv2d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None, *, input_zero_point: int,
                     output_zero_point: int, multiplier: Any, shift: Any, act_min: int = -128, act_max: int = 127,
                     strides: Sequence[int] = (1, 1), pads: Sequence[int] = (0, 0, 0, 0),
                     dilations: Sequence[int] = (1, 1)) -> np.ndarray:
    """NCHW depthwise convolution; int8 (or int16: 16x8) input, returns ``[N, C_out, OH, OW]`` of its dtype."""
    op = "depthwise_conv2d"
    x = check_quantized(x, op, "input", (np.int8, np.int16))
    weight = check_quantized(weight, op, "weight")
    if x.ndim != 4 or weight.ndim != 4 or weight.shape[1] != 1:
        raise ValueError(f"{op}: input must be NCHW and weight [C_out, 1, KH, KW], found {x.shape} and {weight.shape}")
    n, c_in, _, _ = x.shape
    c_out, _, kh, kw = weight.shape
    if c_out % c_in:
        raise ValueError(f"{op}: {c_out} output channels is not a multiple of {c_in} input channels")
    mult = c_out // c_in
    if x.dtype == np.int16:
        if int(input_zero_point) != 0 or int(output_zero_point) != 0:
            raise QKernelError(f"{op}: int16 input and output need zero point 0 (depthwise_conv.cc Prepare)")
        if bias is not None and np.asarray(bias).dtype != np.int64:
            raise QKernelError(f"{op}: an int16 depthwise convolution takes only an int64 bias, found "
                               f"{np.asarray(bias).dtype} (depthwise_conv.cc Prepare: bias->type must be kTfLiteInt64)")
        return _depthwise_16x8(x, weight, bias, multiplier, shift, act_min, act_max, strides, pads, dilations, mult,
                               op)
    zp_in = check_zero_point(input_zero_point, op, "input zero point")
    zp_out = check_zero_point(output_zero_point, op, "output zero point")
    lo, hi = clamp_range(act_min, act_max, np.int8, op)
    pads = normalize_pads(pads, op)
    b = check_bias(bias, c_out, op)
    big_m = np.broadcast_to(np.asarray(multiplier, dtype=np.int64).reshape(-1), (c_out,))
    sh = np.broadcast_to(np.asarray(shift, dtype=np.int64).reshape(-1), (c_out,))
    oh, ow = out_hw(x.shape, (kh, kw), strides, dilations, pads, op)
    (sh_h, sh_w), (dh, dw) = strides, dilations

    overflow_possible = accumulator_bound(kh * kw, 255, max_abs(weight), b) > INT32_MAX
    hp, wp = x.shape[2] + pads[0] + pads[2], x.shape[3] + pads[1] + pads[3]
    if overflow_possible or (sh_h * wp) % sh_w:
        return _depthwise_int(x, weight, b, zp_in, zp_out, big_m, sh, lo, hi, strides, dilations, pads, (oh, ow),
                              mult, overflow_possible, op)
    l1 = np.abs(weight.reshape(c_out, kh * kw).astype(np.int64)).sum(axis=1)
    deviation = max(int(x.max(initial=zp_in)) - zp_in, zp_in - int(x.min(initial=zp_in)), 0)
    bound = deviation * l1 + (0 if b is None else np.abs(b))   # [C_out] int64: |acc| never exceeds it
    plan = float_plan(big_m, sh, bound, c_out, left_shift=True) if _jit.AVAILABLE else None
    if plan is not None:   # compiled loops: float taps (exact), then the requantization
        # The taps' partial sums stay below deviation·Σ|w[c]| (the bias joins in the requantization).
        ftype = np.float32 if int((deviation * l1).max(initial=0)) < (1 << 24) else np.float64
        return _depthwise_jit(x, weight, b, zp_in, zp_out, lo, hi, pads, strides, dilations, (hp, wp), (oh, ow),
                              mult, plan, ftype)
    if sh_w > 1:   # the flattened taps below would compute every other column for nothing (measured slower)
        return _depthwise_int(x, weight, b, zp_in, zp_out, big_m, sh, lo, hi, strides, dilations, pads, (oh, ow),
                              mult, overflow_possible, op)
    # Taps over the flattened batch. Each channel's padded image sits in a slot of ``span`` floats
    # (zeros after it), slots follow each other without gaps, and output (i, j) of a channel is
    # computed at slot position q = i·pitch + j from flat input sw·q + offset(tap). So each tap is
    # ONE strided slice over all images and channels, and the KH·KW multiply-adds stream long
    # contiguous runs (numpy is slow on short rows). Positions that are not an output (j >= OW, the
    # rows below OH, reads running into the next slot) are computed and dropped.
    pitch = sh_h * wp // sh_w
    offsets = [i * dh * wp + j * dw for i in range(kh) for j in range(kw)]
    span = -(-max(hp * wp, sh_w * oh * pitch) // sh_w) * sh_w
    slot = span // sh_w                   # computed positions per channel, oh·pitch of them outputs
    # Every partial sum is an integer below ``bound``: exact in float32 below 2**24.
    ftype = np.float32 if int(np.max(bound, initial=0)) < (1 << 24) else np.float64
    # numpy streams contiguous operands far faster than it broadcasts a (C, 1) one: each tap's
    # weights are expanded to a plane of C_out·slot values once per call.
    planes = np.repeat(weight.reshape(c_out, kh * kw).T.astype(ftype), slot, axis=1)     # [taps, C_out·slot]
    bias_plane = None if b is None else np.repeat(b.astype(ftype), slot)
    out = np.empty((n, c_out, oh, ow), dtype=np.int8)
    for chunk in batch_chunks(n, 3 * c_out * span, budget=1 << 21):
        nb = chunk.stop - chunk.start
        width = c_out * slot
        xz = np.zeros(nb * c_out * span + offsets[-1] + sh_w, dtype=ftype)  # x - zp_in; padding is 0
        images = xz[:nb * c_out * span].reshape(nb, c_out, span)[:, :, :hp * wp].reshape(nb, c_out, hp, wp)
        xc = x[chunk] if mult == 1 else np.repeat(x[chunk], mult, axis=1)  # channel oc reads ic = oc // mult
        np.subtract(xc, ftype(zp_in), out=images[:, :, pads[0]:pads[0] + x.shape[2], pads[1]:pads[1] + x.shape[3]])
        block = max(1, (1 << 16) // (nb * slot))   # channels per pass: the accumulators stay in cache
        acc_buf = np.empty(nb * min(block, c_out) * slot, dtype=ftype)
        tmp_buf = np.empty_like(acc_buf)
        for c0 in range(0, c_out, block):
            c1 = min(c_out, c0 + block)
            cols = slice(c0 * slot, c1 * slot)
            acc = acc_buf[:nb * (c1 - c0) * slot].reshape(nb, (c1 - c0) * slot)
            tmp = tmp_buf[:acc.size].reshape(acc.shape)
            for t, off in enumerate(offsets):
                view = xz[off:off + sh_w * (nb * width - 1) + 1:sh_w].reshape(nb, width)[:, cols]
                if t == 0:
                    np.multiply(view, planes[t, cols], out=acc)
                else:
                    np.multiply(view, planes[t, cols], out=tmp)
                    acc += tmp
            if bias_plane is not None:
                acc += bias_plane[cols]
            acc3 = acc.reshape(nb, c1 - c0, slot)
            q = requantize_exact_float(acc3, big_m[c0:c1], sh[c0:c1], zp_out, lo, hi, bound[c0:c1], left_shift=True)
            if q is None:
                q = requantize(acc3.astype(np.int64), big_m[c0:c1], sh[c0:c1], zp_out, lo, hi, channel_axis=1)
            out[chunk, c0:c1] = q[:, :, :oh * pitch].reshape(nb, c1 - c0, oh, pitch)[:, :, :, :ow]
    return out


def _depthwise_int(x, weight, b, zp_in, zp_out, big_m, sh, lo, hi, strides, dilations, pads, out_hw_, mult,
                   overflow_possible, op):
    """Integer taps over strided windows: for layers whose int32 accumulator may overflow (checked)."""
    n = x.shape[0]
    c_out, _, kh, kw = weight.shape
    oh, ow = out_hw_
    (sh_h, sh_w), (dh, dw) = strides, dilations
    acc_dtype = np.int64 if overflow_possible else np.int32
    # without overflow, |acc[c]| <= 255·Σ|w[c]| + |bias[c]| < 2**31: the float64 requantization applies
    bound = 255 * np.abs(weight.reshape(c_out, -1).astype(np.int64)).sum(axis=1) + (0 if b is None else np.abs(b))
    w = weight.reshape(c_out, kh, kw).astype(acc_dtype)
    bias_view = None if b is None else b.astype(acc_dtype).reshape(c_out, 1, 1)
    hp, wp = x.shape[2] + pads[0] + pads[2], x.shape[3] + pads[1] + pads[3]
    out = np.empty((n, c_out, oh, ow), dtype=np.int8)
    for chunk in batch_chunks(n, c_out * (hp * wp + 2 * oh * ow)):
        xz = pad_hw(x[chunk], pads, zp_in).astype(acc_dtype)
        xz -= zp_in
        if mult > 1:
            xz = np.repeat(xz, mult, axis=1)  # channel oc reads input channel oc // mult
        acc = np.zeros((xz.shape[0], c_out, oh, ow), dtype=acc_dtype)
        if bias_view is not None:
            acc += bias_view
        tmp = np.empty_like(acc)
        for i in range(kh):
            for j in range(kw):
                tap = xz[:, :, i * dh:i * dh + (oh - 1) * sh_h + 1:sh_h, j * dw:j * dw + (ow - 1) * sh_w + 1:sh_w]
                np.multiply(tap, w[:, i, j].reshape(c_out, 1, 1), out=tmp)
                acc += tmp
        if overflow_possible:
            check_accumulator(acc, op)
            out[chunk] = requantize(acc, big_m, sh, zp_out, lo, hi, channel_axis=1)
            continue
        q = requantize_exact_float(acc.reshape(acc.shape[0], c_out, oh * ow), big_m, sh, zp_out, lo, hi, bound,
                                   left_shift=True)
        out[chunk] = (requantize(acc, big_m, sh, zp_out, lo, hi, channel_axis=1) if q is None
                      else q.reshape(acc.shape))
    return out


def _depthwise_jit(x, weight, b, zp_in, zp_out, lo, hi, pads, strides, dilations, hw_padded, out_hw_, mult, plan,
                   ftype):
    """The compiled paths (``_jit.depthwise_rows`` / ``depthwise_channels_last``): taps in ``ftype``,
    where every partial sum is an exact integer, then the requantization with the bias."""
    n, c_in = x.shape[:2]
    c_out, _, kh, kw = weight.shape
    (sh_h, sh_w), (dh, dw) = strides, dilations
    (oh, ow), (hp, wp) = out_hw_, hw_padded
    bias64 = np.zeros(c_out, np.int64) if b is None else b.astype(np.int64)
    params = _jit.requant_params(*plan)
    if mult == 1 and oh * ow <= SMALL_IMAGE:
        # Small images: a channel's loops are too short to vectorize; run over channels instead.
        out_nhwc = np.empty((n, oh, ow, c_out), dtype=np.int8)
        _jit.depthwise_channels_last(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), pads[0], pads[1], hp, wp,
                                     np.ascontiguousarray(weight[:, 0].transpose(1, 2, 0), dtype=ftype),
                                     bias64, ftype(zp_in), sh_h, sh_w, dh, dw, *params, zp_out, lo, hi,
                                     np.zeros((sh_w, hp, -(-wp // sh_w) * c_out), dtype=ftype), out_nhwc)
        return np.ascontiguousarray(out_nhwc.transpose(0, 3, 1, 2))
    out = np.empty((n, c_out, oh, ow), dtype=np.int8)
    hq, wq = -(-hp // sh_h), -(-wp // sh_w)
    phases = np.zeros((sh_h * sh_w, (hq + 1) * wq), dtype=ftype)   # a zero row after each phase
    _jit.depthwise_rows(np.ascontiguousarray(x), pads[0], pads[1], hp, wp,
                        np.ascontiguousarray(weight[:, 0], dtype=ftype), bias64, mult, ftype(zp_in), sh_h, sh_w,
                        dh, dw, *params, zp_out, lo, hi, phases,
                        np.empty(x.shape[2] * x.shape[3], dtype=ftype), np.empty(_jit.BLOCK, dtype=ftype),
                        np.empty(oh * wq, dtype=np.int8), out)
    return out


def _depthwise_16x8(x, weight, bias, multiplier, shift, act_min, act_max, strides, pads, dilations, mult, op):
    """int16 taps in int64 over strided windows (zero point 0 pads with 0), then the 64-bit MBQM."""
    from quantir.runtime.qkernels.conv2d import requantize_16x8

    n = x.shape[0]
    c_out, _, kh, kw = weight.shape
    lo, hi = clamp_range(act_min, act_max, np.int16, op)
    pads = normalize_pads(pads, op)
    b = check_bias64(bias, c_out, op)
    big_m = np.broadcast_to(np.asarray(multiplier, dtype=np.int64).reshape(-1), (c_out,))
    sh = np.broadcast_to(np.asarray(shift, dtype=np.int64).reshape(-1), (c_out,))
    oh, ow = out_hw(x.shape, (kh, kw), strides, dilations, pads, op)
    (sh_h, sh_w), (dh, dw) = strides, dilations
    # the taps' sum fits int32 while |x·w| <= 2**15·2**7 times the taps stays below 2**31 (up to 511
    # taps; SIMD multiplies int32, not int64); the bias is added in int64 after
    wide = np.int32 if kh * kw * (1 << 22) < (1 << 31) and int(np.abs(weight).max(initial=0)) <= 128 else np.int64
    w = weight.reshape(c_out, kh, kw).astype(wide)
    hp, wp = x.shape[2] + pads[0] + pads[2], x.shape[3] + pads[1] + pads[3]
    out = np.empty((n, c_out, oh, ow), dtype=np.int16)
    for chunk in batch_chunks(n, c_out * (hp * wp + 2 * oh * ow)):
        xz = pad_hw(x[chunk], pads, 0).astype(wide)
        if mult > 1:
            xz = np.repeat(xz, mult, axis=1)  # channel oc reads input channel oc // mult
        taps = np.zeros((xz.shape[0], c_out, oh, ow), dtype=wide)
        tmp = np.empty_like(taps)
        for i in range(kh):
            for j in range(kw):
                tap = xz[:, :, i * dh:i * dh + (oh - 1) * sh_h + 1:sh_h, j * dw:j * dw + (ow - 1) * sh_w + 1:sh_w]
                np.multiply(tap, w[:, i, j].reshape(c_out, 1, 1), out=tmp)
                taps += tmp
        acc = taps.astype(np.int64)
        if b is not None:
            acc += b.reshape(c_out, 1, 1)
        out[chunk] = requantize_16x8(acc, big_m, sh, lo, hi, op)
    return out
