"""Final quantization parameters of every tensor, from ranges, the spec and the weights.

- A tensor's range comes from its observers through the calibration callback (a constant
  operand's range from its values).
- Same-scale ops (pooling, reshape, transpose, pad, resize, concat: ``spec.SPEC`` rows whose
  output is ``SAME_AS``) put their inputs and output in one class (union-find); a class's
  range is the union of its members' ranges, so no requantize is needed inside it. Ops whose
  kernel reads all inputs in one scale (the comparisons: ``SolverRules.shared_inputs``) put
  their inputs in one class, constants included.
- An op whose result is not quantized (a comparison's bool: ``QuantOp.output_quantized``)
  gives its result no parameters.
- Fixed-output ops (softmax, logistic, tanh) win: their class gets the fixed parameters.
- Activation parameters are LiteRT's: asymmetric int8 per tensor, real 0 exactly
  representable (``numerics.asymmetric_qparams``, TFLite scheme). Under
  ``Config(activations="int16")`` (LiteRT's 16x8 mode) the outputs of ops with a 16x8 kernel
  (``QuantOp.int16``) and the values no op produces (inputs, float results) are int16 symmetric,
  ``amax / 32767`` with zero point 0, from the same range; fixed outputs take the op's int16
  parameters (``QuantOp.int16_fixed``). An op without a 16x8 kernel keeps int8 parameters for its
  output and reads its inputs at int8 (the lowering requantizes them: ``params.at_width``).
- Weights of a conv/FC (``WeightParams``, keyed by the weight constant's value): symmetric
  narrow-range int8 per output channel, a channel's scale raised where needed so its int32
  bias stays within ±2^30 (LiteRT's converter does the same); and the float bias to quantize,
  minus the bias correction below.

Regions are visited in program order, so when a region's callback runs, everything upstream
is decided: ``CalibrationInfo.params`` is that partial solution, and the info's quantized
inputs and outputs come from the integer graph lowered with it (``lower.IntegerTrace``).

Bias correction
---------------
Rounding weights to int8 shifts the mean of a conv's output: per output channel the integer
op computes ``E[W_q x]`` where float computes ``E[W x]``. The shift is systematic (the same
on every sample), so it is removed by subtracting it from the bias, where it costs nothing at
run time. It matters most for depthwise convs, whose 9 or 25 weights per channel leave the
rounding errors no room to average out: on EfficientNet-Lite0 it is the largest error left.

``E[W x]`` is exact from the mean of the input at every position (``SampleMeanObserver``):
each weight tap sees the mean of the input positions it visits, padding contributing 0
(``expected_taps``), so ``E[(W x)_c] = Σ_taps W[c, tap] · taps[tap]`` (``mean_output``).

- ``"weights"``: remove ``E[(W_q - W) x]`` with ``x`` the float input, over every
  calibration sample (Nagel et al. 2019, "Data-Free Quantization", §4.2, with data).
- ``"empirical"``: remove ``E[W_q x_q] - E[W x]`` with ``x_q`` the input the *integer* graph
  computes on the kept samples (``CalibrationInfo.quantized_inputs``), upstream corrections
  included; this also cancels the mean shift that activation rounding carries down the graph
  (Finkelstein et al. 2019, "Fighting Quantization Bias With Bias").
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterator, Mapping

import numpy as np

from ..ir import Value
from ..numerics import NEAR_ZERO_TOLERANCE, asymmetric_qparams
from .attention_mask import MaskedAdds, bias_range, masked_range
from .calibrate import CalibrationInfo, Statistics, default_callback, interiors
from .channel_split import source_name
from .config import Config
from .methods import Range
from .ops.activation import gates_itself, silu_input_range
from .params import (ActParams, Params, WeightParams, at_width, corrected, dequantized,  # noqa: F401
                     expected_taps, hessian_applies, hessian_rounded, input_gram, mean_output, quantized_weights,
                     range_params, region_bits, region_weights, weight_error_output, weight_params)
from .regions import Annotation, Region, constant_array, weighted_input
from .rules import Kind
from .trace import IntegerTrace


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, k: int) -> int:
        self.parent.setdefault(k, k)
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


Callback = Callable[[CalibrationInfo], Range]


# -- the part of a value its readers tell apart --------------------------------------------------

def input_ranges(annotation: Annotation, values) -> dict[int, Callable[[float, float], tuple[float, float]]]:
    """id(value) -> ``SolverRules.input_range`` of its readers, for the ``values`` read only by ops
    of one kind that tell apart part of their input's range (hard-swish is 0 below -3, a logistic's
    output saturates), or by the sigmoid and the product of an x·σ(x)."""
    owner = {id(op): r.pattern.op for r in annotation.regions for op in r.ops}
    out: dict[int, Callable] = {}
    for v in values:
        decls = {owner.get(id(op)) for op, _ in v.uses}
        decl = decls.pop() if len(decls) == 1 else None
        if decl is not None and decl.solver.input_range is not None:
            out[id(v)] = decl.solver.input_range
        elif len(decls) == 2 and None not in decls and gates_itself(v):   # x·σ(x), both quantized
            out[id(v)] = silu_input_range
    return out


def told_apart(annotation: Annotation) -> dict[str, tuple[float, float]]:
    """Region output name -> the interval outside which its readers give the same result for every
    value (those of ``input_ranges``). The solver saturates such a value there on purpose, so what
    its int8 form loses beyond it costs nothing: error figures compare within it."""
    outputs = {id(r.output): r.output for r in annotation.regions}
    return {outputs[k].name_hint: f(-np.inf, np.inf) for k, f in input_ranges(annotation, outputs.values()).items()}


# -- the solver ---------------------------------------------------------------------------------

class _Solver:
    """Ranges as they are decided, and the parameters they imply so far."""

    def __init__(self, annotation: Annotation, statistics: Statistics, config: Config, fn) -> None:
        self.annotation, self.statistics, self.config, self.fn = annotation, statistics, config, fn
        self.values: dict[int, Value] = {}
        self.ranges: dict[int, tuple[float, float]] = {}
        self.fixed: dict[int, tuple[float, int]] = {}           # class root -> fixed (scale, zp)
        self.fixed16: dict[int, tuple[float, int] | None] = {}  # class root -> its int16 fixed (scale, zp)
        self.narrow: set[int] = set()   # values kept int8 under activations="int16" (their op has no 16x8 kernel)
        self.weights: dict[Value, tuple[Region, float, WeightParams]] = {}
        self.shared: set[Value] = set()                          # weights used by several regions
        uf = _UnionFind()
        fixed_outputs = {id(r.output) for r in annotation.regions
                         if r.pattern.op.output_quantized and r.pattern.op.spec.output.kind is Kind.FIXED}
        for region in annotation.regions:
            decl = region.pattern.op
            row = decl.spec
            outputs = [region.output] if decl.output_quantized else []   # a bool result has no parameters
            for v in [*region.inputs, *outputs]:
                self.values.setdefault(id(v), v)
                uf.find(id(v))
            if row.output.kind is Kind.SAME_AS and outputs:
                for v in region.inputs:
                    # an op whose lowering requantizes its inputs (CONCATENATION) leaves a fixed
                    # output (softmax, tanh) its own parameters: two of them cannot share a class
                    if constant_array(v) is None and not (decl.solver.requantizes_inputs and id(v) in fixed_outputs):
                        uf.union(id(v), id(region.output))
            if row.output.kind is Kind.FIXED and outputs:
                self.fixed.setdefault(id(region.output), row.output.fixed)
                self.fixed16.setdefault(id(region.output), decl.int16_fixed if decl.int16 else None)
            if outputs and region_bits(region, "int16") == 8:   # no 16x8 kernel: int8 in any mode
                self.narrow.add(id(region.output))
            if decl.solver.shared_inputs:
                for v in region.inputs[1:]:
                    uf.union(id(v), id(region.inputs[0]))
        self.root = {k: uf.find(k) for k in self.values}
        self.input_ranges = input_ranges(annotation, self.values.values())
        self.members: dict[int, list[int]] = {}
        for k, root in self.root.items():
            self.members.setdefault(root, []).append(k)
        fixed, self.fixed = self.fixed, {}
        for k, f in fixed.items():   # the first fixed-output op of a class wins
            self.fixed.setdefault(self.root[k], f)
            if self.fixed[self.root[k]] is f:
                self.fixed16.setdefault(self.root[k], self.fixed16.pop(k, None))
        self._provisional: dict[int, tuple[float, float]] = {}
        # Config.int16: the classes of the named tensors are int16 (mixed precision, quantize.precision)
        # (a tensor that channel_split divided is named by its groups' copies too)
        wanted = set(config.int16)
        self.promoted = {self.root[k] for k, v in self.values.items()
                         if v.name_hint in wanted or source_name(v.name_hint) in wanted}
        # an int16 tensor takes its observed min/max: 65,535 steps need no clipping of outliers
        self.wide_config = dataclasses.replace(config, method="minmax", method_options=None)
        # attention masks (quantize.attention_mask): class root -> the range its members get
        self.masks = MaskedAdds.find(annotation)
        self.mask_roots: dict[int, Callable[[], tuple[float, float]]] = {}
        for out, scores in self.masks.scores.items():
            self.mask_roots[self.root[out]] = lambda s=scores: masked_range(self.class_range(s))
        for bias, outs in self.masks.biases.items():
            if bias in self.root:
                self.mask_roots[self.root[bias]] = lambda outs=outs: bias_range(
                    [hi - lo for lo, hi in (self.mask_roots[self.root[o]]() for o in outs)])
        self.floors: dict[int, float] = {}                       # class root -> smallest scale its kernels accept
        for region in annotation.regions:
            finest = region.pattern.op.solver.finest_input_scale
            for v in region.inputs if finest is not None else ():
                root = self.root[id(v)]
                self.floors[root] = max(finest, self.floors.get(root, 0.0))
        self._grams: dict[int, np.ndarray] | None = None   # id(region) -> input_gram
        # values inside ops (an LSTM's cell state): their parameters from their observed min/max
        self.interior: dict[Value, ActParams] = {
            i.carrier: i.params(*value_range(i.carrier, statistics, self.wide_config)) for i in interiors(annotation)}
        self.trace = None
        if statistics.kept and statistics.make_engine is not None:
            self.trace = IntegerTrace(fn, annotation, _Decided(self), config, statistics.kept, statistics.make_engine)

    # -- parameters ---------------------------------------------------------------------------
    def bits(self, region: Region) -> int:
        """The width ``region`` computes in: its output's (``value_bits``)."""
        if region.output is not None and region.pattern.op.output_quantized:
            return self.value_bits(region.output)
        return region_bits(region, self.config.activations)

    def value_bits(self, v: Value) -> int:
        """16 under ``activations="int16"`` or for a promoted class (``Config.int16``), unless the op
        writing ``v`` has no 16x8 kernel; else 8."""
        if id(v) in self.narrow:
            return 8
        if self.config.activations == "int16":
            return 16
        return 16 if self.root.get(id(v)) in self.promoted else 8

    def input_params(self, region: Region, v: Value) -> ActParams:
        """``v``'s parameters as ``region`` reads it (at the region's width)."""
        return at_width(self.act_params(v), self.bits(region))

    def act_params(self, v: Value, candidate: tuple[int, tuple[float, float]] | None = None) -> ActParams:
        """Parameters of ``v`` from its class's ranges: those decided so far, a ``candidate`` for one
        member, and for members not decided yet their observed range (``provisional``)."""
        root = self.root[id(v)]
        known = []
        for k in self.members[root]:
            if candidate is not None and k == candidate[0]:
                known.append(candidate[1])
            elif k in self.ranges:
                known.append(self.ranges[k])
            elif len(self.members[root]) > 1:
                known.append(self.provisional(k))
        if not known:
            raise KeyError(v)
        lo, hi = min(r[0] for r in known), max(r[1] for r in known)
        if self.value_bits(v) == 16:
            return self._wide_params(root, lo, hi)
        if root in self.fixed:
            s, zp = self.fixed[root]
            return ActParams(float(np.float32(s)), int(zp), True, lo, hi)
        scale, zp = asymmetric_qparams(lo, hi)
        floor = self.floors.get(root)
        if floor is not None and float(scale) < floor:   # rmin/rmax keep the calibrated range (health names it)
            scale, zp = asymmetric_qparams(*_widened(lo, hi, floor))
        return ActParams(float(scale), int(zp), False, lo, hi)

    def _wide_params(self, root: int, lo: float, hi: float) -> ActParams:
        """int16 parameters of a class with range ``[lo, hi]``: the fixed ones of its op's 16x8 kernel,
        else symmetric (an int8-only fixed op's class gets them from its range), above its floor."""
        fixed = self.fixed16.get(root) if root in self.fixed else None
        if fixed is not None:
            return ActParams(float(np.float32(fixed[0])), int(fixed[1]), True, lo, hi, 16)
        scale, zp = range_params(lo, hi, 16)
        floor = self.floors.get(root)
        if floor is not None and scale < floor:
            scale = float(np.float32(floor))
        return ActParams(scale, zp, False, lo, hi, 16)

    def provisional(self, k: int) -> tuple[float, float]:
        """The range a member of a same-scale class will most likely get: the configured method's
        (what the default callback returns), so that earlier members see the class's final
        parameters whenever the callbacks keep the default."""
        if k not in self._provisional:
            self._provisional[k] = self.value_range(self.values[k])
        return self._provisional[k]

    def value_range(self, v: Value) -> tuple[float, float]:
        root = self.root.get(id(v))
        if root in self.mask_roots:
            return self.mask_roots[root]()
        config = self.wide_config if self.value_bits(v) == 16 else self.config
        return self._with_mask_values(v, value_range(v, self.statistics, config))

    def _with_mask_values(self, v: Value, r: tuple[float, float]) -> tuple[float, float]:
        """A tensor an attention mask is made from also holds the values padding gives it."""
        m = self.masks.made.get(id(v))
        return r if m is None else (min(r[0], m[0]), max(r[1], m[1]))

    def class_range(self, v: Value) -> tuple[float, float]:
        """The range ``v``'s same-scale class will most likely get (its members' ``provisional`` ranges)."""
        ranges = [self.provisional(k) for k in self.members[self.root[id(v)]]]
        return min(r[0] for r in ranges), max(r[1] for r in ranges)

    # -- one region ---------------------------------------------------------------------------
    def decide(self, region: Region, callback: Callback) -> None:
        for v in region.inputs:
            if id(v) not in self.ranges:
                self.ranges[id(v)] = self.value_range(v)
        info = CalibrationInfo(region, self.statistics, self.config, self.fn, _Decided(self), self.trace)
        x = weighted_input(region)
        if x is not None:   # weights first: they do not depend on the output, which may be evaluated
            key = region.match.values["w"]
            if key in self.weights:
                self.shared.add(key)
            s_in = self.input_params(region, x).scale
            self.weights[key] = (region, s_in, self.region_weight_params(region, x, s_in))
        if region.pattern.op.output_quantized and id(region.output) not in self.ranges:
            wide = callback is default_callback and self.bits(region) == 16
            r = self.statistics.range(region.output, self.wide_config) if wide else callback(info)
            lo, hi = self.returned_range(region, float(r.rmin), float(r.rmax))
            rules = region.pattern.op.solver
            self.ranges[id(region.output)] = (lo, hi)
            scales = [self.input_params(region, v).scale for v in region.inputs if constant_array(v) is None]
            finest = rules.finest_output_scale16 if self.bits(region) == 16 else None
            finest = finest or rules.finest_output_scale
            floor = finest(scales) if finest is not None and scales else None
            if rules.degenerate_floor is not None and max(hi, 0.0) - min(lo, 0.0) <= NEAR_ZERO_TOLERANCE:
                floor = rules.degenerate_floor(region, *self.weights[region.match.values["w"]][1:])
            if floor is not None:
                root = self.root[id(region.output)]
                self.floors[root] = max(floor, self.floors.get(root, 0.0))

    def returned_range(self, region: Region, lo: float, hi: float) -> tuple[float, float]:
        """A callback's range for ``region``'s output as the solver keeps it: widened where the
        kernel's Prepare refuses it (HARD_SWISH's output), cut where every reader discards part of
        it (hard-swish's input below -3). ``CalibrationInfo.quantized_output`` evaluates the same."""
        root = self.root.get(id(region.output))
        if root in self.mask_roots:   # a masked Add's output or an attention-mask bias
            return self.mask_roots[root]()
        rules = region.pattern.op.solver
        if rules.output_range is not None:
            lo, hi = rules.output_range(lo, hi, self.act_params(region.inputs[0]).scale)
        if rules.covers_constant_inputs:
            for v in region.inputs:
                c = constant_array(v)
                if c is not None and c.size and np.issubdtype(c.dtype, np.floating):
                    lo, hi = min(lo, float(c.min())), max(hi, float(c.max()))
        if id(region.output) in self.input_ranges:
            lo, hi = self.input_ranges[id(region.output)](lo, hi)
        return self._with_mask_values(region.output, (lo, hi))

    def grams(self) -> dict[int, np.ndarray]:
        """``input_gram`` of every region ``hessian_applies`` to, on the kept calibration samples (and
        the ``SampleWeights.sums`` of the regions that declare them): one pass of the float function
        over them, the first time a region asks. The sums are small and kept for the quantization's
        later solves (``Statistics.derived``); the conv Gram matrices (up to ``HESSIAN_MAX_COLUMNS``
        squared each) live as long as this solver."""
        if self._grams is None:
            regions = [r for r in self.annotation.regions if hessian_applies(r)]
            own = [r for r in self.annotation.regions if r.pattern.op.sample_weights is not None]
            cache = self.statistics.derived
            missing = [r for r in own if _sums_key(r) not in cache]
            self._grams = {}
            if (regions or missing) and self.statistics.kept and self.statistics.make_engine is not None:
                names = sorted({weighted_input(r).name_hint for r in regions}
                               | {r.inputs[0].name_hint for r in missing})
                engine = self.statistics.make_engine(self.fn, names, self.config.engine)
                for batch in self.statistics.kept:
                    out = engine.run(batch)
                    for r in regions:
                        g = input_gram(r, out[weighted_input(r).name_hint])
                        self._grams[id(r)] = g + self._grams.get(id(r), 0.0)
                    for r in missing:
                        sums = r.pattern.op.sample_weights.sums(r, out[r.inputs[0].name_hint])
                        had = self._grams.get(id(r))
                        self._grams[id(r)] = sums if had is None else tuple(a + b for a, b in zip(had, sums))
                for r in missing:
                    cache[_sums_key(r)] = self._grams[id(r)]
            self._grams.update({id(r): cache[_sums_key(r)] for r in own if _sums_key(r) in cache})
        return self._grams

    def sample_weights(self, region: Region) -> dict[Value, WeightParams]:
        """The ``SampleWeights.params`` of ``region`` under its summed statistics, once per quantization
        and rounding (they do not depend on the promotions the mixed-precision search solves for)."""
        hessian = self.config.weight_rounding != "nearest"
        key = ("sample_weights", id(region.root), region.pattern.name, hessian)
        cache = self.statistics.derived
        if key not in cache:
            cache[key] = region.pattern.op.sample_weights.params(region, self.grams().get(id(region)), hessian)
        return cache[key]

    def region_weight_params(self, region: Region, x: Value, s_in: float) -> WeightParams:
        w, b = region_weights(region)
        per_channel = self.config.per_channel
        plain = weight_params(w, b, s_in, per_channel)
        shared = region.match.values["w"] in self.shared
        if self.config.weight_rounding == "hessian" and not shared and id(region) in self.grams():
            q = hessian_rounded(w, plain.scale, self.grams()[id(region)])
            plain = WeightParams(plain.scale, plain.bias, None, q)
        mode = self.config.bias_correction
        if mode == "off" or x not in self.statistics.means or shared:
            return plain
        q = quantized_weights(w, plain)
        if mode == "empirical" and self.trace is not None and x in self.statistics.kept_means:
            w_q = dequantized(q, plain.scale)
            batches = self.trace.inputs(region)[region.inputs.index(x)]
            n = sum(a.shape[0] for a in batches)
            q_mean = sum(a.sum(axis=0, dtype=np.float64) for a in batches) / n
            f_mean = self.statistics.kept_means[x].mean
            correction = (mean_output(region, w_q, expected_taps(region, q_mean))
                          - mean_output(region, w, expected_taps(region, f_mean)))
        else:
            taps = self.statistics.means[x].taps(region)   # expected_taps of the mean, over every size
            correction = weight_error_output(region, w, q, plain.scale, taps)
        return corrected(plain, correction, q)

    # -- the result ---------------------------------------------------------------------------
    def final(self) -> dict[Value, ActParams | WeightParams]:
        out: dict[Value, ActParams | WeightParams] = {v: self.act_params(v) for v in self.values.values()}
        out.update(self.interior)
        for region in self.annotation.regions:
            if region.pattern.op.sample_weights is not None:
                out.update(self.sample_weights(region))
        for key, (region, s_in, wp) in self.weights.items():
            if key in self.shared:
                continue   # tied weights: the lowering quantizes them per use, uncorrected
            s_final = at_width(out[weighted_input(region)], self.bits(region)).scale
            if s_final != s_in:   # a same-scale class widened the input after this region
                w, b = region_weights(region)
                again = weight_params(w, b, s_final, self.config.per_channel, wp.correction)
                same = np.array_equal(np.asarray(again.scale), np.asarray(wp.scale))   # the rounding still holds
                wp = WeightParams(again.scale, again.bias, again.correction, wp.quantized if same else None)
            check = region.pattern.op.solver.check_weights
            if check is not None:
                check(region, s_final, wp, out[region.output])
            out[key] = wp
        return out


