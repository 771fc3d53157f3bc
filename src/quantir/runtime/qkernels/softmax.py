"""SOFTMAX, int8 -> int8 with output (1/256, -128) (docs/numerics.md §2.12).

* Default, :func:`softmax` — ``BUILTIN_REF``'s ``reference_ops::Softmax``: gemmlowp fixed
  point. With ``(M, ls) = PreprocessSoftmaxScaling(beta, s_in, 5)`` and
  ``diff_min = -CalculateInputRadius(5, ls)``, for every ``d = q - max(q) >= diff_min``:
  ``e = exp_on_negative_values(SRDHM(d·2**ls, M))`` in Q0.31, the sum of
  ``Rescale<12>(e)`` is inverted with ``GetReciprocal``, and
  ``out = RDBPOT(SRDHM(recip, e), bits + 23) - 128``; others give -128.
* Option, :func:`softmax_lut` — the optimized kernel's float LUT (``optimized_ops::Softmax``):
  ``table[j] = expf(f32(-s_in·beta)·j)``, a float32 sum taken left to right,
  ``inv = f32(1 / f32(sum · s_out))`` and ``out = rha(table · inv) + zp_out``. The table is
  float and built in :func:`prepare_softmax`; the evaluation multiplies float32 values
  as the C++ does. ``exp`` comes from float64 rounded to float32, which can differ from a
  libm ``expf`` by one ulp in rare entries.

Both reduce over ``axis`` (LiteRT: the last axis).

int16 -> int16, output (1/32768, 0): ``prepare_softmax(..., storage=np.int16)`` and :func:`softmax` on
an int16 array run LiteRT's ``SoftmaxInt16`` (the only int16 kernel, in every resolver). Prepare
builds two 513-entry tables in double (:mod:`._lut16`): ``exp`` over [-10, 0] and ``1/(1 + x)`` over
[0, 1], both with output steps of 2/65535, and ``(M, s) = QuantizeMultiplier(f32(s_in·beta) / (10/65535))``.
Per row, with ``d = q - max(q)``: ``e = lut_exp(clamp16(MBQM(d, M, s) + 32767))`` (Q0.15),
``S = Σ e`` (int32), ``h = clz32(S)``, ``r = lut_recip(clamp16((((S << (h-1)) + 2**13) >> 14) - 3·2**15))``, and
``out = clamp((e·r + 2**(30-h)) >> (31 - h), 0, 32767)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from quantir.numerics import (
    calculate_input_radius,
    count_leading_zeros_32,
    exp_on_negative_values,
    get_reciprocal,
    multiply_by_quantized_multiplier_greater_than_one,
    preprocess_softmax_scaling,
    quantize_multiplier,
    rescale,
    round_half_away,
    rounding_divide_by_pot,
    saturate,
    saturating_rounding_doubling_high_mul,
    wrap_int32,
)
from quantir.runtime.qkernels._common import (INT32_MAX, KernelParams, QKernelError, check_quantized, check_zero_point,
                                              multiply_by_quantized_multiplier)
from quantir.runtime.qkernels._lut16 import check_int16_zero_point, lut16_values, populate_lut16

__all__ = ["SoftmaxParams", "SoftmaxLutParams", "prepare_softmax", "softmax", "softmax_lut", "reference_softmax_aborts",
           "SoftmaxInt16Params", "SOFTMAX_INT16_OUTPUT"]

SOFTMAX_INT16_OUTPUT = (1 / 32768, 0)   # the (scale, zero point) LiteRT requires of an int16 output

_SCALED_DIFF_INTEGER_BITS = 5
_ACCUMULATION_INTEGER_BITS = 12
_ABORT_SUM = 512 << 19   # a Q12.19 sum of 512: num_bits_over_unit 9, a shift of 32


@dataclass(frozen=True)
class SoftmaxParams(KernelParams):
    input_multiplier: int
    input_left_shift: int
    diff_min: int


@dataclass(frozen=True)
class SoftmaxLutParams(KernelParams):
    table: np.ndarray  # float32[256]; table[255 - d] = exp(-s_in·beta·d)
    output_scale: float
    output_zero_point: int


def _check_output(output_scale: float, output_zero_point: int) -> None:
    # TF_LITE_ENSURE_EQ(zp, -128); TF_LITE_ENSURE_NEAR(scale, 1/256, 0.001/256), in float32.
    target = np.float32(1.0) / np.float32(256.0)
    if int(output_zero_point) != -128 or abs(np.float32(output_scale) - target) > np.float32(0.001) * target:
        raise QKernelError(f"softmax: int8 output must be quantized with scale 1/256 (within 0.1%) and zero point "
                           f"-128, found scale {output_scale} and zero point {output_zero_point}")


def _check_scaling(beta: float, input_scale: float) -> None:
    # PreprocessSoftmaxScaling needs beta·s_in·2**26 > 1 (QuantizeMultiplierGreaterThanOne): LiteRT
    # aborts the process otherwise (beta 0, NaN, negative, or tiny), quantir refuses the op.
    real = beta * input_scale * float(1 << (31 - _SCALED_DIFF_INTEGER_BITS))
    if not real > 1.0:
        raise QKernelError(f"softmax: beta × input scale × 2**{31 - _SCALED_DIFF_INTEGER_BITS} must be above 1, found "
                           f"beta {beta:g} and input scale {input_scale:g} (product {real:g}); LiteRT's reference "
                           f"kernel aborts on it. Use beta 1 (the softmax TFLite converters write)")


def prepare_softmax(input_scale: float, beta: float = 1.0, output_scale: float | None = None,
                    output_zero_point: int | None = None, *, variant: Literal["reference", "lut"] = "reference",
                    storage: Any = np.int8, input_zero_point: int = 0):
    """``SoftmaxPrepare``: fixed-point parameters (reference) or the float table (lut).

    ``storage=np.int16`` prepares ``SoftmaxInt16`` (both resolvers run it; ``variant`` is ignored):
    output (1/32768, 0) by default, ``input_zero_point`` must be 0. The int8 default output is
    (1/256, -128)."""
    if np.dtype(storage) == np.int16:
        return _prepare_softmax_int16(input_scale, beta, SOFTMAX_INT16_OUTPUT[0] if output_scale is None
                                      else output_scale, 0 if output_zero_point is None else output_zero_point,
                                      input_zero_point)
    output_scale = 1 / 256 if output_scale is None else output_scale
    output_zero_point = -128 if output_zero_point is None else output_zero_point
    _check_output(output_scale, output_zero_point)
    s_in, b = np.float32(input_scale), np.float32(beta)
    if variant == "reference":
        _check_scaling(float(b), float(s_in))
        big_m, left_shift = preprocess_softmax_scaling(float(b), float(s_in), _SCALED_DIFF_INTEGER_BITS)
        diff_min = -calculate_input_radius(_SCALED_DIFF_INTEGER_BITS, left_shift)
        return SoftmaxParams(int(big_m), int(left_shift), int(diff_min))
    if variant == "lut":
        scale = -s_in * b  # float32, as PopulateSoftmaxLookupTable
        steps = np.arange(256, dtype=np.float32)
        values = np.exp((scale * steps).astype(np.float64)).astype(np.float32)
        table = np.empty(256, dtype=np.float32)
        table[255 - np.arange(256)] = values
        return SoftmaxLutParams(table, float(np.float32(output_scale)), check_zero_point(output_zero_point, "softmax",
                                                                                        "output zero point"))
    raise ValueError(f"softmax: variant must be 'reference' or 'lut', found {variant!r}")


def _exponentials(x: np.ndarray, axis: int, input_multiplier: int, input_left_shift: int, diff_min: int):
    """The last axis' index ``d + 255`` of every element (``d = q - max(q)``, moved to the last axis)
    and, per possible ``d`` in [-255, 0]: is it live, ``exp(d)`` in Q0.31 and its Q12.19 term."""
    x = check_quantized(x, "softmax", "input")
    q = np.moveaxis(x, axis, -1).astype(np.int16)
    at = (q - q.max(axis=-1, keepdims=True) + 255).astype(np.intp)
    # Everything per element is a function of d alone (and of its row's sum): the gemmlowp chain
    # (a dozen SRDHMs) runs once per possible d and the elements look their values up. Same
    # integers; on a recognizer's 6,625-class output it had been most of the quantize time.
    d = np.arange(-255, 1, dtype=np.int64)
    live = d >= diff_min
    if input_left_shift > 30:
        # PreprocessSoftmaxScaling caps beta·s_in·2**26 at 2**31 - 1 (s_in·beta >= 16), which gives a
        # left shift of 31 and diff_min = 0: only the row maxima (d = 0) are live and d·2**31 = 0 there,
        # so exp(0) = 1 is shared among them (LiteRT does the same, checked against BUILTIN_REF).
        scaled = np.zeros_like(d)
    else:
        scaled = multiply_by_quantized_multiplier_greater_than_one(np.where(live, d, 0), input_multiplier,
                                                                   input_left_shift)
    exps = np.asarray(exp_on_negative_values(scaled, _SCALED_DIFF_INTEGER_BITS), np.int64)
    terms = np.where(live, rescale(exps, 0, _ACCUMULATION_INTEGER_BITS), 0).astype(np.int64)
    return at, live, exps, terms


def softmax(x: np.ndarray, *, input_multiplier: int, input_left_shift: int, diff_min: int = 0,
            exp_values: np.ndarray | None = None, reciprocal_values: np.ndarray | None = None,
            axis: int = -1) -> np.ndarray:
    """Fixed-point softmax along ``axis`` (the ``BUILTIN_REF`` kernel): int8 -> int8 (1/256, -128), or
    int16 -> int16 (1/32768, 0) when ``x`` is int16 (parameters from ``prepare_softmax(storage=np.int16)``)."""
    if np.asarray(x).dtype == np.int16:
        if exp_values is None or reciprocal_values is None:
            raise ValueError("softmax: an int16 input needs the tables of prepare_softmax(storage=np.int16)")
        return _softmax_int16(x, input_multiplier, input_left_shift, exp_values, reciprocal_values, axis)
    at, live, exps, terms = _exponentials(x, axis, input_multiplier, input_left_shift, diff_min)
    total = terms[at].sum(axis=-1, keepdims=True)   # Q12.19, each term <= 1.0
    # A sum of 512 or more (>= 512 values tied with the row maximum, say) is outside the reference
    # kernel's domain: its final RoundingDivideByPOT exponent passes 31, gemmlowp's assert fires and
    # LiteRT aborts the process. Every probability is then below 1/512, half a step of 1/256, so
    # such rows are -128 here (``reference_softmax_aborts`` finds them before LiteRT is run).
    beyond = total >= _ABORT_SUM
    total = wrap_int32(np.where(beyond, 1 << 19, total))
    recip, bits = get_reciprocal(total, _ACCUMULATION_INTEGER_BITS)
    if at.shape[-1] >= len(exps):   # long rows: each row's output for each possible d, looked up
        unsat = rounding_divide_by_pot(saturating_rounding_doubling_high_mul(recip, exps), bits + 31 - 8)
        table = np.where(live & ~beyond, saturate(unsat - 128, -128, 127), -128).astype(np.int8)
        return np.moveaxis(np.take_along_axis(table, at, axis=-1), -1, axis)
    unsat = rounding_divide_by_pot(saturating_rounding_doubling_high_mul(recip, exps[at]), bits + 31 - 8)
    out = np.where(live[at] & ~beyond, saturate(unsat - 128, -128, 127), -128).astype(np.int8)
    return np.moveaxis(out, -1, axis)


def reference_softmax_aborts(x: np.ndarray, *, input_multiplier: int, input_left_shift: int, diff_min: int,
                             axis: int = -1) -> np.ndarray:
    """Which rows (``x`` without ``axis``) LiteRT's ``BUILTIN_REF`` SOFTMAX cannot compute: their
    Q12.19 sum of exponentials is 512 or more, and the kernel aborts (see :func:`softmax`)."""
    at, _, _, terms = _exponentials(x, axis, input_multiplier, input_left_shift, diff_min)
    return terms[at].sum(axis=-1) >= _ABORT_SUM


def softmax_lut(x: np.ndarray, *, table: np.ndarray, output_scale: float, output_zero_point: int,
                axis: int = -1) -> np.ndarray:
    """The optimized kernel's float-LUT softmax along ``axis`` (default resolver, no XNNPACK)."""
    x = check_quantized(x, "softmax_lut", "input")
    q = np.moveaxis(x, axis, -1).astype(np.int64)
    table = np.asarray(table, dtype=np.float32)
    e = table[255 - (q.max(axis=-1, keepdims=True) - q)]
    total = np.cumsum(e, axis=-1, dtype=np.float32)[..., -1:]  # sequential float32 sum, as the C loop
    inv = np.float32(1.0) / (total * np.float32(output_scale))
    rounded = round_half_away(e * inv)
    out = saturate(rounded + int(output_zero_point), -128, 127).astype(np.int8)
    return np.moveaxis(out, -1, axis)


