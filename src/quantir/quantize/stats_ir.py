"""Calibration statistics as IR: ``quant.stats`` ops that carry what calibration observed.

``to_module(fn, statistics)`` writes the float function calibration ran (after the quantizer's
expansions) with a ``quant.stats`` op on every observed tensor; ``read(module)`` takes such a
module apart again into the float function and a ``calibrate.Statistics`` that gives the same
ranges, histograms and bias-correction means, so quantizing from it is quantizing from the
calibration run itself; ``merge(a, b)`` joins the statistics of two runs over the same function.

What a ``quant.stats`` op holds (docs/mlir-quant-spec.md §8.1 documents the extension):

* ``layerStats = dense<[min, max]> : tensor<2xf64>`` — the exact extremes seen (f64: no rounding);
  ``axisStats``/``axis`` for a tensor observed per channel (``[C, 2]``, channels along ``axis``).
* ``quantir.name`` — the tensor's name (ONNX value name), ``quantir.samples`` — the calibration
  samples it saw, ``quantir.values`` — the values it saw.
* Histogram methods (percentile, entropy, mse): the observer's two histograms, as counts with their
  grid: ``quantir.histogram`` (i64 counts), ``quantir.histogram_width`` (a power of two) and
  ``quantir.histogram_zero`` (the index of the bin whose lower edge is 0), so bin ``k`` is
  ``[(k - zero) * width, (k - zero + 1) * width)``; ``quantir.abs_histogram`` and
  ``quantir.abs_histogram_width`` for ``|x|`` (zero index 0; absent while no value was negative,
  when it is the signed one); ``quantir.zero_count`` (exact zeros), ``quantir.bins`` (the observer's
  window, which bounds the bin count).
* Bias correction (``Config.bias_correction="weights"``): for the input of a conv/FC,
  ``quantir.sample_sum`` (f64, the sum of the samples per position) and ``quantir.sample_count``.

Every other op with a label (an ONNX node name) carries it as ``quantir.label`` so ``--exclude``
still finds it. Given the annotation, each member of one of the solver's same-scale classes gets a
``quant.coupled_ref`` after its stats op (key: the class's first tensor's name); ``read`` removes
all of these, and the solver derives the classes from the ops again.

Merging is exact where it can be: min of mins, max of maxes, sums and counts added, and histograms
re-binned onto the coarser of the two power-of-two grids (widened further when the joined range no
longer fits the window) and added. Because every observer's grid is the finest power of two whose
window holds its range, the merged histograms of two halves of a calibration set equal the
histograms of the whole set bin for bin when both used the same ``bins``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import CalibrationError
from ..ir import Function, Module, Operation, Value
from ..ir.attributes import IntegerAttr, StringAttr
from ..ir.builder import OpBuilder, function_like
from ..ir.dialects import quant
from ..ir.mapping import IRMapping
from ..ir.opdef import elements_attr
from .calibrate import Statistics, interiors, observed_values
from .config import Config
from .methods import METHODS, Method
from .patterns import Annotation
from .regions import constant_array, weighted_input
from .observers import HistogramObserver, MinMaxObserver, Observer, _GrowingHistogram
from .sample_means import SizedSampleMean

__all__ = ["to_module", "read", "merge", "holds_stats"]

# -- writing ------------------------------------------------------------------------------------

def to_module(fn: Function, statistics: Statistics, annotation: Annotation | None = None,
              config: Config | None = None) -> Module:
    """A copy of ``fn`` with a ``quant.stats`` op after every observed value (see the module doc),
    and, given the annotation, a ``quant.coupled_ref`` after each member of a same-scale class."""
    observed = {id(v): v for v in statistics.observers}
    keys = couplings(annotation, statistics, config or Config(), fn) if annotation is not None else {}
    out = function_like(fn)
    mapping: IRMapping[Value] = IRMapping()
    mapping.map_all(fn.arguments, out.arguments)
    b = OpBuilder.at_end(out)
    for old, new in zip(fn.arguments, out.arguments):
        if id(old) in observed:
            mapping.map(old, _append_stats(out, new, old, statistics, keys))
    for op in fn.ops:
        copy = b.clone(op, mapping)
        if op.label and not op.opdef.custom_syntax:
            copy.attributes["quantir.label"] = StringAttr(op.label)
        for old, new in zip(op.results, copy.results):
            if id(old) in observed:
                mapping.map(old, _append_stats(out, new, old, statistics, keys))
    return Module([out])


def _append_stats(fn: Function, value: Value, source: Value, statistics: Statistics, keys: dict[int, str]) -> Value:
    attrs = _stats_attributes(source, statistics)
    op = fn.body.append(Operation(quant.STATS, [value], [value.type], attrs))
    key = keys.get(id(source))
    if key is None:
        return op.results[0]
    ref = fn.body.append(Operation(quant.COUPLED_REF, [op.results[0]], [value.type], {"coupledKey": StringAttr(key)}))
    return ref.results[0]


def couplings(annotation: Annotation, statistics: Statistics, config: Config, fn: Function) -> dict[int, str]:
    """id(value) -> the key of its same-scale class (the solver's: pooling, reshape, concatenation
    inputs and outputs share parameters), for classes of two or more observed values. The key is
    the name of the class's first value in program order."""
    from .solver import _Solver   # the classes are the solver's own union-find
    solver = _Solver(annotation, Statistics(statistics.observers, statistics.num_samples), config, fn)
    order = {id(v): i for i, v in enumerate(statistics.observers)}
    members: dict[int, list[int]] = {}
    for k, root in solver.root.items():
        if k in order:
            members.setdefault(root, []).append(k)
    names = {id(v): v.name_hint or "<unnamed>" for v in statistics.observers}
    out: dict[int, str] = {}
    for ks in members.values():
        if len(ks) > 1:
            first = min(ks, key=order.__getitem__)
            out.update({k: names[first] for k in ks})
    return out


