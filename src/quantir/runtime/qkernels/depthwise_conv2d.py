"""DEPTHWISE_CONV_2D, int8 per-channel (``reference_integer_ops::DepthwisePerChannel``, §2.2).

NCHW input ``[N, C_in, H, W]``, weights ``[C_out, 1, KH, KW]`` with
``C_out = C_in · depth_multiplier``; output channel ``oc`` reads input channel
``oc // depth_multiplier`` (ONNX grouped-conv order, the same as TFLite's
``oc = ic·mult + m``). Per output::

    acc = Σ_taps w[oc, kh, kw] · (x[ic] - zp_in) + bias[oc]
    out = clamp(MBQM(acc, M[oc], shift[oc]) + zp_out, act_min, act_max)

Computed as a loop over the KH·KW taps, each a whole-tensor multiply-accumulate in int32
(|x - zp| ≤ 255, |w| ≤ 128: exact unless ``K·255·max|w| + max|bias|`` exceeds int32, in
which case it runs in int64 and the values are checked against LiteRT's int32 range). The
parameters come from :func:`~quantir.runtime.qkernels.conv2d.prepare_conv2d`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from quantir.runtime.qkernels._common import (
    INT32_MAX,
    accumulator_bound,
    batch_chunks,
    check_accumulator,
    check_bias,
    check_quantized,
    check_zero_point,
    clamp_range,
    max_abs,
    requantize,
)
from quantir.runtime.qkernels._window import out_hw, pad_hw
from quantir.runtime.qkernels.padding import normalize_pads

__all__ = ["depthwise_conv2d"]


def depthwise_conv2d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None, *, input_zero_point: int,
                     output_zero_point: int, multiplier: Any, shift: Any, act_min: int = -128, act_max: int = 127,
                     strides: Sequence[int] = (1, 1), pads: Sequence[int] = (0, 0, 0, 0),
                     dilations: Sequence[int] = (1, 1)) -> np.ndarray:
    """Int8 NCHW depthwise convolution; returns int8 ``[N, C_out, OH, OW]``."""
    op = "depthwise_conv2d"
    x = check_quantized(x, op, "input")
    weight = check_quantized(weight, op, "weight")
    if x.ndim != 4 or weight.ndim != 4 or weight.shape[1] != 1:
        raise ValueError(f"{op}: input must be NCHW and weight [C_out, 1, KH, KW], found {x.shape} and {weight.shape}")
    n, c_in, _, _ = x.shape
    c_out, _, kh, kw = weight.shape
    if c_out % c_in:
        raise ValueError(f"{op}: {c_out} output channels is not a multiple of {c_in} input channels")
    mult = c_out // c_in
    zp_in = check_zero_point(input_zero_point, op, "input zero point")
    zp_out = check_zero_point(output_zero_point, op, "output zero point")
    lo, hi = clamp_range(act_min, act_max, np.int8, op)
    pads = normalize_pads(pads, op)
    b = check_bias(bias, c_out, op)
    big_m = np.broadcast_to(np.asarray(multiplier, dtype=np.int64).reshape(-1), (c_out,))
    sh = np.broadcast_to(np.asarray(shift, dtype=np.int64).reshape(-1), (c_out,))
    oh, ow = out_hw(x.shape, (kh, kw), strides, dilations, pads, op)
    (sh_h, sh_w), (dh, dw) = strides, dilations

    # int32 taps are exact unless the worst case K·255·max|w| + max|bias| exceeds int32;
    # then accumulate in int64 and check the values (LiteRT's int32 would overflow).
    overflow_possible = accumulator_bound(kh * kw, 255, max_abs(weight), b) > INT32_MAX
    acc_dtype = np.int64 if overflow_possible else np.int32
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
    return out
