"""Automatic mixed precision: promote the fewest activation tensors to int16 until a budget on
the model's outputs is met (``Config.budget``).

The TVM RFC's reviewers asked for an automatic fallback driven by accuracy; NNCF and Intel's INC
offer one around an eval loop the user writes. quantir measures the outputs itself:

1. **Budget** (``parse_budget``): a floor on the cosine between the float and the integer outputs
   that every output's mean must reach (a number in (0, 1]: ``0.99``) — and, for outputs that are
   class scores (``class_score_outputs``), on the share of positions whose argmax is the float
   model's, and for outputs holding a few quantities per position (``quantity_outputs``: a
   detector's boxes and scores), on each quantity's correlation — on their SQNR (``"25dB"``), on
   the argmax share alone (``"top1:0.995"``), or a callback
   ``(float_outputs, integer_outputs) -> bool`` over lists of output dicts.
2. **Measure** the all-int8 module on held-out calibration samples — up to 32, one in five or
   fewer, set aside by ``calibrate`` and never observed (``Statistics.held_out``; with fewer than 64
   samples none is spared and the kept calibration samples serve) — in the target's arithmetic
   (``Config.integer_engine``). Met: nothing changes.
3. **Rank** the tensors that can be int16 — each same-scale class whose ops all have LiteRT 16x8
   kernels (``QuantOp.int16``) — by their own int8 rounding noise: SQNR of the float values
   against their int8 round trip, worst first (``rank``).
4. **Search** the shortest prefix of that ranking that meets the budget: the whole ranking first,
   then bisection (``log2(N) + 1`` integer runs; from below when a kernel refuses the whole). The
   prefix is promoted with ``Config.int16``; the ops between int8 and int16 islands requantize
   (LiteRT's QUANTIZE).

Each promotion is reported with its int8 and int16 SQNR; the outputs' metric before and after.
If no prefix meets the budget, the best module measured is kept (all-int8 included: on a model
whose int8 error is not where int16 kernels exist, promoting can also hurt), and all-int8 unless
the promotions close at least a quarter of the gap (``WORTH``); the summary says the budget was
missed.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..errors import CalibrationError, QuantirError
from ..ir import Function, Value
from ..ir.dialects import nn
from ..ir.names import output_names
from .params import range_params
from .regions import constant_array



# a missed budget keeps promotions only when they close at least this part of the gap from int8
# (EfficientNet-Lite0: 11 classes promoted closed 4% of it, its convs being the error; PP-OCRv6 tiny
# rec: 60%)
WORTH = 0.25


@dataclass(frozen=True)
class Budget:
    kind: str                                  # "cosine" | "sqnr" | "top1" | "callback"
    floor: float = 0.0
    callback: Callable | None = None
    # a cosine floor also holds these outputs' top-1 agreement to it (``class_score_outputs``);
    # ``decide`` False ("cos:0.995"): the cosine alone
    decide: bool = True
    decisions: tuple[str, ...] = ()
    # ... and each quantity of these outputs' last axis, centered, to it (``quantity_outputs``)
    quantities: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.kind == "cosine":
            also = (f" and the top-1 agreement of {', '.join(self.decisions)} (class scores, where "
                    f"{decisive_positions(self.floor)} or more positions are measured)") if self.decisions else ""
            if self.quantities:
                also += (f" and the correlation of each quantity of "
                         f"{', '.join(self.quantities)} (per position, along the last axis)")
            return f"every output's mean cosine{also} >= {self.floor:g}"
        if self.kind == "sqnr":
            return f"every output's SQNR >= {self.floor:g} dB"
        if self.kind == "top1":
            return f"every output's top-1 agreement along its last axis >= {self.floor:g}"
        return "the user's budget callback"


def parse_budget(spec) -> Budget | None:
    """``None``/``"off"``/``0``: no budget. A number in (0, 1] or its string: a cosine floor;
    ``"25dB"``/``"sqnr:25"``: an SQNR floor in dB; ``"cos:0.997"``: the cosine floor alone, without
    the class-score outputs' top-1 (``Budget.decisions``); ``"top1:0.995"``: the share of positions
    whose largest element along the last axis (a class, a CTC symbol) is the float model's, in
    (0, 1], on every output; a callable: a callback."""
    if spec is None or spec is False:
        return None
    decide = True
    if callable(spec):
        return Budget("callback", callback=spec)
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text in ("off", "none", "0", ""):
            return None
        m = re.fullmatch(r"(?:sqnr:)?\s*([0-9.]+)\s*db|sqnr:\s*([0-9.]+)", text)
        if m:
            return Budget("sqnr", float(m.group(1) or m.group(2)))
        m = re.fullmatch(r"(?:top1|argmax):\s*([0-9.eE+-]+)", text)
        if m:
            try:
                floor = float(m.group(1))
            except ValueError:
                floor = -1.0
            if not 0.0 < floor <= 1.0:
                raise CalibrationError(f"a top-1 budget is a share of positions in (0, 1], got {spec!r}")
            return Budget("top1", floor)
        decide = not text.startswith(("cos:", "cosine:"))
        text = text.removeprefix("cos:").removeprefix("cosine:").strip()
        try:
            spec = float(text)
        except ValueError:
            raise CalibrationError(f"budget {spec!r} is not understood: give an output cosine floor in (0, 1] "
                                   f"(0.99), an SQNR floor in dB ('25dB'), a top-1 agreement ('top1:0.995'), "
                                   f"'off', or a callback") from None
    if isinstance(spec, bool) or not isinstance(spec, (int, float)):
        raise CalibrationError(f"budget must be a number, a string or a callable, got {type(spec).__name__}")
    if spec == 0:
        return None
    if not 0.0 < float(spec) <= 1.0:
        raise CalibrationError(f"a cosine budget must be in (0, 1], got {spec}; for an SQNR floor write '{spec}dB'")
    return Budget("cosine", float(spec), decide=decide)


# the heads whose last axis is a choice among classes: a softmax over it, a linear layer's logits
_SOFTMAXES = (nn.SOFTMAX, nn.LOG_SOFTMAX)
_LINEAR_HEADS = (nn.GEMM, nn.MATMUL)


def _last_dim(v: Value):
    shape = getattr(v.type, "shape", None)
    return shape[-1] if shape else None


def _constant(v: Value) -> bool:
    return constant_array(v) is not None


def _is_class_scores(v: Value) -> bool:
    """Is ``v``'s last axis a choice among classes: a softmax along it, or a linear layer with
    constant weights (its logits), seen through a bias add, an identity or a reshape that keeps
    the last axis."""
    while (op := getattr(v, "op", None)) is not None:
        if op.opdef in _SOFTMAXES:
            shape = getattr(v.type, "shape", None)
            return bool(shape) and op.attr("axis") % len(shape) == len(shape) - 1
        if op.opdef in _LINEAR_HEADS:
            return _constant(op.operands[1])
        if op.opdef is nn.ADD and sum(map(_constant, op.operands)) == 1:
            v = next(o for o in op.operands if not _constant(o))
        elif op.opdef is nn.IDENTITY or (op.opdef in (nn.RESHAPE, nn.FLATTEN) and _last_dim(v) is not None
                                          and _last_dim(v) == _last_dim(op.operands[0])):
            v = op.operands[0]
        else:
            return False
    return False


def class_score_outputs(fn: Function) -> tuple[str, ...]:
    """The outputs of ``fn`` that score classes along their last axis (a classifier's probabilities,
    a recognizer's per-position logits), whose argmax is the decision a cosine can hide: ddddocr's
    recognizer, all int8, keeps cosine 0.998 with 30% of its strings changed."""
    return tuple(n for n, v in zip(output_names(fn), fn.outputs) if _is_class_scores(v))


# a detection head writes a few quantities per position: its conv's output channels (box sides or
# their bins, objectness, one score per class: ddddocr's 6, PicoDet's 10 and 32), moved last
MAX_QUANTITIES = 64


def _is_quantities(v: Value) -> bool:
    """``[N, positions, K]``, K static and small, made by a Transpose that moves axis 1 (a conv's
    channels) last, seen through reshapes: per-position quantities, not features along the last axis
    (a LayerNorm's or a linear layer's hidden state, which the cosine judges) nor class scores."""
    shape = getattr(v.type, "shape", None)
    k = shape[-1] if shape else None
    if len(shape or ()) != 3 or not isinstance(k, int) or not 1 < k <= MAX_QUANTITIES or _is_class_scores(v):
        return False
    while (op := getattr(v, "op", None)) is not None and op.opdef in (nn.RESHAPE, nn.IDENTITY):
        v = op.operands[0]
    perm = tuple(op.attr("perm") or ()) if op is not None and op.opdef is nn.TRANSPOSE else ()
    return len(perm) >= 3 and perm[-1] == 1


def quantity_outputs(fn: Function) -> tuple[str, ...]:
    """The outputs of ``fn`` that hold a few distinct quantities per position along their static last
    axis, ``[N, positions, K]`` with ``K <= MAX_QUANTITIES``, a conv's channels moved last, and are not
    class scores: a detector's boxes and scores, which its post-processing reads one by one against
    thresholds and IoU. The output's cosine weighs them by magnitude and by their mean: ddddocr's
    detector all int8 keeps cosine 0.9992 while its x offsets (mean ~0.5 cells) correlate at 0.986
    and 9% of its boxes move past IoU 0.9."""
    return tuple(n for n, v in zip(output_names(fn), fn.outputs) if _is_quantities(v))


def output_quantity_correlation(reference: Sequence[dict], got: Sequence[dict], names: Sequence[str],
                                min_positions: int = 1) -> float:
    """The worst correlation (the cosine after each side's mean is taken away) of one quantity —
    one index of the last axis — over every position of every batch, among the outputs ``names``.
    A quantity whose float values spread less than one int8 step of its output's range is not
    judged (no int8 output resolves it: a class no sample shows); an output measured on fewer
    than ``min_positions`` positions is not judged (1.0)."""
    sums: dict[str, list] = {}
    for r, g in zip(reference, got):
        for k in [k for k in _float_outputs(r) if k in names]:
            a = _positions(np.asarray(r[k], np.float64))
            b = np.asarray(g[k], np.float64).reshape(a.shape)
            t = sums.setdefault(k, [0, 0.0, 0.0, 0.0, 0.0, 0.0, np.inf, -np.inf])
            t[0] += a.shape[0]
            for i, x in enumerate((a.sum(0), b.sum(0), (a * a).sum(0), (b * b).sum(0), (a * b).sum(0)), 1):
                t[i] = t[i] + x
            t[6], t[7] = min(t[6], float(a.min(initial=np.inf))), max(t[7], float(a.max(initial=-np.inf)))
    worst = 1.0
    for n, sa, sb, saa, sbb, sab, lo, hi in sums.values():
        if n < max(min_positions, 1):
            continue
        va, vb, cov = saa - sa * sa / n, sbb - sb * sb / n, sab - sa * sb / n
        step = (hi - lo) / 255.0
        judged = va > n * step * step
        if not judged.any():
            continue
        with np.errstate(all="ignore"):
            corr = np.where(vb[judged] > 0, cov[judged] / np.sqrt(va[judged] * vb[judged]), 0.0)
        worst = min(worst, float(np.min(np.nan_to_num(corr, nan=0.0))))
    return worst


def _positions(a: np.ndarray) -> np.ndarray:
    """``[positions, last axis]``: every index of the other axes a position (a scalar: one of one)."""
    return a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)


def _rows(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64)
    return a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(1, -1)


def _float_outputs(outputs: dict) -> list[str]:
    """The outputs a metric compares: float ones (an integer output — a shape, an argmax — is exact
    or not a quantity whose closeness means anything)."""
    return sorted(k for k, v in outputs.items() if np.issubdtype(np.asarray(v).dtype, np.floating))


def output_cosine(reference: Sequence[dict], got: Sequence[dict]) -> float:
    """The worst float output's mean cosine, the mean taken over the rows (first axis) of every batch.
    Every output is held to the budget: a mean over outputs let a detector's class scores (small,
    and the hardest to keep: PicoDet's at 0.66-0.82 all int8) hide behind its box outputs."""
    per: dict[str, list[np.ndarray]] = {}
    for ref, out in zip(reference, got):
        for k in _float_outputs(ref):
            per.setdefault(k, []).append(_row_cosines(_rows(ref[k]), _rows(out[k])))
    return float(min(np.mean(np.concatenate(v)) for v in per.values())) if per else 1.0


def _row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    both_zero = (na == 0) & (nb == 0)
    with np.errstate(all="ignore"):
        c = np.where(both_zero, 1.0, np.sum(a * b, axis=1) / (na * nb))
    return np.nan_to_num(c, nan=0.0)


def output_sqnr(reference: Sequence[dict], got: Sequence[dict]) -> float:
    """The worst float output's SQNR (dB) over every batch (see ``output_cosine``)."""
    powers: dict[str, list[float]] = {}
    for r, g in zip(reference, got):
        for k in _float_outputs(r):
            a, b = np.asarray(r[k], np.float64), np.asarray(g[k], np.float64)
            p = powers.setdefault(k, [0.0, 0.0])
            p[0] += float(np.sum(a * a))
            p[1] += float(np.sum((a - b) ** 2))
    return min((_db(s, n) for s, n in powers.values()), default=float("inf"))


def output_top1(reference: Sequence[dict], got: Sequence[dict], names: Sequence[str] | None = None,
                min_positions: int = 1) -> float:
    """The worst float output's top-1 agreement: over every position (all axes but the last), the
    share whose argmax along the last axis is the reference's. For outputs that are scores over
    classes or symbols, where a logits' cosine barely moves when a decision flips (ddddocr's
    recognizer: 0.998 all int8 with 30% of its strings changed). ``names``: those outputs only;
    an output measured on fewer than ``min_positions`` positions is not judged (1.0)."""
    agree: dict[str, list[int]] = {}
    for r, g in zip(reference, got):
        for k in _float_outputs(r) if names is None else [k for k in _float_outputs(r) if k in names]:
            a = _positions(np.asarray(r[k]))
            b = np.asarray(g[k]).reshape(a.shape)
            n = agree.setdefault(k, [0, 0])
            n[0] += int(np.sum(np.argmax(a, axis=1) == np.argmax(b, axis=1)))
            n[1] += a.shape[0]
    return min((same / total for same, total in agree.values() if total >= max(min_positions, 1)), default=1.0)


def decisive_positions(floor: float) -> int:
    """The fewest positions a top-1 share is judged on under a cosine ``floor``: enough that one flip
    alone does not miss it (200 at 0.995). A classifier's 32 held-out samples are too few to tell
    99.5% from 97%; a recognizer's lines give hundreds of positions."""
    return int(np.ceil(1.0 / max(1.0 - floor, 1e-9) - 1e-9))


def score(budget: Budget, reference: Sequence[dict], got: Sequence[dict]) -> tuple[float, bool]:
    """(the measured value, is the budget met)."""
    if budget.kind == "callback":
        met = bool(budget.callback(list(reference), list(got)))
        return float(met), met
    value = {"cosine": output_cosine, "sqnr": output_sqnr, "top1": output_top1}[budget.kind](reference, got)
    if budget.kind == "cosine" and budget.decisions:   # the same floor on each: the worst of them
        value = min(value, output_top1(reference, got, budget.decisions, decisive_positions(budget.floor)))
    if budget.kind == "cosine" and budget.quantities:
        value = min(value, output_quantity_correlation(reference, got, budget.quantities,
                                                       decisive_positions(budget.floor)))
    return value, value >= budget.floor


NOISE = 0.05        # of a cosine's or share's distance to 1: what a budget's 16-64 samples do not rank
NOISE_DB = 0.2      # the same for an SQNR


def at_least_about(a: float, b: float, kind: str) -> bool:
    """Is the metric ``a`` at least ``b`` up to what the budget's samples resolve: within ``NOISE`` of
    ``b``'s distance to 1 for a cosine or top-1 share, ``NOISE_DB`` for an SQNR, exactly for a
    callback's 0/1. PicoDet, every class int16 at --budget 0.999: worst-output cosine 0.99738 with
    nearest and with hessian rounding, boxes 0.924 and 0.969."""
    if kind in ("cosine", "top1"):
        return (1.0 - a) <= (1.0 - b) * (1.0 + NOISE) + 1e-12
    if kind == "sqnr":
        return a >= b - NOISE_DB
    return a >= b


def _power(x: np.ndarray) -> float:
    return float(np.sum(np.square(x)))


def _rounding_noise(x: np.ndarray, scale: float, zero_point: int, bits: int) -> float:
    """``sum((x - round trip)²)`` for float64 ``x``, in place in one scratch array (the ranking runs
    it on every candidate tensor of every sample)."""
    t = np.divide(x, scale)
    np.round(t, out=t)
    t += zero_point
    np.clip(t, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1, out=t)
    t -= zero_point
    t *= scale
    np.subtract(x, t, out=t)
    return _power(t)


def _db(signal: float, noise: float) -> float:
    return float("inf") if noise == 0 else float(10.0 * np.log10(max(signal, 1e-300) / noise))


@dataclass
class Candidate:
    """One same-scale class that can be int16: its tensors' names and rounding SQNRs (dB)."""

    names: list[str]
    sqnr8: float
    sqnr16: float


@dataclass
class Promotion:
    """What the search did, for the summary."""

    budget: Budget
    before: float                     # the outputs' metric, all int8
    after: float                      # with the promotions
    met: bool
    promoted: list[Candidate] = field(default_factory=list)
    candidates: int = 0               # classes that could be int16
    evaluations: int = 0              # integer runs the search made
    samples: int = 0                  # calibration samples the metric was measured on
    held_out: bool = False            # ... set aside from the calibration (False: too few to spare)
    refused: str = ""                 # the last error of a promotion the kernels could not run
    best_tried: float | None = None   # a missed budget: the best metric any promotion reached
    # a budget the promotions missed and met with these ops kept float (no 16-bit kernel): their labels
    kept_float: list[str] = field(default_factory=list)


def rounding_powers(x: np.ndarray, param: tuple[float, int, float, float],
                    told_apart: tuple[float, float] | None = None) -> np.ndarray:
    """(signal, int8 noise, signal, int16 noise) powers of ``x`` for ``param`` = (int8 scale, zero
    point, rmin, rmax); the int16 scale is the one the solver would give the same range.
    ``told_apart``: the interval the value's readers distinguish (``solver.told_apart``); ``x`` is
    clipped to it first, since the saturation beyond it is chosen and costs nothing (a conv output
    below -3 read by hard-swish) and would otherwise rank the value worst without int16 helping."""
    if told_apart is not None:
        x = np.clip(x, *told_apart)
    scale, zp, lo, hi = param
    x = np.asarray(x, np.float64)
    signal = _power(x)
    return np.array([signal, _rounding_noise(x, scale, zp, 8), signal,
                     _rounding_noise(x, range_params(lo, hi, 16)[0], 0, 16)])


def rank(classes: dict[int, list[str]], powers: dict[str, np.ndarray]) -> list[Candidate]:
    """Candidates worst int8 rounding SQNR first. ``classes``: class key -> tensor names; ``powers``:
    name -> its ``rounding_powers`` summed over the samples (a name without them is skipped)."""
    out = []
    for names in classes.values():
        s8, n8, s16, n16 = sum((powers[n] for n in names if n in powers), np.zeros(4))
        out.append(Candidate(list(names), _db(s8, n8), _db(s16, n16)))
    out.sort(key=lambda c: c.sqnr8)
    return out


def _bisect(lo: int, hi: int, meets: Callable[[int], bool]) -> tuple[int, bool]:
    """The smallest k in (lo, hi] with ``meets(k)``, given meets(hi) and not meets(lo)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if meets(mid) else (mid, hi)
    return hi, True


def shortest_prefix(n: int, meets: Callable[[int], bool]) -> tuple[int, bool]:
    """The smallest k in 1..n with ``meets(k)`` assuming it is monotone: the whole ranking first, then
    bisection, at most ceil(log2(n)) + 1 calls. Every budget measured so far needed most of the
    candidates (48 of 72 classes, 118 of 145, 161 of 197, 196 of 199), where doubling up from 1 had
    taken twice the integer runs, each of a mostly int16 module. Returns (k, met); (n, False) when
    even n does not meet it (then n is the only promotion measured)."""
    meets = functools.cache(meets)   # each prefix is measured once
    if not meets(n):
        return n, False
    return _bisect(0, n, meets)      # lo 0 = nothing promoted, known to miss


def rising_prefix(n: int, meets: Callable[[int], bool]) -> tuple[int, bool]:
    """``shortest_prefix`` from below: doubling k from 1, then bisection (about 2·log2(k) calls),
    for when the whole ranking could not be measured (a kernel refused one of its scales)."""
    meets = functools.cache(meets)
    k, last_fail = 1, 0
    while k < n and not meets(k):
        last_fail, k = k, min(2 * k, n)
    if k >= n and not meets(n):
        return n, False
    return _bisect(last_fail, min(k, n), meets)


# -- the search over a quantized graph --------------------------------------------------------------

def samples_of(statistics) -> list[dict[str, np.ndarray]]:
    """What the budget is measured on: the samples calibration set aside, or, when there were too
    few to spare any, the kept calibration samples."""
    return statistics.held_out or statistics.kept


def promote(fn, statistics, config, params, budget: Budget, evaluate,
            classes_of: Callable[[], dict[int, list[str]]],
            told_apart: dict[str, tuple[float, float]] | None = None) -> tuple[tuple[str, ...], Promotion]:
    """The tensor names to make int16 (``Config.int16``) and the report. ``evaluate(names)`` runs
    the integer module quantized with those names promoted on the budget's samples (``samples_of``)
    and returns its (metric, met); it is called with ``()`` first. ``classes_of()``: the same-scale
    classes that can be int16 (``solver.int16_classes``), asked only when the all-int8 module misses.
    The ranking reads the kept calibration samples, within ``told_apart`` (``rounding_powers``)."""
    before, met = evaluate(())
    measured = samples_of(statistics)
    report = Promotion(budget, before, before, met, samples=sum(len(next(iter(b.values()))) for b in measured),
                       held_out=bool(statistics.held_out))
    report.evaluations = 1
    if met:
        return (), report
    classes = classes_of()
    report.candidates = len(classes)
    if not classes:
        return (), report
    names = sorted({n for ns in classes.values() for n in ns})
    engine = statistics.make_engine(fn, names, config.engine)
    by_name = {v.name_hint: p for v, p in params.items() if hasattr(p, "zero_point")}
    param = {n: (by_name[n].scale, by_name[n].zero_point, by_name[n].rmin, by_name[n].rmax)
             for n in names if n in by_name}
    # power sums batch by batch: keeping every candidate tensor of every sample took tens of GB
    # on a detector (PicoDet: 24 GB at 32 calibration images)
    powers = {n: np.zeros(4) for n in param}
    for batch in statistics.kept:
        out = engine.run(batch)
        for n in param:
            powers[n] += rounding_powers(np.asarray(out[n]), param[n], (told_apart or {}).get(n))
        del out
    ranked = rank(classes, powers)
    results: dict[int, tuple[float, bool]] = {}

    def chosen(k: int) -> tuple[str, ...]:
        return tuple(n for c in ranked[:k] for n in c.names)

    def meets(k: int) -> bool:
        report.evaluations += 1
        try:
            results[k] = evaluate(chosen(k))
        except QuantirError as e:   # a promotion the kernels refuse (a scale LiteRT's int16 Prepare rejects)
            report.refused = f"{type(e).__name__}: {e}"
            return False
        return results[k][1]

    k, met = shortest_prefix(len(ranked), meets)
    if not met and len(ranked) not in results and len(ranked) > 1:   # refused whole: search from below
        k, met = rising_prefix(len(ranked) - 1, meets)
    if not met:   # missed: keep the best module measured, all-int8 included (promoting can also hurt)
        results[0] = (before, False)
        k = max(results, key=lambda j: (results[j][0], -j))
        report.best_tried = max((v for j, (v, _) in results.items() if j), default=None)   # None: all refused
        if budget.kind == "callback" or results[k][0] - before < WORTH * (budget.floor - before):
            k = 0   # int16 tensors that close little of the gap cost speed and size for nothing
    report.after, report.met = results[k][0], met
    report.promoted = ranked[:k]
    return chosen(k), report