def _stats_attributes(v: Value, statistics: Statistics) -> dict:
    observers = statistics.observers[v]
    if len(observers) != 1 or not isinstance(observers[0], (MinMaxObserver, HistogramObserver)):
        raise CalibrationError(f"tensor {v.name_hint!r}: observed by {observers}; statistics IR holds one "
                               f"MinMaxObserver or HistogramObserver per tensor")
    obs = observers[0]
    attrs: dict = {"quantir.name": StringAttr(v.name_hint or ""),
                   "quantir.samples": IntegerAttr(statistics.num_samples)}
    if isinstance(obs, MinMaxObserver):
        if type(obs) is not MinMaxObserver:
            raise CalibrationError(f"tensor {v.name_hint!r}: a {type(obs).__name__} (moving averages) has no "
                                   f"statistics IR form; observe with MinMaxObserver")
        lo, hi = np.asarray(obs.min, np.float64), np.asarray(obs.max, np.float64)   # raise without data
        if obs.axis is None:
            attrs["layerStats"] = elements_attr(np.array([lo, hi], np.float64))
        else:
            attrs["layerStats"] = elements_attr(np.array([lo.min(), hi.max()], np.float64))
            attrs["axisStats"] = elements_attr(np.stack([lo, hi], axis=1))
            attrs["axis"] = IntegerAttr(obs.axis)
    else:
        attrs["layerStats"] = elements_attr(np.array([obs.min, obs.max], np.float64))
        attrs["quantir.bins"] = IntegerAttr(obs.bins)
        attrs["quantir.zero_count"] = IntegerAttr(int(obs.zero_count))
        h = obs.histogram
        attrs["quantir.histogram"] = elements_attr(np.asarray(h.counts, np.int64))
        attrs["quantir.histogram_width"] = elements_attr(np.array([h.width], np.float64))
        attrs["quantir.histogram_zero"] = IntegerAttr(int(h.zero_index))
        if obs._abs is not None and not obs._abs_shared:
            a = obs.abs_histogram
            attrs["quantir.abs_histogram"] = elements_attr(np.asarray(a.counts, np.int64))
            attrs["quantir.abs_histogram_width"] = elements_attr(np.array([a.width], np.float64))
    attrs["quantir.values"] = IntegerAttr(int(obs.num_values))
    mean = statistics.means.get(v)
    if mean is not None:
        if mean.mixed:
            raise CalibrationError(f"tensor {v.name_hint!r}: the calibration samples differ in size here, so bias "
                                   f"correction has no mean per position to write; emit the statistics with "
                                   f"bias_correction='off'")
        run = mean._run
        attrs["quantir.sample_sum"] = elements_attr(np.asarray(run._sum, np.float64))
        attrs["quantir.sample_count"] = IntegerAttr(int(run.num_samples))
    return attrs