def _sums_key(region: Region) -> tuple:
    """``Statistics.derived``'s key for a region's ``SampleWeights.sums``: its root op and pattern."""
    return ("sums", id(region.root), region.pattern.name)


def value_range(v: Value, statistics: Statistics, config: Config) -> tuple[float, float]:
    """A constant's range (with 0), else the configured method's range of the observed value."""
    array = constant_array(v)
    if array is not None:
        return float(np.min(array, initial=0.0)), float(np.max(array, initial=0.0))
    r = statistics.range(v, config)
    return float(r.rmin), float(r.rmax)


def _refuse_calibrated(annotation: Annotation, solver: _Solver) -> bool:
    """Return to float the regions whose declaration refuses the calibrated ranges of their inputs'
    same-scale classes (``QuantOp.calibrated_check``), with its reason: known only after
    calibration. True when a region was returned."""
    refused = False
    for region in list(annotation.regions):
        check = region.pattern.op.calibrated_check
        if check is None:
            continue
        output = solver.value_range(region.output) if region.pattern.op.output_quantized else None
        reason = check(region, [solver.class_range(v) for v in region.inputs], output)
        if reason is not None:
            annotation.demote(region, reason)
            refused = True
    return refused


def _widened(lo: float, hi: float, min_scale: float) -> tuple[float, float]:
    """``[lo, hi]`` (with 0, as int8 activations hold it) widened upwards to ``255 · min_scale`` when narrower."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    need = 255.0 * min_scale
    return (lo, lo + need) if hi - lo < need else (lo, hi)


class _Decided(Mapping):
    """The parameters decided so far, as a read-only mapping (what ``CalibrationInfo.params`` is).

    ``candidate``: a hypothetical range for one value (``(id(value), (lo, hi))``), used to
    evaluate a region's output for a range the callback has not returned yet.
    """

    def __init__(self, solver: _Solver, candidate: tuple[int, tuple[float, float]] | None = None) -> None:
        self._s, self._candidate = solver, candidate

    def with_candidate(self, v: Value, rng: tuple[float, float], region: Region | None = None) -> "_Decided":
        if region is not None:
            rng = self._s.returned_range(region, *rng)
        return _Decided(self._s, (id(v), rng))

    def __getitem__(self, v: Value) -> ActParams | WeightParams:
        if v in self._s.interior:
            return self._s.interior[v]
        entry = self._s.weights.get(v)
        if entry is not None:
            return entry[2]
        if id(v) not in self._s.root:
            raise KeyError(v)
        return self._s.act_params(v, self._candidate)

    def __iter__(self) -> Iterator[Value]:
        decided = {self._s.root[k] for k in self._s.ranges}
        yield from (v for k, v in self._s.values.items() if self._s.root[k] in decided)
        yield from self._s.weights

    def __len__(self) -> int:
        return sum(1 for _ in self)


def solve(annotation: Annotation, statistics: Statistics, config: Config, fn,
          callback: Callback | None = None) -> dict[Value, ActParams | WeightParams]:
    """Parameters of every activation tensor (``ActParams``) and conv/FC weight (``WeightParams``).

    Regions whose declaration refuses their inputs' calibrated ranges go back to float first
    (``QuantOp.calibrated_check``: ``annotation`` changes in place, so the lowering sees it too).

    ``callback`` decides each region's output range (default: ``config.callback``, else the
    configured calibration method); see ``calibrate.CalibrationInfo`` for what it may look at.
    """
    callback = callback or config.callback or default_callback
    solver = _Solver(annotation, statistics, config, fn)
    if _refuse_calibrated(annotation, solver):   # without them the same-scale classes change
        solver = _Solver(annotation, statistics, config, fn)
    for region in annotation.regions:
        solver.decide(region, callback)
    return solver.final()


def int16_classes(annotation: Annotation, statistics: Statistics, config: Config, fn) -> dict[int, list[str]]:
    """The same-scale classes that can be int16 (every op writing a member has a 16x8 kernel), as
    class key -> the names of their members (what ``Config.int16`` takes)."""
    s = _Solver(annotation, statistics, dataclasses.replace(config, int16=()), fn)
    produced = {id(r.output) for r in annotation.regions if r.output is not None and r.pattern.op.output_quantized}
    out: dict[int, list[str]] = {}
    for root, members in s.members.items():
        if any(k in s.narrow for k in members) or not any(k in produced for k in members):
            continue
        lo, hi = s.class_range(s.values[root])
        if max(hi, 0.0) - min(lo, 0.0) <= NEAR_ZERO_TOLERANCE:   # nothing int16 could resolve better
            continue
        names = [s.values[k].name_hint for k in members
                 if s.values[k].name_hint and constant_array(s.values[k]) is None]
        if names:
            out[root] = names
    return out