# ---------------------------------------------------------------------------
# int16


@dataclass(frozen=True)
class SoftmaxInt16Params(KernelParams):
    input_multiplier: int
    input_left_shift: int
    exp_values: np.ndarray          # int16[65536]: LUTLookup of the exp table at every int16 value
    reciprocal_values: np.ndarray   # int16[65536]: the same for the 1/(1 + x) table


_INT16_RANGE = 65535   # int16 max - min, the C++ ``range``


def softmax_int16_tables() -> tuple[np.ndarray, np.ndarray]:
    """SoftmaxPrepare's two int16 tables (513 entries each): exp on [-10, 0], 1/(1+x) on [0, 1]."""
    exp_lut = populate_lut16(lambda x: np.array([math.exp(v) for v in x]), 10.0 / _INT16_RANGE, 32767,
                             2.0 / _INT16_RANGE, 0, np.float64)
    recip_lut = populate_lut16(lambda x: 1.0 / (1.0 + x), 1.0 / _INT16_RANGE, -32768, 2.0 / _INT16_RANGE, 0,
                               np.float64)
    return exp_lut, recip_lut


def _prepare_softmax_int16(input_scale: float, beta: float, output_scale: float, output_zero_point: int,
                           input_zero_point: int) -> SoftmaxInt16Params:
    """``SoftmaxPrepare`` for int16 in and out: the checks, the tables and the input multiplier."""
    check_int16_zero_point(input_zero_point, "softmax", "input zero point")
    # TF_LITE_ENSURE_EQ(zp, 0); TF_LITE_ENSURE_NEAR(scale, 1/32768, 0.001/32768), in float32.
    target = np.float32(1.0) / np.float32(32768.0)
    if int(output_zero_point) != 0 or abs(np.float32(output_scale) - target) > np.float32(0.001) * target:
        raise QKernelError(f"softmax: int16 output must be quantized with scale 1/32768 (within 0.1%) and zero "
                           f"point 0 (LiteRT SoftmaxPrepare), found scale {output_scale} and zero point "
                           f"{output_zero_point}")
    real = float(np.float32(input_scale) * np.float32(beta)) / (10.0 / 65535.0)
    if not (np.isfinite(real) and real > 0):
        raise QKernelError(f"softmax: input scale × beta must be a positive finite float32, found input scale "
                           f"{input_scale:g} and beta {beta:g}")
    big_m, shift = quantize_multiplier(real)
    exp_lut, recip_lut = _tables()
    return SoftmaxInt16Params(big_m, shift, lut16_values(exp_lut), lut16_values(recip_lut))


