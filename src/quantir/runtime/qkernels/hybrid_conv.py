"""CONV_2D and DEPTHWISE_CONV_2D in LiteRT's dynamic-range ("hybrid") form, bit-exact (docs/numerics.md §8.4).

Float32 NCHW input, int8 OIHW weights (zero point 0), float32 bias, float32 output; the input is
quantized at run time with **one scale per image** (the whole ``C·H·W``, not per row as in
FULLY_CONNECTED). Which kernel ``BUILTIN_REF`` runs (``conv.cc`` / ``depthwise_conv.cc``):

CONV_2D, per-tensor weights — one scale, or several that are all equal, and one group: the
``EvalHybrid`` path, which has a single implementation for every kernel type, so ``BUILTIN_REF``
runs ``optimized_ops::HybridConv`` (im2col + ``MatrixBatchVectorMultiplyAccumulate``). The image
is quantized **symmetrically** (:func:`~quantir.runtime.qkernels.hybrid.symmetric_quantize_rows`),
``s[b] = f32(s_in[b] · s_w)``, padding contributes ``q = 0``, and (int8 weights of -128 are
refused when ``C_out`` is not a multiple of 4, see
:func:`~quantir.runtime.qkernels.hybrid.check_no_int8_min`)::

    out = clamp(f32(f32(f32(acc) · s[b]) + bias[c]))

CONV_2D, per-channel weights (scales that differ) or groups > 1: ``EvalHybridPerChannel``, which
under ``BUILTIN_REF`` is ``reference_ops::HybridConvPerChannel``. The image is quantized
**asymmetrically** (scale and zero point per image, whatever the op's options say), taps outside
the image are skipped (so they contribute 0, not ``-zp``), and the float32 product is taken left
to right::

    acc = Σ_in-image w · (q - zp[b])
    out = clamp(f32(f32(f32(f32(acc) · s_w[c]) · s_in[b]) + bias[c]))

DEPTHWISE_CONV_2D: only ``EvalHybridPerChannel`` exists (int8 filters); under ``BUILTIN_REF``
``reference_integer_ops::DepthwiseConvHybridPerChannel``: asymmetric per image, taps outside the
image skipped, and the two scales multiplied *first*::

    out = clamp(f32(f32(f32(acc) · f32(s_w[c] · s_in[b])) + bias[c]))

LiteRT requires one weight scale per output channel for the hybrid depthwise (a single scale
passes its Prepare only for one channel), and reads one per channel in the grouped conv, so both
refuse a per-tensor scale there. Weights ``[C_out, C_in/groups, KH, KW]`` (depthwise
``[C_out, 1, KH, KW]``, ``C_out = C_in · depth_multiplier``); pads ``(top, left, bottom, right)``
as :func:`~quantir.runtime.qkernels.padding.tflite_pads` gives them. Fused activations: none,
relu, relu6, relu_n1_to_1.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from quantir.runtime.qkernels._common import QKernelError
from quantir.runtime.qkernels._window import out_hw, pad_hw, windows
from quantir.runtime.qkernels.hybrid import (
    _check_weight,
    _float_bias,
    _rows,
    _weight_scales,
    asymmetric_quantize_rows,
    check_no_int8_min,
    float_activation,
    symmetric_quantize_rows,
)
from quantir.runtime.qkernels.padding import normalize_pads

__all__ = ["conv2d_hybrid", "depthwise_conv2d_hybrid"]

_F32 = np.float32


def _geometry(x: np.ndarray, w: np.ndarray, strides, dilations, pads, op: str):
    if x.ndim != 4:
        raise QKernelError(f"{op}: the input must be NCHW (rank 4), found shape {x.shape}")
    pads = normalize_pads(pads, op)
    strides, dilations = tuple(int(s) for s in strides), tuple(int(d) for d in dilations)
    if min(strides) < 1 or min(dilations) < 1:
        raise QKernelError(f"{op}: strides and dilations must be >= 1, found {strides} and {dilations}")
    return pads, strides, dilations, out_hw(x.shape, w.shape[2:], strides, dilations, pads, op)


def _centered(x: np.ndarray, zp: np.ndarray | None) -> np.ndarray:
    """``q - zp`` per image, as float64 (exact); padding with 0 then skips out-of-image taps."""
    xf = x.astype(np.float64)
    return xf if zp is None else xf - zp.astype(np.float64)[:, None, None, None]


def _quantize_images(x: np.ndarray, symmetric: bool):
    """Each image quantized as LiteRT reads it, a row in NHWC order (the rounding depends on the
    position in the row, hybrid.litert_round_rows); returned in the kernels' NCHW layout."""
    nhwc = x.transpose(0, 2, 3, 1)
    flat = nhwc.reshape(x.shape[0], -1)
    if symmetric:
        (q, s), zp = symmetric_quantize_rows(flat), None
    else:
        q, s, zp = asymmetric_quantize_rows(flat)
    return q.reshape(nhwc.shape).transpose(0, 3, 1, 2), s, zp


