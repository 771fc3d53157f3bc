"""Calibration on the fp32 graph (the TVM reviewers' standard).

The float function runs over the calibration batches once, through ONNX Runtime with every
observed tensor exposed as an output (the numpy interpreter is the reference and the
fallback). Each observed tensor feeds streaming observers, so memory does not grow with the
number of samples. A ``CalibrationCallback`` then turns a region's observations into the
range of its output; callbacks see a ``CalibrationInfo`` with the region's float inputs and
outputs on real samples, as the RFC describes, and never ask the user for initial guesses.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol, Sequence

import numpy as np

from ..ir import Function, Value
from ..ir.dialects import arith
from ..types import FloatType, TensorType
from .config import Config
from .data import DatasetManager, InputSpec
from .methods import METHODS, Method, MinMaxOptions, Range, compute_range
from .observers import HistogramObserver, MinMaxObserver, Observer
from .patterns import Annotation, Region


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
    from ..runtime.interpreter import input_names
    return [InputSpec(name, arg.type) for name, arg in zip(input_names(fn), fn.arguments)]


def constant_array(v: Value) -> np.ndarray | None:
    """The array of a value produced by ``arith.constant``, else None."""
    op = getattr(v, "op", None)
    if op is not None and op.opdef is arith.CONSTANT:
        return getattr(op.attributes.get("value"), "array", None)
    return None


def observed_values(annotation: Annotation) -> list[Value]:
    """Every float tensor whose range decides a quantization parameter."""
    out: dict[int, Value] = {}
    for region in annotation.regions:
        for v in [*region.inputs, region.output]:
            if constant_array(v) is None and isinstance(v.type, TensorType) \
                    and isinstance(v.type.element_type, FloatType):
                out.setdefault(id(v), v)
    return list(out.values())


@dataclass
class Statistics:
    """Observers per observed value, plus the samples kept for ``CalibrationInfo``."""

    observers: dict[Value, list[Observer]]
    num_samples: int
    kept: list[dict[str, np.ndarray]] = field(default_factory=list)   # a few feeds for callbacks
    make_engine: "EngineFactory | None" = None

    def range(self, value: Value, config: Config) -> Range:
        obs = self.observers[value]
        spec = METHODS[Method(config.method)]
        observer = next((o for o in obs if isinstance(o, spec.observer)), obs[0])
        options = config.method_options if isinstance(observer, spec.observer) else MinMaxOptions()
        return compute_range(options, observer)


def _make_observers(value: Value, config: Config) -> list[Observer]:
    observers: list[Observer] = [MinMaxObserver(name=value.name_hint)]
    if METHODS[Method(config.method)].observer is HistogramObserver:
        observers.append(HistogramObserver(name=value.name_hint))
    return observers


class Engine(Protocol):
    """Runs the float function on a batch of feeds; returns outputs and the exposed values by name."""

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


# (function, names of values to expose, engine kind) -> Engine. Injected by the caller
# (quantir.api) because executors live in the runtime layer, above this one.
EngineFactory = Callable[[Function, Sequence[str], str], Engine]


def calibrate(fn: Function, annotation: Annotation, dataset: DatasetManager, config: Config,
              make_engine: EngineFactory, keep_samples: int = 32) -> Statistics:
    """Run the float function over the dataset and observe every tensor the regions need."""
    ensure_names(fn)
    values = observed_values(annotation)
    observers = {v: _make_observers(v, config) for v in values}
    engine = make_engine(fn, [v.name_hint for v in values], config.engine)
    specs = input_specs(fn)
    kept: list[dict[str, np.ndarray]] = []
    seen = 0
    batches: Iterator = dataset.batches(specs, config.batch_size, config.max_samples)
    progress = _progress(config, dataset)
    for batch in batches:
        results = engine.run(batch)
        for v, obs in observers.items():
            array = results[v.name_hint]
            for o in obs:
                o.update(array)
        n = next(iter(batch.values())).shape[0]
        seen += n
        if sum(next(iter(k.values())).shape[0] for k in kept) < keep_samples:
            kept.append(batch)
        if progress is not None:
            progress.update(n)
    if progress is not None:
        progress.close()
    return Statistics(observers, seen, kept, make_engine)


def _progress(config: Config, dataset: DatasetManager):
    if not config.progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    total = dataset.num_samples if config.max_samples is None else min(config.max_samples, dataset.num_samples or config.max_samples)
    return tqdm(total=total, desc="calibrating", unit="sample", leave=False)


# -- callbacks (RFC: CalibrationCallback / CalibrationInfo) ------------------------------------

@dataclass
class CalibrationInfo:
    """What a callback may look at for one region: its observers and real samples.

    ``float_inputs()``/``float_output()`` run the fp32 function on the kept calibration
    samples. (The RFC's quantized counterparts are not implemented yet.)
    """

    region: Region
    statistics: Statistics
    config: Config
    _fn: Function

    def _run(self, values: Sequence[Value]) -> list[np.ndarray]:
        engine = self.statistics.make_engine(self._fn, [v.name_hint for v in values], "interpreter")
        outs = [engine.run(batch) for batch in self.statistics.kept]
        return [np.concatenate([o[v.name_hint] for o in outs]) for v in values]

    def float_inputs(self) -> list[np.ndarray]:
        return self._run(self.region.inputs)

    def float_output(self) -> np.ndarray:
        return self._run([self.region.output])[0]

    def output_range(self) -> Range:
        return self.statistics.range(self.region.output, self.config)


class CalibrationCallback(Protocol):
    def __call__(self, info: CalibrationInfo) -> Range: ...


def default_callback(info: CalibrationInfo) -> Range:
    """The configured method (minmax, percentile, entropy, mse) on the region's output."""
    return info.output_range()
