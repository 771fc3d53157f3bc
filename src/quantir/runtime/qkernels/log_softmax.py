"""LOG_SOFTMAX, int8 -> int8 with output (16/256, 127): ``BUILTIN_REF``'s fixed-point kernel.

``LogSoftmaxPrepare`` (reference kernel type), with beta 1 and 5 integer bits for the
scaled differences:

* ``(M, ls) = PreprocessSoftmaxScaling(1, s_in, 5)`` (as SOFTMAX), and the reverse
  multiplier ``(Mr, er) = QuantizeMultiplierSmallerThanOneExp(2**(31 - ls) / M)``;
* ``diff_min = -CalculateInputRadius(5, ls)``.

``reference_integer_ops::LogSoftmax``, per row (the last axis, or ``axis``), with
``d = q - max(q)``:

* ``sum = Σ_{d >= diff_min} Rescale<12>(exp_on_negative_values(MBQM(d, M, ls)))`` in Q12.19;
* ``L = log_x_for_x_greater_than_or_equal_to_1(sum)`` in Q5.26;
* ``cut = max(diff_min - 1, MBQM(L + INT32_MIN, Mr, er))`` — the smallest ``d`` whose
  ``MBQM(d, M, ls) - L`` still fits int32;
* ``out = clamp(RDBPOT(MBQM(d, M, ls) - L, 22) + 127, -128, 127)`` where ``d > cut``, else -128.

The output is ``log p`` in steps of 1/16 below 127 (so 0 is 127 and -16 is -129 → -128).

The default resolver runs a different kernel, :func:`log_softmax_lut` (``optimized_ops::LogSoftmax``,
prepared with ``variant="lut"``): SOFTMAX's float table ``table[255 - d] = expf(f32(-s_in)·d)``,
a float32 sum taken left to right, ``lse = logf(sum)``, and
``out = clamp(rint(f32(f32(s_in/s_out)·q) - f32(f32(s_in·max + lse)/s_out)) + 127)`` (ties to
even). The two kernels differ by one step on some inputs. ``expf``/``logf`` come from float64
rounded to float32.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from quantir.numerics import (
    calculate_input_radius,
    exp_on_negative_values,
    rescale,
    round_half_even,
    rounding_divide_by_pot,
    saturate,
    wrap_int32,
)
from quantir.numerics.gemmlowp_log import log_x_for_x_greater_than_or_equal_to_1, preprocess_log_softmax_scaling_exp
from quantir.runtime.qkernels._common import (INT32_MAX, INT32_MIN, KernelParams, QKernelError, check_quantized,
                                              multiply_by_quantized_multiplier)
from quantir.runtime.qkernels.softmax import prepare_softmax

__all__ = ["LogSoftmaxParams", "LogSoftmaxLutParams", "prepare_log_softmax", "log_softmax", "log_softmax_lut",
           "LOG_SOFTMAX_OUTPUT"]

LOG_SOFTMAX_OUTPUT = (16 / 256, 127)  # the (scale, zero point) LiteRT requires of an int8 output
_SCALED_DIFF_INTEGER_BITS = 5
_ACCUMULATION_INTEGER_BITS = 12
_OUTPUT_INTEGER_BITS = 4


@dataclass(frozen=True)
class LogSoftmaxParams(KernelParams):
    input_multiplier: int
    input_left_shift: int
    reverse_multiplier: int
    reverse_shift: int   # the MBQM exponent of the reverse multiplier (<= 0)
    diff_min: int


@dataclass(frozen=True)
class LogSoftmaxLutParams(KernelParams):
    table: np.ndarray    # float32[256]; table[255 - d] = exp(-s_in·d)
    input_scale: float   # float32


def _exp_table(input_scale: float) -> np.ndarray:
    """``PopulateSoftmaxLookupTable`` with beta 1: the table SOFTMAX's optimized kernel uses."""
    return prepare_softmax(input_scale, 1.0, variant="lut").table


def prepare_log_softmax(input_scale: float, output_scale: float = 16 / 256, output_zero_point: int = 127, *,
                        variant: Literal["reference", "lut"] = "reference"):
    """``LogSoftmaxPrepare`` for int8: fixed-point parameters (``BUILTIN_REF``) or the float table of
    the default resolver (``variant="lut"``); beta is always 1 in LiteRT."""
    # TF_LITE_ENSURE_EQ(scale, 16.0 / 256) compares the float32 scale exactly; zp must be 127.
    if np.float32(output_scale) != np.float32(16 / 256) or int(output_zero_point) != 127:
        raise QKernelError(f"log_softmax: int8 output must be quantized with scale 16/256 and zero point 127 "
                           f"(LiteRT LogSoftmaxPrepare checks both exactly), found scale {output_scale} and zero "
                           f"point {output_zero_point}")
    s_in = float(np.float32(input_scale))
    if variant == "lut":
        if not (np.isfinite(s_in) and s_in > 0):
            raise QKernelError(f"log_softmax: the input scale must be a positive finite float32, found {input_scale}")
        return LogSoftmaxLutParams(_exp_table(s_in), s_in)
    if variant != "reference":
        raise ValueError(f"log_softmax: variant must be 'reference' or 'lut', found {variant!r}")
    real = s_in * float(1 << (31 - _SCALED_DIFF_INTEGER_BITS))
    if not real > 1.0:
        # QuantizeMultiplierGreaterThanOne's TFLITE_CHECK: LiteRT aborts the process.
        raise QKernelError(f"log_softmax: input scale × 2**{31 - _SCALED_DIFF_INTEGER_BITS} must be above 1, found "
                           f"input scale {input_scale:g}; LiteRT's reference kernel aborts on it")
    big_m, left_shift, reverse_m, reverse_shift = preprocess_log_softmax_scaling_exp(
        1.0, s_in, _SCALED_DIFF_INTEGER_BITS)
    diff_min = -calculate_input_radius(_SCALED_DIFF_INTEGER_BITS, left_shift)
    return LogSoftmaxParams(int(big_m), int(left_shift), int(reverse_m), int(reverse_shift), int(diff_min))


