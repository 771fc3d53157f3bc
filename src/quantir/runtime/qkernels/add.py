"""ADD, int8 (``reference_integer_ops::Add`` / ``BroadcastAdd6DSlow``, docs/numerics.md §2.4).

Both inputs are brought to a common scale with 20 bits of headroom, added, and rescaled::

    a' = MBQM<1((q1 - zp1)·2**20, M1, sh1)        b' likewise
    out = clamp(MBQM<1(a' + b', Mo, sho) + zp_out, act_min, act_max)

where ``MBQM<1`` is ``MultiplyByQuantizedMultiplierSmallerThanOneExp`` and the real
multipliers are ``s1/2m``, ``s2/2m``, ``2m/(2**20·s_out)`` with ``m = max(s1, s2)``
(:func:`~quantir.numerics.add_sub_multipliers`). LiteRT aborts (``TFLITE_CHECK``) unless
every multiplier is in (0, 1); :func:`prepare_add` raises :class:`QKernelError` instead.
Broadcasting follows numpy (the same rule as TFLite's).

**int16** (``storage=np.int16``; docs/numerics.md "int16x8 kernels"): every zero point must be 0,
and Prepare picks one of two kernels. When the op's ``pot_scale_int16`` option is set (the
schema default) and all three scales are powers of two (``CheckedLog2``: ``|log2 s - round| <
1e-3`` in float32), the **POT** kernel shifts the input whose scale is finer than the output's
right by the exponent difference (``RoundingDivideByPOT``) and adds with int16 saturation; the
other input must have the output's exact exponent, no input may be coarser than the output, and
LiteRT's ADD runs it without broadcasting (both refused here). Otherwise the **general** kernel
above runs with a left shift of 15 instead of 20.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from quantir.numerics import (
    add_sub_multipliers,
    multiply_by_quantized_multiplier_smaller_than_one_exp,
    quantize_multiplier_smaller_than_one_exp,
    rounding_divide_by_pot,
    saturate,
)
from quantir.runtime.qkernels._common import (
    INT8_VALUES,
    Activation,
    KernelParams,
    QKernelError,
    activation_range,
    check_quantized,
    check_zero_point,
    clamp_range,
    lookup_table,
    pair_table_lookup,
    requantize,
)
from quantir.runtime.qkernels._lut16 import checked_log2

__all__ = ["AddParams", "AddPotParams", "prepare_add", "add", "rescale_input", "quantize_smaller_than_one"]

LEFT_SHIFT = 20  # int8 / uint8 headroom
LEFT_SHIFT_INT16 = 15  # general-scale int16: (2**16)·2**15 still fits the int32 sum


@dataclass(frozen=True)
class AddParams(KernelParams):
    input1_multiplier: int
    input1_shift: int
    input2_multiplier: int
    input2_shift: int
    output_multiplier: int
    output_shift: int
    output_zero_point: int
    act_min: int
    act_max: int
    left_shift: int = LEFT_SHIFT


@dataclass(frozen=True)
class AddPotParams(KernelParams):
    """int16 ADD/SUB with power-of-two scales: right shifts of the two inputs (one of them 0)."""

    pot_input1_shift: int
    pot_input2_shift: int
    act_min: int
    act_max: int


def quantize_smaller_than_one(m: float, op: str, what: str) -> tuple[int, int]:
    """``QuantizeMultiplierSmallerThanOneExp``, with LiteRT's abort turned into QKernelError."""
    if not 0.0 < float(m) < 1.0:
        raise QKernelError(f"{op}: the {what} multiplier {float(m):.6g} must be in (0, 1); LiteRT aborts on it "
                           "(TFLITE_CHECK in QuantizeMultiplierSmallerThanOneExp). The output scale is too small "
                           "for the input scales.")
    return quantize_multiplier_smaller_than_one_exp(m)


