"""Final quantization parameters of every tensor, from ranges, the spec and the weights.

- A tensor's range comes from its observers through the calibration callback (a constant
  operand's range from its values).
- Same-scale ops (pooling, reshape, transpose, pad, resize, concat: ``spec.SPEC`` rows whose
  output is ``SAME_AS``) put their inputs and output in one class (union-find); a class's
  range is the union of its members' ranges, so no requantize is needed inside it.
- Fixed-output ops (softmax, logistic, tanh) win: their class gets the fixed parameters.
- Activation parameters are LiteRT's: asymmetric int8 per tensor, real 0 exactly
  representable (``numerics.asymmetric_qparams``, TFLite scheme).
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

from concurrent.futures import ThreadPoolExecutor

from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

import numpy as np

from ..errors import CalibrationError, quote_name
from ..ir import Value
from ..ir.dialects import nn
from ..numerics import (NEAR_ZERO_TOLERANCE, asymmetric_qparams, conv_multiplier, quantize_multipliers,
                        quantize_weights, symmetric_weight_qparams)
from . import spec
from .calibrate import (CalibrationInfo, Statistics, constant_array, conv_window, default_callback,
                        weighted_input)
from .config import Config
from .methods import Range
from .patterns import Annotation, Region


@dataclass(frozen=True)
class ActParams:
    """int8 per-tensor parameters of one activation tensor."""

    scale: float          # a float32 value
    zero_point: int
    fixed: bool = False   # imposed by the op (softmax ...), not calibrated
    rmin: float = 0.0     # the range they came from
    rmax: float = 0.0


@dataclass(frozen=True, eq=False)
class WeightParams:
    """How the constant operands of one conv/FC become integers.

    ``scale``: float32 weight scales, shape ``(C_out,)`` per channel or ``()`` per tensor.
    ``bias``: float32 ``(C_out,)``, the bias to quantize (scale input × weight): the model's
    bias minus ``correction`` (None when the op has neither). ``correction``: float64
    ``(C_out,)``, the mean output error removed (see the module notes), or None.
    ``quantized``: the int8 weights (int64 array, output channel first) when already computed.
    """

    scale: np.ndarray
    bias: np.ndarray | None
    correction: np.ndarray | None = None
    quantized: np.ndarray | None = None


Params = Mapping[Value, "ActParams | WeightParams"]


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


# -- weights ------------------------------------------------------------------------------------

def region_weights(region: Region) -> tuple[np.ndarray, np.ndarray | None]:
    """A conv/FC region's weights, output channel first, and its bias per output channel.

    Conv: ``(C_out, C_in / group, kh, kw)`` as stored. Gemm/MatMul: ``(C_out, K)``, with
    Gemm's ``transB``, ``alpha`` and ``beta`` applied. Bias: float32 ``(C_out,)`` or None.
    """
    w = np.asarray(region.match.consts["w"], np.float32)
    b = region.match.consts.get("b")
    if region.pattern.name != "conv":
        op = region.match.ops["op"]
        if op.opdef is nn.GEMM:
            w = w if op.attr("trans_b") else w.T
            if op.attr("alpha") != 1.0:   # (no copy of a large FC weight for the usual alpha = 1)
                w = w * np.float32(op.attr("alpha"))
            if b is not None:
                b = np.asarray(b, np.float32) * np.float32(op.attr("beta"))
        else:
            w = w.T
        w = np.ascontiguousarray(w)
    if b is not None:
        b = np.broadcast_to(np.asarray(b, np.float32).reshape(-1), (w.shape[0],)).copy()
    return w, b


def weight_params(w: np.ndarray, b: np.ndarray | None, input_scale: float, per_channel: bool,
                  correction: np.ndarray | None = None) -> WeightParams:
    """Symmetric int8 weight scales (raised so that ``|b| / (s_in · s_w) <= 2^30``) and the bias.

    A near-zero weight channel would otherwise get a tiny scale (the 1e-6 floor), a bias of
    billions of steps and an accumulator that overflows int32. ``correction`` is subtracted
    from the bias (a bias of zeros when the op has none).
    """
    axis = 0 if per_channel else None
    scale, _ = symmetric_weight_qparams(w, axis=axis)
    if b is not None:
        need = np.abs(np.asarray(b, np.float64)) / (np.float64(input_scale) * 2.0 ** 30)
        need = need if axis == 0 else need.max(initial=0.0)
        scale = np.maximum(np.asarray(scale, np.float64), need).astype(np.float32)
    return corrected(WeightParams(np.asarray(scale, np.float32), b), correction)


def corrected(wp: WeightParams, correction: np.ndarray | None, quantized: np.ndarray | None = None) -> WeightParams:
    """``wp`` with ``correction`` subtracted from its bias (the model's, or zeros)."""
    if correction is None:
        return wp
    base = np.zeros(correction.shape) if wp.bias is None else np.asarray(wp.bias, np.float64)
    return WeightParams(wp.scale, (base - correction).astype(np.float32), correction, quantized)


# Weights are quantized and compared with float in blocks of output channels of about this many
# elements: quantize_weights works in float64 with a few temporaries, so a whole VGG classifier
# (25088 x 4096) at once would take gigabytes. Results are the same element for element.
_BLOCK_ELEMENTS = 1 << 22


def _row_blocks(w: np.ndarray):
    rows = max(1, _BLOCK_ELEMENTS // max(1, int(np.prod(w.shape[1:], dtype=np.int64))))
    for i in range(0, w.shape[0], rows):
        yield slice(i, min(i + rows, w.shape[0]))


def quantized_weights(w: np.ndarray, wp: WeightParams) -> np.ndarray:
    """The int8 weights for ``wp``'s scales: symmetric, narrow range, per channel (dim 0) when
    the scale is an array."""
    if wp.quantized is not None:
        return wp.quantized
    per_channel = np.ndim(wp.scale) > 0
    out = np.empty(w.shape, np.int8)

    def block(rows: slice) -> None:
        out[rows] = quantize_weights(w[rows], wp.scale[rows] if per_channel else wp.scale,
                                     axis=0 if per_channel else None)
    blocks = list(_row_blocks(w))
    if len(blocks) > 1:   # numpy releases the GIL: blocks of a large weight on two threads, same result
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(block, blocks))
    else:
        block(blocks[0])
    return out


def dequantized(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``scale · q`` in float64, per output channel when ``scale`` is an array."""
    s = np.asarray(scale, np.float64)
    return q.astype(np.float64) * (s.reshape((-1,) + (1,) * (q.ndim - 1)) if np.ndim(s) else s)


def weight_error_output(region: Region, w: np.ndarray, q: np.ndarray, scale: np.ndarray,
                        taps: np.ndarray) -> np.ndarray:
    """``mean_output(region, dequantized(q, scale) - w, taps)`` for an FC, a block of rows at a
    time (a conv's weights are small: at once)."""
    if w.ndim != 2:
        return mean_output(region, dequantized(q, scale) - w, taps)
    per_channel = np.ndim(scale) > 0
    out = np.empty(w.shape[0])
    for rows in _row_blocks(w):
        diff = dequantized(q[rows], scale[rows] if per_channel else scale) - w[rows]
        out[rows] = diff @ taps
    return out


def expected_taps(region: Region, mean: np.ndarray) -> np.ndarray:
    """The mean input each weight of a conv/FC multiplies, from the input's per-position mean.

    Conv: ``(C_in, kh, kw)``, averaged over the output positions, with 0 for padding (exact:
    the window visits the same padded positions on every sample). FC: ``(K,)``, the mean over
    every axis but the last.
    """
    mean = np.asarray(mean, np.float64)
    if region.pattern.name != "conv":
        return mean.reshape(-1, mean.shape[-1]).mean(axis=0)
    op = region.match.ops["op"]
    kh, kw = region.match.consts["w"].shape[2:]
    g = conv_window(op, (kh, kw))
    top, left, bottom, right = g["pads"]
    (sh, sw), (dh, dw) = g["strides"], g["dilations"]
    padded = np.pad(mean, ((0, 0), (top, bottom), (left, right)))
    ho = (padded.shape[1] - dh * (kh - 1) - 1) // sh + 1
    wo = (padded.shape[2] - dw * (kw - 1) - 1) // sw + 1
    taps = np.empty((mean.shape[0], kh, kw))
    for i in range(kh):
        for j in range(kw):
            window = padded[:, i * dh: i * dh + sh * (ho - 1) + 1: sh, j * dw: j * dw + sw * (wo - 1) + 1: sw]
            taps[:, i, j] = window.mean(axis=(1, 2))
    return taps


def mean_output(region: Region, w: np.ndarray, taps: np.ndarray) -> np.ndarray:
    """``E[W x]`` per output channel (no bias), from ``expected_taps``; float64 ``(C_out,)``."""
    w = np.asarray(w, np.float64)
    if w.ndim == 2:
        return w @ taps
    group = region.match.ops["op"].attr("group") or 1
    co, cig = w.shape[:2]
    return np.einsum("gocij,gcij->go", w.reshape(group, co // group, cig, *w.shape[2:]),
                     taps.reshape(group, cig, *w.shape[2:])).reshape(co)


# -- the solver ---------------------------------------------------------------------------------

class _Solver:
    """Ranges as they are decided, and the parameters they imply so far."""

    def __init__(self, annotation: Annotation, statistics: Statistics, config: Config, fn) -> None:
        self.annotation, self.statistics, self.config, self.fn = annotation, statistics, config, fn
        self.values: dict[int, Value] = {}
        self.ranges: dict[int, tuple[float, float]] = {}
        self.fixed: dict[int, tuple[float, int]] = {}           # class root -> fixed (scale, zp)
        self.weights: dict[Value, tuple[Region, float, WeightParams]] = {}
        self.shared: set[Value] = set()                          # weights used by several regions
        uf = _UnionFind()
        for region in annotation.regions:
            row = spec.SPEC[region.pattern.kind]
            for v in [*region.inputs, region.output]:
                self.values.setdefault(id(v), v)
                uf.find(id(v))
            if row.output.kind is spec.Kind.SAME_AS:
                for v in region.inputs:
                    if constant_array(v) is None:
                        uf.union(id(v), id(region.output))
            if row.output.kind is spec.Kind.FIXED:
                self.fixed.setdefault(id(region.output), row.output.fixed)
        self.root = {k: uf.find(k) for k in self.values}
        self.members: dict[int, list[int]] = {}
        for k, root in self.root.items():
            self.members.setdefault(root, []).append(k)
        fixed, self.fixed = self.fixed, {}
        for k, f in fixed.items():   # the first fixed-output op of a class wins
            self.fixed.setdefault(self.root[k], f)
        self._provisional: dict[int, tuple[float, float]] = {}
        self.floors: dict[int, float] = {}                       # class root -> smallest scale its kernels accept
        self.trace = None
        if statistics.kept and statistics.make_engine is not None:
            from .lower import IntegerTrace   # lower imports this module
            self.trace = IntegerTrace(fn, annotation, _Decided(self), config, statistics.kept, statistics.make_engine)

    # -- parameters ---------------------------------------------------------------------------
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
        if root in self.fixed:
            s, zp = self.fixed[root]
            return ActParams(float(np.float32(s)), int(zp), True, lo, hi)
        scale, zp = asymmetric_qparams(lo, hi)
        floor = self.floors.get(root)
        if floor is not None and float(scale) < floor:   # rmin/rmax keep the calibrated range (health names it)
            scale, zp = asymmetric_qparams(*_widened(lo, hi, floor))
        return ActParams(float(scale), int(zp), False, lo, hi)

    def provisional(self, k: int) -> tuple[float, float]:
        """The range a member of a same-scale class will most likely get: the configured method's
        (what the default callback returns), so that earlier members see the class's final
        parameters whenever the callbacks keep the default."""
        if k not in self._provisional:
            self._provisional[k] = self.value_range(self.values[k])
        return self._provisional[k]

    def value_range(self, v: Value) -> tuple[float, float]:
        array = constant_array(v)
        if array is not None:
            return float(np.min(array, initial=0.0)), float(np.max(array, initial=0.0))
        r = self.statistics.range(v, self.config)
        return float(r.rmin), float(r.rmax)

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
            s_in = self.act_params(x).scale
            self.weights[key] = (region, s_in, self.region_weight_params(region, x, s_in))
        if id(region.output) not in self.ranges:
            r = callback(info)
            lo, hi = float(r.rmin), float(r.rmax)
            if region.pattern.kind == "HARD_SWISH":
                lo, hi = _hard_swish_range(lo, hi, self.act_params(region.inputs[0]).scale)
            self.ranges[id(region.output)] = (lo, hi)
            floor = _finest_output_scale(region.pattern.kind, [self.act_params(v).scale for v in region.inputs
                                                               if constant_array(v) is None])
            if region.pattern.kind == "CONV_2D" and max(hi, 0.0) - min(lo, 0.0) <= NEAR_ZERO_TOLERANCE:
                floor = _finest_conv_output_scale(region, *self.weights[region.match.values["w"]][1:])
            if floor is not None:
                root = self.root[id(region.output)]
                self.floors[root] = max(floor, self.floors.get(root, 0.0))

    def region_weight_params(self, region: Region, x: Value, s_in: float) -> WeightParams:
        w, b = region_weights(region)
        per_channel = self.config.per_channel
        plain = weight_params(w, b, s_in, per_channel)
        mode = self.config.bias_correction
        if mode == "off" or x not in self.statistics.means or region.match.values["w"] in self.shared:
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
            taps = expected_taps(region, self.statistics.means[x].mean)
            correction = weight_error_output(region, w, q, plain.scale, taps)
        return corrected(plain, correction, q)

    # -- the result ---------------------------------------------------------------------------
    def final(self) -> dict[Value, ActParams | WeightParams]:
        out: dict[Value, ActParams | WeightParams] = {v: self.act_params(v) for v in self.values.values()}
        for key, (region, s_in, wp) in self.weights.items():
            if key in self.shared:
                continue   # tied weights: the lowering quantizes them per use, uncorrected
            s_final = out[weighted_input(region)].scale
            if s_final != s_in:   # a same-scale class widened the input after this region
                w, b = region_weights(region)
                wp = weight_params(w, b, s_final, self.config.per_channel, wp.correction)
            if region.pattern.kind == "CONV_2D":
                _check_conv_requantization(region, s_final, wp, out[region.output])
            out[key] = wp
        return out


def _hard_swish_range(lo: float, hi: float, input_scale: float) -> tuple[float, float]:
    """LiteRT's HARD_SWISH Prepare refuses ``s_in / (128 · s_out) >= 1``: an output range much
    narrower than the input's (say inputs down to -1000, where hard-swish is 0) is widened
    upwards until ``s_out >= s_in / 127``."""
    need = 255.0 * input_scale / 127.0
    return (lo, lo + need) if hi - lo < need else (lo, hi)


# Degenerate output scales. An output step much finer than the step of what an op computes in
# integers resolves nothing more, but the kernels cannot express it: ADD/SUB refuse an output
# multiplier >= 1, MEAN's shift tops out at 30 and MUL's product overflows int32 when shifted
# left by more than 15 bits. Such scales come from a zero or near-zero range (a callback that
# returns one, constant data) or an input scale blown up by absurd weights upstream. Like
# LiteRT's converter for HARD_SWISH (above), the output range is widened to the finest scale the
# kernel accepts, which loses no value the integer op can produce; the health check names the
# tensor when its range was degenerate (``ActParams.rmin``/``rmax`` keep the calibrated range).
# Normal ranges are far from these floors and unchanged.
_ADD_LEFT_SHIFT = 20        # ADD/SUB's int8 input left shift: mo = 2·max(s1, s2) / (2**20 · s_out) < 1
_MEAN_MAX_RATIO = 2.0 ** 20  # s_in / s_out: MBQM(Σ(q - zp), M', sh') then fits int32 for any count
_MUL_MAX_RATIO = 2.0 ** 14   # s1·s2 / s_out: a product of two int8 differs (< 2**16) times 2**15 fits int32
_MARGIN = 1.0 + 2.0 ** -10   # float32 rounding of the scale must not land back on the limit


def _finest_output_scale(kind: str, input_scales: list[float]) -> float | None:
    """The smallest output scale the kernel of ``kind`` accepts for these input scales (None: no floor)."""
    if not input_scales:
        return None
    if kind in ("ADD", "SUB") and len(input_scales) == 2:
        return 2.0 * max(input_scales) / 2.0 ** _ADD_LEFT_SHIFT * _MARGIN
    if kind == "MEAN":
        return input_scales[0] / _MEAN_MAX_RATIO * _MARGIN
    if kind == "MUL" and len(input_scales) == 2:
        return input_scales[0] * input_scales[1] / _MUL_MAX_RATIO * _MARGIN
    return None


def _widened(lo: float, hi: float, min_scale: float) -> tuple[float, float]:
    """``[lo, hi]`` (with 0, as int8 activations hold it) widened upwards to ``255 · min_scale`` when narrower."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    need = 255.0 * min_scale
    return (lo, lo + need) if hi - lo < need else (lo, hi)


def _worst_accumulators(region: Region, s_in: float, wp: WeightParams, channels: np.ndarray | None = None
                        ) -> np.ndarray:
    """Per output channel (or those in ``channels``), the largest ``|acc|`` the int8 weights and int32
    bias allow: every input at 255 steps from its zero point, with each weight's sign."""
    w, _ = region_weights(region)
    scales = np.broadcast_to(np.asarray(wp.scale, np.float64).reshape(-1), (w.shape[0],))
    rows = np.arange(w.shape[0]) if channels is None else channels
    worst = np.empty(len(rows))
    for i, c in enumerate(rows):
        w_steps = np.minimum(np.rint(np.abs(w[c].astype(np.float64)) / scales[c]), 127.0).sum()
        b_steps = 0.0 if wp.bias is None else abs(float(wp.bias[c])) / (np.float64(s_in) * scales[c])
        worst[i] = 255.0 * w_steps + b_steps
    return worst


def _finest_conv_output_scale(region: Region, s_in: float, wp: WeightParams) -> float:
    """The smallest output scale for which no channel's ``worst acc · 2**shift`` overflows int32
    (``2**shift <= 2·m``). Used only for a degenerate (zero) output range: it carries no value to
    keep, and the kernel cannot go finer; a real range is never widened (see below)."""
    scales = np.asarray(wp.scale, np.float64).reshape(-1)
    need = np.float64(s_in) * scales * 2.0 * _worst_accumulators(region, s_in, wp) / (2.0 ** 31 - 1)
    return float(need.max(initial=0.0)) * _MARGIN


def _check_conv_requantization(region: Region, s_in: float, wp: WeightParams, out: "ActParams") -> None:
    """Refuse a conv whose requantization LiteRT cannot compute: a channel multiplier
    ``m = s_in · s_w / s_out`` above 1 is applied as ``acc · 2**shift`` in int32 (double-rounding
    MBQM), undefined behaviour once that overflows.

    With a real output range it takes weights out of all proportion to it (a clipped output of
    [0, 6] after weights of 1e9): every non-zero accumulator saturates. Widening the output range
    (per tensor) would zero every other channel, and LiteRT's converter would emit the overflow
    silently; so the layer is named with its numbers, and the user fixes the weights or keeps the
    layer float. Only channels with ``m > 1`` (none in ordinary models) are looked at, with the
    worst accumulator their int8 weights and bias allow.
    """
    scales = np.broadcast_to(np.asarray(wp.scale, np.float32).reshape(-1), (region.match.consts["w"].shape[0],))
    m = np.asarray(conv_multiplier(np.float32(s_in), scales, np.float32(out.scale)), np.float64)
    if not np.any(m > 1.0):
        return
    _, shift = quantize_multipliers(m)
    flagged = np.flatnonzero(shift > 0)
    worst = _worst_accumulators(region, s_in, wp, flagged)
    over = worst * 2.0 ** shift[flagged].astype(np.float64) > 2.0 ** 31 - 1
    if not over.any():
        return
    i = int(np.argmax(over))
    c, acc = int(flagged[i]), float(worst[i])
    w_max = float(np.abs(region_weights(region)[0][c]).max(initial=0.0))
    raise CalibrationError(
        f"conv {quote_name(region.label)}: output channel {c} cannot be requantized in int32: its multiplier "
        f"input scale × weight scale / output scale = {s_in:.4g} × {float(scales[c]):.4g} / {out.scale:.4g} "
        f"= {m[c]:.4g} shifts the accumulator left by {int(shift[c])} bits, which overflows int32 (undefined "
        f"behaviour in LiteRT) for accumulators up to {acc:.4g}; its weights (|w| up to {w_max:.4g}) are out "
        f"of proportion with the output range [{out.rmin:.4g}, {out.rmax:.4g}]. Check this layer's weights, or "
        f"keep it float with --exclude {quote_name(region.label)}")


class _Decided(Mapping):
    """The parameters decided so far, as a read-only mapping (what ``CalibrationInfo.params`` is).

    ``candidate``: a hypothetical range for one value (``(id(value), (lo, hi))``), used to
    evaluate a region's output for a range the callback has not returned yet.
    """

    def __init__(self, solver: _Solver, candidate: tuple[int, tuple[float, float]] | None = None) -> None:
        self._s, self._candidate = solver, candidate

    def with_candidate(self, v: Value, rng: tuple[float, float]) -> "_Decided":
        return _Decided(self._s, (id(v), rng))

    def __getitem__(self, v: Value) -> ActParams | WeightParams:
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

    ``callback`` decides each region's output range (default: ``config.callback``, else the
    configured calibration method); see ``calibrate.CalibrationInfo`` for what it may look at.
    """
    callback = callback or config.callback or default_callback
    solver = _Solver(annotation, statistics, config, fn)
    for region in annotation.regions:
        solver.decide(region, callback)
    return solver.final()
