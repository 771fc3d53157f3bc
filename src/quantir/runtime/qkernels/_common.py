"""Plumbing shared by the integer kernels: errors, parameter records, argument checks, requantization.

Nothing here rounds on its own: requantization is
:func:`~quantir.numerics.multiply_by_quantized_multiplier` plus the zero point, clamped with
:func:`~quantir.numerics.saturate`, exactly as every LiteRT int8 kernel ends.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Literal

import numpy as np

from quantir.errors import VerifyError
from quantir.numerics import (
    MultiplierRounding,
    fused_activation_range,
    multiply_by_quantized_multiplier_smaller_than_one_exp,
    quantize_multipliers,
    saturate,
    storage_range,
)
from quantir.numerics import multiply_by_quantized_multiplier as _mbqm
from quantir.runtime.qkernels import _jit

Activation = Literal["none", "relu", "relu6", "relu_n1_to_1"]
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

# Storage dtypes the kernels produce, with their integer ranges.
STORAGE_DTYPES = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255),
                  np.dtype(np.int16): (-32768, 32767)}


class QKernelError(VerifyError):
    """A parameter combination LiteRT's reference kernel rejects (or leaves undefined)."""


class AccumulatorOverflowError(QKernelError):
    """An int32 accumulator of CONV_2D / DEPTHWISE / FULLY_CONNECTED would overflow in LiteRT."""


def multiply_by_quantized_multiplier(x: Any, big_m: Any, shift: Any, rounding: MultiplierRounding | str = "double"
                                     ) -> np.ndarray:
    """numerics' ``multiply_by_quantized_multiplier`` for the kernels: an int32 overflow of
    ``x·2**shift`` (undefined behaviour in LiteRT, e.g. an output scale of 1e-11 in a file) is a
    QKernelError, not a ValueError."""
    try:
        return _mbqm(x, big_m, shift, rounding)
    except ValueError as e:
        raise QKernelError(str(e)) from None


