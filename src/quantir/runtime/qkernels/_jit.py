"""Compiled loops for the hottest integer-kernel steps, when numba is installed (optional).

numpy spends one pass over memory per ufunc; a requantization is six of them, a 3x3 depthwise
convolution eighteen more. These loops do each in one pass and compute the very same integers:

* :func:`requantize_rows` applies the float64 form of MBQM derived in
  :mod:`~quantir.runtime.qkernels._fast_requant` to channels marked fast (every operation exact,
  so no reassociation or FMA contraction can change a result; numba compiles without fastmath),
  and LiteRT's integer ``RDBPOT(SRDHM(acc, M), r)`` to the others;
* :func:`depthwise_rows` is ``DepthwisePerChannel`` with an int32 accumulator (the caller has
  bounded it below 2**31) followed by the same requantization;
* :func:`gather` / :func:`gather_pairs` are the 256 / 256x256-entry table lookups.

Without numba (``AVAILABLE`` is False) the callers keep their numpy paths, which give the same
results; tests compare the two. ``QUANTIR_NO_JIT=1`` turns the compiled loops off.
"""
from __future__ import annotations

import os

import numpy as np

try:
    if os.environ.get("QUANTIR_NO_JIT"):
        raise ImportError("disabled by QUANTIR_NO_JIT")
    import numba
except ImportError:  # optional: the numpy paths stay
    numba = None

AVAILABLE = numba is not None

__all__ = ["AVAILABLE", "requantize_rows", "depthwise_rows", "gather", "gather_pairs", "requant_params"]


def requant_params(multiplier: np.ndarray, shift: np.ndarray, fast: np.ndarray):
    """Per-channel constants of :func:`requantize_rows`: float scale and half-step (fast channels),
    multiplier and right shift (all), as contiguous arrays."""
    r = (-shift).astype(np.int64)
    scale = np.where(fast, np.ldexp(multiplier.astype(np.float64), (-31 - r).astype(np.int32)), 0.0)
    half = np.where(fast & (r >= 1), np.ldexp(1.0, (-(r + 1)).astype(np.int32)), 0.0)
    return (np.ascontiguousarray(scale), np.ascontiguousarray(half), np.ascontiguousarray(fast, dtype=np.bool_),
            np.ascontiguousarray(multiplier, dtype=np.int64), np.ascontiguousarray(r))


def _requantize_row(src, dst, scale, half, fast, m, r, zp, lo, hi):
    """``dst[k] = clamp(MBQM(src[k]) + zp)`` for one channel's row of exact integer accumulators."""
    if fast:
        flo, fhi = np.float64(lo - zp), np.float64(hi - zp)
        for k in range(src.size):
            y = src[k] * scale
            y = y + half if y >= 0.0 else y - half
            v = min(max(np.floor(y + 0.5), flo), fhi)
            dst[k] = np.int8(np.int32(v) + zp)
    else:   # LiteRT's integers: SRDHM (rhu at 2**31), then RDBPOT (rha at 2**r)
        mask = (np.int64(1) << r) - 1
        for k in range(src.size):
            high = (np.int64(src[k]) * m + (1 << 30)) >> 31
            rounded = (high >> r) + np.int64((high & mask) > ((mask >> 1) + np.int64(high < 0)))
            dst[k] = np.int8(min(max(rounded + zp, lo), hi))


def _requantize_rows(acc, scale, half, fast, m, r, zp, lo, hi, out):
    n, c, p = acc.shape
    for i in range(n):
        for ch in range(c):
            _requantize_row(acc[i, ch], out[i, ch], scale[ch], half[ch], fast[ch], m[ch], r[ch], zp, lo, hi)


def _depthwise_rows(xp, w, offsets, bias, mult, zp_in, sw, pitch, scale, half, fast, m, r, zp, lo, hi, out):
    """``xp``: [N, C_in, flat] int8, each channel's zp-padded image flattened (with a zp tail);
    ``w``: [C_out, taps] int32 with the flat ``offsets`` of the taps. Output (i, j) is position
    q = i·pitch + j, reading ``xp[..., offset + sw·q]``. A channel is first split into its ``sw``
    column phases (``src[p::sw]``) so that every tap is a contiguous run: the loop vectorizes."""
    n, c_out, oh, ow = out.shape
    flat = xp.shape[2]
    length = oh * pitch
    plen = (flat + sw - 1) // sw
    phases = np.empty((sw, plen), dtype=np.int32)
    acc = np.empty(length, dtype=np.int32)
    row8 = np.empty(length, dtype=np.int8)
    zpi = np.int32(zp_in)
    for i_n in range(n):
        last = -1
        for oc in range(c_out):
            ic = oc // mult
            if ic != last:   # x - zp of this channel, by column phase
                src = xp[i_n, ic]
                for p in range(sw):
                    for k in range(plen):
                        at = p + sw * k
                        phases[p, k] = np.int32(src[at]) - zpi if at < flat else 0
                last = ic
            b = np.int32(bias[oc])
            for q in range(length):
                acc[q] = b
            for t in range(offsets.size):
                wv = w[oc, t]
                run = phases[offsets[t] % sw, offsets[t] // sw:offsets[t] // sw + length]
                for q in range(length):
                    acc[q] += wv * run[q]
            _requantize_row(acc, row8, scale[oc], half[oc], fast[oc], m[oc], r[oc], zp, lo, hi)
            for i in range(oh):   # positions j >= ow of each row are dropped
                for j in range(ow):
                    out[i_n, oc, i, j] = row8[i * pitch + j]


def _gather(index, table, out):
    for k in range(index.size):
        out[k] = table[index[k]]


def _gather_pairs(a, b, table, out):
    for k in range(a.size):
        out[k] = table[(np.int64(a[k]) << 8) | np.int64(b[k])]


if AVAILABLE:
    _jit = numba.njit(cache=True, nogil=True)
    _requantize_row = _jit(_requantize_row)
    requantize_rows = _jit(_requantize_rows)
    depthwise_rows = _jit(_depthwise_rows)
    gather = _jit(_gather)
    gather_pairs = _jit(_gather_pairs)
else:
    requantize_rows = depthwise_rows = gather = gather_pairs = None
