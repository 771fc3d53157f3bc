"""Per-channel requantization of exact float accumulators in a few float64 passes.

The convolution kernels get their accumulators from float BLAS (exact integers held in
float32/float64). :func:`~quantir.runtime.qkernels._common.requantize` converts them to int64
and runs the fixed-point MBQM (``RDBPOT(SRDHM(acc, M), r)``, ``r = -shift``) in ~20 integer
passes. For ``shift <= 0`` the same integers follow from one float64 expression::

    out = clamp(floor(acc·s + copysign(h, acc) + 1/2) + zp, act_min, act_max)
    s = M·2**-(31 + r),  h = 2**-(r + 1) if r >= 1 else 0

Why: SRDHM is ``hi = floor(acc·M/2**31 + 1/2)`` and RDBPOT is
``floor((hi + 2**(r-1) - [hi < 0]) / 2**r)``; nested floors of power-of-two divisions merge,
so ``out - zp = floor(acc·s + 2**-(r+1) + 1/2 - [hi < 0]·2**-r)``. ``hi < 0`` may be replaced
by ``acc < 0`` for ``r >= 1`` (they differ only when ``hi = 0``, where both give 0), which
gives the ``copysign`` term; with ``r = 0`` RDBPOT is the identity and ``h = 0``.

Every operand is a multiple of ``2**-(31 + r)``: the float64 arithmetic is exact while the
magnitudes stay below ``2**(22 - r)``, i.e. ``|acc|·M + 2**30 + 2**(39 + r) < 2**53`` (the
last term bounds ``zp + 128.5``). The caller passes a per-channel bound of ``|acc|``; channels
that miss it (tiny multipliers with a large ``r``, or a huge bound) are requantized with the
integer MBQM instead. A positive shift (a multiplier above one: LiteRT shifts the int32
accumulator left first) is the ``r < 0`` case of the same formula, with ``h = 0``; a layer with
one takes the float path only when asked (``left_shift``) and when the bound proves the left
shift cannot overflow int32 — the overflow check belongs to the integer path.

The per-channel constants are expanded to planes along the flattened ``C·P`` axis (numpy
broadcasts a ``(C, 1)`` operand much slower than it streams a contiguous one), and the work is
tiled so that the passes run in cache. The result is offset by 128 so that the float -> uint8
conversion (truncation) is a floor, then flipped back to int8 with one xor.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from quantir.runtime.qkernels import _jit
from quantir.runtime.qkernels._common import INT32_MAX, requantize

__all__ = ["requantize_exact_float", "float_plan", "ExactFloatRequantizer"]

_EXACT = 1 << 53
TILE = 1 << 15  # float64 elements per pass: two buffers of 256 KiB stay in L2


def _fast_channels(m: np.ndarray, r: np.ndarray, bound: np.ndarray) -> np.ndarray:
    rr = np.minimum(r, 21)   # r > 21 can never pass (2**(39 + r) alone exceeds 2**53 after 2**60)
    need = bound * m + (1 << 30) + np.left_shift(np.int64(1), 39 + rr)   # < 2**63: bound, m < 2**31
    return (m == 0) | ((r <= 21) & (need < _EXACT))


def float_plan(multiplier: Any, shift: Any, bound: Any, channels: int, *, left_shift: bool = False
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Per-channel ``(M, shift, fast)`` as int64/int64/bool arrays, or None when the layer needs
    the integer path as a whole (an out-of-range shift, a multiplier outside ``[0, 2**31)``, or an
    accumulator bound past int32).

    A positive shift is declined unless ``left_shift``; then a channel with ``shift > 0`` is taken
    when ``bound·2**shift`` fits int32 (LiteRT shifts the int32 accumulator left before SRDHM, and
    the integer path raises where that overflows: with this bound it never does) and its float64
    form is exact (with ``r = -shift < 0`` it is ``floor(acc·M·2**(shift-31) + 1/2)``, the
    ``h = 0`` case of the formula above); otherwise the whole layer is declined. The compiled
    loops' integer fallback knows only right shifts, so every such channel must be fast."""
    m = np.broadcast_to(np.asarray(multiplier, dtype=np.int64).reshape(-1), (channels,))
    s = np.broadcast_to(np.asarray(shift, dtype=np.int64).reshape(-1), (channels,))
    bound = np.broadcast_to(np.asarray(bound, dtype=np.int64).reshape(-1), (channels,))
    if channels == 0 or m.min() < 0 or m.max() > INT32_MAX or s.max() > 30 or s.min() < -31 \
            or bound.max() > INT32_MAX:
        return None
    fast = _fast_channels(m, -s, bound)
    left = s > 0
    if left.any():
        if not left_shift or np.any(np.left_shift(bound[left], s[left]) > INT32_MAX) or not fast[left].all():
            return None
    return m, s, fast


