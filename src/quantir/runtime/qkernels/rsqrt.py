"""RSQRT, int8 (``elementwise.cc``: ``RsqrtEvalQuantizedInt8``, docs/numerics.md §2.22), both resolvers.

Prepare: ``(M, s) = QuantizeMultiplier(1.0 / f32(sqrtf(s_in) · s_out))`` (the product in float32,
the quotient in double). Per value ``v = q - zp_in``::

    v < 0    LiteRT fails the invocation ("Rsqrt is only defined for positive values")
    v == 0   127 (the largest output, whatever the parameters)
    else     (Mi, si) = GetInvSqrtQuantizedMultiplierExp(v, -1)
             d   = MBQM(1, Mi, si + 20)                      1/sqrt(v) in Q.20
             out = clamp(MBQM(d, M, s - 20) + zp_out, -128, 127)

The output is a function of one int8 value: the formula runs on the 256 values once (at Prepare)
and the kernel gathers.

int16 (``storage=np.int16``): zero points 0 (Prepare checks both) and a
513-entry table (:mod:`._lut16`, float32) of ``1.0f / sqrtf(x)`` for ``x > 0`` and
``f32(32767 · s_out)`` (the largest output) for ``x <= 0``, read with interpolation; a negative input
fails the invocation as in int8.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from quantir.numerics import get_inv_sqrt_quantized_multiplier_exp, quantize_multiplier, saturate
from quantir.runtime.qkernels._common import (INT8_VALUES, KernelParams, QKernelError, check_quantized,
                                              check_zero_point, lookup_table, multiply_by_quantized_multiplier)
from quantir.runtime.qkernels._lut16 import check_int16_zero_point, lut16_lookup, lut16_values, populate_lut16

__all__ = ["RsqrtParams", "prepare_rsqrt", "rsqrt"]

_SHIFT = 20   # LiteRT's kShift: the reciprocal square root kept as an integer in Q.20


@dataclasses.dataclass(frozen=True)
class RsqrtParams(KernelParams):
    table: np.ndarray          # 256 entries, indexed by q + 128 (values below the zero point unused);
    #                            int16: 65,536, indexed by q + 32768
    input_zero_point: int


def _real_multiplier(input_scale: float, output_scale: float) -> float:
    """``1. / (std::sqrt(float input_scale) * float output_scale)``: float32 until the double quotient."""
    product = np.float32(np.sqrt(np.float32(input_scale))) * np.float32(output_scale)
    return 1.0 / float(product)


def prepare_rsqrt(input_scale: float, input_zero_point: int, output_scale: float,
                  output_zero_point: int, *, storage: Any = np.int8) -> RsqrtParams:
    """int8: the formula on the 256 values; ``storage=np.int16``: the interpolated table's lookup of all
    65,536 inputs (zero points 0)."""
    if np.dtype(storage) == np.int16:
        return RsqrtParams(_rsqrt_int16_values(input_scale, input_zero_point, output_scale, output_zero_point), 0)
    zp_in = check_zero_point(input_zero_point, "rsqrt", "input zero point")
    zp_out = check_zero_point(output_zero_point, "rsqrt", "output zero point")
    real = _real_multiplier(input_scale, output_scale)
    if not np.isfinite(real) or real <= 0:
        raise QKernelError(f"rsqrt: 1 / (sqrt(input scale) · output scale) = {real} from scales "
                           f"({input_scale}, {output_scale}) is not a finite positive multiplier")
    m, s = quantize_multiplier(real)
    v = np.maximum(INT8_VALUES - zp_in, 1)             # v <= 0 lanes are replaced below
    inv_m, inv_s = get_inv_sqrt_quantized_multiplier_exp(v, -1)
    d = multiply_by_quantized_multiplier(np.ones_like(v), inv_m, np.asarray(inv_s) + _SHIFT)
    out = saturate(multiply_by_quantized_multiplier(d, m, s - _SHIFT) + zp_out, -128, 127)
    out = np.where(INT8_VALUES - zp_in == 0, 127, out)
    return RsqrtParams(out.astype(np.int8), zp_in)


def rsqrt(x: np.ndarray, *, table: np.ndarray, input_zero_point: int) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype == np.int16:
        if x.size and int(x.min()) < 0:
            raise QKernelError(f"rsqrt: int16 input value {int(x.min())} is negative: LiteRT fails the invocation "
                               f"(Rsqrt is only defined for positive values)")
        return lut16_lookup(x, table, "rsqrt")
    x = check_quantized(x, "rsqrt", "input")
    if x.size and int(x.min()) < input_zero_point:
        raise QKernelError(f"rsqrt: input value {int(x.min())} is below the zero point {input_zero_point}, a "
                           f"negative real value: LiteRT fails the invocation (Rsqrt is only defined for "
                           f"positive values)")
    return lookup_table(x, np.asarray(table, np.int8))


def _rsqrt_int16_values(input_scale: float, input_zero_point: int, output_scale: float,
                        output_zero_point: int) -> np.ndarray:
    """``GenericPrepare`` of RSQRT for int16: the interpolated table, as its lookup of all 65,536 inputs."""
    check_int16_zero_point(input_zero_point, "rsqrt", "input zero point")
    check_int16_zero_point(output_zero_point, "rsqrt", "output zero point")
    for name, scale in (("input", input_scale), ("output", output_scale)):
        s = np.float32(scale)
        if not (np.isfinite(s) and s > 0):
            raise QKernelError(f"rsqrt: the {name} scale must be a positive finite float32, found {scale}")
    largest = np.float32(32767) * np.float32(output_scale)
    one = np.float32(1.0)

    def transform(x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(x <= 0, largest, one / np.sqrt(np.maximum(x, np.float32(0)))).astype(np.float32)

    return lut16_values(populate_lut16(transform, input_scale, 0, output_scale, 0))