def _conv_acc(xc: np.ndarray, w: np.ndarray, groups: int, pads, strides, dilations, out) -> np.ndarray:
    """Exact integer accumulators ``[N, C_out, OH, OW]`` (float64 values)."""
    win = windows(pad_hw(xc, pads, 0.0), w.shape[2:], strides, dilations, out)   # [N, C, OH, OW, KH, KW]
    cpg, opg = xc.shape[1] // groups, w.shape[0] // groups
    wf = w.astype(np.float64)
    parts = [np.einsum("nchwij,ocij->nohw", win[:, g * cpg:(g + 1) * cpg], wf[g * opg:(g + 1) * opg],
                       optimize=True) for g in range(groups)]
    return parts[0] if groups == 1 else np.concatenate(parts, axis=1)


def conv2d_hybrid(x: np.ndarray, weight: np.ndarray, weight_scales: Any, bias: np.ndarray | None = None, *,
                  pads: Sequence[int] = (0, 0, 0, 0), strides: Sequence[int] = (1, 1),
                  dilations: Sequence[int] = (1, 1), activation: str = "none") -> np.ndarray:
    """Hybrid CONV_2D: float32 NCHW ``x``, int8 OIHW ``weight``, float32 NCHW result (module docstring)."""
    op = "conv2d_hybrid"
    x = _rows(x, op)
    w = _check_weight(weight, 4, op)
    c_out, cpg = w.shape[:2]
    if x.ndim != 4 or cpg == 0 or x.shape[1] % cpg or c_out % (x.shape[1] // cpg):
        raise QKernelError(f"{op}: input {x.shape} and weight {w.shape} do not form a grouped convolution")
    groups = x.shape[1] // cpg
    sw = _weight_scales(weight_scales, c_out, op)
    b = _float_bias(bias, c_out, op)
    pads, strides, dilations, out = _geometry(x, w, strides, dilations, pads, op)
    per_tensor = groups == 1 and bool(np.all(sw == sw[0]))   # conv.cc: is_hybrid_per_channel is false
    if groups != 1 and sw.size == 1 and c_out > 1:
        raise QKernelError(f"{op}: a grouped hybrid convolution reads one weight scale per output channel in "
                           f"LiteRT; give {c_out} scales")
    if per_tensor and c_out % 4:   # else ruy's GEMM, which is exact
        check_no_int8_min(w, op)
    q, s_in, zp = _quantize_images(x, symmetric=per_tensor)
    acc = _conv_acc(_centered(q, zp), w, groups, pads, strides, dilations, out).astype(_F32)
    if per_tensor:
        scale = (s_in * sw[0]).astype(_F32)[:, None, None, None]
        y = (acc * scale).astype(_F32)
    else:
        y = (acc * sw[None, :, None, None]).astype(_F32)
        y = (y * s_in[:, None, None, None]).astype(_F32)
    if b is not None:
        y = (y + b[None, :, None, None]).astype(_F32)
    return float_activation(y, activation, op)


def depthwise_conv2d_hybrid(x: np.ndarray, weight: np.ndarray, weight_scales: Any, bias: np.ndarray | None = None,
                            *, pads: Sequence[int] = (0, 0, 0, 0), strides: Sequence[int] = (1, 1),
                            dilations: Sequence[int] = (1, 1), activation: str = "none") -> np.ndarray:
    """Hybrid DEPTHWISE_CONV_2D: float32 NCHW ``x``, int8 ``weight`` ``[C_out, 1, KH, KW]`` with
    ``C_out`` a multiple of ``C_in``, one weight scale per output channel (module docstring)."""
    op = "depthwise_conv2d_hybrid"
    x = _rows(x, op)
    w = _check_weight(weight, 4, op)
    c_out = w.shape[0]
    if x.ndim != 4 or w.shape[1] != 1 or x.shape[1] == 0 or c_out % x.shape[1]:
        raise QKernelError(f"{op}: input {x.shape} and depthwise weight {w.shape} disagree (weight must be "
                           "[C_in·multiplier, 1, KH, KW])")
    sw = _weight_scales(weight_scales, c_out, op)
    if sw.size != c_out:
        raise QKernelError(f"{op}: LiteRT's hybrid depthwise kernel needs one weight scale per output channel "
                           f"({c_out}), found {sw.size}")
    b = _float_bias(bias, c_out, op)
    pads, strides, dilations, out = _geometry(x, w, strides, dilations, pads, op)
    q, s_in, zp = _quantize_images(x, symmetric=False)
    xc = _centered(q, zp)[:, np.arange(c_out) // (c_out // x.shape[1])]   # the input channel of each output
    win = windows(pad_hw(xc, pads, 0.0), w.shape[2:], strides, dilations, out)
    acc = np.einsum("nchwij,cij->nchw", win, w[:, 0].astype(np.float64), optimize=True).astype(_F32)
    scale = (sw[None, :] * s_in[:, None]).astype(_F32)[:, :, None, None]
    y = (acc * scale).astype(_F32)
    if b is not None:
        y = (y + b[None, :, None, None]).astype(_F32)
    return float_activation(y, activation, op)