# -- reading ------------------------------------------------------------------------------------

def holds_stats(module: Module) -> bool:
    """True when the module's main function carries ``quant.stats`` ops."""
    fn = module.main
    return fn.body is not None and any(op.opdef is quant.STATS for op in fn.ops)


@dataclass
class StatsRecord:
    """One ``quant.stats`` op read and checked: its observer, and the bias-correction sums if any."""

    observer: Observer
    samples: int
    sample_sum: np.ndarray | None = None
    sample_count: int = 0


def read(module: Module) -> tuple[Function, Statistics]:
    """The float function without its stats ops (names and labels restored) and its ``Statistics``.

    The module is modified: the stats ops are removed and their results replaced by their operands.
    """
    fn = module.main
    records: dict[Value, StatsRecord] = {}
    for op in list(fn.ops):
        if "quantir.label" in op.attributes:
            op.label = op.attributes.pop("quantir.label").value
        if op.opdef is quant.COUPLED_REF:   # the solver derives the same classes from the ops again
            op.results[0].replace_all_uses_with(op.operands[0])
            fn.body.detach(op)
            continue
        if op.opdef is not quant.STATS:
            continue
        value = op.operands[0]
        name = _attr(op, "quantir.name", str, "")
        if name:
            value.name_hint = name
        if value in records:
            raise _error(op, name, "is the second quant.stats op on this tensor; merge them (quantir.merge_stats)")
        records[value] = record_of(op, name)
        op.results[0].replace_all_uses_with(value)
        fn.body.detach(op)
    fn.body.ops[:] = [op for op in fn.body.ops if op.block is fn.body]
    if not records:
        raise CalibrationError("the module holds no quant.stats ops: nothing to quantize from without "
                               "calibration data (write them with quantir quantize --emit-stats)")
    observers = {v: [r.observer] for v, r in records.items()}
    means = {}
    for v, r in records.items():
        if r.sample_sum is not None:
            m = SizedSampleMean(v.name_hint)
            m._run._sum, m._run.num_samples = r.sample_sum, r.sample_count
            m._run.num_values = r.sample_count * max(r.sample_sum.size, 1)
            means[v] = m
    samples = max(r.samples for r in records.values())
    return fn, Statistics(observers, samples, means=means)


def check_covers(annotation: Annotation, statistics: Statistics, config: Config) -> None:
    """Refuse statistics that cannot give ``config``'s parameters: a tensor the quantizer observes
    with no stats op, a histogram method with min/max statistics only, bias correction without sums."""
    wanted = [*observed_values(annotation), *(i.carrier for i in interiors(annotation))]
    missing = [v.name_hint or "<unnamed>" for v in wanted if v not in statistics.observers]
    if missing:
        raise CalibrationError(f"no quant.stats op on {len(missing)} tensor(s) the quantizer observes "
                               f"({', '.join(repr(n) for n in missing[:5])}): write the statistics with the same "
                               f"model and options (quantir quantize --emit-stats)")
    needed = METHODS[Method(config.method)].observer
    if needed is HistogramObserver and config.activations == "int8" and config.callback is None:
        plain = [v.name_hint for v, obs in statistics.observers.items() if not isinstance(obs[0], HistogramObserver)]
        if plain:
            raise CalibrationError(f"method {config.method!r} needs histograms, and the quant.stats op on "
                                   f"{plain[0]!r} (and {len(plain) - 1} more) has min/max only: write the "
                                   f"statistics with --method {config.method}, or quantize with --method minmax")
    if config.bias_correction != "off":
        inputs = {id(x): x for r in annotation.regions if (x := weighted_input(r)) is not None
                  and constant_array(x) is None}
        bare = [x.name_hint for x in inputs.values() if x not in statistics.means]
        if bare:
            raise CalibrationError(f"bias correction needs the sample sums of each conv/FC input, and the "
                                   f"quant.stats op on {bare[0]!r} has none (written with bias_correction='off'?): "
                                   f"quantize with bias_correction='off' (--bias-correction off), or write "
                                   f"the statistics again")


def _error(op: Operation, name: str, message: str) -> CalibrationError:
    where = f" on tensor {name!r}" if name else ""
    return CalibrationError(f"'quant.stats' op{where} {message}", op.loc)