@dataclasses.dataclass(frozen=True)
class KernelParams:
    """Base of the records ``prepare_*`` returns; field names match the kernel's keywords."""

    def as_kwargs(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def storage_limits(dtype: Any, op: str) -> tuple[int, int]:
    dt = np.dtype(dtype)
    if dt not in STORAGE_DTYPES:
        raise QKernelError(f"{op}: storage type must be int8, uint8 or int16, found {dt}")
    return STORAGE_DTYPES[dt]


def check_quantized(x: Any, op: str, name: str, dtypes: tuple = (np.int8,)) -> np.ndarray:
    """``x`` as an array of one of ``dtypes`` (no conversion: a wrong dtype is a caller bug)."""
    a = np.asarray(x)
    if a.dtype not in [np.dtype(d) for d in dtypes]:
        allowed = ", ".join(np.dtype(d).name for d in dtypes)
        raise TypeError(f"{op}: {name} must have dtype {allowed}, found {a.dtype}")
    return a


def check_bias64(bias: Any, channels: int, op: str) -> np.ndarray | None:
    """A 16x8 bias, one integer per output channel, as int64: LiteRT's 16x8 kernels add it into an
    int64 accumulator (int32 data is widened)."""
    if bias is None:
        return None
    b = np.asarray(bias)
    if b.dtype.kind not in "iu" or b.size != channels:
        raise ValueError(f"{op}: the bias must be {channels} integers, found {b.size} of dtype {b.dtype}")
    return b.astype(np.int64).reshape(-1)


def check_bias(bias: Any, channels: int, op: str) -> np.ndarray | None:
    if bias is None:
        return None
    b = np.asarray(bias)
    if b.dtype.kind not in "iu":
        raise TypeError(f"{op}: bias must be an int32 array, found dtype {b.dtype}")
    b = b.astype(np.int64).reshape(-1)
    if b.size != channels:
        raise ValueError(f"{op}: bias has {b.size} values for {channels} output channels")
    if b.size and (b.min() < INT32_MIN or b.max() > INT32_MAX):
        raise ValueError(f"{op}: bias values must fit int32")
    return b


def check_zero_point(zp: Any, op: str, name: str, lo: int = -128, hi: int = 127) -> int:
    z = int(zp)
    if not lo <= z <= hi:
        raise QKernelError(f"{op}: {name} must be in [{lo}, {hi}], found {z}")
    return z


def check_accumulator(acc: np.ndarray, op: str) -> None:
    """Raise when an int32 accumulator of ``op`` would overflow (undefined behaviour in LiteRT)."""
    if acc.size == 0:
        return
    lo, hi = acc.min(), acc.max()
    if lo < INT32_MIN or hi > INT32_MAX:
        bad = int(lo) if lo < INT32_MIN else int(hi)
        raise AccumulatorOverflowError(
            f"{op}: accumulator value {bad} does not fit int32; LiteRT's int32 accumulator would overflow "
            "(undefined behaviour). Reduce the reduction length or the input/weight ranges.")


def exact_float_dtype(k: int, max_abs_input: int, max_abs_weight: int, op: str):
    """The narrowest float type in which a length-``k`` integer dot product is exact.

    With ``|x| <= max_abs_input`` and ``|w| <= max_abs_weight``, every product and partial sum
    is an integer of magnitude at most ``k·max_abs_input·max_abs_weight``; below 2**24 it is
    exact in float32 (whatever the summation order or FMA use), below 2**53 in float64
    (docs/numerics.md §6).
    """
    bound = k * max_abs_input * max_abs_weight
    if bound < (1 << 24):
        return np.float32
    if bound < (1 << 53):
        return np.float64
    raise QKernelError(f"{op}: a dot product of length {k} may reach {bound}, beyond exact float64 integers")


def accumulator_bound(k: int, max_abs_input: int, max_abs_weight: int, bias: np.ndarray | None) -> int:
    """An upper bound of |acc| over all inputs: when below 2**31 no overflow check is needed."""
    b = int(np.abs(bias).max()) if bias is not None and bias.size else 0
    return k * max_abs_input * max_abs_weight + b


def max_abs(a: np.ndarray, offset: int = 0) -> int:
    if a.size == 0:
        return 0
    return max(abs(int(a.max()) - offset), abs(int(a.min()) - offset))


def quantize_channel_multipliers(real: Any, op: str) -> tuple[np.ndarray, np.ndarray]:
    """``QuantizeMultiplier`` per element, refusing what LiteRT's MBQM cannot apply (shift > 30)."""
    big_m, shift = quantize_multipliers(np.atleast_1d(np.asarray(real, dtype=np.float64)))
    if shift.size and shift.max() > 30:
        raise QKernelError(f"{op}: real multiplier {float(np.max(real)):g} is too large for a 31-bit "
                           "fixed-point multiplier (shift > 30)")
    return big_m.astype(np.int64), shift.astype(np.int64)


def activation_range(activation: Activation, scale: float, zero_point: int, dtype: Any = np.int8,
                     op: str = "kernel") -> tuple[int, int]:
    """``CalculateActivationRangeQuantized`` for the storage type ``dtype`` (§1.8)."""
    qmin, qmax = storage_limits(dtype, op)
    try:
        lo, hi = fused_activation_range(activation, scale, zero_point, qmin, qmax)
    except ValueError as e:
        raise QKernelError(f"{op}: {e}") from None
    if lo > hi:
        raise QKernelError(f"{op}: the {activation} range [{lo}, {hi}] is empty for output scale {scale} "
                           f"and zero point {zero_point}")
    return lo, hi


def _requantize_block(acc, multiplier, shift, zero_point, act_min, act_max, out_dtype, rounding):
    if np.max(shift) <= 0:
        # With no left shift, MBQM is exactly MultiplyByQuantizedMultiplierSmallerThanOneExp
        # (RDBPOT(SRDHM(x, M), -shift)) in both builds; that entry point skips the shift step.
        scaled = multiply_by_quantized_multiplier_smaller_than_one_exp(acc, multiplier, shift, rounding)
    else:
        scaled = multiply_by_quantized_multiplier(acc, multiplier, shift, rounding)
    return saturate(scaled + int(zero_point), int(act_min), int(act_max)).astype(out_dtype)


BLOCK = 1 << 16  # elements per requantization block: the ~20 int64 passes of MBQM stay in cache


def _flat_compiled(acc: np.ndarray, m: int, shift: int, rounding) -> bool:
    """One multiplier over a large integer array that the compiled loop takes: the double-rounding
    build, ``m`` and ``shift`` in MBQM's domain and ``acc·2**left`` within int32 (else the numpy path
    runs, and raises where LiteRT's arithmetic is undefined)."""
    if not (_jit.AVAILABLE and acc.size >= BLOCK and acc.dtype.kind == "i"
            and MultiplierRounding(rounding) is MultiplierRounding.DOUBLE and 0 <= m <= INT32_MAX
            and -31 <= shift <= 30):
        return False
    left = max(shift, 0)
    return int(acc.min()) << left >= -(1 << 31) and int(acc.max()) << left <= INT32_MAX


def requantize(acc: np.ndarray, multiplier: Any, shift: Any, zero_point: int, act_min: int, act_max: int,
               out_dtype: Any = np.int8, rounding: MultiplierRounding | str = "double", *,
               channel_axis: int | None = None) -> np.ndarray:
    """``clamp(MBQM(acc, M, shift) + zp, act_min, act_max)`` cast to the storage dtype.

    ``multiplier``/``shift`` are scalars, or 1-D per-channel arrays along ``channel_axis``.
    The work is split into blocks of about :data:`BLOCK` elements so that the many
    element-wise passes of the fixed-point arithmetic run in cache; the result is the
    same as one call on the whole array.
    """
    acc = np.asarray(acc)
    m = np.asarray(multiplier, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    if m.ndim == 0 and s.ndim == 0 and _flat_compiled(acc, int(m), int(s), rounding):
        out = np.empty(acc.shape, dtype=out_dtype)
        _jit.requantize_flat(np.ascontiguousarray(acc).reshape(-1), int(m), max(int(s), 0), max(-int(s), 0),
                             int(zero_point), int(act_min), int(act_max), out.reshape(-1))
        return out
    if acc.size <= BLOCK or acc.ndim == 0:
        if channel_axis is not None and m.ndim:
            view = [1] * acc.ndim
            view[channel_axis] = -1
            m, s = m.reshape(view), s.reshape(view)
        return _requantize_block(acc, m, s, zero_point, act_min, act_max, out_dtype, rounding)
    out = np.empty(acc.shape, dtype=out_dtype)
    if channel_axis is None or m.ndim == 0:
        flat_in, flat_out = acc.reshape(-1), out.reshape(-1)
        for start in range(0, flat_in.size, BLOCK):
            sl = slice(start, start + BLOCK)
            flat_out[sl] = _requantize_block(flat_in[sl], m, s, zero_point, act_min, act_max, out_dtype, rounding)
        return out
    axis = channel_axis % acc.ndim
    channels = acc.shape[axis]
    m = np.broadcast_to(m.reshape(-1), (channels,))
    s = np.broadcast_to(s.reshape(-1), (channels,))
    if axis == acc.ndim - 1:  # channel-last: blocks of whole rows, parameters broadcast on the last axis
        rows_in, rows_out = acc.reshape(-1, channels), out.reshape(-1, channels)
        step = max(1, BLOCK // channels)
        for start in range(0, rows_in.shape[0], step):
            sl = slice(start, start + step)
            rows_out[sl] = _requantize_block(rows_in[sl], m, s, zero_point, act_min, act_max, out_dtype, rounding)
        return out
    outer = int(np.prod(acc.shape[:axis], dtype=np.int64))
    inner = int(np.prod(acc.shape[axis + 1:], dtype=np.int64))
    rows_in, rows_out = acc.reshape(outer * channels, inner), out.reshape(outer * channels, inner)
    row_channel = np.tile(np.arange(channels), outer)
    step = max(1, BLOCK // max(inner, 1))
    for start in range(0, rows_in.shape[0], step):
        sl = slice(start, start + step)
        c = row_channel[sl]
        rows_out[sl] = _requantize_block(rows_in[sl], m[c][:, None], s[c][:, None], zero_point, act_min, act_max,
                                         out_dtype, rounding)
    return out


INT8_VALUES = np.arange(-128, 128, dtype=np.int64)


_JIT_MIN = 1 << 12   # below this many elements the numpy gather is as fast as a compiled call


def _unsigned_view(x: np.ndarray) -> tuple[np.ndarray, int]:
    """``x`` reinterpreted as unsigned storage, and the bit that flips it to ``x - min(dtype)``.

    For a signed dtype ``x - min = u ^ sign_bit`` where ``u`` is the unsigned view; reordering
    the table by the same xor lets the gather index with the raw bytes (no widening pass)."""
    if x.dtype.kind == "u":
        return x, 0
    return x.view(np.dtype(f"u{x.dtype.itemsize}")), 1 << (8 * x.dtype.itemsize - 1)


def lookup_table(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``table[x - min(dtype)]``: evaluate a function of one int8/uint8/int16 value by gathering."""
    u, flip = _unsigned_view(x)
    table = np.asarray(table)
    if flip:
        table = table[np.arange(table.size) ^ flip]
    if _jit.AVAILABLE and u.size >= _JIT_MIN and u.flags.c_contiguous:
        out = np.empty(u.shape, dtype=table.dtype)
        _jit.gather(u.reshape(-1), np.ascontiguousarray(table), out.reshape(-1))
        return out
    return np.take(table, u, mode="clip")    # every index is in range: "clip" skips the checks


def pair_table_lookup(a: np.ndarray, b: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``table[a + 128, b + 128]`` with numpy broadcasting: a function of two int8 values by gathering."""
    shape = np.broadcast_shapes(a.shape, b.shape)
    ua, _ = _unsigned_view(a)
    ub, _ = _unsigned_view(b)
    flip = np.arange(256) ^ 0x80
    reordered = np.asarray(table)[flip[:, None], flip[None, :]].reshape(-1)   # [ua, ub] = table[a+128, b+128]
    if _jit.AVAILABLE and ua.shape == ub.shape and ua.size >= _JIT_MIN and ua.flags.c_contiguous \
            and ub.flags.c_contiguous:
        out = np.empty(shape, dtype=reordered.dtype)
        _jit.gather_pairs(ua.reshape(-1), ub.reshape(-1), reordered, out.reshape(-1))
        return out
    index = np.empty(shape, dtype=np.uint16)
    np.left_shift(ua, 8, out=index, dtype=np.uint16)
    np.bitwise_or(index, ub, out=index)
    return np.take(reordered, index, mode="clip")


def clamp_range(act_min: int, act_max: int, dtype: Any, op: str) -> tuple[int, int]:
    qmin, qmax = storage_limits(dtype, op)
    lo, hi = int(act_min), int(act_max)
    if not qmin <= lo <= hi <= qmax:
        raise QKernelError(f"{op}: activation range [{lo}, {hi}] must lie inside [{qmin}, {qmax}]")
    return lo, hi


def batch_chunks(n: int, per_item: int, budget: int = 1 << 19):
    """Split ``range(n)`` into slices whose working set stays near ``budget`` elements."""
    step = max(1, budget // max(per_item, 1))
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


__all__ = [
    "Activation", "QKernelError", "AccumulatorOverflowError", "KernelParams", "storage_limits",
    "check_quantized", "check_bias", "check_zero_point", "check_accumulator", "quantize_channel_multipliers",
    "activation_range", "requantize", "clamp_range", "batch_chunks", "storage_range", "exact_float_dtype",
    "accumulator_bound", "max_abs", "lookup_table", "pair_table_lookup", "INT8_VALUES",
]
