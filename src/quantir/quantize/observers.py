"""Observers: streaming statistics of one tensor over many calibration batches.

An observer sees a tensor batch by batch (``update``) and keeps a summary whose size does not
depend on how many samples it saw. Calibration methods (``quantize.methods``) turn the summary
into a float range ``(rmin, rmax)``; ``numerics.qparams`` turns that range into scale/zero point.

==================================  ===================================  =======================
observer                            keeps                                used by
==================================  ===================================  =======================
``MinMaxObserver``                  running min and max (tensor/channel)  ``minmax``
``MovingAverageMinMaxObserver``     EMA of per-batch min/max, exact too   ``minmax`` (QAT style)
``HistogramObserver``               growing histograms of x and of |x|    every method
``SampleMeanObserver``              mean over the samples, per position   bias correction
==================================  ===================================  =======================

Contract shared by every observer
---------------------------------
* ``update(x)`` takes any shape of a floating dtype (float16 is widened to float32). Integer or
  boolean arrays are refused: calibration observes the float graph.
* A batch holding NaN or ±Inf raises ``CalibrationError`` naming the tensor and counting the bad
  values, and leaves the observer unchanged. Bad values are never dropped silently: a NaN in an
  activation is a bug upstream (preprocessing, overflow) that would otherwise hide in a range.
* An empty batch is legal and changes nothing but ``num_batches``. Asking an observer that has
  seen no value for its range raises ``CalibrationError("no calibration data reached tensor X")``.
* A constant tensor (``min == max``) is legal. ``is_constant`` reports it and ``range()`` returns
  ``(min(0, v), max(0, v))``: the range qparams would widen it to anyway, so a constant 3.0 gets
  ``(0, 3)`` and represents 3.0 exactly. An all-zero tensor gets ``(0, 0)``; the qparams layer
  applies its 1e-6 range floor (docs/numerics.md §3.1 step 2).

Design of the growing histogram
-------------------------------
Bin ``i`` is ``[i * 2**e, (i+1) * 2**e)`` for *every* integer ``i``: the bin width is a power of
two and the histogram stores counts for a window of ``bins`` consecutive indices.

* **No rounding anywhere.** Edges ``i * 2**e`` and the scaled values ``x / 2**e`` are exact in
  binary floating point, so ``floor(x / 2**e)`` is the true bin and the counts always equal
  ``np.histogram(all_data, bins=hist.edges)`` exactly, however the data were batched.
* **Zero is always an edge** (``i = 0``) and the window always contains it, because the int8
  range always contains zero. Symmetric methods cut windows exactly at ``±t``; the histogram of
  ``|x|`` is anchored at 0 too. The occupied span is then at least ``max|x|``, so the histogram is
  always ``>= bins / 512`` times finer than the final int8 grid, and ``|x| / 2**e <= 2 * bins``
  (no overflow, whatever the magnitudes).
* **Growth is exact and bounded.** When data fall outside the window the exponent grows by
  ``k`` and old bin ``i`` becomes bin ``i >> k`` (floor division): each old bin lies inside one
  new bin, nothing is smeared, and memory stays ``bins`` counters.

The first width is the smallest power of two that fits ``[min(0, xmin), max(0, xmax)]`` of the
first batch that is not all zeros (earlier all-zero batches are held as a count) into the
window, so the data occupy between half and all of the window, before and after any growth.
Values are binned in chunks of ``2**17``, which keeps temporaries in cache; float32 data are
scaled in float32, where ``x / 2**e`` is as exact as in float64 (``_scale``). While no negative
value has been seen the ``|x|`` histogram is the signed one, counted once; after that one pass
bins ``x`` at the finer of the two widths and derives both (``_add_signed_and_abs``).

Example::

    >>> obs = HistogramObserver(bins=64, name="conv1")
    >>> obs.update(np.array([-1.0, 0.5, 3.0], dtype=np.float32))
    >>> obs.range()
    (-1.0, 3.0)
    >>> int(obs.histogram.counts.sum())
    3
"""
from __future__ import annotations

import math
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from quantir.errors import CalibrationError, quote_name
from quantir.numerics.qparams import NEAR_ZERO_TOLERANCE

__all__ = [
    "Observer",
    "MinMaxObserver",
    "MovingAverageMinMaxObserver",
    "HistogramObserver",
    "Histogram",
    "SampleMeanObserver",
]