def _attr(op: Operation, key: str, kind: type, default=None):
    attr = op.attributes.get(key)
    if attr is None:
        return default
    value = getattr(attr, "value", None)
    if kind is int and isinstance(attr, IntegerAttr):
        return int(value)
    if kind is str and isinstance(attr, StringAttr):
        return value
    raise _error(op, "", f"attribute '{key}' must be a{'n integer' if kind is int else ' string'}, got {attr}")


def _array(op: Operation, name: str, key: str, dtype) -> np.ndarray | None:
    attr = op.attributes.get(key)
    if attr is None:
        return None
    array = getattr(attr, "array", None)
    if array is None:
        raise _error(op, name, f"attribute '{key}' must be a dense elements attribute with its data, got {attr}")
    return np.asarray(array).astype(dtype)


def record_of(op: Operation, name: str = "") -> StatsRecord:
    """The observer one ``quant.stats`` op describes; a ``CalibrationError`` naming the op when its
    numbers cannot be statistics (NaN, min > max, a histogram that disagrees with them)."""
    layer = _array(op, name, "layerStats", np.float64).reshape(-1)
    if layer.size != 2:
        raise _error(op, name, f"layerStats must be [min, max], got {layer.size} values")
    lo, hi = (float(x) for x in layer)
    _check_range(op, name, "layerStats", lo, hi)
    values = _attr(op, "quantir.values", int, 1)
    samples = _attr(op, "quantir.samples", int, 0)
    if values < 1 or samples < 0:
        raise _error(op, name, f"counts quantir.values = {values}, quantir.samples = {samples}: statistics need "
                               f"at least one observed value")
    histogram = _array(op, name, "quantir.histogram", np.int64)
    axis_stats = _array(op, name, "axisStats", np.float64)
    if histogram is not None:
        observer = _histogram_observer(op, name, lo, hi, values, histogram)
    elif axis_stats is not None:
        observer = _axis_observer(op, name, lo, hi, values, axis_stats)
    else:
        observer = MinMaxObserver(name=name or "<unnamed>")
        observer._min, observer._max = np.asarray(lo), np.asarray(hi)
        observer.num_values, observer.num_batches = values, 1
    sample_sum = _array(op, name, "quantir.sample_sum", np.float64)
    count = _attr(op, "quantir.sample_count", int, 0)
    if sample_sum is not None and (count < 1 or not np.isfinite(sample_sum).all()):
        raise _error(op, name, f"quantir.sample_sum needs finite values and quantir.sample_count >= 1 "
                               f"(got {count})")
    return StatsRecord(observer, samples, sample_sum, count)


def _check_range(op: Operation, name: str, what: str, lo, hi) -> None:
    lo, hi = np.asarray(lo), np.asarray(hi)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        raise _error(op, name, f"{what} holds NaN or Inf ({lo.tolist()}, {hi.tolist()}); statistics must be finite")
    bad = np.flatnonzero(np.atleast_1d(lo > hi))
    if bad.size:
        at = "" if lo.ndim == 0 else f" at row {int(bad[0])}"
        raise _error(op, name, f"{what} has min > max{at} ({np.atleast_1d(lo)[bad[0]]} > "
                               f"{np.atleast_1d(hi)[bad[0]]})")


def _axis_observer(op: Operation, name: str, lo: float, hi: float, values: int, stats: np.ndarray) -> MinMaxObserver:
    axis = op.attr("axis")
    t = op.operands[0].type
    channels = t.shape[axis] if axis is not None and t.is_ranked and -t.rank <= axis < t.rank else None
    if axis is None or stats.ndim != 2 or stats.shape[1] != 2 or (channels is not None and stats.shape[0] != channels):
        raise _error(op, name, f"axisStats must be [C, 2] with C = {channels} channels along axis {axis} of "
                               f"{t}, got shape {list(stats.shape)}")
    _check_range(op, name, "axisStats", stats[:, 0], stats[:, 1])
    if stats[:, 0].min() != lo or stats[:, 1].max() != hi:
        raise _error(op, name, f"layerStats [{lo}, {hi}] is not the min and max of its axisStats "
                               f"[{stats[:, 0].min()}, {stats[:, 1].max()}]")
    observer = MinMaxObserver(axis=axis, name=name or "<unnamed>")
    observer._min, observer._max = stats[:, 0].copy(), stats[:, 1].copy()
    observer.num_values, observer.num_batches = values, 1
    return observer


