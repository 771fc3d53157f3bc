"""FULLY_CONNECTED, int8 (``reference_integer_ops::FullyConnected[PerChannel]``, docs/numerics.md §2.3).

Weights ``[C_out, K]``; the input is flattened to ``[batches, K]`` (its last axis is K)::

    acc = Σ_k (w - zp_w) · (x - zp_in) + bias          (zp_w = 0 for per-channel weights)
    out = clamp(MBQM(acc, M[c], shift[c]) + zp_out, act_min, act_max)

Multipliers differ by granularity (:func:`prepare_fully_connected`): per-tensor forms
``s_in·s_w`` in **float32** (``GetQuantizedConvolutionMultipler``), per-channel in double
(as CONV_2D). Under ``BUILTIN_REF`` the kernel is a float path instead,
``rha(double(acc) · double(s_in)·double(s_w[c])/double(s_out)) + zp_out`` — per channel as
numerics.md says, and in ai-edge-litert 2.3 per tensor too (measured); pass
``reference_float=True`` with the prepared ``effective_scale`` to reproduce it (the IR's
``qnn.fully_connected`` does). The fixed-point form is this function's default (the
optimized kernels compute it).

The dot products run as a float BLAS matmul, exact for any realistic K (§6): float32
when ``K·255·max|w - zp_w| < 2**24``, float64 otherwise.

**16x8** (int16 input and output, int8 weights; docs/numerics.md "int16x8 kernels"): pass
``storage=np.int16`` to :func:`prepare_fully_connected`. LiteRT requires zero point 0 on the
input and the output, and every 16x8 path with int8 weights that ``BUILTIN_REF`` (and, with an
int64 bias, the default resolver) runs is the double-precision one above, so the kernel always
takes it for int16. The bias is int64 by default (64-bit accumulator); an int32 bias is read as
int32 only when the op's ``quantized_bias_type`` says INT32 (``bias_type="int32"``), and then
LiteRT accumulates in int32 — an overflow there is refused, as for int8.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from quantir.numerics import conv_multiplier, fully_connected_per_tensor_multiplier, round_half_away, saturate
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

__all__ = ["FullyConnectedParams", "prepare_fully_connected", "fully_connected"]


@dataclass(frozen=True)
class FullyConnectedParams(KernelParams):
    multiplier: np.ndarray
    shift: np.ndarray
    output_zero_point: int
    act_min: int
    act_max: int
    effective_scale: np.ndarray  # double(s_in)·double(s_w[c])/double(s_out): the BUILTIN_REF float path
    accumulator: str = "int32"   # LiteRT's accumulator type: int32, or int64 for 16x8 with an int64 bias


def prepare_fully_connected(input_scale: float, weight_scales: Any, output_scale: float, output_zero_point: int,
                            activation: Activation = "none", *, channels: int | None = None,
                            bias_scale: float | None = None, storage: Any = np.int8, input_zero_point: int = 0,
                            bias_type: str = "int64") -> FullyConnectedParams:
    """Multipliers as ``fully_connected.cc`` Prepare computes them.

    One weight scale means per-tensor (float32 product ``s_in·s_w``); several mean
    per-channel (double product, one per output channel). ``bias_scale``, when given, is
    checked like LiteRT's per-tensor path: ``|s_in·s_w - s_bias| / s_out <= 0.02``.
    ``storage=np.int16`` prepares the 16x8 kernel: ``input_zero_point`` and the output zero
    point must be 0, and ``bias_type`` ("int64" or "int32") is the op's ``quantized_bias_type``.
    """
    op = "fully_connected"
    ws = np.atleast_1d(np.asarray(weight_scales, dtype=np.float32)).reshape(-1)
    accumulator = "int32"
    if np.dtype(storage) == np.int16:
        if int(input_zero_point) != 0 or int(output_zero_point) != 0:
            raise QKernelError(f"{op}: int16 input and output need zero point 0, found {input_zero_point} and "
                               f"{output_zero_point} (fully_connected.cc Prepare: TF_LITE_ENSURE_EQ zero_point, 0)")
        if bias_type not in ("int64", "int32"):
            raise QKernelError(f"{op}: a 16x8 bias is int64 or int32 (quantized_bias_type), found {bias_type!r}")
        accumulator = bias_type
        zp = 0
    else:
        zp = check_zero_point(output_zero_point, op, "output zero point")
    if ws.size == 1:
        real = np.atleast_1d(fully_connected_per_tensor_multiplier(input_scale, ws[0], output_scale))
        if bias_scale is not None:
            product = float(np.float32(input_scale) * ws[0])
            if abs(product - float(np.float32(bias_scale))) / float(np.float32(output_scale)) > 0.02:
                raise QKernelError(f"{op}: bias scale {bias_scale} differs from input_scale·weight_scale "
                                   f"{product} by more than 2% of the output scale (LiteRT rejects it)")
    else:
        if channels is not None and ws.size != channels:
            raise ValueError(f"{op}: {ws.size} weight scales for {channels} output channels")
        real = np.atleast_1d(conv_multiplier(input_scale, ws, output_scale))
    big_m, shift = quantize_channel_multipliers(real, op)
    if channels is not None and ws.size == 1:
        big_m, shift = np.repeat(big_m, channels), np.repeat(shift, channels)
    lo, hi = activation_range(activation, output_scale, zp, storage, op)
    effective = np.atleast_1d(conv_multiplier(input_scale, ws, output_scale))
    if channels is not None and effective.size == 1:
        effective = np.repeat(effective, channels)
    return FullyConnectedParams(big_m, shift, zp, lo, hi, effective, accumulator)


def fully_connected(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None, *, input_zero_point: int,
                    output_zero_point: int, multiplier: Any, shift: Any, act_min: int = -128, act_max: int = 127,
                    weight_zero_point: int = 0, reference_float: bool = False,
                    effective_scale: Any = None, accumulator: str = "int32") -> np.ndarray:
    """Fully connected layer; ``x`` is ``[..., K]`` int8 (or int16: 16x8), the result
    ``[..., C_out]`` of the input's dtype."""
    op = "fully_connected"
    x = check_quantized(x, op, "input", (np.int8, np.int16))
    weight = check_quantized(weight, op, "weight")
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"{op}: input [..., K] and weight [C_out, K] disagree: {x.shape} vs {weight.shape}")
    c_out, k = weight.shape
    wide = x.dtype == np.int16
    span = 32768 if wide else 255   # max |x - zp_in|
    if wide:
        if int(input_zero_point) != 0 or int(output_zero_point) != 0:
            raise QKernelError(f"{op}: int16 input and output need zero point 0 (fully_connected.cc Prepare)")
        zp_in = zp_out = 0
        reference_float = True   # the only 16x8 path with int8 weights under BUILTIN_REF (module docstring)
    else:
        zp_in = check_zero_point(input_zero_point, op, "input zero point")
        zp_out = check_zero_point(output_zero_point, op, "output zero point")
    zp_w = check_zero_point(weight_zero_point, op, "weight zero point")
    lo, hi = clamp_range(act_min, act_max, x.dtype, op)
    b = check_bias64(bias, c_out, op) if accumulator == "int64" else check_bias(bias, c_out, op)
    rows = x.reshape(-1, k)
    w_max = max_abs(weight, zp_w)
    ftype = exact_float_dtype(k, span, w_max, op)  # exact BLAS (docs/numerics.md §6)
    wt = np.subtract(weight.T, ftype(zp_w), dtype=ftype)  # [K, C_out]
    overflow_possible = accumulator == "int32" and accumulator_bound(k, span, w_max, b) > INT32_MAX
    if reference_float:
        if effective_scale is None:
            raise ValueError(f"{op}: reference_float=True needs the effective_scale from prepare_fully_connected")
        eff = np.broadcast_to(np.asarray(effective_scale, dtype=np.float64).reshape(-1), (c_out,))
    else:
        big_m = np.broadcast_to(np.asarray(multiplier, dtype=np.int64).reshape(-1), (c_out,))
        sh = np.broadcast_to(np.asarray(shift, dtype=np.int64).reshape(-1), (c_out,))
    out = np.empty((rows.shape[0], c_out), dtype=x.dtype)
    for chunk in batch_chunks(rows.shape[0], k + c_out):
        xs = np.subtract(rows[chunk], ftype(zp_in), dtype=ftype)
        acc = (xs @ wt).astype(np.int64)  # exact integers
        if b is not None:
            acc += b
        if overflow_possible:
            check_accumulator(acc, op)
        if reference_float:
            # BUILTIN_REF per-channel path: static_cast<int32_t>(round(double(acc) * scale)) + zp
            scaled = round_half_away(acc.astype(np.float64) * eff)
            if wide and scaled.size and np.abs(scaled).max() > INT32_MAX:
                raise QKernelError(f"{op}: acc·s_in·s_w/s_out reaches {np.abs(scaled).max():g}, past int32: LiteRT's "
                                   "cast of it to int32 is undefined behaviour. Raise the output scale.")
            out[chunk] = saturate(scaled + zp_out, lo, hi).astype(x.dtype)
        else:
            out[chunk] = requantize(acc, big_m, sh, zp_out, lo, hi, channel_axis=-1)
    return out.reshape(*x.shape[:-1], c_out)
