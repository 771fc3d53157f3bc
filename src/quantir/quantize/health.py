"""Health checks: results that look fine and are not (issue 11 item 9).

Quantization succeeds on data that cannot give sound parameters, and its summary then looks
excellent: the per-layer SQNR is measured on the same calibration samples, so all-zero or
constant samples give 30–57 dB on every layer of a model that is useless on real input.
Weights below int8's smallest step quantize to zeros without any error. Nothing here changes
a parameter; each check returns messages that name the tensors and say what to give instead.
``quantir.api.quantize`` emits them as ``QuantizationWarning`` and keeps them on the result.

- Calibration inputs (``InputObserver``, fed by ``calibrate``): all zeros (or within ±1e-6),
  one constant, every sample a copy of the first, every sample constant within itself; fewer
  than ``FEW_SAMPLES`` samples (softer). Float inputs only: integer inputs (token ids, masks)
  are legitimately constant.
- Activations: a tensor of the float graph that is constant on every sample (min == max), or
  within ±1e-6 (int8's range floor makes it 0), while the inputs vary: a dead ReLU, a constant
  branch. Per tensor only: a ReLU output that is zero in some channels is normal.
- Weights: a conv/FC weight whose int8 values are all zero, or a channel that is not negligible
  in the model but quantizes to zeros (the information is lost). A channel that is zero, or
  ``NEGLIGIBLE`` beside the tensor's largest, in the model (pruning, dead channels folded from
  batch norm) is not reported unless the whole tensor is.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..errors import quote_name
from ..ir import Function, Value
from ..numerics.qparams import NEAR_ZERO_TOLERANCE, symmetric_weight_qparams
from .calibrate import Statistics
from .attention_mask import mask_values
from .config import Config
from .observers import InputObserver  # noqa: F401  (the calibration inputs' observer; named here too)
from .params import ActParams, WeightParams, region_weights, weight_params
from .regions import Annotation, Region, constant_array, weighted_input

FEW_SAMPLES = 16          # below this many samples, ranges are a guess
_LISTED = 8               # names listed per warning; the rest are counted
_F32_TINY = float(np.finfo(np.float32).tiny)   # below this a float32 is subnormal
NEGLIGIBLE = 1e-4         # a weight channel this far below the tensor's largest is as good as zero
GIVE_REAL = "give real samples (a few hundred representative inputs, preprocessed as at inference)"


@dataclass
class Health:
    """The warnings of one quantization, and whether its SQNR was measured on degenerate data."""

    warnings: list[str] = field(default_factory=list)
    degenerate_data: bool = False


def check(fn: Function, annotation: Annotation, statistics: Statistics, params: Mapping, config: Config) -> Health:
    """Every check, inputs first; activation checks only when the inputs are sound."""
    inputs = input_warnings(statistics)
    degenerate = bool(inputs)
    out = list(inputs)
    if statistics.num_samples < FEW_SAMPLES:
        out.append(f"only {statistics.num_samples} calibration sample{'s' if statistics.num_samples != 1 else ''}: "
                   f"ranges from fewer than {FEW_SAMPLES} inputs are a guess; {GIVE_REAL}")
    if not degenerate:
        out += activation_warnings(fn, statistics, params, config)
    out += weight_warnings(annotation, params, config)
    return Health(out, degenerate)


def input_warnings(statistics: Statistics) -> list[str]:
    return [f"{p}: the ranges, and the SQNR of the summary, describe this data, not real inputs; {GIVE_REAL}"
            for obs in statistics.inputs.values() if (p := obs.problem()) is not None]


def _listed(names: Sequence[str]) -> str:
    more = len(names) - _LISTED
    return ", ".join(names[:_LISTED]) + (f" and {more} more" if more > 0 else "")


def activation_warnings(fn: Function, statistics: Statistics, params: Mapping = {}, config: Config | None = None
                        ) -> list[str]:
    """Observed tensors (not graph inputs) that are constant, or vanishing, on every sample; and
    tensors whose values vary but whose calibrated range (the method's, or a callback's) is zero."""
    args = {id(a) for a in fn.arguments}
    constant, vanishing, collapsed = [], [], []
    for v, observers in statistics.observers.items():
        if id(v) in args or not observers or observers[0].num_values == 0:
            continue
        o = observers[0]
        lo, hi = float(np.min(o.min)), float(np.max(o.max))
        where = quote_name(v.name_hint) + (f" ({_producer(v)})" if _producer(v) else "")
        if lo == hi:
            if mask_values(v) is not None:   # made from a 0/1 mask: its range comes from those values
                continue
            constant.append(f"{where} = {lo:.6g}")
        elif max(abs(lo), abs(hi)) <= NEAR_ZERO_TOLERANCE:
            vanishing.append(f"{where} within ±{max(abs(lo), abs(hi)):.3g}")
        elif (isinstance(p := params.get(v), ActParams) and not p.fixed
              and max(p.rmax, 0.0) - min(p.rmin, 0.0) <= NEAR_ZERO_TOLERANCE):   # int8 ranges include zero
            collapsed.append(f"{where} from {lo:.6g} to {hi:.6g}")
    out = []
    if constant:
        out.append(f"{len(constant)} activation tensor{'s are' if len(constant) > 1 else ' is'} constant on every "
                   f"calibration sample although the inputs vary: {_listed(constant)}. A dead ReLU or a constant "
                   "branch: its int8 range carries no information; check the model there, or calibrate with "
                   "samples that reach it")
    if vanishing:
        many = len(vanishing) > 1
        out.append(f"{len(vanishing)} activation tensor{'s stay' if many else ' stays'} below int8's smallest range "
                   f"(1e-6) on every sample, so {'they quantize' if many else 'it quantizes'} to zeros: "
                   f"{_listed(vanishing)}. "
                   "Check the weights upstream (vanishing or subnormal) or the input scaling")
    if collapsed:
        how = "a calibration callback" if config is not None and config.callback else \
            f"method '{config.method if config is not None else '?'}'"
        out.append(f"{len(collapsed)} activation tensor{'s' if len(collapsed) > 1 else ''} got a zero range from {how} "
                   f"although the values vary: {_listed(collapsed)}. Everything there quantizes to zero: "
                   + ("check the callback" if config is not None and config.callback else "use --method minmax"))
    return out


def _producer(v: Value) -> str:
    op = getattr(v, "op", None)
    return "" if op is None else f"output of {quote_name(op.label or op.name)}"


def weight_warnings(annotation: Annotation, params: Mapping, config: Config) -> list[str]:
    """Conv/FC weights that quantize to all zeros, wholly or in channels that are not zero in float."""
    out = []
    seen: set[int] = set()
    for region in annotation.regions:
        x = weighted_input(region)
        if x is None or id(key := region.match.values["w"]) in seen:
            continue
        seen.add(id(key))
        w, b = region_weights(region)
        wp = params.get(key)
        if not isinstance(wp, WeightParams):   # tied weights: the lowering quantizes them per use, like this
            s_in = params[x].scale if constant_array(x) is None and x in params else 1.0
            wp = weight_params(w, b, s_in, config.per_channel)
        msg = weight_problem(region, w, np.asarray(wp.scale, np.float64), config.per_channel)
        if msg is not None:
            out.append(msg)
    return out


def weight_problem(region: Region, w: np.ndarray, scale: np.ndarray, per_channel: bool) -> str | None:
    """Why ``w`` (output channel first) quantizes to zeros with ``scale``, or None.

    A channel's int8 values are all zero exactly when its largest ``|w| / scale`` is below 0.5
    (``quantize_weights`` rounds half away from zero after an exact float64 division). A channel
    ``NEGLIGIBLE`` times below the tensor's largest counts as zero in the model, like a pruned one:
    trained models have such channels (EfficientNet-Lite0's stem: 3e-9 beside 17.6, with a bias of
    -1.2), and losing them changes nothing.
    """
    amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1, initial=0.0).astype(np.float64)
    zero_q = amax / np.broadcast_to(scale, amax.shape) < 0.5
    lost = zero_q & (amax > NEGLIGIBLE * amax.max(initial=0.0))
    c = w.shape[0]
    name = (f"weight {quote_name(region.match.values['w'].name_hint)} of {quote_name(region.label)} "
            f"({region.pattern.kind})")
    if zero_q.all():
        if not amax.any():
            why = "it is all zeros in the model"
        elif (amax < _F32_TINY).all():
            why = "its values are all subnormal (|w| < 1.2e-38)"
        else:
            why = f"its values (|w| <= {amax.max():.3g}) are below half an int8 step"
        return (f"{name} quantizes to all zeros ({c} of {c} output channels): {why}, so the layer computes only "
                "its bias. Check the model's weights (a failed export or training run?)")
    if not lost.any():
        return None
    k = int(lost.sum())
    if not per_channel:
        hint = "one scale for the whole tensor is too coarse for them: quantize per channel (drop --per-tensor)"
    elif (amax / symmetric_weight_qparams(w, axis=0)[0] >= 0.5)[lost].any():   # kept by the plain scale
        hint = ("their scale was raised to keep the bias within int32, because the input's scale is tiny: "
                "calibrate with real samples whose range at this layer's input is not near zero")
    else:
        hint = "their values are below int8's smallest step (2e-9); check the model's weights"
    return (f"{name}: {k} of {c} output channels ({100.0 * k / c:.0f}%) quantize to all zeros although they are "
            f"not negligible in the model; {hint}")