_UNNAMED = "<unnamed>"
_CHUNK = 1 << 17  # values binned per step
_MIN_EXPONENT = -1074  # 2**-1074 is the smallest positive double
_F32_MAX_BINS = 1 << 22  # up to here every index and key (< 4 * bins) is an exact float32 integer


class _Scratch(threading.local):
    """Chunk-sized scratch arrays, allocated once per thread and reused by every batch.

    Fresh megabyte-sized arrays per batch would come from the OS each time (large blocks are
    mapped, or the heap is trimmed after the big activations are freed), and their page faults
    cost as much as the binning itself.
    """

    def __init__(self) -> None:
        self.arrays: dict[tuple[str, np.dtype], np.ndarray] = {}

    def get(self, role: str, dtype, n: int) -> np.ndarray:
        """The first ``n <= _CHUNK`` entries of this thread's ``role`` array of ``dtype``."""
        key = (role, np.dtype(dtype))
        a = self.arrays.get(key)
        if a is None:
            a = self.arrays[key] = np.empty(_CHUNK, dtype)
        return a[:n]


_SCRATCH = _Scratch()


class Observer(ABC):
    """Base of all observers: name, counters, batch validation and the empty-data check."""

    def __init__(self, *, name: str = _UNNAMED):
        self.name = name
        self.num_values = 0  # finite values seen so far
        self.num_batches = 0  # batches seen, empty ones included

    @abstractmethod
    def update(self, x: np.ndarray) -> None:
        """Fold one batch (any shape) into the statistics."""

    @abstractmethod
    def range(self) -> tuple[float | np.ndarray, float | np.ndarray]:
        """The observed ``(rmin, rmax)``; raises ``CalibrationError`` if no data arrived."""

    @property
    @abstractmethod
    def is_constant(self) -> bool:
        """True when every value seen was the same (see the module doc for its range)."""

    # -- shared -----------------------------------------------------------------------------
    def _as_float(self, x: np.ndarray) -> np.ndarray:
        """Return ``x`` as a float array (float16 widened to float32), or raise if it is not float."""
        x = np.asarray(x)
        if not np.issubdtype(x.dtype, np.floating):
            raise CalibrationError(
                f"tensor {self.name!r}: calibration batch {self.num_batches} has dtype {x.dtype}; "
                "expected float32 or float64 (observers watch the float graph)"
            )
        if x.dtype == np.float16:
            x = x.astype(np.float32)
        return x

    def _validated(self, x: np.ndarray) -> np.ndarray:
        """Return ``x`` as a float array, or raise if it is not float or holds NaN/Inf."""
        x = self._as_float(x)
        finite = np.isfinite(x)
        if not finite.all():
            n_nan = int(np.count_nonzero(np.isnan(x)))
            n_inf = x.size - int(np.count_nonzero(finite)) - n_nan
            raise CalibrationError(
                f"tensor {self.name!r}: calibration batch {self.num_batches} (shape {x.shape}) "
                f"holds {n_nan} NaN and {n_inf} Inf values out of {x.size}; expected finite values. "
                "Check the input preprocessing, or the model for an overflow upstream of this tensor"
            )
        return x

    def _check_finite(self, x: np.ndarray, lo, hi) -> None:
        """Raise (as ``_validated``) unless the batch's min ``lo`` and max ``hi`` are finite.

        NaN and ±Inf propagate into a batch's min and max (NaN into both, +Inf into the max,
        -Inf into the min), so finite extremes prove a finite batch without another scan; the
        full scan only runs to count the bad values for the message.
        """
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            self._validated(x)

    def _require_data(self) -> None:
        if self.num_values == 0:
            seen = (f"{self.num_batches} batches observed, all empty" if self.num_batches
                    else "no batch observed")
            raise CalibrationError(
                f"no calibration data reached tensor {self.name!r} ({seen}); check that the "
                "dataset is not empty and that the tensor is computed for every input"
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, num_values={self.num_values})"


