"""int16 lookup tables with interpolation, and the sigmoid table of the int16 LOGISTIC / TANH kernels.

LiteRT's int16 table ops (SOFTMAX's two tables, GELU, RSQRT) keep 513 entries: the input range
``[s_in·(-32768 - zp_in), s_in·(32767 - zp_in)]`` cut into 512 steps, plus the right end. Prepare
fills it in a float type ``F`` (float32, or float64 for SOFTMAX's tables), every operation rounded
to ``F`` as the C++ does:

    step  = (in_max - in_min) / 512                   inv = 65536 / (out_max - out_min)
    y_i   = f(in_min + i·step), y_mid = f(in_min + i·step + step/2), y_next = f(in_min + (i+1)·step)
    err   = rha((y_next·inv + rha(y_i·inv)) / 2) - rha(y_mid·inv)      (interpolated minus true midpoint)
    lut_i = clamp(rha(y_i·inv) - rha(err / 2), -32768, 32767)          i < 512
    lut_512 = clamp(rha(f(in_max)·inv), -32768, 32767)

so each segment is biased by half its midpoint error. The output zero point only moves
``out_min``/``out_max`` (their difference, hence ``inv``, barely depends on it); it is never added.

Lookup (``LUTLookup``), for an int16 value v: ``i = 256 + (v >> 7)``, ``t = v & 127``,
``slope = int16(lut[i+1] - lut[i])``, ``out = int16(lut[i] + ((slope·t + 64) >> 7))``. The result
is a function of one int16 value, so the kernels evaluate it on all 65,536 values once and gather.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dataclasses import dataclass

from quantir.numerics import wrap_int32
from quantir.runtime.qkernels._common import KernelParams, QKernelError, check_quantized, lookup_table

__all__ = ["LUT16_SIZE", "INT16_VALUES", "populate_lut16", "lut16_values", "lut16_lookup", "sigmoid_table_uint16",
           "checked_log2", "check_int16_zero_point", "wrap_int16", "Int16ActivationParams", "prepare_sigmoid_family",
           "scaled_sigmoid_input", "sigmoid_table_interpolated"]

LUT16_SIZE = 513
INT16_VALUES = np.arange(-32768, 32768, dtype=np.int64)
_STEPS = 512


def wrap_int16(v: np.ndarray) -> np.ndarray:
    """``static_cast<int16_t>`` of an int: two's complement wrap."""
    return ((np.asarray(v, dtype=np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def _round_away(a: np.ndarray) -> np.ndarray:
    """``TfLiteRound`` (ties away from zero) in the array's own float type."""
    r = np.rint(a)
    tie = np.abs(a - r) == a.dtype.type(0.5)
    return np.where(tie & (np.abs(r) < np.abs(a)), r + np.sign(a), r)


def populate_lut16(transform: Callable[[np.ndarray], np.ndarray], input_scale: float, input_zero_point: int,
                   output_scale: float, output_zero_point: int, float_type=np.float32) -> np.ndarray:
    """``LUTPopulate<int16_t>`` (``detail::LUTPopulateInt16<F>``): the 513-entry table of ``transform``.

    ``transform`` maps an array of ``float_type`` to values of ``float_type`` (it must compute as the
    C++ lambda does, in that type). Returns int16[513]."""
    f = np.dtype(float_type).type
    s_in, s_out = f(input_scale), f(output_scale)
    in_min = s_in * f(-32768 - int(input_zero_point))
    in_max = s_in * f(32767 - int(input_zero_point))
    out_min = s_out * f(-32768 - int(output_zero_point))
    out_max = s_out * f(32767 - int(output_zero_point))
    step = (in_max - in_min) / f(_STEPS)
    half_step = step / f(2)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        inv = f(65536) / (out_max - out_min)
        i = np.arange(_STEPS).astype(f)
        x = in_min + i * step            # C: input_min + i * step, one rounding per operation
        x_mid = in_min + i * step + half_step
        x_next = in_min + (i + f(1)) * step
        y = np.asarray(transform(x), dtype=f)
        y_mid = np.asarray(transform(x_mid), dtype=f)
        y_next = np.asarray(transform(x_next), dtype=f)
        sample = _round_away(y * inv)
        interp = _round_away((y_next * inv + sample) / f(2))
        err = interp - _round_away(y_mid * inv)
        body = np.minimum(np.maximum(sample - _round_away(err / f(2)), f(-32768)), f(32767))
        last = np.minimum(np.maximum(_round_away(np.asarray(transform(np.array([in_max], dtype=f)), dtype=f) * inv),
                                     f(-32768)), f(32767))
    table = np.concatenate([body, last])
    if np.isnan(table).any():
        raise QKernelError(f"int16 lookup table: an entry is NaN (input scale {input_scale}, output scale "
                           f"{output_scale}); LiteRT's float-to-int16 cast of it is undefined")
    return table.astype(np.int16)


def lut16_values(lut: np.ndarray) -> np.ndarray:
    """``LUTLookup`` of every int16 value, in order -32768..32767 (int16[65536])."""
    lut = np.asarray(lut, dtype=np.int64)
    if lut.shape != (LUT16_SIZE,):
        raise ValueError(f"int16 lookup table must have {LUT16_SIZE} entries, found shape {lut.shape}")
    v = INT16_VALUES
    index = 256 + (v >> 7)
    offset = v & 0x7F
    base = lut[index]
    slope = wrap_int16(lut[index + 1] - base)
    return wrap_int16(base + ((slope * offset + 64) >> 7)).astype(np.int16)


def lut16_lookup(x: np.ndarray, values: np.ndarray, op: str) -> np.ndarray:
    """Gather ``values`` (from :func:`lut16_values`) at the int16 array ``x``."""
    x = check_quantized(x, op, "input", (np.int16,))
    values = np.asarray(values)
    if values.shape != (65536,) or values.dtype != np.int16:
        raise ValueError(f"{op}: an int16 input needs the int16 table of 65,536 entries its prepare_* builds with "
                         f"storage=np.int16, found {values.dtype} {values.shape}")
    return lookup_table(x, values)


def check_int16_zero_point(zero_point: int, op: str, name: str) -> None:
    # TF_LITE_ENSURE_EQ(zero_point, 0): LiteRT's int16 activation kernels are symmetric.
    if int(zero_point) != 0:
        raise QKernelError(f"{op}: int16 {name} must be 0 (LiteRT's Prepare checks zero_point == 0 for int16), "
                           f"found {zero_point}")


def checked_log2(x: float) -> tuple[bool, int]:
    """``CheckedLog2``: whether float32 ``x`` is within 1e-3 (in log2) of a power of two, and that power.
    ``logf(x) · f32(1/logf(2))``, rounded half away, all float32."""
    f = np.float32
    log_x = f(math.log(float(f(x)))) if f(x) > 0 else f(-np.inf)
    if not np.isfinite(log_x):
        return False, 0
    log2 = log_x * (f(1.0) / f(math.log(2.0)))
    rounded = _round_away(np.asarray(log2, dtype=f))
    return bool(abs(float(log2 - rounded)) < 1e-3), int(rounded)


# LiteRT's table of sigmoid(i/24) in unsigned Q0.16, i = 0..255, shared by the int16 LOGISTIC and
# TANH kernels (tanh(x) = 2·sigmoid(2x) - 1). It is round(65536·sigmoid(i/24)) except at the indices
# below, whose entries are one higher (a fitted table, checked entry by entry through the kernels
# against BUILTIN_REF on all 65,536 inputs).
_SIGMOID_ONE_HIGHER = (4, 8, 12, 14, 15, 16, 17, 19, 20, 21, 22, 25, 27, 28, 29, 30, 31, 33, 34, 35, 37, 39, 40, 41,
                       43, 44, 45, 46, 49, 50, 54, 62, 63, 64, 66, 82, 86, 93, 100, 103, 112, 116, 135, 255)


def sigmoid_table_uint16() -> np.ndarray:
    """The 256-entry ``sigmoid_table_uint16`` as int64."""
    i = np.arange(256, dtype=np.float64)
    table = np.floor(65536.0 / (1.0 + np.exp(-i / 24.0)) + 0.5).astype(np.int64)
    table[list(_SIGMOID_ONE_HIGHER)] += 1
    return table


# ---------------------------------------------------------------------------
# int16 LOGISTIC and TANH: the input rescaling their Prepare computes


@dataclass(frozen=True)
class Int16ActivationParams(KernelParams):
    input_multiplier: int    # 0: a power-of-two input scale (the kernel then uses 3 << input_left_shift)
    input_left_shift: int


def prepare_sigmoid_family(op: str, input_scale: float, input_zero_point: int, output_scale: float,
                           output_zero_point: int, pot_shifts: tuple[int, ...]) -> Int16ActivationParams:
    """``SigmoidPrepare`` / ``TanhPrepare`` for int16 (3 input integer bits, 15 output fractional bits).

    A power-of-two input scale (``CheckedLog2``) whose left shift ``12 + log2(s_in)`` is in
    ``pot_shifts`` needs no multiplier; any other scale gets ``M = trunc(s_in·4096·3·2**n)`` with the
    smallest ``n`` (at most 31) that lifts it above 32767/2, and left shift ``n``. The output scale
    must be 2**-15 to within CheckedLog2's tolerance."""
    check_int16_zero_point(input_zero_point, op, "input zero point")
    check_int16_zero_point(output_zero_point, op, "output zero point")
    is_pot, log2_out = checked_log2(output_scale)
    if not is_pot or log2_out != -15:
        raise QKernelError(f"{op}: int16 output scale must be 1/32768 (LiteRT's Prepare checks "
                           f"CheckedLog2(output scale) == -15), found {output_scale}")
    s_in = np.float32(input_scale)
    if not (np.isfinite(s_in) and s_in > 0):
        raise QKernelError(f"{op}: the input scale must be a positive finite float32, found {input_scale}")
    is_pot, log2_in = checked_log2(float(s_in))
    shift = 12 + log2_in
    if is_pot and shift in pot_shifts:
        return Int16ActivationParams(0, shift)
    multiplier, shift = float(s_in) * 4096.0 * 3.0, 0
    while multiplier <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        multiplier *= 2.0
    return Int16ActivationParams(int(multiplier), shift)


def sigmoid_table_interpolated(d: np.ndarray, frac_bits: int, saturated: int) -> np.ndarray:
    """The sigmoid table at ``|d|``, linearly interpolated with ``frac_bits`` bits between entries
    (entry ``u = |d| >> frac_bits``), ``saturated`` past the last one: LOGISTIC's (9 bits) and
    TANH's (8 bits) common first step, before each rounds and mirrors it its own way."""
    a = np.abs(d)
    u = np.minimum(a >> frac_bits, 254)
    table = sigmoid_table_uint16()
    lo, hi = table[u], table[u + 1]
    return np.where((a >> frac_bits) >= 255, saturated, (lo << frac_bits) + (a & ((1 << frac_bits) - 1)) * (hi - lo))


def scaled_sigmoid_input(input_multiplier: int, input_left_shift: int) -> np.ndarray:
    """``((q·M + round) >> shift)`` for every int16 q (int32 arithmetic, wrapping as the C++ compiles)."""
    if input_multiplier == 0:          # power of two: the scale is exact, only the 3/4 range stretch
        input_multiplier, input_left_shift = 3 << input_left_shift, 0
    rounding = (1 << (input_left_shift - 1)) if input_left_shift > 0 else 0
    return wrap_int32(wrap_int32(INT16_VALUES * input_multiplier) + rounding) >> input_left_shift
