"""The integer graph evaluated region by region while the solver is still deciding.

``IntegerTrace`` lowers one step at a time (one region, with ``lower.Lowerer``, exactly as
the final lowering does, or one float op) as a small function of its live inputs and runs it
in the reference interpreter on the kept calibration samples, so ``CalibrationInfo`` can show
callbacks what the integer graph computes with the parameters decided so far.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from ..errors import QuantirError
from ..ir import Function, Operation, Value
from ..ir.dialects import arith, func
from ..numerics import asymmetric_qparams, dequantize, quantize_tflite
from ..types import Type
from .calibrate import EngineFactory, input_specs
from .config import Config
from .lower import Lowerer
from .params import ActParams, Params, act_type
from .regions import Annotation, Region, constant_array


class IntegerTrace:
    """The integer graph evaluated step by step on the kept calibration samples.

    A step is one region (lowered at its root, exactly as ``lower`` does) or one float op;
    each runs as a small function of its live inputs in the reference interpreter (through
    ``make_engine(..., config.integer_engine)``: the runtime layer sits above this one; with
    ``target="onnxruntime"`` the segment's QDQ export runs in ONNX Runtime instead). Values are
    stored as the lowering would hold them — a region output as int8 with the parameters
    decided when it ran, a float op's result as float — per kept batch, and dropped after
    their last use. ``params`` is read when a step runs, so each step sees the solver's
    decisions up to that point. Nothing runs until a caller asks for a region's values.
    """

    def __init__(self, fn: Function, annotation: Annotation, params: Params, config: Config,
                 samples: Sequence[Mapping[str, np.ndarray]], make_engine: EngineFactory):
        self.src, self.annotation, self.params, self.config = fn, annotation, params, config
        self.make_engine = make_engine
        self.num_batches = len(samples)
        self.env: dict[Value, tuple[Type, list[np.ndarray]]] = {}
        for spec_, arg in zip(input_specs(fn), fn.arguments):
            self.env[arg] = (arg.type, [np.asarray(s[spec_.name]) for s in samples])
        # steps: (region or None, op); a region runs at its root, its other ops are skipped
        self.steps: list[tuple[Region | None, Operation]] = []
        self.step_of: dict[Operation, int] = {}   # region root -> step
        for op in fn.ops:
            if op.opdef in (arith.CONSTANT, func.RETURN):
                continue
            region = annotation.region_of(op)
            if region is not None and op is not region.root:
                continue
            if region is not None:
                self.step_of[region.root] = len(self.steps)
            self.steps.append((region, op))
        self.last_use: dict[Value, int] = {}
        for i, step in enumerate(self.steps):
            for v in self._uses(step):
                self.last_use[v] = i
        for v in fn.outputs:
            self.last_use[v] = len(self.steps)
        self.pos = 0

    @staticmethod
    def _uses(step: tuple[Region | None, Operation]) -> list[Value]:
        region, op = step
        values = region.inputs if region is not None else op.operands
        return [v for v in values if constant_array(v) is None]

    # -- public -------------------------------------------------------------------------------
    def inputs(self, region: Region) -> list[list[np.ndarray] | np.ndarray]:
        """Each input of ``region``, quantized with its own parameters, dequantized: a list of
        float32 arrays per kept batch, or one array for a constant input."""
        self._advance(self.step_of[region.root])
        out: list[list[np.ndarray] | np.ndarray] = []
        for v in region.inputs:
            p = self.params[v]
            array = constant_array(v)
            if array is not None:
                out.append(dequantize(quantize_tflite(array, np.float32(p.scale), p.zero_point), p.scale, p.zero_point))
                continue
            t, batches = self.env[v]
            if t != act_type(p, v.type):
                ((t, batches),) = self._run([v], lambda lw: [lw.quantized(v, p)], self.params)
            out.append([dequantize(b, p.scale, p.zero_point) for b in batches])
        return out

    def output(self, region: Region, candidate: tuple[float, float]) -> list[np.ndarray]:
        """``region``'s integer op on its quantized inputs, with output parameters from the
        ``candidate`` range; dequantized float32, per kept batch."""
        self._advance(self.step_of[region.root])
        if hasattr(self.params, "with_candidate"):   # the solver's view: joins same-scale classes, fixed outputs
            params = self.params.with_candidate(region.output, candidate, region)
        else:                                         # a plain mapping: asymmetric parameters of the candidate
            params = {**self.params, region.output: _params_of(candidate)}
        live = self._uses((region, region.root))
        ((_, batches),) = self._run(live, lambda lw: [lw.lower_region(region)], params)
        p = params[region.output]
        return [dequantize(b, p.scale, p.zero_point) for b in batches]

    # -- stepping -----------------------------------------------------------------------------
    def _advance(self, target: int) -> None:
        """Run every step before ``target`` (steps already run are not repeated)."""
        if target < self.pos:
            raise QuantirError("the integer trace only moves forward: ask for regions in program order")
        while self.pos < target:
            region, op = self.steps[self.pos]
            live = self._uses((region, op))
            if region is not None:
                results = [region.output]
                (value,) = self._run(live, lambda lw: [lw.lower_region(region)], self.params)
                self.env[region.output] = value
            else:
                results = list(op.results)

                def emit(lw: Lowerer, op=op) -> list[Value]:
                    lw.copy_float(op)
                    return [lw.floats[r] for r in op.results]
                for r, value in zip(results, self._run(live, emit, self.params)):
                    self.env[r] = value
            for v in [*live, *results]:
                if self.last_use.get(v, -1) <= self.pos:
                    self.env.pop(v, None)
            self.pos += 1

    def _run(self, live: Sequence[Value], emit: Callable[[Lowerer], list[Value]],
             params: Params) -> list[tuple[Type, list[np.ndarray]]]:
        """Lower a segment (``live`` as arguments, ``emit`` builds the body) and run it per batch."""
        lw = Lowerer(self.src, self.annotation, params, self.config,
                     arguments=[(v, self.env[v][0]) for v in live])
        outs = emit(lw)
        segment = lw.finish(outs)
        engine = self.make_engine(segment, [], self.config.integer_engine)   # the target's arithmetic
        results = [engine.run({f"in{i}": self.env[v][1][b] for i, v in enumerate(live)})
                   for b in range(self.num_batches)]
        return [(o.type, [r[f"out{k}"] for r in results]) for k, o in enumerate(outs)]


def _params_of(rng: tuple[float, float]) -> ActParams:
    scale, zp = asymmetric_qparams(*rng)
    return ActParams(float(scale), int(zp), False, *rng)