def _scaled_differences(diff: np.ndarray, live: np.ndarray, input_multiplier: int, input_left_shift: int):
    """``MBQM(d, M, ls)`` (a Q5.26 value) where ``live``, 0 elsewhere."""
    if input_left_shift > 30:
        # s_in·2**26 capped at 2**31 - 1 gives ls = 31 and diff_min = 0: only d = 0 is live,
        # and 0·2**31 = 0 (LiteRT's int32 shift by 31 is harmless there).
        return np.zeros_like(diff)
    return multiply_by_quantized_multiplier(np.where(live, diff, 0), input_multiplier, input_left_shift)


def log_softmax(x: np.ndarray, *, input_multiplier: int, input_left_shift: int, reverse_multiplier: int,
                reverse_shift: int, diff_min: int, axis: int = -1) -> np.ndarray:
    """Fixed-point int8 log-softmax along ``axis`` (the ``BUILTIN_REF`` kernel); output (16/256, 127)."""
    x = check_quantized(x, "log_softmax", "input")
    q = np.moveaxis(x, axis, -1).astype(np.int64)
    if q.size == 0:
        return x.copy()
    diff = q - q.max(axis=-1, keepdims=True)
    live = diff >= diff_min
    scaled = _scaled_differences(diff, live, input_multiplier, input_left_shift)
    exps = exp_on_negative_values(scaled, _SCALED_DIFF_INTEGER_BITS)
    terms = np.where(live, rescale(exps, 0, _ACCUMULATION_INTEGER_BITS), 0)
    total = terms.sum(axis=-1, keepdims=True)
    if total.max() > INT32_MAX:
        # 4096 terms of 1.0 (the row maxima) fill the Q12.19 accumulator: LiteRT's sum wraps negative
        # and its logarithm is then garbage (its output is not log-softmax), so no integers are given.
        raise QKernelError(f"log_softmax: a row's sum of exponentials reaches {int(total.max()) / (1 << 19):g} "
                           f"(its {q.shape[-1]} values hold that many near the maximum); LiteRT's Q12.19 "
                           "accumulator overflows at 4096")
    log_sum = log_x_for_x_greater_than_or_equal_to_1(total, _ACCUMULATION_INTEGER_BITS, _SCALED_DIFF_INTEGER_BITS)
    reach = multiply_by_quantized_multiplier(wrap_int32(log_sum + INT32_MIN), reverse_multiplier, reverse_shift)
    cut = np.maximum(diff_min - 1, reach)
    shifted = rounding_divide_by_pot(wrap_int32(scaled - log_sum),
                                     31 - _SCALED_DIFF_INTEGER_BITS - _OUTPUT_INTEGER_BITS)
    out = np.where(diff > cut, saturate(shifted + 127, -128, 127), -128).astype(np.int8)
    return np.moveaxis(out, -1, axis)


def log_softmax_lut(x: np.ndarray, *, table: np.ndarray, input_scale: float, axis: int = -1) -> np.ndarray:
    """The default resolver's float-table int8 log-softmax along ``axis``; output (16/256, 127)."""
    x = check_quantized(x, "log_softmax_lut", "input")
    q = np.moveaxis(x, axis, -1).astype(np.int64)
    if q.size == 0:
        return x.copy()
    table = np.asarray(table, dtype=np.float32)
    s_in, s_out = np.float32(input_scale), np.float32(LOG_SOFTMAX_OUTPUT[0])
    top = q.max(axis=-1, keepdims=True)
    total = np.cumsum(table[255 - (top - q)], axis=-1, dtype=np.float32)[..., -1:]  # the C loop's order
    log_sum = np.log(total.astype(np.float64)).astype(np.float32)
    offset = (s_in * top.astype(np.float32) + log_sum) / s_out
    log_prob = (s_in / s_out) * q.astype(np.float32) - offset
    out = saturate(round_half_even(log_prob) + LOG_SOFTMAX_OUTPUT[1], -128, 127).astype(np.int8)
    return np.moveaxis(out, -1, axis)
