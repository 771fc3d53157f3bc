"""TRANSPOSE_CONV, int8 per-channel (``reference_integer_ops::TransposeConv``, docs/numerics.md §2.24).

Every input pixel scatters its contribution into the output window it covers::

    acc[n, c, y, x] = Σ_{iy·s_h − pad_h + fy = y,  ix·s_w − pad_w + fx = x}
                          Σ_ic w[c, ic, fy, fx] · (x[n, ic, iy, ix] − zp_in)
    out = clamp(MBQM(acc + bias[c], M[c], shift[c]) + zp_out, act_min, act_max)

Layout is NCHW with weights output channel first ``[C_out, C_in, KH, KW]`` (LiteRT's OHWI in
NCHW order). The output size is whatever the op's output-shape input says: taps that land
outside it are dropped, output pixels no tap reaches hold only the bias. LiteRT 2.x's Prepare
requires the forward conv of that output size (same padding and strides) to give back the
input size (``transpose_conv_input_hw``), so the output can exceed the natural
``s·(i − 1) + k`` (VALID) only by less than a stride. The begin pads come
from TFLite's SAME/VALID rule applied to the *output* size (``ComputePaddingHeightWidth`` with
the output as the "input" of the forward conv, dilation 1); the end side is cut by the output
size. ``M[c]`` is the conv multiplier ``double(s_in)·double(s_w[c])/double(s_out)``
(``PopulateConvolutionQuantizationParams``, as CONV_2D).

LiteRT accumulates in an int32 scratch buffer (no saturation). Here the per-tap products are
one exact float BLAS product (every partial sum is an integer below
``max|x − zp_in|·Σ|w[c]|``: exact in float32 below 2**24, else float64, §6), scattered into an
int64 canvas. When a static bound does not rule int32 overflow out, the sum of the absolute
terms is computed too and the kernel refuses any output whose partial sums could leave int32
(undefined behaviour in LiteRT): a conservative test, since the order of LiteRT's partial sums
is not reproduced.

**16x8** (int16 input and output, int8 weights; docs/numerics.md §2.25): prepare with
``storage=np.int16``. LiteRT's Prepare requires zero point 0 on the input and the output and an
int64 or int32 bias. The reference kernel is a template on the bias type: the accumulator (scratch
buffer) is int64 unless the op's ``quantized_bias_type`` is INT32, and it is requantized with the
``MultiplyByQuantizedMultiplier`` of that type — the 64-bit one (15-bit multiplier, one rounding,
§1.5) for int64, the 32-bit one of the int8 kernel for int32. Here the accumulator follows the bias's
dtype: an int32 ``bias`` means INT32 (the exporter writes the option), an int64 one or none means
int64. An int32 accumulator that could overflow is refused, as for int8.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from quantir.runtime.qkernels._common import (
    INT32_MAX,
    AccumulatorOverflowError,
    Activation,
    QKernelError,
    check_bias,
    check_bias64,
    check_quantized,
    check_zero_point,
    clamp_range,
    requantize,
)
from quantir.runtime.qkernels.conv2d import ConvParams, prepare_conv2d, requantize_16x8
from quantir.runtime.qkernels.padding import tflite_pads

__all__ = ["prepare_transpose_conv", "transpose_conv", "transpose_conv_pads", "transpose_conv_input_hw"]

PADDINGS = ("same", "valid")


def prepare_transpose_conv(input_scale: float, weight_scales: Any, output_scale: float, output_zero_point: int,
                           activation: Activation = "none", *, channels: int | None = None,
                           storage: Any = np.int8, input_zero_point: int = 0) -> ConvParams:
    """TRANSPOSE_CONV's Prepare: the CONV_2D multipliers and clamp (one scale per output channel, or
    one broadcast to ``channels``). ``storage=np.int16`` prepares the 16x8 kernel: ``input_zero_point``
    and the output zero point must be 0, and the clamp spans int16."""
    return prepare_conv2d(input_scale, weight_scales, output_scale, output_zero_point, activation,
                          channels=channels, op="transpose_conv", storage=storage, input_zero_point=input_zero_point)


def transpose_conv_pads(padding: str, output_hw: Sequence[int], kernel_hw: Sequence[int],
                        strides: Sequence[int]) -> tuple[int, int]:
    """The begin pads ``(top, left)`` LiteRT's Eval computes for an output of ``output_hw``."""
    if padding.lower() not in PADDINGS:
        raise QKernelError(f"transpose_conv: padding must be 'same' or 'valid', found {padding!r}")
    top, left, _, _ = tflite_pads(padding, output_hw, kernel_hw, strides)
    return top, left


