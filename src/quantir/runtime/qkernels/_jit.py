"""Compiled loops for the hottest integer-kernel steps, when numba is installed (optional).

numpy spends one pass over memory per ufunc; a requantization is six of them, a 3x3 depthwise
convolution eighteen more. These loops do each in one pass and compute the very same integers:

* :func:`requantize_rows` applies the float64 form of MBQM derived in
  :mod:`~quantir.runtime.qkernels._fast_requant` to channels marked fast (every operation exact,
  so no reassociation or FMA contraction can change a result; numba compiles without fastmath),
  and LiteRT's integer ``RDBPOT(SRDHM(acc, M), r)`` to the others;
* :func:`depthwise_rows` / :func:`depthwise_channels_last` are ``DepthwisePerChannel`` with an
  int32 accumulator (the caller has bounded it below 2**31) followed by the same
  requantization: per channel over stride phases (large images), or channels innermost (small);
* :func:`quantize_f32` is LiteRT's QUANTIZE (float32 division, ties away from zero);
* :func:`gather` / :func:`gather_pairs` are the 256 / 256x256-entry table lookups;
* :func:`requantize_flat` is LiteRT's integer MBQM with one multiplier, into int8 or int16.

Without numba (``AVAILABLE`` is False) the callers keep their numpy paths, which give the same
results; tests compare the two. ``QUANTIR_NO_JIT=1`` turns the compiled loops off.
"""
from __future__ import annotations

import math
import os

import numpy as np

try:
    if os.environ.get("QUANTIR_NO_JIT"):
        raise ImportError("disabled by QUANTIR_NO_JIT")
    import numba
except ImportError:  # optional: the numpy paths stay
    numba = None

AVAILABLE = numba is not None

__all__ = ["AVAILABLE", "requantize_rows", "requantize_channel_major", "depthwise_rows", "depthwise_channels_last",
           "gather", "gather_pairs", "quantize_f32", "pointwise_cols", "im2col", "requant_params",
           "requantize_flat"]


def requant_params(multiplier: np.ndarray, shift: np.ndarray, fast: np.ndarray):
    """Per-channel constants of :func:`requantize_rows`: float scale and half-step (fast channels),
    multiplier and right shift (all), as contiguous arrays."""
    r = (-shift).astype(np.int64)
    scale = np.where(fast, np.ldexp(multiplier.astype(np.float64), (-31 - r).astype(np.int32)), 0.0)
    half = np.where(fast & (r >= 1), np.ldexp(1.0, (-(r + 1)).astype(np.int32)), 0.0)
    return (np.ascontiguousarray(scale), np.ascontiguousarray(half), np.ascontiguousarray(fast, dtype=np.bool_),
            np.ascontiguousarray(multiplier, dtype=np.int64), np.ascontiguousarray(r))


def _requantize_row(src, bias, dst, scale, half, fast, m, r, zp, lo, hi):
    """``dst[k] = clamp(MBQM(src[k] + bias) + zp)`` for one channel's row of exact integer
    accumulators (``bias`` an integer: the depthwise loops add it here, in float64, exactly)."""
    if fast:   # offset by 128 so that the clamped value is >= 0 and truncation is floor
        off, flo, fhi = np.float64(zp) + 128.5, np.float64(lo + 128), np.float64(hi + 128)
        fb = np.float64(bias)
        for k in range(dst.size):
            y = (np.float64(src[k]) + fb) * scale
            y = y + math.copysign(half, y) + off
            dst[k] = np.int8(np.int32(min(max(y, flo), fhi)) - 128)
    else:   # LiteRT's integers: SRDHM (rhu at 2**31), then RDBPOT (rha at 2**r)
        mask = (np.int64(1) << r) - 1
        for k in range(dst.size):
            high = ((np.int64(src[k]) + bias) * m + (1 << 30)) >> 31
            rounded = (high >> r) + np.int64((high & mask) > ((mask >> 1) + np.int64(high < 0)))
            dst[k] = np.int8(min(max(rounded + zp, lo), hi))


def _requantize_rows(acc, bias, scale, half, fast, m, r, zp, lo, hi, out):
    """``acc`` [N, C, P] plus ``bias`` [C] (int64) -> ``out`` [N, C, P] int8."""
    n, c, p = acc.shape
    for i in range(n):
        for ch in range(c):
            _requantize_row(acc[i, ch], bias[ch], out[i, ch], scale[ch], half[ch], fast[ch], m[ch], r[ch], zp, lo,
                            hi)


