"""Sliding-window plumbing shared by the conv and pool kernels: padding, window views,
per-tap slices, and the im2col convolution core.

A convolution is computed one of three ways, picked by shape:
- pointwise (1x1, no padding): one matmul over the channel dim;
- depthwise (one input channel per group): a loop over kernel taps, each a broadcast
  multiply-add over the whole (N, C, spatial) block — no im2col copy;
- otherwise im2col: a strided window view copied to (N, G, C/G * k, out) and one batched
  float BLAS matmul with the (G, M/G, C/G * k) weights.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...ir.dialects.nn_conv import Window
from .limits import check_allocation


def pad_spatial(x: np.ndarray, begin, end, value=0) -> np.ndarray:
    """Pad (or crop, for negative amounts) the spatial dims 2.. of x."""
    if not any(begin) and not any(end):
        return x
    crop = tuple(slice(max(0, -b), x.shape[2 + i] - max(0, -a)) for i, (b, a) in enumerate(zip(begin, end)))
    x = x[(slice(None), slice(None), *crop)]
    widths = [(0, 0), (0, 0), *((max(0, b), max(0, a)) for b, a in zip(begin, end))]
    check_allocation("the padded input of a window op", (d + b + a for d, (b, a) in zip(x.shape, widths)), x.dtype)
    return np.pad(x, widths, constant_values=value)


def padded_for(x: np.ndarray, win: Window, value=0) -> np.ndarray:
    """x padded so that every one of ``win.out`` windows fits (ceil mode may need more at the end)."""
    ends = []
    for i, (n, b, a, o, s, e) in enumerate(zip(x.shape[2:], win.pads_begin, win.pads_end, win.out,
                                               win.strides, win.effective)):
        need = (o - 1) * s + e - (n + b)
        ends.append(max(a, need))
    return pad_spatial(x, win.pads_begin, ends, value)


def tap_slices(win: Window):
    """For every kernel tap: (tap index tuple, the slices of the padded input it reads)."""
    for tap in itertools.product(*(range(k) for k in win.kernel)):
        yield tap, tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                         for t, d, o, s in zip(tap, win.dilations, win.out, win.strides))


def windows(xp: np.ndarray, win: Window) -> np.ndarray:
    """A read-only view (N, C, *out, *kernel) of the windows of the padded input."""
    nsp = len(win.kernel)
    view = np.lib.stride_tricks.sliding_window_view(xp, win.effective, axis=tuple(range(2, 2 + nsp)))
    index = ((slice(None), slice(None))
             + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(win.out, win.strides))
             + tuple(slice(None, None, d) for d in win.dilations))
    return view[index]


def conv_core(x: np.ndarray, w: np.ndarray, win: Window, group: int, dtype=np.float32) -> np.ndarray:
    """Cross-correlation of x (N, C, ...) with w (M, C/group, k...), no bias, in ``dtype``."""
    x = x.astype(dtype, copy=False)
    w = w.astype(dtype, copy=False)
    n, c = x.shape[:2]
    m = w.shape[0]
    nsp = len(win.kernel)
    out = tuple(win.out)
    xp = padded_for(x, win)
    if group == 1 and all(k == 1 for k in win.kernel):
        xs = xp[(slice(None), slice(None), *(slice(0, (o - 1) * s + 1, s) for o, s in zip(out, win.strides)))]
        y = np.matmul(w.reshape(m, c), xs.reshape(n, c, math.prod(out)))   # explicit: -1 is ambiguous when n is 0
        return y.reshape(n, m, *out)
    if group == c and w.shape[1] == 1:
        mult = m // c
        check_allocation("a depthwise conv's output", (n, m, *out), dtype)
        if mult > 1:   # channel c feeds outputs c*mult .. c*mult + mult - 1
            xp = np.repeat(xp, mult, axis=1)
        y = np.zeros((n, m, *out), dtype=dtype)
        scratch = np.empty_like(y)
        for tap, sl in tap_slices(win):
            np.multiply(xp[(slice(None), slice(None), *sl)], w[(slice(None), 0, *tap)].reshape(1, m, *(1,) * nsp),
                        out=scratch)
            y += scratch
        return y
    check_allocation("a conv's im2col buffer", (n, c * math.prod(win.kernel), math.prod(out)), dtype)
    view = windows(xp, win)                                          # (N, C, *out, *k)
    cg, mg = c // group, m // group
    view = view.reshape(n, group, cg, *out, *win.kernel)
    order = (0, 1, 2, *range(3 + nsp, 3 + 2 * nsp), *range(3, 3 + nsp))
    cols = view.transpose(order).reshape(n, group, cg * math.prod(win.kernel), math.prod(out))
    y = np.matmul(w.reshape(group, mg, -1), cols)                   # (N, G, M/G, P)
    return y.reshape(n, m, *out)


def channel_view(v: np.ndarray, rank: int) -> np.ndarray:
    """A per-channel vector shaped (1, C, 1, ...) to broadcast over an NC... tensor."""
    return v.reshape(1, -1, *(1,) * (rank - 2))