def _sweep(x: np.ndarray, zeros: bool = False) -> tuple[np.floating, np.floating, int]:
    """``(x.min(), x.max(), count of exact zeros or 0)`` of a flat array in one sweep over memory.

    Chunk by chunk, so that the max and the zero count read the chunk from cache. NaN propagates
    into both extremes (``np.min`` of the per-chunk extremes); the sign of a zero extreme may
    differ from a whole-array ``x.min()`` (both are exact, neither is specified).
    """
    is_zero = _SCRATCH.get("flag", np.bool_, min(x.size, _CHUNK)) if zeros else None
    if x.size <= _CHUNK:
        return x.min(), x.max(), int(np.count_nonzero(np.equal(x, 0, out=is_zero))) if zeros else 0
    lows, highs, n = [], [], 0
    for i in range(0, x.size, _CHUNK):
        c = x[i : i + _CHUNK]
        lows.append(c.min())
        highs.append(c.max())
        if is_zero is not None:
            n += int(np.count_nonzero(np.equal(c, 0, out=is_zero[: c.size])))
    return np.min(lows), np.max(highs), n


def _constant_range(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Widen channels with ``lo == hi == v`` to ``(min(0, v), max(0, v))``; others unchanged."""
    const = lo == hi
    return np.where(const, np.minimum(lo, 0.0), lo), np.where(const, np.maximum(hi, 0.0), hi)


class MinMaxObserver(Observer):
    """Running minimum and maximum, per tensor (``axis=None``) or per channel along ``axis``.

    Per channel, ``min``/``max`` are float64 arrays of shape ``(C,)`` where ``C`` is the size of
    ``axis`` (fixed by the first non-empty batch; later batches must agree). ``range()`` then
    returns arrays; per tensor it returns Python floats.
    """

    def __init__(self, axis: int | None = None, *, name: str = _UNNAMED):
        super().__init__(name=name)
        self.axis = axis
        self._min: np.ndarray | None = None  # float64, shape () or (C,)
        self._max: np.ndarray | None = None

    def _batch_min_max(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.axis is None:
            lo, hi, _ = _sweep(x.reshape(-1))
            return np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        if not -x.ndim <= self.axis < x.ndim:
            self._validated(x)  # a NaN/Inf batch is reported as such first
            raise CalibrationError(
                f"tensor {self.name!r}: per-channel axis {self.axis} is out of range for a batch "
                f"of shape {x.shape}"
            )
        flat = np.moveaxis(x, self.axis, 0).reshape(x.shape[self.axis], -1)
        if self._min is not None and flat.shape[0] != self._min.shape[0]:
            self._validated(x)
            raise CalibrationError(
                f"tensor {self.name!r}: batch of shape {x.shape} has {flat.shape[0]} channels "
                f"along axis {self.axis}; earlier batches had {self._min.shape[0]}"
            )
        return flat.min(axis=1).astype(np.float64), flat.max(axis=1).astype(np.float64)

    def update(self, x: np.ndarray) -> None:
        x = self._as_float(x)
        if x.size:
            lo, hi = self._batch_min_max(x)
            self._check_finite(x, lo, hi)
            self._merge(lo, hi)
            self.num_values += x.size
        self.num_batches += 1

    def _merge(self, lo: np.ndarray, hi: np.ndarray) -> None:
        if self._min is None:
            self._min, self._max = lo, hi
        else:
            self._min, self._max = np.minimum(self._min, lo), np.maximum(self._max, hi)

    @property
    def min(self) -> float | np.ndarray:
        """Exact minimum seen (float, or ``(C,)`` array per channel)."""
        self._require_data()
        return _out(self._min)

    @property
    def max(self) -> float | np.ndarray:
        """Exact maximum seen (float, or ``(C,)`` array per channel)."""
        self._require_data()
        return _out(self._max)

    @property
    def constant_mask(self) -> np.ndarray:
        """Boolean array, shape ``()`` per tensor or ``(C,)`` per channel: which are constant."""
        self._require_data()
        return np.asarray(self._min == self._max)

    @property
    def is_constant(self) -> bool:
        """True when the tensor (every channel, per channel) held a single value."""
        return bool(self.constant_mask.all())

    def range(self) -> tuple[float | np.ndarray, float | np.ndarray]:
        """``(min, max)`` seen; constant tensors/channels get ``(min(0, v), max(0, v))``."""
        self._require_data()
        lo, hi = _constant_range(self._min, self._max)
        return _out(lo), _out(hi)


def _out(a: np.ndarray) -> float | np.ndarray:
    return float(a) if a.ndim == 0 else a.copy()


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Exponential moving average of per-batch min and max, as in PyTorch's and TF's QAT observers.

    After batch ``b`` with minimum ``m_b``: ``avg_min += averaging_constant * (m_b - avg_min)``
    (likewise for max). **First batch:** the averages start *at* the first batch's min/max, not
    at zero, so one batch gives the plain min/max (PyTorch ``MovingAverageMinMaxObserver``
    semantics; starting from zero would bias every range toward zero for ~1/c batches).
    Empty batches do not move the averages.

    ``range()`` returns the averaged range, which need not contain every value seen: that is the
    point (outlier batches are damped). The exact ``min``/``max`` are kept too and decide
    ``is_constant``.
    """

    def __init__(
        self, averaging_constant: float = 0.01, axis: int | None = None, *, name: str = _UNNAMED
    ):
        if not 0.0 < averaging_constant <= 1.0:
            raise ValueError(f"averaging_constant must be in (0, 1], got {averaging_constant}")
        super().__init__(axis, name=name)
        self.averaging_constant = averaging_constant
        self._avg_min: np.ndarray | None = None
        self._avg_max: np.ndarray | None = None

    def _merge(self, lo: np.ndarray, hi: np.ndarray) -> None:
        if self._avg_min is None:
            self._avg_min, self._avg_max = lo, hi
        else:
            c = self.averaging_constant
            self._avg_min = self._avg_min + c * (lo - self._avg_min)
            self._avg_max = self._avg_max + c * (hi - self._avg_max)
        super()._merge(lo, hi)

    @property
    def averaged_min(self) -> float | np.ndarray:
        self._require_data()
        return _out(self._avg_min)

    @property
    def averaged_max(self) -> float | np.ndarray:
        self._require_data()
        return _out(self._avg_max)

    def range(self) -> tuple[float | np.ndarray, float | np.ndarray]:
        """Averaged ``(min, max)``; constant tensors/channels get ``(min(0, v), max(0, v))``."""
        self._require_data()
        const = self._min == self._max
        lo = np.where(const, self._min, self._avg_min)
        hi = np.where(const, self._max, self._avg_max)
        lo, hi = _constant_range(lo, hi)
        return _out(lo), _out(hi)


@dataclass(frozen=True, eq=False)
class Histogram:
    """An immutable snapshot: ``counts[k]`` values fell in ``[edges[k], edges[k+1])``.

    Bins are uniform and exact: ``edges[k] == (k - zero_index) * width`` with ``width`` a power
    of two, so ``edges[zero_index] == 0``.
    Snapshots are trimmed to the bins between zero and the data: ``edges[0] <= min(0, xmin)``
    and ``edges[-1] > max(0, xmax)``. An all-zero tensor gives one zero-width bin ``[0, 0]``.
    """

    counts: np.ndarray  # int64, shape (k,)
    edges: np.ndarray  # float64, shape (k + 1,)
    zero_index: int
    width: float

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def fold_abs(self) -> Histogram:
        """The histogram of ``|x|`` implied by this one (same width, zero at index 0).

        Negative bin ``[-(k+1)w, -kw)`` folds onto ``[kw, (k+1)w)``; only values exactly at a
        negative edge ``-(k+1)w`` land one bin low (their ``|x|`` is that bin's upper edge).
        """
        z = self.zero_index
        pos, neg = self.counts[z:], self.counts[:z][::-1]
        n = max(pos.size, neg.size)
        folded = np.zeros(n, np.int64)
        folded[: pos.size] += pos
        folded[: neg.size] += neg
        return Histogram(folded, np.arange(n + 1, dtype=np.float64) * self.width, 0, self.width)


class _GrowingHistogram:
    """Counts of a window of ``bins`` consecutive bins ``[i * 2**e, (i+1) * 2**e)``; see module doc."""

    def __init__(self, bins: int):
        self.bins = bins
        self.counts = np.zeros(bins, np.int64)
        self.exponent: int | None = None  # bin width is 2**exponent; None while all data are 0
        self.lo = 0  # global index of counts[0]
        self.pending_zeros = 0  # zeros seen before the width was known

    @property
    def width(self) -> float | None:
        return None if self.exponent is None else math.ldexp(1.0, self.exponent)

    def _fits(self, lo_v: float, hi_v: float, e: int) -> bool:
        try:
            return math.floor(math.ldexp(hi_v, -e)) - math.floor(math.ldexp(lo_v, -e)) < self.bins
        except OverflowError:  # the data are ~2**1000 times wider than this width
            return False

    def copy(self) -> _GrowingHistogram:
        twin = _GrowingHistogram(self.bins)
        twin.counts, twin.exponent, twin.lo = self.counts.copy(), self.exponent, self.lo
        twin.pending_zeros = self.pending_zeros
        return twin

    def prepare(self, n: int, lo_v: float, hi_v: float) -> bool:
        """Make the window hold ``[lo_v, hi_v]`` (``lo_v <= 0 <= hi_v`` bound every value seen so
        far) before ``n`` values are counted. False when they are all zeros held as pending."""
        if self.exponent is None:
            if lo_v == hi_v:  # everything so far is 0
                self.pending_zeros += n
                return False
            # 2**e >= 2 * max|v| / (bins - 2) >= span / (bins - 2): the span fits in the window
            e = math.frexp(max(-lo_v, hi_v) / (self.bins - 2) * 2.0)[1]
            while e > _MIN_EXPONENT and self._fits(lo_v, hi_v, e - 1):
                e -= 1
            self.exponent, self.lo = e, math.floor(math.ldexp(lo_v, -e))
        self._cover(lo_v, hi_v)
        if self.pending_zeros:
            self.counts[-self.lo] += self.pending_zeros
            self.pending_zeros = 0
        return True

    def add(self, x: np.ndarray, lo_v: float, hi_v: float, *, nonneg: bool = False) -> None:
        """Count ``x`` (flat float array); ``lo_v <= 0 <= hi_v`` bound every value seen so far.

        ``nonneg``: the caller knows that no value of ``x`` is negative (-0.0 may occur).
        """
        if not self.prepare(x.size, lo_v, hi_v):
            return
        y, idx = _buffers(x, self.exponent, self.bins)
        for i in range(0, x.size, _CHUNK):  # chunks keep the temporaries in cache
            c = x[i : i + _CHUNK]
            m = c.size
            self.counts += np.bincount(self._indices(c, y[:m], idx[:m], nonneg), minlength=self.bins)

    def _indices(self, x: np.ndarray, y: np.ndarray, idx: np.ndarray, nonneg: bool) -> np.ndarray:
        """Window index of each value, ``floor(x / 2**e) - lo``, written to ``idx``; exact.

        ``y`` (the size of ``x``) is scratch for ``x / 2**e`` (``_scale``). For non-negative
        values the floor is the truncation the integer conversion does.
        """
        e = self.exponent
        _scale(x, e, y)
        if nonneg:
            np.copyto(idx, y, casting="unsafe")  # truncation == floor for y >= 0 (and -0.0)
            if self.lo:
                idx -= self.lo
            return idx
        _floor(x, e, y, y)
        y -= self.lo
        np.copyto(idx, y, casting="unsafe")
        return idx

    def _cover(self, lo_v: float, hi_v: float) -> None:
        """Grow (width * 2**k, bin i -> i >> k) and shift until the window holds [lo_v, hi_v]."""
        e, n = self.exponent, self.bins
        if self._fits(lo_v, hi_v, e):
            a = math.floor(math.ldexp(lo_v, -e))
            if self.lo <= a and math.floor(math.ldexp(hi_v, -e)) < self.lo + n:
                return
        k = 0
        while not self._fits(lo_v, hi_v, e + k):
            k += 1
        a = math.floor(math.ldexp(lo_v, -(e + k)))
        occupied = np.flatnonzero(self.counts)
        grown = np.zeros(n, np.int64)
        np.add.at(grown, ((self.lo + occupied) >> k) - a, self.counts[occupied])
        self.counts, self.lo, self.exponent = grown, a, e + k

    def snapshot(self, hi_v: float) -> Histogram:
        if self.exponent is None:
            return Histogram(np.array([self.pending_zeros], np.int64), np.zeros(2), 0, 0.0)
        last = math.floor(math.ldexp(hi_v, -self.exponent)) - self.lo
        counts = self.counts[: last + 1].copy()
        edges = np.arange(self.lo, self.lo + last + 2, dtype=np.float64) * self.width
        return Histogram(counts, edges, -self.lo, self.width)


def _buffers(x: np.ndarray, e: int, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Scratch for one chunk of ``x`` scaled by ``2**-e`` (float32 when exact, see ``_scale``)
    and for its integer indices."""
    n = min(x.size, _CHUNK)
    f32 = x.dtype == np.float32 and -127 <= e <= 126 and bins <= _F32_MAX_BINS
    return _SCRATCH.get("scaled", np.float32 if f32 else np.float64, n), _SCRATCH.get("index", np.intp, n)


def _scale(x: np.ndarray, e: int, y: np.ndarray) -> None:
    """``y = x / 2**e``, exactly unless a quotient is below the normal range of ``y``'s format.

    Dividing by a power of two is exact unless the quotient overflows or falls below the
    smallest normal number. Zero anchoring keeps ``|x| / 2**e <= 2 * bins``, so nothing
    overflows; ``_buffers`` only hands out a float32 ``y`` for float32 data, a float32-normal
    ``2**-e`` and at most ``_F32_MAX_BINS`` bins, where every integer involved (indices up to
    ``4 * bins``) is exact too. An underflowing quotient has ``|x / 2**e| < 1``: rounded, it keeps
    its floor (0 or -1) unless a negative one rounds to -0.0, which ``_floor`` patches.
    """
    if y.dtype == np.float32:
        np.multiply(x, np.float32(math.ldexp(1.0, -e)), out=y)
    elif e >= -1022:
        np.multiply(x, math.ldexp(1.0, -e), out=y, dtype=np.float64)
    else:  # 2**-e is not a double: scale in two exact steps
        np.copyto(y, x)
        np.ldexp(y, -e, out=y)


def _floor(x: np.ndarray, e: int, y: np.ndarray, out: np.ndarray) -> None:
    """``out = floor(y)`` for ``y = _scale(x, e)``: the exact ``floor(x / 2**e)``. Only a negative
    quotient that underflowed to -0.0 (which needs ``2**e > 1``) floors wrong; it is patched."""
    np.floor(y, out=out)
    if e > 0:
        out[(out == 0) & (x < 0)] = -1.0


def _add_signed_and_abs(signed: _GrowingHistogram, absolute: _GrowingHistogram, x: np.ndarray,
                        lo_v: float, hi_v: float) -> None:
    """``signed.add(x, lo_v, hi_v)`` and ``absolute.add(|x|, 0, max(-lo_v, hi_v))`` in one pass.

    Each value gets one index ``k = floor(x / 2**f)`` at the finer width ``2**f`` of the two, and
    a flag: is ``x`` exactly ``k * 2**f``. Both histograms follow exactly: the signed bin is
    ``k >> (e_signed - f)``; the ``|x|`` bin is ``k`` for ``k >= 0`` and ``-k - 1``, or ``-k`` for
    a value exactly on its edge, for ``k < 0`` (``floor(|x| / 2**f)``), shifted by
    ``e_abs - f``. One bincount over ``(k, flag)`` replaces two over ``x`` and ``|x|``.
    """
    n = x.size
    if not signed.prepare(n, lo_v, hi_v):  # all zeros so far: so is |x|
        absolute.prepare(n, 0.0, max(-lo_v, hi_v))
        return
    absolute.prepare(n, 0.0, max(-lo_v, hi_v))
    bins, f = signed.bins, min(signed.exponent, absolute.exponent)
    d_s, d_a = signed.exponent - f, absolute.exponent - f
    # fine indices inside both windows; one of d_s, d_a is 0, so at most 2 * bins of them
    k_lo = max(signed.lo << d_s, -(bins << d_a))
    k_hi = min((signed.lo + bins) << d_s, bins << d_a) - 1
    span = k_hi - k_lo + 1
    y, idx = _buffers(x, f, bins)
    fl = _SCRATCH.get("floor", y.dtype, y.size)
    exact = _SCRATCH.get("flag", np.bool_, y.size)
    counts = np.zeros(2 * span, np.int64)
    for i in range(0, n, _CHUNK):
        c = x[i : i + _CHUNK]
        m = c.size
        ym, fm, em = y[:m], fl[:m], exact[:m]
        _scale(c, f, ym)
        _floor(c, f, ym, fm)
        np.equal(ym, fm, out=em)
        fm -= k_lo  # key 2 * (k - k_lo) + exact, exact integers in y's format
        fm *= 2
        fm += em
        np.copyto(idx[:m], fm, casting="unsafe")
        counts += np.bincount(idx[:m], minlength=2 * span)
    k = np.arange(k_lo, k_hi + 1, dtype=np.int64)
    off_edge, on_edge = counts[0::2], counts[1::2]
    total = off_edge + on_edge
    np.add.at(signed.counts, (k >> d_s) - signed.lo, total)
    neg = k < 0
    np.add.at(absolute.counts, np.where(neg, -k - 1, k) >> d_a, np.where(neg, off_edge, total))
    edge = neg & (on_edge > 0)  # (-k >> d_a is past the window only where nothing was counted)
    np.add.at(absolute.counts, -k[edge] >> d_a, on_edge[edge])


class HistogramObserver(Observer):
    """Growing histograms of ``x`` (signed) and of ``|x|``, plus exact min, max and zero count.

    Per tensor only: a per-channel histogram would multiply memory by the channel count, and
    per-channel ranges (weights) come from ``MinMaxObserver(axis=...)``.

    ``bins`` bounds the memory (``bins`` int64 counters per histogram). The signed histogram serves
    asymmetric methods; the ``|x|`` histogram (``track_abs=True``) serves symmetric ones with twice
    the resolution that folding the signed one would give (``abs_histogram`` folds when
    ``track_abs=False``). ``zero_count`` counts values that are exactly 0.0 (ReLU outputs, padding),
    which the int8 grid represents without error; the ``mse`` method uses it.
    """

    def __init__(self, bins: int = 2048, *, track_abs: bool = True, name: str = _UNNAMED):
        if bins < 16:
            raise ValueError(f"HistogramObserver needs at least 16 bins, got {bins}")
        super().__init__(name=name)
        self.bins = bins
        self.track_abs = track_abs
        self._signed = _GrowingHistogram(bins)
        self._abs = _GrowingHistogram(bins) if track_abs else None
        # While no negative value has been seen, |x| == x: the |x| histogram receives the same
        # values with the same bounds as the signed one, so it *is* the signed one (not counted
        # twice); the first negative batch gives it a copy of its own.
        self._abs_shared = track_abs
        self._min = math.inf
        self._max = -math.inf
        self.zero_count = 0

    def update(self, x: np.ndarray) -> None:
        x = self._as_float(x)
        if x.size:
            x = x.reshape(-1)
            b_min, b_max, zeros = _sweep(x, zeros=True)
            self._check_finite(x, b_min, b_max)
            self._min = min(self._min, float(b_min))
            self._max = max(self._max, float(b_max))
            lo_v, hi_v = min(self._min, 0.0), max(self._max, 0.0)
            nonneg = not b_min < 0
            if self._abs_shared and not nonneg:  # the first negative value: |x| != x from now on
                self._abs, self._abs_shared = self._signed.copy(), False
            if self._abs is None or self._abs_shared:
                self._signed.add(x, lo_v, hi_v, nonneg=nonneg)
            else:
                _add_signed_and_abs(self._signed, self._abs, x, lo_v, hi_v)
            self.zero_count += zeros
            self.num_values += x.size
        self.num_batches += 1

    @property
    def min(self) -> float:
        self._require_data()
        return self._min

    @property
    def max(self) -> float:
        self._require_data()
        return self._max

    @property
    def is_constant(self) -> bool:
        self._require_data()
        return self._min == self._max

    def range(self) -> tuple[float, float]:
        """``(min, max)`` seen; a constant ``v`` gives ``(min(0, v), max(0, v))``."""
        self._require_data()
        if self.is_constant:
            return min(self._min, 0.0), max(self._max, 0.0)
        return self._min, self._max

    @property
    def bin_width(self) -> float | None:
        """Current width of the signed histogram (None while every value seen was 0)."""
        return self._signed.width

    @property
    def histogram(self) -> Histogram:
        """Snapshot of the signed histogram, trimmed to ``[min(0, xmin), max(0, xmax)]``."""
        self._require_data()
        return self._signed.snapshot(max(self._max, 0.0))

    @property
    def abs_histogram(self) -> Histogram:
        """Snapshot of the ``|x|`` histogram, from 0 to ``max|x|`` (folded if not tracked)."""
        self._require_data()
        if self._abs is None:
            return self.histogram.fold_abs()
        tracked = self._signed if self._abs_shared else self._abs
        return tracked.snapshot(max(-self._min, self._max, 0.0))


class SampleMeanObserver(Observer):
    """The mean over samples (axis 0) of every position of one sample: shape ``x.shape[1:]``.

    Not a range statistic: it feeds bias correction, which needs the expected input of each
    conv tap (``E[x[c, h, w]]``, padding taken into account by the consumer) rather than a
    per-channel mean, so borders stay exact. Sums are float64; memory is one float64 sample.
    Every batch must have the shape of the first one past axis 0. ``range()`` is the
    ``(min, max)`` of the mean itself, to honour the observer contract.
    """

    def __init__(self, *, name: str = _UNNAMED):
        super().__init__(name=name)
        self._sum: np.ndarray | None = None
        self.num_samples = 0

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x)
        if not np.issubdtype(x.dtype, np.floating) or x.ndim == 0:
            x = self._validated(x)   # raises for a non-float dtype
            raise CalibrationError(f"tensor {self.name!r}: a sample mean needs a batch axis, got a scalar")
        if x.size:
            if self._sum is not None and x.shape[1:] != self._sum.shape:
                raise CalibrationError(
                    f"tensor {self.name!r}: batch of shape {x.shape} does not match the sample shape "
                    f"{self._sum.shape} of earlier batches"
                )
            # summed in the input's precision over one batch (float32: error ~ batch * 6e-8,
            # far below the int8 step), then accumulated in float64 across batches
            with np.errstate(over="ignore"):
                s = x.sum(axis=0, dtype=np.float32 if x.dtype == np.float16 else None)
            if not np.isfinite(s).all():
                self._validated(x)                       # NaN/Inf in x: raises with the counts
                s = x.sum(axis=0, dtype=np.float64)      # finite values whose sum overflowed
            s = s.astype(np.float64)
            self._sum = s if self._sum is None else self._sum + s
            self.num_samples += x.shape[0]
            self.num_values += x.size
        self.num_batches += 1

    @property
    def mean(self) -> np.ndarray:
        """float64 array of one sample's shape."""
        self._require_data()
        return self._sum / self.num_samples

    @property
    def is_constant(self) -> bool:
        m = self.mean
        return bool(m.min() == m.max())

    def range(self) -> tuple[float, float]:
        m = self.mean
        return float(m.min()), float(m.max())


class InputObserver:
    """What one calibration input looks like across samples, batch by batch, in O(one sample).

    Keeps the first sample, whether every later sample equals it, whether every sample is
    constant within itself, and the largest magnitude seen.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.num_samples = 0
        self.first: np.ndarray | None = None
        self.identical = True          # every sample equals the first
        self.constant_each = True      # every sample holds one value
        self.lo = np.inf               # smallest and largest value seen
        self.hi = -np.inf
        self.is_float = True

    @property
    def amax(self) -> float:
        """The largest magnitude seen (0 before any sample)."""
        return max(abs(self.lo), abs(self.hi)) if self.num_samples else 0.0

    def update(self, batch: np.ndarray) -> None:
        a = np.asarray(batch)
        if not np.issubdtype(a.dtype, np.floating):
            self.is_float = False
            return
        if a.ndim == 0 or a.shape[0] == 0:
            return
        rows = a.reshape(a.shape[0], -1)
        if rows.shape[1] == 0:
            return
        if self.first is None:
            self.first = rows[0].copy()
        if self.identical:   # a sample of another size (dynamic dims) is not a copy of the first
            self.identical = rows.shape[1] == self.first.size and \
                bool(np.array_equal(rows, np.broadcast_to(self.first, rows.shape)))
        lo, hi = rows.min(axis=1), rows.max(axis=1)
        self.constant_each = self.constant_each and bool(np.array_equal(lo, hi))
        self.lo, self.hi = min(self.lo, float(lo.min())), max(self.hi, float(hi.max()))
        self.num_samples += rows.shape[0]

    def problem(self) -> str | None:
        """What is wrong with this input's samples, or None."""
        if not self.is_float or self.first is None:
            return None
        n = f"{self.num_samples} sample{'s' if self.num_samples != 1 else ''}"
        if self.amax == 0.0:
            return f"calibration input {quote_name(self.name)} is all zeros in every one of its {n}"
        if self.amax <= NEAR_ZERO_TOLERANCE:
            return (f"calibration input {quote_name(self.name)} stays within ±{self.amax:.3g} in all {n} "
                    "(below int8's smallest range, 1e-6: it quantizes to zeros)")
        if self.lo == self.hi:
            return f"calibration input {quote_name(self.name)} is the constant {self.lo:.6g} in every one of its {n}"
        if self.identical and self.num_samples > 1:
            return f"calibration input {quote_name(self.name)}: all {n} are identical (each equals the first)"
        if self.constant_each:
            return (f"calibration input {quote_name(self.name)}: every one of its {n} is constant within itself "
                    f"(one value per sample, from {self.lo:.6g} to {self.hi:.6g})")
        return None
