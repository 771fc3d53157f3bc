"""Calibration on the fp32 graph (the TVM reviewers' standard).

The float function runs over the calibration batches once, through ONNX Runtime with every
observed tensor exposed as an output (the numpy interpreter is the reference and the
fallback). Each observed tensor feeds streaming observers, so memory does not grow with the
number of samples. A ``CalibrationCallback`` then turns a region's observations into the
range of its output; callbacks see a ``CalibrationInfo`` with the region's float inputs and
outputs on real samples, and their quantized counterparts (what the integer graph computes
with the parameters decided so far), as the RFC describes, and never ask the user for
initial guesses.

The inputs of every conv and fully-connected layer also get a ``SampleMeanObserver`` when
bias correction is on (``Config.bias_correction``): the solver needs each tap's expected input.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Protocol, Sequence

import numpy as np

from ..errors import CalibrationError, QuantirError
from ..ir import Function, Value
from ..ir.names import input_names
from ..types import FloatType, TensorType
from .config import Config
from .data import DatasetManager, InputSpec
from .methods import METHODS, Method, MinMaxOptions, Range, compute_range
from .observers import HistogramObserver, InputObserver, MinMaxObserver, Observer
from .params import ActParams, WeightParams
from .regions import Annotation, Region, constant_array, conv_window, weighted_input  # noqa: F401 (named here too)
from .sample_means import SizedSampleMean


class RegionTrace(Protocol):
    """The integer graph evaluated region by region (``trace.IntegerTrace``, which imports this module)."""

    def inputs(self, region: Region) -> list: ...

    def output(self, region: Region, candidate: tuple[float, float]) -> list: ...


def ensure_names(fn: Function) -> None:
    """Give every value a unique ``name_hint`` so executors can expose it by name."""
    seen: set[str] = set()
    values = list(fn.arguments) + [r for op in fn.ops for r in op.results]
    for i, v in enumerate(values):
        name = v.name_hint
        if not name or name in seen:
            base = name or "t"
            k = i
            while f"{base}__{k}" in seen:
                k += 1
            v.name_hint = f"{base}__{k}"
        seen.add(v.name_hint)


def input_specs(fn: Function) -> list[InputSpec]:
    return [InputSpec(name, arg.type) for name, arg in zip(input_names(fn), fn.arguments)]


def interiors(annotation: Annotation) -> list:
    """The ``Interior`` values of the annotated regions (an LSTM's cell state): observed through
    their carriers, which no engine exposes."""
    return [i for r in annotation.regions if r.pattern.op.interior is not None for i in r.pattern.op.interior(r)]


def observed_values(annotation: Annotation) -> list[Value]:
    """Every float tensor whose range decides a quantization parameter."""
    out: dict[int, Value] = {}
    for region in annotation.regions:
        outputs = [region.output] if region.pattern.op.output_quantized else []
        for v in [*region.inputs, *outputs]:
            if constant_array(v) is None and isinstance(v.type, TensorType) \
                    and isinstance(v.type.element_type, FloatType):
                out.setdefault(id(v), v)
    return list(out.values())


@dataclass
class Statistics:
    """Observers per observed value, plus the samples kept for ``CalibrationInfo``.

    ``means``: per conv/FC input, its mean over all samples (bias correction ``"weights"``);
    ``kept_means``: the same over the kept samples only (``"empirical"``, which compares them
    with the integer graph's values on those samples). ``inputs``: per model input, what its
    samples look like (``health.InputObserver``: zeros, constant, copies of one sample).
    """

    observers: dict[Value, list[Observer]]
    num_samples: int
    kept: list[dict[str, np.ndarray]] = field(default_factory=list)   # a few feeds for callbacks
    make_engine: "EngineFactory | None" = None
    means: dict[Value, SizedSampleMean] = field(default_factory=dict)
    kept_means: dict[Value, SizedSampleMean] = field(default_factory=dict)
    inputs: dict[str, InputObserver] = field(default_factory=dict)   # per model input (health checks)
    # samples set aside and never observed (``calibrate(hold_out=...)``): what mixed precision
    # measures its budget on, so that the budget is not met only on the data the ranges came from
    held_out: list[dict[str, np.ndarray]] = field(default_factory=list)
    # (value, method options) -> range: observers are final, and mixed precision solves many times
    _ranges: dict = field(default_factory=dict, repr=False)
    # what the solver derives from the kept samples and the float graph alone (an LSTM's Gram
    # matrices and rounded gate weights), keyed by region root and pattern: computed once per
    # quantization, not once per solve
    derived: dict = field(default_factory=dict, repr=False)

    def range(self, value: Value, config: Config) -> Range:
        obs = self.observers[value]
        spec = METHODS[Method(config.method)]
        observer = next((o for o in obs if isinstance(o, spec.observer)), obs[0])
        options = config.method_options if isinstance(observer, spec.observer) else MinMaxOptions()
        key = (id(value), id(observer), repr(options))
        if key not in self._ranges:
            self._ranges[key] = compute_range(options, observer)
        return self._ranges[key]


def _make_observers(value: Value, config: Config) -> list[Observer]:
    """The observers of one tensor: what the configured method needs, nothing more.

    A ``HistogramObserver`` keeps the exact min and max too (``range()`` equals a
    ``MinMaxObserver``'s), so histogram methods get no extra ``MinMaxObserver``: a ``minmax``
    range asked of their statistics (``Statistics.range`` falls back to ``obs[0]``) is the same.
    """
    if METHODS[Method(config.method)].observer is HistogramObserver:
        return [HistogramObserver(name=value.name_hint)]
    return [MinMaxObserver(name=value.name_hint)]


class Engine(Protocol):
    """Runs the float function on a batch of feeds; returns outputs and the exposed values by name."""

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


# (function, names of values to expose, engine kind) -> Engine. Injected by the caller
# (quantir.api) because executors live in the runtime layer, above this one.
EngineFactory = Callable[[Function, Sequence[str], str], Engine]


HOLD_OUT_STRIDE = 5         # at most one sample in this many is set aside
HOLD_OUT_MIN_SAMPLES = 64   # fewer samples than this: all of them calibrate, none is held out


def held_out_rows(first: int, n: int, stride: int, start: int) -> np.ndarray:
    """Which of the samples ``first .. first + n - 1`` (their dataset indices) are held out: every
    ``stride``-th from ``start`` on, so that they spread over the dataset (batches by length: all
    lengths) and leave the first samples, which calibration keeps for its callbacks, whole."""
    index = np.arange(first, first + n)
    return (index >= start) & ((index - start) % stride == stride - 1)


def calibrate(fn: Function, annotation: Annotation, dataset: DatasetManager, config: Config,
              make_engine: EngineFactory, keep_samples: int = 32, hold_out: int = 0) -> Statistics:
    """Run the float function over the dataset and observe every tensor the regions need.

    ``hold_out``: set up to that many samples aside, unobserved (``Statistics.held_out``): after the
    ``keep_samples`` first (kept whole), one in every ``(len(dataset) - keep_samples) // hold_out``
    (at least ``HOLD_OUT_STRIDE``), or one in ``HOLD_OUT_STRIDE`` up to the count when the dataset's
    size is unknown; none when it is known to hold fewer than ``HOLD_OUT_MIN_SAMPLES``."""
    ensure_names(fn)
    values = observed_values(annotation)
    observers = {v: _make_observers(v, config) for v in values}
    inside = [(i, _make_observers(i.carrier, config)) for i in interiors(annotation)]
    corrected = [] if config.bias_correction == "off" else \
        list({id(x): x for r in annotation.regions if (x := weighted_input(r)) is not None
              and constant_array(x) is None}.values())
    readers = {id(x): [r for r in annotation.regions if weighted_input(r) is x] for x in corrected}
    # samples of different sizes (dynamic dims) have no common positions: SizedSampleMean folds
    # each size into the readers' expected taps (with one size it is a plain SampleMeanObserver)
    means = {v: SizedSampleMean(v.name_hint, readers[id(v)]) for v in corrected}
    kept_means = {v: SizedSampleMean(v.name_hint, readers[id(v)]) for v in corrected} \
        if config.bias_correction == "empirical" else {}
    engine = make_engine(fn, list({v.name_hint: None for v in [*values, *corrected]}), config.engine)
    specs = input_specs(fn)
    inputs = {s.name: InputObserver(s.name) for s in specs}
    kept: list[dict[str, np.ndarray]] = []
    kept_n = 0
    seen = 0
    total = dataset.num_samples if config.max_samples is None or dataset.num_samples is None \
        else min(dataset.num_samples, config.max_samples)
    if total is not None and total < HOLD_OUT_MIN_SAMPLES:
        hold_out = 0
    stride = HOLD_OUT_STRIDE if total is None or not hold_out else \
        max(HOLD_OUT_STRIDE, (total - keep_samples) // hold_out)
    held: list[dict[str, np.ndarray]] = []
    held_n = index = 0
    batches: Iterator = dataset.batches(specs, config.batch_size, config.max_samples)
    progress = _progress(config, dataset)
    for batch in batches:
        first, n_all = index, next(iter(batch.values())).shape[0]
        index += n_all
        rows = held_out_rows(first, n_all, stride, keep_samples)
        rows &= np.cumsum(rows) <= hold_out - held_n   # none once hold_out are set aside (or hold_out is 0)
        for name, array in batch.items():   # the health checks look at every sample the user gave
            inputs[name].update(array)
        if rows.any():
            held.append({k: v[rows] for k, v in batch.items()})
            held_n += int(rows.sum())
            if progress is not None:
                progress.update(int(rows.sum()))
            if rows.all():
                continue
            batch = {k: v[~rows] for k, v in batch.items()}
        results = _run_batch(engine, batch, first, n_all)
        for v, obs in observers.items():
            array = results[v.name_hint]
            for o in obs:
                o.update(array)
        for interior, obs in inside:
            array = interior.observe(lambda v: results[v.name_hint] if v.name_hint in results else batch[v.name_hint])
            for o in obs:
                o.update(array)
        n = next(iter(batch.values())).shape[0]
        keep = kept_n < keep_samples
        for v, m in means.items():
            m.update(results[v.name_hint])
            if keep and v in kept_means:
                kept_means[v].update(results[v.name_hint])
        seen += n
        if keep:
            kept.append(batch)
            kept_n += n
        if progress is not None:
            progress.update(n)
    if progress is not None:
        progress.close()
    if any(m.mixed for m in kept_means.values()):   # "empirical" compares positions: one size only
        kept_means = {}                              # the solver then corrects from the weights
    observers.update({i.carrier: obs for i, obs in inside})
    return Statistics(observers, seen, kept, make_engine, means, kept_means, inputs, held_out=held)


def _run_batch(engine: Engine, batch: dict[str, np.ndarray], first: int, n: int) -> dict[str, np.ndarray]:
    """``engine.run(batch)``; a failure names the samples (their dataset indices ``first`` ..
    ``first + n - 1``, held-out ones included) and their shapes (a size the model cannot take:
    inputs that disagree on a dim they share, a width the network's strides do not divide)."""
    try:
        return engine.run(batch)
    except CalibrationError:
        raise
    except QuantirError as e:
        which = f"sample {first}" if n <= 1 else f"samples {first}-{first + n - 1}"
        shapes = ", ".join(f"'{k}' {tuple(v.shape)}" for k, v in batch.items())
        raise CalibrationError(f"calibration {which} ({shapes}): the float model cannot run on them: {e}") from None


def _progress(config: Config, dataset: DatasetManager):
    if not config.progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    total = dataset.num_samples if config.max_samples is None else \
        min(config.max_samples, dataset.num_samples or config.max_samples)
    return tqdm(total=total, desc="calibrating", unit="sample", leave=False)


# -- callbacks (RFC: CalibrationCallback / CalibrationInfo) ------------------------------------

@dataclass
class CalibrationInfo:
    """What a callback may look at for one region: its observers and real samples.

    Float side: ``float_inputs()``/``float_output()`` run the fp32 function on the kept
    calibration samples (``Statistics.kept``, the first ``keep_samples`` of the dataset).

    Quantized side: ``quantized_inputs()``/``quantized_output()`` are what the *integer*
    graph computes on the same samples, given the parameters decided so far (``params``):
    the solver visits regions in program order, so every region upstream of this one has its
    output parameters, weight scales and corrected bias, and the graph up to this region is
    lowered with them (``lower.Lowerer``, the same code as the final lowering) and run by the
    reference interpreter with LiteRT's integer kernels. Results are **dequantized float32
    arrays** ``scale * (q - zero_point)``, one row per sample; ``input_params()`` gives the
    ``(scale, zero_point)`` to recover the stored integers exactly
    (``q = round(x / scale) + zero_point``). The integer graph is evaluated incrementally and
    only when a callback asks, so callbacks that never ask cost nothing.

    A region's weights (scales, corrected bias) are decided before its callback runs, so
    ``quantized_output()`` is the op the final module will contain, but for its output
    parameters. The values are bit-identical to the final module's whenever the parameters
    they depend on do not change later, which holds in particular when the callbacks keep
    the configured method's ranges. What can change them: the inputs and outputs of pooling,
    reshape or concatenation share one set of parameters (a same-scale class, ``solver``);
    members not decided yet count with their observed range, so a later callback that
    returns another range for one of them changes the parameters of tensors that earlier
    callbacks saw. The trace only moves forward: ask for a region's values from its own
    callback.

    Example: a callback that picks, among a few clipped ranges, the one whose *integer*
    output is closest to float (the RFC's use case for quantized outputs)::

        >>> import numpy as np, quantir as qr
        >>> from quantir.text import parse_module
        >>> model = parse_module('''
        ... func.func @main(%x: tensor<?x2x4x4xf32> {quantir.name = "x"}) -> (tensor<?x2x4x4xf32> {quantir.name = "y"}) {
        ...   %w = arith.constant dense<[[[[0.5]], [[-0.25]]], [[[0.125]], [[1.0]]]]> : tensor<2x2x1x1xf32>
        ...   %b = arith.constant dense<[0.1, -0.2]> : tensor<2xf32>
        ...   %0 = "nn.conv"(%x, %w, %b) : (tensor<?x2x4x4xf32>, tensor<2x2x1x1xf32>, tensor<2xf32>) -> tensor<?x2x4x4xf32>
        ...   %1 = "nn.relu"(%0) : (tensor<?x2x4x4xf32>) -> tensor<?x2x4x4xf32>
        ...   return %1 : tensor<?x2x4x4xf32>
        ... }''')
        >>> def best_of_clipped(info):
        ...     ref, full = info.float_output(), info.output_range()
        ...     candidates = [Range(full.rmin * f, full.rmax * f) for f in (1.0, 0.9, 0.8)]
        ...     error = [np.mean((info.quantized_output(r) - ref) ** 2) for r in candidates]
        ...     return candidates[int(np.argmin(error))]
        >>> x = np.random.default_rng(0).normal(size=(64, 2, 4, 4)).astype(np.float32)
        >>> result = qr.quantize(model, {"x": x}, qr.Config(callback=best_of_clipped, progress=False))
        >>> result.spec_report().ok, result.cast_counts()
        (True, (1, 1))
    """

    region: Region
    statistics: Statistics
    config: Config
    _fn: Function
    params: Mapping[Value, ActParams | WeightParams] = field(default_factory=dict)   # decided so far
    _trace: RegionTrace | None = None

    def _run(self, values: Sequence[Value]) -> list[np.ndarray]:
        engine = self.statistics.make_engine(self._fn, [v.name_hint for v in values], "interpreter")
        outs = [engine.run(batch) for batch in self.statistics.kept]
        return [self._joined([o[v.name_hint] for o in outs]) for v in values]

    def _joined(self, parts: list[np.ndarray]) -> np.ndarray:
        """The kept batches' arrays as one; samples of different sizes cannot be stacked."""
        sizes = sorted({a.shape[1:] for a in parts if np.ndim(a)})
        if len(sizes) > 1:
            raise CalibrationError(
                f"region '{self.region.label}': the kept calibration samples differ in size here "
                f"({', '.join(str(s) for s in sizes)}), so their values are not one array; a callback that "
                f"needs them calibrates with samples of one size (Config.callback)")
        return np.concatenate(parts)

    def float_inputs(self) -> list[np.ndarray]:
        return self._run(self.region.inputs)

    def float_output(self) -> np.ndarray:
        return self._run([self.region.output])[0]

    def output_range(self) -> Range:
        return self.statistics.range(self.region.output, self.config)

    # -- the integer graph (RFC: quantized layer inputs and outputs) --------------------------
    def _integer(self) -> RegionTrace:
        if self._trace is None or not self.statistics.kept:
            raise CalibrationError(
                f"region '{self.region.label}': quantized values need the kept calibration samples and the "
                "solver's integer trace; call the callback through quantir.quantize.solver.solve")
        return self._trace

    def input_params(self) -> list[ActParams]:
        """The parameters of each input as the integer graph holds it (decided so far)."""
        return [self.params[v] for v in self.region.inputs]

    def quantized_inputs(self) -> list[np.ndarray]:
        """Each input as the integer graph computes it on the kept samples, dequantized (float32).

        A constant input comes back quantized and dequantized, without a sample axis. Each
        input has its own parameters (``input_params()``); ops that requantize their inputs
        (CONCATENATION to its output's) do so inside the op, as in the integer module.
        """
        return [self._joined(b) if isinstance(b, list) else b
                for b in self._integer().inputs(self.region)]

    def quantized_output(self, candidate: Range | None = None) -> np.ndarray:
        """The region's integer op on its quantized inputs, dequantized (float32).

        The output parameters come from ``candidate`` (default: ``output_range()``, the
        configured method's range), as the solver would derive them from a returned range
        (joined with the ranges of the output's same-scale class, if any); ops with a fixed
        output (softmax, logistic, tanh) ignore it.
        """
        rng = self.output_range() if candidate is None else candidate
        return self._joined(self._integer().output(self.region, (float(rng.rmin), float(rng.rmax))))


class CalibrationCallback(Protocol):
    def __call__(self, info: CalibrationInfo) -> Range: ...


def default_callback(info: CalibrationInfo) -> Range:
    """The configured method (minmax, percentile, entropy, mse) on the region's output."""
    return info.output_range()