def _exponent(op: Operation, name: str, key: str) -> int | None:
    width = _array(op, name, key, np.float64)
    w = float(width.reshape(-1)[0]) if width is not None and width.size == 1 else math.nan
    if w == 0.0:
        return None
    mantissa, e = math.frexp(w) if math.isfinite(w) else (0.0, 0)
    if mantissa != 0.5:
        raise _error(op, name, f"{key} must hold one power of two (the bin width), got {width}")
    return e - 1


def _histogram_observer(op: Operation, name: str, lo: float, hi: float, values: int,
                        counts: np.ndarray) -> HistogramObserver:
    bins = _attr(op, "quantir.bins", int, 2048)
    zeros = _attr(op, "quantir.zero_count", int, 0)
    if bins < 16 or counts.ndim != 1 or not 1 <= counts.size <= bins or (counts < 0).any():
        raise _error(op, name, f"quantir.histogram must be 1 to quantir.bins = {bins} (>= 16) non-negative "
                               f"counts, got shape {list(counts.shape)}")
    if int(counts.sum()) != values or not 0 <= zeros <= values:
        raise _error(op, name, f"quantir.histogram counts {int(counts.sum())} values and quantir.zero_count "
                               f"{zeros}, but quantir.values says {values}")
    obs = HistogramObserver(bins, name=name or "<unnamed>")
    obs._min, obs._max, obs.zero_count, obs.num_values, obs.num_batches = lo, hi, zeros, values, 1
    obs._signed = _grown(op, name, "quantir.histogram", counts, _exponent(op, name, "quantir.histogram_width"),
                         -_attr(op, "quantir.histogram_zero", int, 0), bins, min(lo, 0.0), max(hi, 0.0))
    abs_counts = _array(op, name, "quantir.abs_histogram", np.int64)
    if abs_counts is None:
        if lo < 0:
            raise _error(op, name, f"min {lo} is negative but the op has no quantir.abs_histogram")
        obs._abs_shared = True
    else:
        if abs_counts.ndim != 1 or abs_counts.size > bins or int(abs_counts.sum()) != values:
            raise _error(op, name, f"quantir.abs_histogram must be at most {bins} counts adding up to {values}")
        obs._abs = _grown(op, name, "quantir.abs_histogram", abs_counts,
                          _exponent(op, name, "quantir.abs_histogram_width"), 0, bins, 0.0, max(-lo, hi))
        obs._abs_shared = False
    return obs


def _grown(op: Operation, name: str, key: str, counts: np.ndarray, exponent: int | None, start: int, bins: int,
           lo_v: float, hi_v: float) -> _GrowingHistogram:
    """The observer's growing histogram behind a stored snapshot; checks that the grid covers the range."""
    h = _GrowingHistogram(bins)
    if exponent is None:   # every value was 0
        if lo_v != 0.0 or hi_v != 0.0 or counts.size != 1:
            raise _error(op, name, f"{key} has width 0 (all values zero) but the range is [{lo_v}, {hi_v}]")
        h.pending_zeros = int(counts[0])
        return h
    first, last = math.floor(math.ldexp(lo_v, -exponent)), math.floor(math.ldexp(hi_v, -exponent))
    if first != start or last - start + 1 != counts.size:
        raise _error(op, name, f"{key}: {counts.size} bins of width 2**{exponent} from bin {start} do not span "
                               f"the range [{lo_v}, {hi_v}] (expected bins {first} to {last})")
    h.exponent, h.lo = exponent, start
    h.counts[: counts.size] = counts
    return h


# -- merging ------------------------------------------------------------------------------------