def _requantize_channel_major(acc, bias, scale, half, fast, m, r, zp, lo, hi, out):
    """``acc`` [C, N, P] (a GEMM over a batch, C-contiguous) plus ``bias`` [C] (int64) -> ``out``
    [N, C, P] int8 (NCHW). Small images (P < ``SHORT_ROW``) are requantized a channel at a time
    as one run of N·P, then copied: numba's loops run scalar on rows shorter than their vector
    width (7x7 = 49 is mostly scalar)."""
    c, n, p = acc.shape
    if p < SHORT_ROW:
        row8 = np.empty(n * p, dtype=np.int8)
        for ch in range(c):
            _requantize_row(acc[ch].ravel(), bias[ch], row8, scale[ch], half[ch], fast[ch], m[ch], r[ch], zp, lo,
                            hi)
            for i in range(n):
                dst, src = out[i, ch], row8[i * p:(i + 1) * p]
                for q in range(p):
                    dst[q] = src[q]
        return
    for ch in range(c):
        for i in range(n):
            _requantize_row(acc[ch, i], bias[ch], out[i, ch], scale[ch], half[ch], fast[ch], m[ch], r[ch], zp, lo,
                            hi)


SHORT_ROW = 256


def _tap_run(phases, rr, cc, sh_h, sw, wq, length):
    """The contiguous run of stride phase (rr % sh_h, cc % sw) that tap (rr, cc) reads."""
    start = (rr // sh_h) * wq + cc // sw
    return phases[(rr % sh_h) * sw + cc % sw, start:start + length]


def _depthwise_rows(x, top, left, hp, wp, w, bias, mult, zp_in, sh_h, sw, dh, dw, scale, half, fast, m, r, zp, lo,
                    hi, phases, plane_f, acc, row8, out):
    """``x``: [N, C_in, H, W] int8, read as if padded by ``top``/``left`` (to ``hp`` x ``wp``) with
    ``zp_in`` (the padding holds x - zp_in = 0); ``w``: [C_out, KH, KW], ``zp_in`` and the scratch
    ``phases`` (zeros, ``[sh_h·sw, (hq + 1)·wq]``) and ``acc`` (``BLOCK``) in one float dtype (int8
    minus a float stays in it; an int64 would convert lane by lane), in which every partial sum of
    the taps is exact (the caller checks; ``bias`` [C_out] int64 is added in the requantization);
    ``plane_f``: ``H·W`` of that dtype; ``row8``: int8 ``OH·wq``.

    Each input channel is first split into its sh_h·sh_w stride phases (``x[a::sh_h, b::sw]``,
    minus ``zp_in``, rows of ``wq`` values, a zero row after): then tap (ki, kj) of output
    (i, j) reads phase (r % sh_h, c % sw) at ``(i + r // sh_h)·wq + j + c // sw`` with
    r = ki·dh, c = kj·dw, so every tap is one contiguous run over q = i·wq + j and the
    multiply-adds vectorize (in float: numba widens int32 products to int64, which AVX2 cannot
    multiply in vectors). Positions j >= OW of each row are computed and dropped. The taps run over
    blocks of ``BLOCK`` positions (in L1), each requantized into ``row8`` as one run: numba's
    loops are slow on runs shorter than their vector width (an output row of 14 is)."""
    n, c_out, oh, ow = out.shape
    h, wd = x.shape[2], x.shape[3]
    kh, kw = w.shape[1], w.shape[2]
    wq = (wp + sw - 1) // sw
    length = oh * wq
    for i_n in range(n):
        last = -1
        for oc in range(c_out):
            ic = oc // mult
            if ic != last:
                _split_phases(x[i_n, ic].ravel(), zp_in, top, left, h, wd, wq, sh_h, sw, plane_f, phases)
                last = ic
            for q0 in range(0, length, BLOCK):
                q1 = min(length, q0 + BLOCK)
                _depthwise_block(phases, w, oc, kh, kw, dh, dw, sh_h, sw, wq, length, q0, q1, acc)
                _requantize_row(acc[:q1 - q0], bias[oc], row8[q0:q1], scale[oc], half[oc], fast[oc], m[oc], r[oc],
                                zp, lo, hi)
            for i in range(oh):   # the columns past OW of each row are dropped
                dst, src8 = out[i_n, oc, i], row8[i * wq:i * wq + ow]
                for j in range(ow):
                    dst[j] = src8[j]


def _split_phases(plane8, zp_in, top, left, h, wd, wq, sh_h, sw, plane_f, phases):
    """Write ``plane8 - zp_in`` (one channel, ``h·wd`` int8) into its stride phases. Only the
    image's positions are written: the padding stays 0 from the start. The plane is converted in
    one long loop first (numba vectorizes long loops; a row of 56 runs mostly scalar), then its
    rows are copied. Every loop indexes a pre-cut slice with its own counter: an index with a
    runtime offset (``b + left``) makes numba test it for wraparound, element by element, which
    keeps the loop scalar (measured 4x slower)."""
    for t in range(h * wd):
        plane_f[t] = plane8[t] - zp_in
    for a in range(h):
        pr, a2 = (a + top) % sh_h, (a + top) // sh_h
        row = plane_f[a * wd:(a + 1) * wd]
        if sw == 1:
            dst = phases[pr, a2 * wq + left:a2 * wq + left + wd]
            for b in range(wd):
                dst[b] = row[b]
            continue
        for pc in range(sw):   # phase column b2 holds padded column b2·sw + pc = b + left
            b_lo = max(0, (left - pc + sw - 1) // sw)
            b_hi = min(wq, (wd + left - pc + sw - 1) // sw)
            if b_hi <= b_lo:
                continue
            dst = phases[pr * sw + pc, a2 * wq + b_lo:a2 * wq + b_hi]
            src = row[b_lo * sw + pc - left:]
            if sw == 2:   # a literal stride: the compiler vectorizes the split
                for t in range(b_hi - b_lo):
                    dst[t] = src[2 * t]
            else:
                for t in range(b_hi - b_lo):
                    dst[t] = src[t * sw]


BLOCK = 512   # accumulators per block of the depthwise taps (2 KiB in float32)


def _depthwise_block(phases, w, oc, kh, kw, dh, dw, sh_h, sw, wq, length, q0, q1, acc):
    """``acc[:q1 - q0]`` = the taps' sum at positions ``q0 .. q1`` of :func:`_depthwise_rows`'s runs,
    three (or two) taps of a kernel row per pass."""
    n = q1 - q0
    first = True
    for ki in range(kh):
        rr = ki * dh
        kj = 0
        while kj < kw:
            left = kw - kj
            if left >= 3:
                r0 = _tap_run(phases, rr, kj * dw, sh_h, sw, wq, length)[q0:q1]
                r1 = _tap_run(phases, rr, (kj + 1) * dw, sh_h, sw, wq, length)[q0:q1]
                r2 = _tap_run(phases, rr, (kj + 2) * dw, sh_h, sw, wq, length)[q0:q1]
                w0, w1, w2 = w[oc, ki, kj], w[oc, ki, kj + 1], w[oc, ki, kj + 2]
                if first:
                    for q in range(n):
                        acc[q] = w0 * r0[q] + w1 * r1[q] + w2 * r2[q]
                else:
                    for q in range(n):
                        acc[q] += w0 * r0[q] + w1 * r1[q] + w2 * r2[q]
                kj += 3
            elif left == 2:
                r0 = _tap_run(phases, rr, kj * dw, sh_h, sw, wq, length)[q0:q1]
                r1 = _tap_run(phases, rr, (kj + 1) * dw, sh_h, sw, wq, length)[q0:q1]
                w0, w1 = w[oc, ki, kj], w[oc, ki, kj + 1]
                if first:
                    for q in range(n):
                        acc[q] = w0 * r0[q] + w1 * r1[q]
                else:
                    for q in range(n):
                        acc[q] += w0 * r0[q] + w1 * r1[q]
                kj += 2
            else:
                r0 = _tap_run(phases, rr, kj * dw, sh_h, sw, wq, length)[q0:q1]
                w0 = w[oc, ki, kj]
                if first:
                    for q in range(n):
                        acc[q] = w0 * r0[q]
                else:
                    for q in range(n):
                        acc[q] += w0 * r0[q]
                kj += 1
            first = False


def _quantize_f32(x, scale, zp, qmin, qmax, out):
    """LiteRT QUANTIZE: ``clamp(rha(f32(x / f32(s))) + zp)``; False (nothing trusted) on a NaN.
    No early exit and an int32 conversion (the clamped value fits): the loop vectorizes (AVX2
    converts float64 to int64 one lane at a time)."""
    lo, hi = np.float64(qmin - zp - 1), np.float64(qmax - zp + 1)
    nan = False
    for k in range(x.size):
        y = x[k] / scale   # float32 / float32: rounded to float32, as LiteRT divides
        nan |= y != y
        a = min(max(np.float64(y), lo), hi)
        v = np.int32(math.copysign(math.floor(abs(a) + 0.5), a)) + zp   # exact for float32 values
        out[k] = min(max(v, qmin), qmax)
    return not nan


def _depthwise_channels_last(x, top, left, hp, wp, w, bias, zp_in, sh_h, sw, dh, dw, scale, half, fast, m, r, zp,
                             lo, hi, xt, out):
    """Depthwise with the channels innermost, for many channels on small images (depth multiplier
    1). ``x`` is NHWC int8 and ``out`` NHWC int8 (the caller transposes: numpy's int8 transposes
    beat a gather in this loop 2x). Each image is copied into the scratch ``xt``
    ``[sw, Hp, ceil(Wp / sw)·C]`` (zeros; minus ``zp_in``), its padded columns split by their
    phase modulo the column stride: then every tap of an output row reads ONE contiguous run of
    ``OW·C`` values of one phase, whatever the stride, and is one multiply-add over it (the
    weights and requantization constants tiled OW times; short per-position loops over few
    channels run scalar). ``w``: [KH, KW, C], ``zp_in`` and ``xt`` in one float dtype in which the
    taps are exact; ``bias`` [C] int64, added in the requantization. The float requantization
    runs over all channels; the few that need LiteRT's integer one are redone after it."""
    n, oh, ow, c = out.shape
    h, wd = x.shape[1], x.shape[2]
    kh, kw = w.shape[0], w.shape[1]
    slow = np.flatnonzero(~fast)
    width = ow * c
    wrep = np.empty((kh, kw, width), dtype=w.dtype)
    brep = np.empty(width, dtype=np.float64)
    srep = np.empty(width, dtype=np.float64)
    hrep = np.empty(width, dtype=np.float64)
    for j in range(ow):
        for ch in range(c):
            brep[j * c + ch], srep[j * c + ch], hrep[j * c + ch] = bias[ch], scale[ch], half[ch]
            for ki in range(kh):
                for kj in range(kw):
                    wrep[ki, kj, j * c + ch] = w[ki, kj, ch]
    accrow = np.empty(width, dtype=w.dtype)
    for i_n in range(n):
        for a in range(h):
            src = x[i_n, a].ravel()
            if sw == 1:   # the row is one run
                dst = xt[0, a + top, left * c:(left + wd) * c]
                for t in range(wd * c):
                    dst[t] = src[t] - zp_in
                continue
            for b in range(wd):   # column b goes to phase (b + left) % sw
                pb = b + left
                dst = xt[pb % sw, a + top, (pb // sw) * c:(pb // sw + 1) * c]
                s_b = src[b * c:(b + 1) * c]
                for ch in range(c):
                    dst[ch] = s_b[ch] - zp_in
        _channels_last_rows(xt, wrep, brep, srep, hrep, slow, bias, m, r, sh_h, sw, dh, dw, zp, lo, hi, accrow, i_n,
                            out)


WIDE = 128   # channels from which the channels-last taps run per output position (measured)


def _channels_last_rows(xt, wrep, brep, srep, hrep, slow, bias, m, r, sh_h, sw, dh, dw, zp, lo, hi, accrow, i_n,
                        out):
    """One image of :func:`_depthwise_channels_last`."""
    _, oh, ow, c = out.shape
    kh, kw, width = wrep.shape
    off, flo, fhi = np.float64(zp) + 128.5, np.float64(lo + 128), np.float64(hi + 128)
    for i in range(oh):
        for ki in range(kh):
            for kj in range(kw):
                cc = kj * dw   # tap column offset: phase cc % sw, cc // sw columns into it
                flat = xt[cc % sw, i * sh_h + ki * dh]
                start = (cc // sw) * c
                wv = wrep[ki, kj]
                if c < WIDE:   # a row of outputs is one run
                    src = flat[start:start + width]
                    if ki == 0 and kj == 0:
                        for q in range(width):
                            accrow[q] = wv[q] * src[q]
                    else:
                        for q in range(width):
                            accrow[q] += wv[q] * src[q]
                else:   # one channel vector per output position, the tap's C weights staying in L1
                    w_j = wv[:c]   # (pre-cut slices: see _split_phases on indices with a runtime offset)
                    for j in range(ow):
                        a_j, s_j = accrow[j * c:(j + 1) * c], flat[start + j * c:start + (j + 1) * c]
                        if ki == 0 and kj == 0:
                            for ch in range(c):
                                a_j[ch] = w_j[ch] * s_j[ch]
                        else:
                            for ch in range(c):
                                a_j[ch] += w_j[ch] * s_j[ch]
        row8 = out[i_n, i].ravel()
        for q in range(width):
            y = (np.float64(accrow[q]) + brep[q]) * srep[q]
            y = y + math.copysign(hrep[q], y) + off
            row8[q] = np.int8(np.int32(min(max(y, flo), fhi)) - 128)
        for t in range(slow.size):
            ch = slow[t]
            for j in range(ow):
                _requantize_row(accrow[j * c + ch:j * c + ch + 1], bias[ch], row8[j * c + ch:j * c + ch + 1], 0.0,
                                0.0, False, m[ch], r[ch], zp, lo, hi)


def _pointwise_cols(x, zp_in, cols):
    """im2col of a 1x1 convolution: ``cols[k, n, p] = x[n, k, p] - zp_in`` (``cols`` may have one
    more row, the bias's ones, which this also writes). ``zp_in`` has the dtype of ``cols``, so
    the subtraction stays in it (no int64 -> float conversion, which AVX2 does one lane at a time)."""
    n, k, p = x.shape
    for i in range(n):
        for kk in range(k):
            src, dst = x[i, kk], cols[kk, i]
            for q in range(p):
                dst[q] = src[q] - zp_in
    for kk in range(k, cols.shape[0]):
        for i in range(n):
            for q in range(p):
                cols[kk, i, q] = 1


def _im2col(xp, zp_in, kh, kw, sh, sw, dh, dw, r0, r1, cols):
    """im2col of a band of output rows ``r0 .. r1``: ``cols[(c, ki, kj), n, (i - r0)·OW + j] =
    xp[n, c, i·sh + ki·dh, j·sw + kj·dw] - zp_in`` from the ``zp_in``-padded int8 ``xp``; ``cols``
    [C·KH·KW, N, (r1 - r0)·OW] of the float dtype of ``zp_in`` (the GEMM's). Pre-cut slices and a
    literal stride 2: see :func:`_split_phases`."""
    n, c = xp.shape[0], xp.shape[1]
    ow = cols.shape[2] // (r1 - r0)
    for ch in range(c):
        for ki in range(kh):
            for kj in range(kw):
                dst_k = cols[(ch * kh + ki) * kw + kj]
                for i_n in range(n):
                    for i in range(r0, r1):
                        src = xp[i_n, ch, i * sh + ki * dh, kj * dw:]
                        dst = dst_k[i_n, (i - r0) * ow:(i - r0 + 1) * ow]
                        if sw == 1:
                            for j in range(ow):
                                dst[j] = src[j] - zp_in
                        elif sw == 2:
                            for j in range(ow):
                                dst[j] = src[2 * j] - zp_in
                        else:
                            for j in range(ow):
                                dst[j] = src[j * sw] - zp_in


def _gather(index, table, out):
    for k in range(index.size):
        out[k] = table[index[k]]


def _requantize_flat(acc, m, left, right, zp, lo, hi, out):
    """``out[k] = clamp(RDBPOT(SRDHM(acc[k]·2**left, m), right) + zp, lo, hi)``: LiteRT's double-rounding
    MBQM with one multiplier, for any integer ``out`` dtype (the int16 ADD/MUL paths). The caller has
    checked that ``acc·2**left`` fits int32 and that ``m`` is in [0, 2**31) (no SRDHM overflow)."""
    mask = (np.int64(1) << right) - 1
    half = mask >> 1
    for k in range(acc.size):
        x = np.int64(acc[k]) << left
        high = (x * m + (np.int64(1) << 30)) >> 31
        rounded = (high >> right) + np.int64((high & mask) > (half + np.int64(high < 0)))
        out[k] = min(max(rounded + zp, lo), hi)


def _gather_pairs(a, b, table, out):
    for k in range(a.size):
        out[k] = table[(np.int64(a[k]) << 8) | np.int64(b[k])]


if AVAILABLE:
    _jit = numba.njit(cache=True, nogil=True)
    _requantize_row = _jit(_requantize_row)
    _tap_run = _jit(_tap_run)
    requantize_rows = _jit(_requantize_rows)
    requantize_channel_major = _jit(_requantize_channel_major)
    _depthwise_block = _jit(_depthwise_block)
    _split_phases = _jit(_split_phases)
    depthwise_rows = _jit(_depthwise_rows)
    _channels_last_rows = _jit(_channels_last_rows)
    depthwise_channels_last = _jit(_depthwise_channels_last)
    gather = _jit(_gather)
    pointwise_cols = _jit(_pointwise_cols)
    im2col = _jit(_im2col)
    quantize_f32 = _jit(_quantize_f32)
    gather_pairs = _jit(_gather_pairs)
    requantize_flat = _jit(_requantize_flat)
else:
    requantize_rows = requantize_channel_major = depthwise_rows = depthwise_channels_last = None
    gather = gather_pairs = quantize_f32 = pointwise_cols = im2col = requantize_flat = None