def prepare_add_sub(op: str, input1_scale: float, input2_scale: float, output_scale: float,
                    output_zero_point: int, activation: Activation = "none", *, storage: Any = np.int8,
                    input_zero_points: tuple[int, int] = (0, 0),
                    pot_scale_int16: bool = True) -> AddParams | AddPotParams:
    """ADD's and SUB's Prepare (they share it in LiteRT); ``op`` names the op in errors.

    For ``storage=np.int16`` the input zero points are checked too, and the POT kernel is chosen
    as LiteRT does (module docstring)."""
    if np.dtype(storage) == np.int16:
        if tuple(int(z) for z in input_zero_points) != (0, 0) or int(output_zero_point) != 0:
            raise QKernelError(f"{op}: int16 inputs and output need zero point 0, found {tuple(input_zero_points)} "
                               f"and {output_zero_point} ({op}.cc Prepare: TF_LITE_ENSURE_EQ zero_point, 0)")
        pots = [checked_log2(s) for s in (input1_scale, input2_scale, output_scale)]
        lo, hi = activation_range(activation, output_scale, 0, np.int16, op)
        if pot_scale_int16 and all(is_pot for is_pot, _ in pots):
            sh1, sh2 = pots[0][1] - pots[2][1], pots[1][1] - pots[2][1]
            if not (sh1 == 0 or sh2 == 0) or sh1 > 0 or sh2 > 0:
                raise QKernelError(f"{op}: with power-of-two int16 scales, one input must have the output's scale and "
                                   f"neither a coarser one; the exponents differ by {sh1} and {sh2} ({op}.cc "
                                   "Prepare: input1_shift == 0 || input2_shift == 0, both <= 0)")
            return AddPotParams(-sh1, -sh2, lo, hi)
        shift = LEFT_SHIFT_INT16
    else:
        shift = LEFT_SHIFT
        lo = hi = None
    zp = check_zero_point(output_zero_point, op, "output zero point", -32768, 32767)
    m1, m2, mo = add_sub_multipliers(input1_scale, input2_scale, output_scale, shift)
    q1 = quantize_smaller_than_one(m1, op, "input1")
    q2 = quantize_smaller_than_one(m2, op, "input2")
    qo = quantize_smaller_than_one(mo, op, "output")
    if lo is None:
        zp = check_zero_point(output_zero_point, op, "output zero point")
        lo, hi = activation_range(activation, output_scale, zp, np.int8, op)
    return AddParams(*q1, *q2, *qo, zp, lo, hi, shift)


def prepare_add(input1_scale: float, input2_scale: float, output_scale: float, output_zero_point: int,
                activation: Activation = "none", **int16_options) -> AddParams | AddPotParams:
    """``int16_options``: ``storage``, ``input_zero_points``, ``pot_scale_int16`` (see :func:`prepare_add_sub`)."""
    return prepare_add_sub("add", input1_scale, input2_scale, output_scale, output_zero_point, activation,
                           **int16_options)


def rescale_input(q: np.ndarray, zero_point: int, multiplier: int, shift: int, left_shift: int = LEFT_SHIFT
                  ) -> np.ndarray:
    """``MBQM<1((q - zp)·2**left_shift, M, shift)`` as int64."""
    shifted = (q.astype(np.int64) - zero_point) << left_shift
    return multiply_by_quantized_multiplier_smaller_than_one_exp(shifted, multiplier, shift)


INT16_VALUES = np.arange(-32768, 32768, dtype=np.int64)


def _rescale16(q: np.ndarray, multiplier: int, shift: int, left_shift: int) -> np.ndarray:
    """``rescale_input`` of an int16 array (zero point 0); a large one looks its values up in the
    function evaluated on all 65,536 int16 values (the same integers, one pass instead of ten)."""
    if q.size < INT16_VALUES.size:
        return rescale_input(q, 0, multiplier, shift, left_shift)
    return lookup_table(q, rescale_input(INT16_VALUES, 0, multiplier, shift, left_shift))


