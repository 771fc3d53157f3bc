"""BATCH_MATMUL, int8 x int8 -> int8 (``reference_ops::BatchMatMul<int8_t, int32_t>``, docs/numerics.md §2.23).

Both operands are activations, per tensor. Prepare: ``M = double(f32(s_a · s_b)) / double(s_out)``
(``GetQuantizedConvolutionMultipler``, as per-tensor FULLY_CONNECTED) quantized by ``QuantizeMultiplier``.
Eval, after ``adj_x`` / ``adj_y`` transpose the last two dims of an operand (pure data movement)::

    acc[..., i, j] = Σ_k (a[..., i, k] - zp_a) · (b[..., k, j] - zp_b)     int32 (overflow refused)
    out            = clamp(MBQM(acc, M, shift) + zp_out, -128, 127)

The batch dims broadcast (a size-1 dim repeats), as numpy's matmul does. The products are exact
in float BLAS while ``K · 255²`` stays below 2**53 (docs/numerics.md §6).

**int16 x int16 -> int16** (``storage=np.int16``): ``batch_matmul.cc`` Prepare requires zero
point 0 on both operands and the output; the accumulator is int64 and is requantized with the
int64 form of MBQM (15-bit multiplier, one rounding; docs/numerics.md §1.5), clamped to int16.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from quantir.numerics import (fully_connected_per_tensor_multiplier, multiply_by_quantized_multiplier_int64,
                              quantize_multiplier, saturate)
from quantir.runtime.qkernels._common import (INT32_MAX, KernelParams, QKernelError, check_accumulator,
                                              check_quantized, check_zero_point, exact_float_dtype, requantize)

__all__ = ["BatchMatMulParams", "prepare_batch_matmul", "batch_matmul"]


@dataclasses.dataclass(frozen=True)
class BatchMatMulParams(KernelParams):
    output_multiplier: int
    output_shift: int
    output_zero_point: int


def prepare_batch_matmul(lhs_scale: float, rhs_scale: float, output_scale: float,
                         output_zero_point: int, *, storage=np.int8) -> BatchMatMulParams:
    if np.dtype(storage) == np.int16 and int(output_zero_point) != 0:
        raise QKernelError(f"batch_matmul: an int16 output needs zero point 0, found {output_zero_point} "
                           "(batch_matmul.cc Prepare: TF_LITE_ENSURE_EQ output zero_point, 0)")
    zp = check_zero_point(output_zero_point, "batch_matmul", "output zero point")
    real = float(fully_connected_per_tensor_multiplier(lhs_scale, rhs_scale, output_scale))
    if not np.isfinite(real) or real < 0:
        raise QKernelError(f"batch_matmul: multiplier s_a·s_b/s_out = {real} from scales ({lhs_scale}, {rhs_scale}, "
                           f"{output_scale}) is not finite and non-negative")
    m, s = quantize_multiplier(real)
    return BatchMatMulParams(int(m), int(s), zp)


def batch_matmul(a: np.ndarray, b: np.ndarray, *, lhs_zero_point: int, rhs_zero_point: int, output_multiplier: int,
                 output_shift: int, output_zero_point: int, adj_x: bool = False, adj_y: bool = False) -> np.ndarray:
    a = check_quantized(a, "batch_matmul", "lhs", (np.int8, np.int16))
    b = check_quantized(b, "batch_matmul", "rhs", (a.dtype,))
    wide = a.dtype == np.int16
    if wide and (int(lhs_zero_point) or int(rhs_zero_point) or int(output_zero_point)):
        raise QKernelError("batch_matmul: int16 operands and output need zero point 0, found "
                           f"{lhs_zero_point}, {rhs_zero_point}, {output_zero_point} (batch_matmul.cc Prepare)")
    if a.ndim < 2 or b.ndim < 2:
        raise QKernelError(f"batch_matmul: operands of rank 2 or more, got shapes {a.shape} and {b.shape}")
    av = a.astype(np.int64) - int(lhs_zero_point)
    bv = b.astype(np.int64) - int(rhs_zero_point)
    if adj_x:
        av = np.swapaxes(av, -1, -2)
    if adj_y:
        bv = np.swapaxes(bv, -1, -2)
    k = av.shape[-1]
    if bv.shape[-2] != k:
        raise QKernelError(f"batch_matmul: contracted dims differ ({av.shape} x {bv.shape})")
    span = 32768 if wide else 255
    dtype = exact_float_dtype(k, span, span, "batch_matmul")
    acc = np.matmul(av.astype(dtype), bv.astype(dtype)).astype(np.int64)
    if wide:
        if acc.size and np.abs(acc).max() >= 1 << 47:
            raise QKernelError(f"batch_matmul: an int64 accumulator reaches {np.abs(acc).max()}, past the 2**47 "
                               "that LiteRT's 64-bit MultiplyByQuantizedMultiplier accepts")
        try:
            scaled = multiply_by_quantized_multiplier_int64(acc, output_multiplier, output_shift)
        except ValueError as e:   # a shift outside [-31, 7], or a result past int32: LiteRT's DCHECKs
            raise QKernelError(f"batch_matmul: {e}") from None
        return saturate(np.asarray(scaled), -32768, 32767).astype(np.int16)
    if k * 255 * 255 > INT32_MAX:
        check_accumulator(acc, "batch_matmul")
    return requantize(acc, output_multiplier, output_shift, output_zero_point, -128, 127)