def transpose_conv_input_hw(padding: str, output_hw: Sequence[int], kernel_hw: Sequence[int],
                            strides: Sequence[int]) -> tuple[int, int]:
    """The input size LiteRT (2.x) requires: the forward conv's output size from ``output_hw``
    (``ComputeOutSize``: SAME ``ceil(O / s)``, VALID ``(O + s − k) / s`` truncated toward zero)."""
    same = padding.lower() == "same"
    return tuple(-(-o // s) if same else int((o + s - k) / s)  # type: ignore[return-value]
                 for o, k, s in zip(output_hw, kernel_hw, strides))


def transpose_conv(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None, *, input_zero_point: int,
                   output_zero_point: int, multiplier: Any, shift: Any, act_min: int = -128, act_max: int = 127,
                   strides: Sequence[int] = (1, 1), output_hw: Sequence[int], padding: str = "valid") -> np.ndarray:
    """NCHW transposed convolution of int8 (or int16: 16x8) ``x``; returns ``[N, C_out, *output_hw]`` of
    its dtype."""
    op = "transpose_conv"
    x = check_quantized(x, op, "input", (np.int8, np.int16))
    weight = check_quantized(weight, op, "weight")
    if x.ndim != 4 or weight.ndim != 4:
        raise QKernelError(f"{op}: input must be NCHW and weight [C_out, C_in, KH, KW] (4-D), found "
                           f"{x.shape} and {weight.shape}")
    n, c_in, h, w = x.shape
    c_out, wc_in, kh, kw = weight.shape
    if wc_in != c_in:
        raise QKernelError(f"{op}: the input has {c_in} channels but the weight {weight.shape} expects {wc_in}")
    sh, sw = (int(s) for s in strides)
    if sh < 1 or sw < 1:
        raise QKernelError(f"{op}: strides must be positive, found {tuple(strides)} (LiteRT refuses them)")
    oh, ow = (int(d) for d in output_hw)
    if oh < 0 or ow < 0:
        raise QKernelError(f"{op}: output size must be non-negative, found {tuple(output_hw)}")
    wide = x.dtype == np.int16
    if wide and (int(input_zero_point) != 0 or int(output_zero_point) != 0):
        raise QKernelError(f"{op}: int16 input and output need zero point 0 (transpose_conv.cc Prepare)")
    zp_in = check_zero_point(input_zero_point, op, "input zero point")
    zp_out = check_zero_point(output_zero_point, op, "output zero point")
    lo, hi = clamp_range(act_min, act_max, x.dtype, op)
    accumulator = "int32" if not wide or (bias is not None and np.asarray(bias).dtype == np.int32) else "int64"
    b = check_bias(bias, c_out, op) if accumulator == "int32" else check_bias64(bias, c_out, op)
    big_m = np.broadcast_to(np.asarray(multiplier, np.int64).reshape(-1), (c_out,))
    shift_ = np.broadcast_to(np.asarray(shift, np.int64).reshape(-1), (c_out,))
    top, left = transpose_conv_pads(padding, (oh, ow), (kh, kw), (sh, sw))
    expected = transpose_conv_input_hw(padding, (oh, ow), (kh, kw), (sh, sw))
    if expected != (h, w):
        raise QKernelError(f"{op}: an output of {oh}x{ow} with {padding.upper()} padding, kernel {kh}x{kw} and "
                           f"strides {sh}x{sw} comes from a {expected[0]}x{expected[1]} input, not {h}x{w} "
                           "(LiteRT's Prepare refuses the mismatch)")

    l1 = np.abs(weight.reshape(c_out, -1).astype(np.int64)).sum(axis=1)
    b_abs = np.zeros(c_out, np.int64) if b is None else np.abs(b)
    deviation = max(int(x.max(initial=zp_in)) - zp_in, zp_in - int(x.min(initial=zp_in)), 0)
    bound = int((deviation * l1).max(initial=0))
    ftype = np.float32 if bound < (1 << 24) else np.float64   # float64 holds any 16x8 sum below 2**53
    acc = _scatter(x.astype(ftype) - ftype(zp_in), weight.astype(ftype), (sh, sw), (top, left), (oh, ow))
    if accumulator == "int64":
        if b is not None:
            acc += b.reshape(1, -1, 1, 1)
        return requantize_16x8(acc, big_m, shift_, lo, hi, op)   # the 64-bit MBQM, as CONV_2D's
    if int((deviation * l1 + b_abs).max(initial=0)) > INT32_MAX:
        terms = _scatter(np.abs(x.astype(np.float64) - zp_in), np.abs(weight.astype(np.float64)), (sh, sw),
                         (top, left), (oh, ow))
        worst = terms + b_abs.reshape(1, -1, 1, 1)
        if worst.size and float(worst.max()) > INT32_MAX:
            raise AccumulatorOverflowError(
                f"{op}: an output sums terms of magnitude up to {int(worst.max())}, past int32; LiteRT's int32 "
                "scratch accumulator may overflow (undefined behaviour). Reduce the weight or input ranges.")
    if b is not None:
        acc += b.reshape(1, -1, 1, 1)
    return requantize(acc, big_m, shift_, zp_out, lo, hi, x.dtype, channel_axis=1)


def _scatter(xc: np.ndarray, w: np.ndarray, strides, begin, out_hw) -> np.ndarray:
    """``Σ`` of every tap's products at its output position (int64 ``[N, C_out, OH, OW]``):
    one GEMM ``w[(C_out, KH, KW), C_in] @ x[C_in, N·H·W]`` (exact, see the module docstring),
    then a strided add per tap into a canvas that holds the whole uncropped result."""
    n, c_in, h, wd = xc.shape
    c_out, _, kh, kw = w.shape
    sh, sw = strides
    top, left = begin
    oh, ow = out_hw
    wmat = w.transpose(0, 2, 3, 1).reshape(c_out * kh * kw, c_in)
    cols = (wmat @ xc.transpose(1, 0, 2, 3).reshape(c_in, n * h * wd)).reshape(c_out, kh, kw, n, h, wd)
    cols = np.rint(cols).astype(np.int64)   # exact integers already: rint only fixes the dtype
    # canvas rows/cols: output coordinate + top/left, large enough for every tap and the output
    ch = max(sh * (h - 1) + kh, top + oh) if h else top + oh
    cw = max(sw * (wd - 1) + kw, left + ow) if wd else left + ow
    canvas = np.zeros((n, c_out, ch, cw), np.int64)
    for fy in range(kh):
        for fx in range(kw):
            canvas[:, :, fy: fy + sh * (h - 1) + 1: sh, fx: fx + sw * (wd - 1) + 1: sw] += \
                cols[:, fy, fx].transpose(1, 0, 2, 3)
    return np.ascontiguousarray(canvas[:, :, top: top + oh, left: left + ow])