def add_sub(op: str, sign: int, a: np.ndarray, b: np.ndarray, *, input1_zero_point: int, input2_zero_point: int,
            output_zero_point: int, input1_multiplier: int, input1_shift: int, input2_multiplier: int,
            input2_shift: int, output_multiplier: int, output_shift: int, act_min: int = -128,
            act_max: int = 127, left_shift: int = LEFT_SHIFT) -> np.ndarray:
    """``a + sign·b`` with LiteRT's ADD/SUB integer arithmetic and broadcasting; returns the inputs' dtype."""
    a = check_quantized(a, op, "input1", (np.int8, np.int16))
    b = check_quantized(b, op, "input2", (a.dtype,))
    if a.dtype == np.int16:   # 65536 x 65536 pairs: no table, the formula on the broadcast arrays
        if int(input1_zero_point) or int(input2_zero_point) or int(output_zero_point):
            raise QKernelError(f"{op}: int16 inputs and output need zero point 0 ({op}.cc Prepare)")
        lo, hi = clamp_range(act_min, act_max, np.int16, op)
        a1 = _rescale16(a, int(input1_multiplier), int(input1_shift), int(left_shift))
        b1 = _rescale16(b, int(input2_multiplier), int(input2_shift), int(left_shift))
        if int(output_shift) > 0:   # outside MBQM<1's domain: the numpy call names the error
            multiply_by_quantized_multiplier_smaller_than_one_exp(0, int(output_multiplier), int(output_shift))
        return requantize(a1 + sign * b1, int(output_multiplier), int(output_shift), 0, lo, hi, np.int16)
    zp1 = check_zero_point(input1_zero_point, op, "input1 zero point")
    zp2 = check_zero_point(input2_zero_point, op, "input2 zero point")
    zp_out = check_zero_point(output_zero_point, op, "output zero point")
    lo, hi = clamp_range(act_min, act_max, np.int8, op)
    table = _pair_table(sign, zp1, zp2, zp_out, int(input1_multiplier), int(input1_shift), int(input2_multiplier),
                        int(input2_shift), int(output_multiplier), int(output_shift), lo, hi)
    return pair_table_lookup(a, b, table)


@functools.lru_cache(maxsize=512)
def _pair_table(sign, zp1, zp2, zp_out, m1, s1, m2, s2, mo, so, lo, hi) -> np.ndarray:
    """A function of the two int8 inputs, evaluated on all 256 x 256 pairs (then gathered). It is
    the same for every call with the same parameters, so it is built once per parameter set."""
    a1 = rescale_input(INT8_VALUES, zp1, m1, s1)
    b1 = rescale_input(INT8_VALUES, zp2, m2, s2)
    raw = multiply_by_quantized_multiplier_smaller_than_one_exp(a1[:, None] + sign * b1[None, :], mo, so)
    table = saturate(raw + zp_out, lo, hi).astype(np.int8)
    table.flags.writeable = False
    return table


def add_sub_pot(op: str, sign: int, a: np.ndarray, b: np.ndarray, *, pot_input1_shift: int, pot_input2_shift: int,
                act_min: int, act_max: int, input1_zero_point: int = 0, input2_zero_point: int = 0,
                output_zero_point: int = 0, broadcast: bool = True) -> np.ndarray:
    """int16 ``a + sign·b`` with power-of-two scales: ``sat16(RDBPOT(a, s1) ± RDBPOT(b, s2))``, clamped."""
    a = check_quantized(a, op, "input1", (np.int16,))
    b = check_quantized(b, op, "input2", (np.int16,))
    if int(input1_zero_point) or int(input2_zero_point) or int(output_zero_point):
        raise QKernelError(f"{op}: int16 inputs and output need zero point 0 ({op}.cc Prepare)")
    if not broadcast and a.shape != b.shape:
        raise QKernelError(f"{op}: LiteRT's power-of-two int16 kernel does not broadcast ({a.shape} vs {b.shape}); "
                           "give the inputs one shape or scales that are not both powers of two")
    lo, hi = clamp_range(act_min, act_max, np.int16, op)
    a1 = rounding_divide_by_pot(a.astype(np.int64), int(pot_input1_shift))
    b1 = rounding_divide_by_pot(b.astype(np.int64), int(pot_input2_shift))
    total = saturate(np.asarray(a1) + sign * np.asarray(b1), -32768, 32767)   # gemmlowp SaturatingAdd/Sub
    return saturate(total, lo, hi).astype(np.int16)


def add(a: np.ndarray, b: np.ndarray, **params) -> np.ndarray:
    """Element-wise addition with broadcasting; ``params`` as ``prepare_add(...).as_kwargs()`` plus zero points."""
    if "pot_input1_shift" in params:
        return add_sub_pot("add", 1, a, b, broadcast=False, **params)
    return add_sub("add", 1, a, b, **params)
