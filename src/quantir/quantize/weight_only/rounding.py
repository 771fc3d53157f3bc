"""Rounding one weight's groups: round-to-nearest with the scale from each group's extremes, and
the (optionally E[x_k^2]-weighted) search of the clipping ratio that minimizes the squared error."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

# clipping ratios of the search: fine near 1 (int8 gains there), coarse down to 0.5 (int4 outliers)
MSE_RATIOS = 1.0 - np.array([0, .005, .01, .015, .02, .03, .04, .05, .07, .09, .12, .15, .2, .25, .3, .35, .4, .5])
_CHUNK = 1 << 20             # elements per vectorized pass of the search (bounds its memory)


@dataclass
class Quantized:
    """One weight quantized: storage integers of the weight's shape, scales and zero points in
    the layout of the quant type (per channel: 1-D; blocks: the weight's rank), the SQNR of the
    dequantized weight and, for comparison, of round-to-nearest."""

    q: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray
    sqnr_db: float
    sqnr_rtn_db: float


def _groups(w: np.ndarray, channel_axis: int, block_axis: int, block: int | None):
    """(rows [groups, group size], a function mapping a row-shaped array back to the weight's
    layout, the scale layout's shape)."""
    if block is None:
        moved = np.moveaxis(w, channel_axis, 0)
        rows = moved.reshape(moved.shape[0], -1)
        return rows, lambda r: np.moveaxis(r.reshape(moved.shape), 0, channel_axis), (w.shape[channel_axis],)
    moved = np.moveaxis(w, block_axis, -1)
    rows = moved.reshape(-1, block)
    scale_moved = moved.shape[:-1] + (moved.shape[-1] // block,)
    scale_shape = tuple(np.moveaxis(np.empty(scale_moved, np.int8), -1, block_axis).shape)
    return rows, lambda r: np.moveaxis(r.reshape(moved.shape), -1, block_axis), scale_shape


def _params(lo: np.ndarray, hi: np.ndarray, qmin: int, qmax: int, symmetric: bool):
    """(float32 scale, zero point) per group from its (clipped) extremes."""
    if symmetric:
        amax = np.maximum(np.abs(lo), np.abs(hi))
        scale = amax / min(qmax, -qmin)
        zp = np.zeros_like(scale, dtype=np.int64)
    else:
        lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)   # zero representable: a zero weight stays zero
        scale = (hi - lo) / (qmax - qmin)
        zp = np.zeros_like(scale, dtype=np.int64)
        ok = scale > 0
        zp[ok] = np.clip(np.round(qmin - lo[ok] / scale[ok]), qmin, qmax).astype(np.int64)
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)   # an all-zero group: any scale, 1.0
    return scale, zp


def _round(rows: np.ndarray, scale: np.ndarray, zp: np.ndarray, qmin: int, qmax: int):
    """(stored integers, dequantized rows) with round-to-nearest-even for the given scales."""
    s = scale.astype(np.float64)[:, None]
    q = np.clip(np.round(rows / s) + zp[:, None], qmin, qmax)
    return q, (q - zp[:, None]) * s


def _quantize_rows(rows: np.ndarray, weight: np.ndarray | None, qmin: int, qmax: int, symmetric: bool,
                   ratios: Sequence[float]):
    """Per row, the ratio of ``ratios`` whose clipped scale gives the least weighted squared error."""
    lo, hi = rows.min(axis=1), rows.max(axis=1)
    best = None
    for r in ratios:
        scale, zp = _params(lo * r, hi * r, qmin, qmax, symmetric)
        q, deq = _round(rows, scale, zp, qmin, qmax)
        d2 = (rows - deq) ** 2
        err = (d2 if weight is None else d2 * weight).sum(axis=1)
        if best is None:
            best = [err, q, scale, zp]
            continue
        better = err < best[0]
        best[0] = np.where(better, err, best[0])
        best[1][better] = q[better]
        best[2] = np.where(better, scale, best[2])
        best[3] = np.where(better, zp, best[3])
    return best[1], best[2], best[3]


def back_scale(flat: np.ndarray, shape: tuple[int, ...], block_axis: int, block: int) -> np.ndarray:
    """Per-block values in row order back to the blocked scale layout."""
    moved = tuple(np.moveaxis(np.empty(shape, np.int8), block_axis, -1).shape)
    return np.moveaxis(flat.reshape(moved[:-1] + (moved[-1] // block,)), -1, block_axis)


def _sqnr(signal: float, noise: float) -> float:
    if noise == 0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal > 0 else -math.inf