class ExactFloatRequantizer:
    """:func:`requantize_exact_float` with its per-channel plan made once, for a kernel that
    requantizes many tiles of one layer (the plan costs more than a small tile)."""

    def __init__(self, multiplier: Any, shift: Any, zero_point: int, act_min: int, act_max: int, bound: Any,
                 channels: int, bias: np.ndarray | None = None):
        """``bias`` (int, ``[channels]``): added to ``acc`` here, exactly (in float64), so that the
        accumulators need not hold it — a large bias would otherwise push a GEMM into float64.
        ``bound`` bounds ``|acc + bias|``."""
        self.channels, self.zero_point, self.act_min, self.act_max = channels, int(zero_point), int(act_min), \
            int(act_max)
        self.multiplier, self.shift, self.bound = multiplier, shift, bound
        self.bias = np.zeros(channels, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(channels)
        self.plan = float_plan(multiplier, shift, bound, channels, left_shift=True)
        self.params = _jit.requant_params(*self.plan) if self.plan is not None and _jit.AVAILABLE else None

    def __call__(self, acc: np.ndarray, *, channel_major: bool = False, out: np.ndarray | None = None
                 ) -> np.ndarray | None:
        """The int8 ``[N, C, P]`` result, written into ``out`` when given (that shape; with the
        compiled loops it may be a strided view, such as a band of rows of an NCHW output)."""
        if self.plan is None:
            return None
        if self.params is None:
            if self.bias.any():   # float64 holds acc + bias exactly (both integers below 2**31)
                acc = acc + self.bias.astype(np.float64).reshape((-1, 1, 1) if channel_major else (1, -1, 1))
            result = requantize_exact_float(acc, self.multiplier, self.shift, self.zero_point, self.act_min,
                                            self.act_max, self.bound, channel_major=channel_major, left_shift=True)
            if out is not None:
                out[...] = result
            return result
        c, n, p = acc.shape if channel_major else (acc.shape[1], acc.shape[0], acc.shape[2])
        result = np.empty((n, c, p), dtype=np.int8) if out is None else out
        kernel = _jit.requantize_channel_major if channel_major else _jit.requantize_rows
        kernel(np.ascontiguousarray(acc), self.bias, *self.params, self.zero_point, self.act_min, self.act_max,
               result)
        return result


def requantize_exact_float(acc: np.ndarray, multiplier: Any, shift: Any, zero_point: int, act_min: int,
                           act_max: int, bound: np.ndarray, *, channel_major: bool = False,
                           left_shift: bool = False) -> np.ndarray | None:
    """int8 ``clamp(MBQM(acc, M[c], shift[c]) + zp)`` for float ``acc`` of shape ``[N, C, P]``
    (``[C, N, P]`` with ``channel_major``, as a GEMM over a batch leaves it); the result is
    ``[N, C, P]`` either way.

    ``acc`` holds exact integers with ``|acc[c]| <= bound[c]`` (int64). Returns None when the
    parameters need the integer path for the whole layer (see :func:`float_plan`, which also says
    what ``left_shift`` admits): the caller then requantizes as before, with its checks and errors.
    """
    if channel_major:
        c, n, p = acc.shape
    else:
        n, c, p = acc.shape
    plan = float_plan(multiplier, shift, bound, c, left_shift=left_shift)
    if plan is None:
        return None
    m, s, fast = plan
    if _jit.AVAILABLE:
        result = np.empty((n, c, p), dtype=np.int8)
        kernel = _jit.requantize_channel_major if channel_major else _jit.requantize_rows
        kernel(np.ascontiguousarray(acc), np.zeros(c, np.int64), *_jit.requant_params(m, s, fast), int(zero_point),
               int(act_min), int(act_max), result)
        return result
    if channel_major:
        acc = acc.transpose(1, 0, 2)
    r = -s
    scale = np.where(fast, np.ldexp(m.astype(np.float64), (-31 - r).astype(np.int32)), 0.0)
    half = np.where(fast & (r >= 1), np.ldexp(1.0, (-(r + 1)).astype(np.int32)), 0.0)
    out = np.empty((n, c, p), dtype=np.uint8)
    width = c * p
    flat_in, flat_out = acc.reshape(n, width), out.reshape(n, width)
    scale_plane, half_plane = np.repeat(scale, p), np.repeat(half, p)
    offset, lo, hi = float(zero_point) + 128.5, float(act_min + 128), float(act_max + 128)
    rows = max(1, TILE // width)
    cols = min(width, TILE)
    y = np.empty(rows * cols, dtype=np.float64)
    t = np.empty(rows * cols, dtype=np.float64)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        for c0 in range(0, width, cols):
            c1 = min(width, c0 + cols)
            shape = (r1 - r0, c1 - c0)
            yb, tb = y[:shape[0] * shape[1]].reshape(shape), t[:shape[0] * shape[1]].reshape(shape)
            np.multiply(flat_in[r0:r1, c0:c1], scale_plane[c0:c1], out=yb)
            np.copysign(half_plane[c0:c1], yb, out=tb)
            np.add(yb, tb, out=yb)
            np.add(yb, offset, out=yb)
            np.clip(yb, lo, hi, out=yb)
            np.copyto(flat_out[r0:r1, c0:c1], yb, casting="unsafe")   # y >= 0: truncation is floor
    np.bitwise_xor(out, 0x80, out=out)
    result = out.view(np.int8)
    slow = np.flatnonzero(~fast)
    if slow.size:
        exact = acc[:, slow, :].astype(np.int64)
        result[:, slow, :] = requantize(exact, m[slow], s[slow], zero_point, act_min, act_max, channel_axis=1)
    return result
