"""Calibration methods: turn an observer's statistics into a float range ``(rmin, rmax)``.

Each method is a name, a small frozen options class and a function; ``compute_range`` is the one
entry point (the CalibrationCallback of docs/design.md calls it per tensor). Ranges feed
``numerics.qparams``, which widens them to contain 0 and picks scale/zero point (numerics §3.1).

==============  ====================  =====================  ===========================================
method          options               observer needed        range
==============  ====================  =====================  ===========================================
``minmax``      ``MinMaxOptions``     any observer           ``observer.range()`` (exact or EMA min/max)
``percentile``  ``PercentileOptions`` ``HistogramObserver``  central ``p`` % (two tails), or ``±`` the
                                                             ``p``-th percentile of ``|x|`` (ORT style)
``entropy``     ``EntropyOptions``    ``HistogramObserver``  window of minimal KL(P‖Q): TensorRT's search,
                                                             P compared at a fixed resolution per level
``mse``         ``MseOptions``        ``HistogramObserver``  minimal expected squared error: rounding
                                                             noise inside + clipping error outside
==============  ====================  =====================  ===========================================

Guarantees, for every method: ``rmin <= rmax``; histogram methods return a range inside the
observed ``[min, max]``; a constant tensor gets the observer's constant range
``(min(0, v), max(0, v))`` whatever the method; an observer without data raises
``CalibrationError``; so does a method given the wrong kind of observer. Invalid option values
raise ``ValueError`` when the options are built.

Symmetric results are ``(-t, t)`` clipped to the observed range, so a one-signed tensor gets
``(0, t)``; a symmetric consumer recovers ``t`` as ``max(|rmin|, |rmax|)``.

Example::

    >>> import numpy as np
    >>> from quantir.quantize.observers import HistogramObserver
    >>> obs = HistogramObserver(name="x")
    >>> obs.update(np.linspace(-1.0, 1.0, 10001))
    >>> r = compute_range(PercentileOptions(percentile=99.0), obs)
    >>> bool(-1.0 < r.rmin < -0.98 and 0.98 < r.rmax < 1.0)
    True
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, ClassVar, Literal, NamedTuple

import numpy as np

from quantir.errors import CalibrationError
from quantir.quantize.observers import Histogram, HistogramObserver, Observer

__all__ = [
    "Method",
    "EntropyWindow",
    "MinMaxOptions",
    "PercentileOptions",
    "EntropyOptions",
    "MseOptions",
    "MethodOptions",
    "MethodSpec",
    "METHODS",
    "Range",
    "compute_range",
    "options_for",
    "kl_divergence_windows",
    "kl_divergence_resampled",
]


class Method(StrEnum):
    MINMAX = "minmax"
    PERCENTILE = "percentile"
    ENTROPY = "entropy"
    MSE = "mse"


class EntropyWindow(StrEnum):
    """Which clipping windows the entropy method searches.

    * ``abs`` — TensorRT: ``|x|`` histogram, windows ``[0, t)``; range ``(-t, t)``. Default 128
      quantized bins (the non-negative half of int8).
    * ``symmetric`` — MXNet/ONNX Runtime: signed histogram, windows ``[-t, t)``; range ``(-t, t)``.
      Default 255 bins (MXNet; ORT uses 128).
    * ``asymmetric`` — signed histogram, windows ``[lo, hi)`` with ``lo <= 0 <= hi``; default 256
      bins (all int8 levels). The 2-D search is a coarse grid then coordinate descent at full
      resolution: exhaustive search costs O(bins² · quantized bins). One-signed data (ReLU) fix
      one end at 0, so the search is then exact.
    """

    ABS = "abs"
    SYMMETRIC = "symmetric"
    ASYMMETRIC = "asymmetric"


_DEFAULT_QUANTIZED_BINS = {EntropyWindow.ABS: 128, EntropyWindow.SYMMETRIC: 255,
                           EntropyWindow.ASYMMETRIC: 256}
_DEFAULT_RESOLUTION = {EntropyWindow.ABS: 2, EntropyWindow.SYMMETRIC: None, EntropyWindow.ASYMMETRIC: 2}


@dataclass(frozen=True)
class MinMaxOptions:
    """The observed range, as the observer reports it (exact or moving-average min/max)."""

    method: ClassVar[Method] = Method.MINMAX


@dataclass(frozen=True)
class PercentileOptions:
    """Keep the central ``percentile`` % of the values.

    Asymmetric: at most ``(100 - p) / 2`` % of the values lie below ``rmin`` and as many above
    ``rmax``. Symmetric (``symmetric=True``, ORT's symmetric mode): ``t`` is the ``p``-th
    percentile of ``|x|``. Cuts fall on histogram edges, chosen so that **at least** ``p`` % of
    the values lie in ``[rmin, rmax]`` (ORT takes the lower edge of the crossing bin, which can
    keep slightly less; the two differ by at most one bin of each histogram).
    """

    percentile: float = 99.999
    symmetric: bool = False
    method: ClassVar[Method] = Method.PERCENTILE

    def __post_init__(self) -> None:
        if not 0.0 < self.percentile <= 100.0:
            raise ValueError(f"percentile must be in (0, 100], got {self.percentile}")


@dataclass(frozen=True)
class EntropyOptions:
    """Minimal KL divergence between the clipped distribution P and its quantized version Q.

    ``num_quantized_bins`` is the number of levels Q has over the window (``None``: the window's
    default, see ``EntropyWindow``). ``exclude_zeros`` removes exact zeros from the histogram
    first: every candidate represents 0 exactly, and a ReLU spike at 0 otherwise dominates the KL
    and drags the window narrow (pytorch-quantization overwrites bin 0 for the same reason).
    ONNX Runtime keeps them; pass ``False`` to compare with it on data with exact zeros.

    ``resolution`` says at which resolution P is compared with Q:

    * ``None`` — at the histogram's own bins (TensorRT, MXNet, ONNX Runtime). A window of ``L``
      bins then merges ``L / m`` bins per level, so a distribution with atoms (repeated values:
      a constant image background through the first conv, ReLU6 or a hard gate saturating, the
      dense cluster a LeakyRelu makes just below 0) pays ``mass · log(bins per level)`` per atom,
      a cost that grows with the window and has nothing to do with rounding: the minimum slides
      inward and clips far inside the data (the Fashion CNN's first ReLU6 was cut at 2.5 of 6).
    * ``r`` (default 2 for the ``abs`` and ``asymmetric`` windows) — each window is resampled
      into ``r`` sub-bins per level (the histogram's CDF, linear inside a bin), so an atom costs
      at most ``mass · log r`` whatever the window, and what is left to compare is how the
      window's levels resolve the distribution against what clipping folds into its last level.
      The ``abs`` window's level count then follows the int8 grid the range gets: ``(-t, t)``
      clipped to the data is one asymmetric grid of 255 steps, so a window ``[0, t)`` holds
      ``m · 2t / span`` levels — ``m`` for two-sided data, ``2m`` for one-signed data (ReLU,
      sigmoid, a [0, 1] gate), which TensorRT's fixed 128 levels would quantize twice too coarsely.
      Atoms (bins far above their neighbours) are left out of P inside the window, as exact
      zeros are, and count only where a window clips them. Windows whose KL is within the
      estimate's sampling bias (``levels · (r - 1) / 2N``, Miller-Madow) of the minimum are not
      told apart by the data; the ``abs`` search takes the widest of them (sparse histograms:
      pooled features), and only among windows that clip at most as many values as P resolves
      inside them (past that, TensorRT's fold turns P into one spike and KL degenerates).

    The ``symmetric`` window keeps ``resolution=None`` by default: it is the port of ONNX
    Runtime's search, kept to compare with it (bench/entropy_vs_ort.py).

    KL minima are shallow: the threshold can move by 10-15 % of ``max|x|`` when the number of
    histogram bins changes by a few percent (ONNX Runtime's does too, see the tests). Prefer
    ``percentile`` or ``mse`` where reproducibility across bin counts matters.
    """

    num_quantized_bins: int | None = None
    window: EntropyWindow = EntropyWindow.ABS
    exclude_zeros: bool = True
    resolution: int | None | Literal["default"] = "default"
    method: ClassVar[Method] = Method.ENTROPY

    def __post_init__(self) -> None:
        window = EntropyWindow(self.window)
        object.__setattr__(self, "window", window)
        if self.num_quantized_bins is None:
            object.__setattr__(self, "num_quantized_bins", _DEFAULT_QUANTIZED_BINS[window])
        elif self.num_quantized_bins < 2:
            raise ValueError(f"num_quantized_bins must be >= 2, got {self.num_quantized_bins}")
        if self.resolution == "default":
            object.__setattr__(self, "resolution", _DEFAULT_RESOLUTION[window])
        elif self.resolution is not None and (isinstance(self.resolution, bool) or
                                              not isinstance(self.resolution, int) or self.resolution < 1):
            raise ValueError(f"resolution must be None (the histogram's bins) or a whole number of "
                             f"sub-bins per level >= 1, got {self.resolution!r}")


@dataclass(frozen=True)
class MseOptions:
    """Minimal expected squared error of quantizing to ``num_levels`` evenly spaced levels.

    For a candidate range of step ``Δ = (rmax - rmin) / (num_levels - 1)`` the error is, from the
    histogram: ``n_inside · Δ²/12`` (uniform rounding noise; exact zeros excluded, since the grid
    holds 0 exactly) plus ``Σ (x - rmax)²`` above and ``Σ (rmin - x)²`` below (bin centres, plus
    the in-bin variance ``w²/12``). Candidates are all histogram edges: every ``(lo, hi)`` pair
    with ``lo <= 0 <= hi`` asymmetric (exhaustive, O(bins²) with prefix sums), every ``t``
    symmetric. Use 256 levels for int8 asymmetric, 255 for symmetric narrow range ``[-127, 127]``.
    The grid is modelled without the zero-point nudge (at most half a step at each end).
    """

    num_levels: int = 256
    symmetric: bool = False
    method: ClassVar[Method] = Method.MSE

    def __post_init__(self) -> None:
        if self.num_levels < 2:
            raise ValueError(f"num_levels must be >= 2, got {self.num_levels}")


MethodOptions = MinMaxOptions | PercentileOptions | EntropyOptions | MseOptions


class Range(NamedTuple):
    """A float range; arrays of shape ``(C,)`` for a per-channel ``minmax``."""

    rmin: float | np.ndarray
    rmax: float | np.ndarray


# --------------------------------------------------------------------------------------------
# percentile


def _percentile(opts: PercentileOptions, obs: HistogramObserver) -> tuple[float, float]:
    lo_v, hi_v = obs.min, obs.max
    if opts.symmetric:
        h = obs.abs_histogram
        cum = np.cumsum(h.counts)
        k = int(np.searchsorted(cum, opts.percentile / 100.0 * cum[-1], side="left"))
        t = min(float(h.edges[min(k, cum.size - 1) + 1]), max(-lo_v, hi_v))
        return max(-t, lo_v), min(t, hi_v)
    h = obs.histogram
    cum = np.cumsum(h.counts)
    tail = (100.0 - opts.percentile) / 200.0 * cum[-1]
    k = int(np.searchsorted(cum, tail, side="right"))  # first bin with cum > tail
    j = int(np.searchsorted(cum, cum[-1] - tail, side="left"))  # first bin with cum >= N - tail
    rmin = max(float(h.edges[min(k, cum.size - 1)]), lo_v)
    rmax = min(float(h.edges[min(j, cum.size - 1) + 1]), hi_v)
    return rmin, max(rmax, rmin)


# --------------------------------------------------------------------------------------------
# entropy


def _xlogx(v: np.ndarray) -> np.ndarray:
    return v * np.log(np.where(v > 0, v, 1.0))


def kl_divergence_windows(
    counts: np.ndarray, starts: np.ndarray, ends: np.ndarray, num_quantized_bins: int
) -> np.ndarray:
    """KL(P‖Q) for every window ``[starts[r], ends[r])`` of a histogram, vectorized.

    The TensorRT construction (as in MXNet, and ONNX Runtime's ``get_entropy_threshold``):
    P is the window with the mass outside folded into its first and last bins; the window's bins
    (without the outliers) are merged into ``m = num_quantized_bins`` groups of
    ``L // m`` bins, the last group taking the remainder; Q spreads each group's mass evenly over
    the group's bins where P is non-zero. Both are normalized; bins where P is 0 contribute
    nothing; a bin where P > 0 and Q = 0 makes the divergence ``inf``. (MXNet/ORT instead smooth
    zeros with ``eps = 1e-4`` counts; the effect on which window wins is negligible.)

    With ``N = ΣP`` and ``Q_tot = ΣQ`` the sum splits into prefix sums,
    ``KL = (Σ p log p)/N − log N − (Σ_j P_j log q_j)/N + log Q_tot`` with ``q_j`` the per-bin
    value of group ``j`` and ``P_j`` the P-mass of the group, so each window costs O(m), not
    O(bins). Windows need ``ends - starts >= m``.
    """
    h = np.asarray(counts, np.float64)
    s = np.asarray(starts, np.int64).reshape(-1)
    e = np.asarray(ends, np.int64).reshape(-1)
    m = num_quantized_bins
    if s.size == 0:
        return np.empty(0)
    if np.any(e - s < m) or np.any(s < 0) or np.any(e > h.size):
        raise ValueError("every window must lie in the histogram and span >= num_quantized_bins")
    n_total = h.sum()
    if n_total <= 0:
        return np.full(s.size, np.inf)
    csum = np.concatenate(([0.0], np.cumsum(h)))
    cxlogx = np.concatenate(([0.0], np.cumsum(_xlogx(h))))
    cnz = np.concatenate(([0], np.cumsum(h > 0)))

    merged = (e - s) // m
    g0 = s[:, None] + np.arange(m) * merged[:, None]  # (R, m) group starts
    g1 = g0 + merged[:, None]
    g1[:, -1] = e
    group = csum[g1] - csum[g0]  # window mass per group, outliers excluded -> Q
    nonzero = cnz[g1] - cnz[g0]  # bins where P > 0, per group

    left, right = csum[s], n_total - csum[e]
    h_first, h_last = h[s], h[e - 1]
    p_first, p_last = h_first + left, h_last + right
    nonzero[:, 0] += (h_first == 0) & (left > 0)
    nonzero[:, -1] += (h_last == 0) & (right > 0)
    p_mass = group.copy()
    p_mass[:, 0] += left
    p_mass[:, -1] += right

    sum_plogp = (cxlogx[e] - cxlogx[s] - _xlogx(h_first) - _xlogx(h_last)
                 + _xlogx(p_first) + _xlogx(p_last))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_q = np.log(group / nonzero)
    sum_plogq = np.where(p_mass > 0, p_mass * np.where(group > 0, log_q, 0.0), 0.0).sum(axis=1)
    q_total = csum[e] - csum[s]
    with np.errstate(divide="ignore"):
        kl = sum_plogp / n_total - math.log(n_total) - sum_plogq / n_total + np.log(q_total)
    impossible = ((p_mass > 0) & (group == 0)).any(axis=1) | (q_total == 0)
    return np.where(impossible, np.inf, np.maximum(kl, 0.0))


_RESAMPLE_BLOCK = 1 << 21  # sub-bins resampled at once (16 MB per float64 temporary)


def kl_divergence_resampled(
    counts: np.ndarray, starts: np.ndarray, ends: np.ndarray, num_quantized_bins: int, resolution: int,
    folded: np.ndarray | None = None,
) -> np.ndarray:
    """KL(P‖Q) for every window ``[starts[r], ends[r])`` (in bins, fractional allowed), with P
    resampled to ``resolution`` sub-bins per quantized level.

    The window is cut into ``M = num_quantized_bins · resolution`` equal sub-bins whose masses
    come from the CDF of ``counts``, linear inside each bin (values spread evenly over their bin).
    P is those masses, with the mass of ``folded`` (default ``counts``) left of the window added
    to the first sub-bin and the mass right of it to the last (TensorRT's fold); Q spreads each
    level's window mass (outliers excluded) evenly over the level's sub-bins where P is non-zero.
    Both are normalized; a sub-bin where P > 0 and Q = 0, or an empty window, gives ``inf``.
    Unlike ``kl_divergence_windows`` the comparison has the same resolution for every window, so
    the divergence no longer grows with the window merely because more histogram bins fall into
    each level (see ``EntropyOptions``). ``folded`` lets values that are exactly representable
    inside the window (atoms, see ``_split_atoms``) count only when the window clips them.
    """
    h = np.asarray(counts, np.float64)
    out_h = h if folded is None else np.asarray(folded, np.float64)
    s = np.asarray(starts, np.float64).reshape(-1)
    e = np.asarray(ends, np.float64).reshape(-1)
    m, r = num_quantized_bins, resolution
    if np.any(e <= s) or np.any(s < 0) or np.any(e > h.size) or out_h.shape != h.shape:
        raise ValueError("every window must lie in the histogram and be non-empty")
    cum = np.concatenate(([0.0], np.cumsum(h)))
    cum_out = np.concatenate(([0.0], np.cumsum(out_h)))
    out = np.full(s.size, np.inf)
    if s.size == 0:
        return out
    grid = np.arange(m * r + 1, dtype=np.float64) / (m * r)
    bins = np.arange(cum.size, dtype=np.float64)
    rows = max(1, _RESAMPLE_BLOCK // (m * r))
    for r0 in range(0, s.size, rows):
        sl = slice(r0, r0 + rows)
        cdf = np.interp(s[sl, None] + (e[sl] - s[sl])[:, None] * grid, bins, cum)
        window = np.maximum(np.diff(cdf, axis=1), 0.0)  # (R, M); a rounding ulp never goes negative
        p = window.copy()
        p[:, 0] += np.interp(s[sl], bins, cum_out)
        p[:, -1] += cum_out[-1] - np.interp(e[sl], bins, cum_out)
        p3 = p.reshape(-1, m, r)
        occupied = p3 > 0
        level_mass = window.reshape(-1, m, r).sum(axis=2)
        p_total, q_total = p.sum(axis=1), cdf[:, -1] - cdf[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            q3 = np.where(occupied, (level_mass / occupied.sum(axis=2))[:, :, None], 0.0)
            ratio = (p3 / p_total[:, None, None]) / (q3 / q_total[:, None, None])
            terms = np.where(occupied & (q3 > 0), p3 * np.log(np.where(occupied & (q3 > 0), ratio, 1.0)), 0.0)
            kl = terms.sum(axis=(1, 2)) / p_total
        impossible = (occupied & (q3 <= 0)).any(axis=(1, 2)) | (q_total <= 0)
        out[sl] = np.where(impossible, np.inf, np.maximum(kl, 0.0))
    return out


_ATOM_NEIGHBOURS = 8  # bins each side whose median is the continuous level around a bin
_ATOM_RATIO = 4.0     # a bin this many times above that level (and >= 4 counts over it) holds an atom


def _split_atoms(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(continuous, atoms)`` with ``continuous + atoms == counts``: a bin far above the median
    of its neighbours holds an atom — a value repeated many times (a constant background through
    a conv, a saturated ReLU6 or gate) — and keeps only its neighbours' level as continuous mass.

    An atom lands on one level whatever the window, with at most half a step of error like any
    value; what KL measures inside a level (how unevenly the level's mass spreads) says nothing
    about it, and a spike costs ``mass · log(sub-bins)`` there. So atoms are left out of P inside
    the window, as exact zeros are, and counted only where a window clips them.
    """
    c = np.asarray(counts, np.float64)
    k = _ATOM_NEIGHBOURS
    if c.size < 2 * k + 1:
        return c, np.zeros_like(c)
    padded = np.pad(c, k, mode="reflect")
    level = np.median(np.lib.stride_tricks.sliding_window_view(padded, 2 * k + 1), axis=1)
    atom = (c > _ATOM_RATIO * level) & (c - level >= 4.0)
    continuous = np.where(atom, level, c)
    return continuous, c - continuous


def _window_kl(counts, starts, ends, m, resolution, folded=None) -> np.ndarray:
    if resolution is None:
        return kl_divergence_windows(counts, starts, ends, m)
    return kl_divergence_resampled(counts, starts, ends, m, resolution, folded)


def _argmin_window(counts, starts, ends, m, resolution=None, folded=None) -> tuple[int, int, float] | None:
    """The window of least KL (``resolution`` None: TensorRT's kernel, ``folded`` unused)."""
    kl = _window_kl(counts, starts, ends, m, resolution, folded)
    if kl.size == 0 or not np.isfinite(kl).any():
        return None
    r = int(np.argmin(kl))
    return int(starts[r]), int(ends[r]), float(kl[r])


def _entropy_abs(counts: np.ndarray, m: int) -> int:
    """TensorRT: the end ``e`` of the best window ``[0, e)`` of an |x| histogram."""
    n = counts.size
    if n <= m:
        return n
    ends = np.arange(m, n + 1)
    best = _argmin_window(counts, np.zeros_like(ends), ends, m)
    return n if best is None else best[1]


def _grid_levels(ends: np.ndarray, width: float, lo_v: float, hi_v: float, m: int) -> np.ndarray:
    """Levels the int8 grid puts into ``[0, t)`` for each window end (``t = ends · width``).

    The range ``(-t, t)`` clipped to the data ``[lo_v, hi_v]`` gets one asymmetric grid over
    ``span = min(t, hi_v) + min(t, -lo_v)``; ``m`` levels per ``t`` over a two-sided span of
    ``2t`` is ``m · 2t / span`` over this one: ``m`` for symmetric data, up to ``2m`` one-signed.
    Computed in units of the bin width (``|x| / width <= 2 · bins``), so nothing overflows.
    """
    t = ends.astype(np.float64)
    span = np.minimum(t, max(hi_v, 0.0) / width) + np.minimum(t, max(-lo_v, 0.0) / width)
    with np.errstate(divide="ignore", invalid="ignore"):
        levels = np.where(span > 0, np.rint(2.0 * m * t / np.where(span > 0, span, 1.0)), m)
    return np.clip(levels, m, 2 * m).astype(np.int64)


def _entropy_abs_resampled(counts: np.ndarray, width: float, lo_v: float, hi_v: float, m: int,
                           resolution: int, keep_zero_bin: bool = False) -> int:
    """The end ``e`` of the best window ``[0, e)`` of an |x| histogram, P at ``resolution``
    sub-bins per level and the grid's own level count. Among minima equal within the sampling
    bias of the KL estimate the widest wins.
    ``keep_zero_bin``: the bin ``[0, w)`` stays in P whole, spike or not (``exclude_zeros=False``)."""
    n = counts.size
    continuous, _ = _split_atoms(counts)
    if keep_zero_bin:
        continuous[0] = counts[0]
    if continuous.sum() <= 0:  # only atoms: every window resolves them alike, so keep them all
        return n
    # A window may clip at most as many values as P resolves inside it: past that the fold makes
    # P one spike, Q's normalization blows the window's remnant up to match it, and KL degenerates
    # (data offset from zero, [0.21, 0.49], was cut at its minimum; with 75 % atoms, just above them)
    ends = np.arange(min(m, n), n + 1)
    clipped = counts.sum() - np.cumsum(counts)[ends - 1]
    ends = ends[clipped <= np.cumsum(continuous)[ends - 1]]
    levels = _grid_levels(ends, width, lo_v, hi_v, m)
    kl = np.full(ends.size, np.inf)
    for k in np.unique(levels):  # one vectorized call per level count (few distinct values)
        sel = levels == k
        kl[sel] = kl_divergence_resampled(continuous, np.zeros(int(sel.sum())), ends[sel], int(k),
                                          resolution, folded=counts)
    if not np.isfinite(kl).any():
        return n
    # KL from a histogram is biased upward by ~ (sub-bins - levels occupied) / 2N (Miller-Madow):
    # windows closer to the minimum than that are not told apart by the data, and the widest of
    # them clips nothing the calibration set could show to be noise (sparse tails: pooled features)
    best = int(np.argmin(kl))
    tolerance = levels[best] * (resolution - 1) / (2.0 * max(float(counts.sum()), 1.0))
    return int(ends[np.flatnonzero(kl <= kl[best] + tolerance)[-1]])


def _entropy_symmetric(counts: np.ndarray, zero_index: int, m: int, resolution=None) -> int:
    """MXNet/ORT: the half-width ``i`` (in bins) of the best window ``[z - i, z + i)``."""
    z, n = zero_index, counts.size
    half = max(z, n - z)
    first = -(-m // 2)
    if half <= first:
        return half
    padded = np.zeros(2 * half, counts.dtype)
    padded[half - z : half - z + n] = counts
    widths = np.arange(first, half + 1)
    best = _argmin_window(padded, half - widths, half + widths, m, resolution)
    return half if best is None else (best[1] - best[0]) // 2


def _entropy_asymmetric(counts: np.ndarray, z: int, m: int, resolution=None,
                        keep_zero_bin: bool = True) -> tuple[int, int]:
    """The best window ``[s, e)`` with ``s <= z <= e``: coarse 48×48 grid, then coordinate descent.
    With a ``resolution``, atoms are left out of P inside the window as in the ``abs`` search."""
    n = counts.size
    if n <= m:
        return 0, n
    folded = None
    if resolution is not None:
        folded, (counts, _) = counts, _split_atoms(counts)
        if keep_zero_bin and z < n:
            counts[z] = folded[z]
        if counts.sum() <= 0:
            return 0, n
    s_max, e_min = min(z, n - m), max(z, m)
    s_grid = np.unique(np.linspace(0, s_max, 48).round().astype(np.int64))
    e_grid = np.unique(np.linspace(e_min, n, 48).round().astype(np.int64))
    ss, ee = (a.reshape(-1) for a in np.meshgrid(s_grid, e_grid))
    keep = ee - ss >= m
    best = _argmin_window(counts, ss[keep], ee[keep], m, resolution, folded)
    if best is None:
        return 0, n
    s, e, kl = best
    for _ in range(32):
        moved = False
        starts = np.arange(0, min(z, e - m) + 1)
        cand = _argmin_window(counts, starts, np.full_like(starts, e), m, resolution, folded)
        if cand is not None and cand[2] < kl:
            s, e, kl, moved = *cand, True
        ends = np.arange(max(z, s + m), n + 1)
        cand = _argmin_window(counts, np.full_like(ends, s), ends, m, resolution, folded)
        if cand is not None and cand[2] < kl:
            s, e, kl, moved = *cand, True
        if not moved:
            break
    return s, e


def _without_zeros(h: Histogram, zeros: int) -> np.ndarray:
    counts = h.counts.copy()
    if zeros and h.zero_index < counts.size:
        counts[h.zero_index] -= zeros  # exact zeros sit in the bin [0, w)
    return counts


def _entropy(opts: EntropyOptions, obs: HistogramObserver) -> tuple[float, float]:
    lo_v, hi_v = obs.min, obs.max
    m, res = opts.num_quantized_bins, opts.resolution
    zeros = obs.zero_count if opts.exclude_zeros else 0
    if opts.window is EntropyWindow.ABS:
        h = obs.abs_histogram
        counts = _without_zeros(h, zeros)
        e = (_entropy_abs(counts, m) if res is None
             else _entropy_abs_resampled(counts, h.width, lo_v, hi_v, m, res, not opts.exclude_zeros))
        t = min(float(h.edges[e]), max(-lo_v, hi_v))
        return max(-t, lo_v), min(t, hi_v)
    h = obs.histogram
    counts = _without_zeros(h, zeros)
    if opts.window is EntropyWindow.SYMMETRIC:
        t = _entropy_symmetric(counts, h.zero_index, m, res) * h.width
        return max(-t, lo_v), min(t, hi_v)
    s, e = _entropy_asymmetric(counts, h.zero_index, m, res, not opts.exclude_zeros)
    return max(float(h.edges[s]), lo_v), min(float(h.edges[e]), hi_v)


# --------------------------------------------------------------------------------------------
# mse

_MSE_BLOCK = 1 << 22  # candidate pairs evaluated at once (32 MB per float64 temporary)


def _moments(counts: np.ndarray, edges: np.ndarray, width: float):
    """Prefix sums over bins of count, count·x and count·(x² + w²/12), x the bin centre."""
    c = counts.astype(np.float64)
    x = 0.5 * (edges[:-1] + edges[1:])
    z = np.zeros(1)
    return (np.concatenate((z, np.cumsum(c))), np.concatenate((z, np.cumsum(c * x))),
            np.concatenate((z, np.cumsum(c * (x * x + width * width / 12.0)))))


def _clip_error(p0, p1, p2, sel, bound) -> np.ndarray:
    """Σ c·((x - bound)² + w²/12) over the bins ``sel`` picks out of the prefix sums."""
    return np.maximum(p2[sel] - 2.0 * bound * p1[sel] + bound * bound * p0[sel], 0.0)


def _mse(opts: MseOptions, obs: HistogramObserver) -> tuple[float, float]:
    """Works in units of the bin width (a power of two, so the scaling is exact): every quantity
    is then at most ~2·bins and nothing squares into overflow, whatever the data's magnitude."""
    steps = float(opts.num_levels - 1)
    if opts.symmetric:
        h = obs.abs_histogram
        w, n = h.width, h.counts.size
        edges, amax = np.arange(n + 1, dtype=np.float64), max(-obs.min, obs.max) / w
        p0, p1, p2 = _moments(_without_zeros(h, obs.zero_count), edges, 1.0)
        k = np.arange(1, n + 1)  # t = edges[k]: bins k.. are clipped
        t = np.minimum(edges[k], amax)
        above = (p0[n] - p0[k], p1[n] - p1[k], p2[n] - p2[k])
        err = p0[k] * (2.0 * t / steps) ** 2 / 12.0 + _clip_error(*above, slice(None), t)
        best = float(t[int(np.argmin(err))]) * w
        return max(-best, obs.min), min(best, obs.max)

    h = obs.histogram
    w, n, z = h.width, h.counts.size, h.zero_index
    edges = np.arange(n + 1, dtype=np.float64) - z  # h.edges / w, without overflow
    p0, p1, p2 = _moments(_without_zeros(h, obs.zero_count), edges, 1.0)
    i = np.arange(0, z + 1)  # lo = edges[i]: bins < i are clipped
    j = np.arange(z, n + 1)  # hi = edges[j]: bins >= j are clipped
    lo = np.maximum(edges[i], min(obs.min, 0.0) / w)
    hi = np.minimum(edges[j], max(obs.max, 0.0) / w)
    err_below = _clip_error(p0, p1, p2, i, lo)
    err_above = _clip_error(p0[n] - p0, p1[n] - p1, p2[n] - p2, j, hi)
    best, best_ij = math.inf, (0, n - z)
    rows = max(1, _MSE_BLOCK // j.size)  # bound the (rows, |j|) temporaries
    for r0 in range(0, i.size, rows):
        r = slice(r0, r0 + rows)
        span = hi[None, :] - lo[r, None]
        inside = p0[j][None, :] - p0[i[r], None]
        err = inside * (span / steps) ** 2 / 12.0 + err_below[r, None] + err_above[None, :]
        err = np.where(span > 0, err, np.inf)
        flat = int(np.argmin(err))
        if err.flat[flat] < best:
            best, best_ij = float(err.flat[flat]), (r0 + flat // j.size, flat % j.size)
    return max(float(lo[best_ij[0]]) * w, obs.min), min(float(hi[best_ij[1]]) * w, obs.max)


# --------------------------------------------------------------------------------------------
# registry and entry point


@dataclass(frozen=True)
class MethodSpec:
    """One row of the method table: its options class, the observer it needs, its function."""

    method: Method
    options: type
    observer: type[Observer]
    compute: Callable[[Any, Any], tuple[Any, Any]]


METHODS: Mapping[Method, MethodSpec] = MappingProxyType({
    Method.MINMAX: MethodSpec(Method.MINMAX, MinMaxOptions, Observer, lambda _, o: o.range()),
    Method.PERCENTILE: MethodSpec(Method.PERCENTILE, PercentileOptions, HistogramObserver,
                                  _percentile),
    Method.ENTROPY: MethodSpec(Method.ENTROPY, EntropyOptions, HistogramObserver, _entropy),
    Method.MSE: MethodSpec(Method.MSE, MseOptions, HistogramObserver, _mse),
})


def options_for(method: Method | str, **options: Any) -> MethodOptions:
    """Build the options of a method from its name, e.g. ``options_for("percentile", percentile=99.9)``."""
    try:
        spec = METHODS[Method(method)]
    except ValueError:
        raise ValueError(
            f"unknown calibration method {method!r}; expected one of {[m.value for m in Method]}"
        ) from None
    return spec.options(**options)


def compute_range(options: MethodOptions, observer: Observer) -> Range:
    """The float range ``options``' method derives from ``observer``'s statistics.

    Raises ``CalibrationError`` if the observer saw no data or is not the kind the method needs
    (``METHODS[method].observer``): only ``minmax`` works from a min/max observer.
    """
    spec = METHODS.get(getattr(options, "method", None))
    if spec is None or not isinstance(options, spec.options):
        raise TypeError(f"expected calibration method options, got {options!r}")
    if not isinstance(observer, spec.observer):
        raise CalibrationError(
            f"tensor {observer.name!r}: calibration method {spec.method.value!r} needs a "
            f"{spec.observer.__name__}, got a {type(observer).__name__}; observe this tensor with "
            f"a {spec.observer.__name__} or use the 'minmax' method"
        )
    full = observer.range()  # raises when no data reached the tensor
    if observer.is_constant:
        return Range(*full)
    rmin, rmax = spec.compute(options, observer)
    return Range(rmin, rmax) if isinstance(rmin, np.ndarray) else Range(float(rmin), float(rmax))