def merge(a: Module, b: Module) -> Module:
    """The statistics of two runs over the same float function, as one module (see the module doc).

    ``a`` and ``b`` are left as they are; the result has ``a``'s function with merged stats ops."""
    from ..ir.builder import clone_module
    out = clone_module(a)
    ops_a = [op for op in out.main.ops if op.opdef is quant.STATS]
    ops_b = [op for op in b.main.ops if op.opdef is quant.STATS]
    names_a = [_attr(op, "quantir.name", str, "") for op in ops_a]
    names_b = [_attr(op, "quantir.name", str, "") for op in ops_b]
    if names_a != names_b:
        extra = sorted(set(names_a) ^ set(names_b))[:5]
        raise CalibrationError(f"cannot merge statistics of different functions: {len(ops_a)} and {len(ops_b)} "
                               f"quant.stats ops" + (f"; tensors in one only: {extra}" if extra else
                                                     "; tensor order differs"))
    for x, y, name in zip(ops_a, ops_b, names_a):
        if x.operands[0].type != y.operands[0].type:
            raise _error(y, name, f"has type {y.operands[0].type}, the other run {x.operands[0].type}")
        x.attributes.update(_merged(record_of(x, name), record_of(y, name), x, name))
    return out


def _merged(ra: StatsRecord, rb: StatsRecord, op: Operation, name: str) -> dict:
    a, b = ra.observer, rb.observer
    if type(a) is not type(b) or getattr(a, "axis", None) != getattr(b, "axis", None):
        raise _error(op, name, f"was observed by a {type(a).__name__} in one run and a {type(b).__name__} in the "
                               f"other (one calibration method needs histograms): calibrate both with one method")
    if isinstance(a, MinMaxObserver):
        m = MinMaxObserver(axis=a.axis, name=name)
        m._min, m._max = np.minimum(a._min, b._min), np.maximum(a._max, b._max)
    else:
        m = HistogramObserver(min(a.bins, b.bins), name=name)
        m._min, m._max, m.zero_count = min(a._min, b._min), max(a._max, b._max), a.zero_count + b.zero_count
        lo_v, hi_v = min(m._min, 0.0), max(m._max, 0.0)
        m._signed = _merge_grids(a._signed, b._signed, m.bins, lo_v, hi_v)
        if a._abs_shared and b._abs_shared:
            m._abs_shared = True
        else:
            m._abs = _merge_grids(a._signed if a._abs_shared else a._abs, b._signed if b._abs_shared else b._abs,
                                  m.bins, 0.0, max(-lo_v, hi_v))
            m._abs_shared = False
    m.num_values, m.num_batches = a.num_values + b.num_values, 1
    stats = Statistics({op.operands[0]: [m]}, ra.samples + rb.samples)
    if (ra.sample_sum is None) != (rb.sample_sum is None):
        raise _error(op, name, "has bias-correction sums in one run only: calibrate both with one bias_correction")
    if ra.sample_sum is not None:
        if ra.sample_sum.shape != rb.sample_sum.shape:
            raise _error(op, name, f"has samples of shape {ra.sample_sum.shape} in one run and "
                                   f"{rb.sample_sum.shape} in the other: their means per position cannot be joined")
        mean = SizedSampleMean(name)
        mean._run._sum, mean._run.num_samples = ra.sample_sum + rb.sample_sum, ra.sample_count + rb.sample_count
        stats.means[op.operands[0]] = mean
    attrs = _stats_attributes(op.operands[0], stats)
    attrs["quantir.name"] = StringAttr(name)
    for key in [k for k in op.attributes if k.startswith("quantir.") and k not in attrs and k != "quantir.label"]:
        del op.attributes[key]   # an abs histogram one run had and the merged one does not
    return attrs


def _merge_grids(a: _GrowingHistogram, b: _GrowingHistogram, bins: int, lo_v: float, hi_v: float
                 ) -> _GrowingHistogram:
    """``a`` and ``b`` added on the finest power-of-two grid at least as coarse as both whose window of
    ``bins`` holds ``[lo_v, hi_v]``: bin ``i`` of width ``2**e`` lies inside bin ``i >> k`` of width
    ``2**(e + k)``, so re-binning moves no value across an edge."""
    out = _GrowingHistogram(bins)
    exps = [h.exponent for h in (a, b) if h.exponent is not None]
    if not exps:
        out.pending_zeros = a.pending_zeros + b.pending_zeros
        return out
    e = max(exps)
    while not out._fits(lo_v, hi_v, e):
        e += 1
    out.exponent, out.lo = e, math.floor(math.ldexp(lo_v, -e))
    for h in (a, b):
        if h.exponent is None:
            out.counts[-out.lo] += h.pending_zeros
            continue
        occupied = np.flatnonzero(h.counts)
        np.add.at(out.counts, ((h.lo + occupied) >> (e - h.exponent)) - out.lo, h.counts[occupied])
    return out