_TABLES: list = []


def _tables() -> tuple[np.ndarray, np.ndarray]:
    if not _TABLES:   # they depend on nothing: built once per process
        _TABLES.append(softmax_int16_tables())
    return _TABLES[0]


def _softmax_int16(x: np.ndarray, input_multiplier: int, input_left_shift: int, exp_values: np.ndarray,
                   reciprocal_values: np.ndarray, axis: int) -> np.ndarray:
    """``SoftmaxInt16`` along ``axis`` (LiteRT: the last axis, any rank: older sources refused rank 5 and
    more, ai-edge-litert 2.3.0 runs them); output (1/32768, 0)."""
    x = check_quantized(x, "softmax", "input", (np.int16,))
    q = np.moveaxis(x, axis, -1).astype(np.int64)
    if q.size == 0:
        return x.copy()
    diff = q - q.max(axis=-1, keepdims=True)                       # [-65535, 0]
    scaled = multiply_by_quantized_multiplier(diff, input_multiplier, input_left_shift)
    exps = exp_values[np.clip(scaled + 32767, -32768, 32767) + 32768].astype(np.int64)   # Q0.15
    total = exps.sum(axis=-1, keepdims=True)                       # int32 in LiteRT; >= 1 row max
    if total.max() > INT32_MAX:
        raise QKernelError(f"softmax: a row of {q.shape[-1]} int16 values sums its exponentials past int32 "
                           "(LiteRT's sum_of_exps overflows)")
    headroom = count_leading_zeros_32(total).astype(np.int64)      # h - 1 bits of headroom
    normalized = ((total << (headroom - 1)) + (1 << 13)) >> 14     # [2**16, 2**17]
    recip = reciprocal_values[np.clip(normalized - 3 * (1 << 15), -32768, 32767) + 32768].astype(np.int64)
    right = 31 - headroom
    out = (exps * recip + (np.int64(1) << (right - 1))) >> right
    return np.moveaxis(np.clip(out, 0, 32767).astype(np.int16), -1, axis)
