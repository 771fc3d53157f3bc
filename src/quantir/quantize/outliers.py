"""Outlier passes on LayerNorm outputs that feed only matmuls: no training, same LiteRT ops.

A transformer's LayerNorm output ``y = n·γ + β`` (``n`` the normalized rows) is one int8 tensor
with one scale, but its channels differ in magnitude by 10-100x: γ amplifies a few, and the
residual stream's own outlier channels survive the per-row normalization. Two passes move that
spread out of the activation, where a per-tensor scale pays for it, into the weights of the
matmuls that read it, where the per-output-channel scales see each input channel's rows mixed
with the others (a row of ``W`` scaled up costs little as long as the columns' maxima do not move
much):

``fold_layer_norm``
    ``y·W + b = n·(diag(γ)·W) + (β·W + b)``: the MUL γ and ADD β disappear (two fewer int8
    requantizations), the matmuls read ``n`` directly.
``smooth_layer_norm``
    SmoothQuant's migration: ``s_j = max|X_j|^α / max|W_j|^(1-α)`` per input channel ``j`` (``X``
    the matmul input, ``W`` all its readers' weights side by side), ``X_j / s_j`` into the MUL that
    scales ``n`` (γ's place) and ``W_j · s_j``. ``α`` is chosen per LayerNorm from ``ALPHAS`` by the
    simulated integer error of its matmuls on the calibration samples (see ``choose``); with
    ``fold_layer_norm`` also on, "γ folded" (no MUL) and "γ kept" are candidates beside the α
    grid, so the pass never picks a form that its own measurement finds worse.

Where: on the float function after the expansions (``quantize.expand``) and before calibration.
After the expansion every LayerNorm — the ONNX op and the written-out forms, both
``Config.layer_norm`` forms — is ``n`` (``MUL(x - mean(x), rsqrt(...))`` or
``L2_NORMALIZATION(x - mean(x))``) followed by per-channel MUL/ADD constants (γ, including the
expansion's ``sqrt(C)``, and β): one shape to recognize, and the MUL γ it wrote can go.

Applies only where every reader of the LayerNorm output is a MatMul/Gemm with constant weights
(pre-LN blocks: a ViT's QKV and FFN inputs). Where the output also feeds a residual Add (post-LN
BERT, e.g. MiniLM) or anything else, the algebra does not hold and the site is left as it is,
with the reason in ``OutlierStats.not_applied``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from ..ir import Function, Operation, Value
from ..ir.dialects import arith, nn
from ..ir import elements_attr
from .calibrate import EngineFactory, ensure_names, input_specs
from .config import OUTLIER_PASSES, Config
from .data import DatasetManager
from .methods import Method, METHODS, compute_range
from .observers import HistogramObserver, MinMaxObserver
from .regions import constant_array

PASSES = OUTLIER_PASSES
FOLD, SMOOTH = PASSES      # "fold_layer_norm", "smooth_layer_norm"
ALPHAS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)   # SmoothQuant's useful range for encoders
STATISTICS_SAMPLES = 256    # calibration samples the smoothing statistics read (the first ones)
KEPT_ROWS = 4096            # rows of each n kept to simulate the candidates' integer error
ROWS_PER_BATCH = 512

DOCS = {FOLD: "LayerNorm gamma/beta folded into the matmuls that read it (weights diag(gamma)·W, bias beta·W + b)",
        SMOOTH: "SmoothQuant channel scaling: X_j/s_j into gamma, W_j·s_j, alpha per LayerNorm by simulated int error"}


@dataclass
class Reader:
    """A matmul reading the LayerNorm output: ``op`` (MatMul or Gemm), its weights as ``[C, N]``
    (input channels first) and the constant-bias ADD after it, if any."""

    op: Operation
    weight: np.ndarray
    bias_add: Operation | None


@dataclass
class Site:
    """One LayerNorm: its normalized rows ``core``, the affine ``core·scale + shift`` made of the
    per-channel MUL/ADD ``chain`` ending at ``output``, and the matmuls that read ``output``."""

    label: str
    core: Value
    output: Value
    chain: list[Operation]
    scale: np.ndarray
    shift: np.ndarray
    readers: list[Reader]


@dataclass
class OutlierStats:
    """What the outlier passes did: per pass, the LayerNorms rewritten with a detail each; the
    LayerNorms left alone, with why."""

    passes: tuple[str, ...] = ()
    applied: dict[str, list[str]] = field(default_factory=dict)
    not_applied: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"passes": list(self.passes), "applied": {k: list(v) for k, v in self.applied.items()},
                "not_applied": dict(self.not_applied)}


# -- recognizing the sites -------------------------------------------------------------------------

def _producer(v: Value, opdef) -> Operation | None:
    op = getattr(v, "op", None)
    return op if op is not None and op.opdef is opdef else None


def _is_centered(v: Value) -> bool:
    """``x - mean(x)`` (the expansion's and the written-out LayerNorm's first step)."""
    sub = _producer(v, nn.SUB)
    if sub is None:
        return False
    mean = _producer(sub.operands[1], nn.REDUCE_MEAN)
    return mean is not None and mean.operands[0] is sub.operands[0]


def _is_core(op: Operation) -> bool:
    """The normalized rows: ``centered · rsqrt(...)`` or ``L2_NORMALIZATION(centered)``."""
    if op.opdef is nn.LP_NORMALIZATION:
        return _is_centered(op.operands[0])
    if op.opdef is nn.MUL and len(op.operands) == 2:
        a, b = op.operands
        return (_is_centered(a) and not _is_centered(b) and constant_array(b) is None) or \
            (_is_centered(b) and not _is_centered(a) and constant_array(a) is None)
    return False


def _channels(v: Value) -> int | None:
    shape = getattr(v.type, "shape", None)
    return shape[-1] if shape and shape[-1] is not None else None


def _per_channel(c: np.ndarray, channels: int) -> np.ndarray | None:
    """``c`` as one value per last-axis channel, when it broadcasts along that axis only."""
    c = np.asarray(c)
    if c.size == 1:
        return np.full(channels, float(c.reshape(())), np.float64)
    if c.ndim >= 1 and c.shape[-1] == channels and c.size == channels:
        return c.reshape(channels).astype(np.float64)
    return None


def _affine_step(op: Operation, v: Value, channels: int) -> tuple[str, np.ndarray] | None:
    """``("mul"|"add", per-channel constant)`` when ``op`` multiplies or adds one to ``v``."""
    if op.opdef not in (nn.MUL, nn.ADD) or len(op.operands) != 2 or op.results[0].type != v.type:
        return None
    other = op.operands[1] if op.operands[0] is v else op.operands[0]
    if other is v:
        return None
    c = constant_array(other)
    per = None if c is None else _per_channel(c, channels)
    return None if per is None else ("mul" if op.opdef is nn.MUL else "add", per)


def _reader(op: Operation, index: int, v: Value, channels: int) -> Reader | str:
    """The matmul ``op`` reading ``v`` as its input, or why it is not one."""
    where = op.label or (op.results[0].name_hint if op.results else None) or op.name
    if op.opdef is nn.ADD:
        other = op.operands[1 - index] if len(op.operands) == 2 else None
        if other is not None and constant_array(other) is None:
            return f"not applicable: LayerNorm output feeds a residual Add ({where})"
    if op.opdef is nn.MATMUL and index == 0:
        w = constant_array(op.operands[1])
        if w is None or w.ndim != 2 or w.shape[0] != channels:
            return f"not applicable: the MatMul {where} does not have constant 2-D weights [{channels}, N]"
        return Reader(op, np.asarray(w, np.float64), _bias_add(op, w.shape[1]))
    if op.opdef is nn.GEMM and index == 0 and not op.attr("trans_a", 0):
        b = constant_array(op.operands[1])
        bias = op.operands[2] if len(op.operands) > 2 else None
        if b is None or (bias is not None and constant_array(bias) is None):
            return f"not applicable: the Gemm {where} does not have constant weights and bias"
        w = np.asarray(b.T if op.attr("trans_b", 0) else b, np.float64) * float(op.attr("alpha", 1.0))
        return Reader(op, w, None) if w.shape[0] == channels else \
            f"not applicable: the Gemm {where} has weights of shape {list(b.shape)}"
    return f"not applicable: LayerNorm output feeds {op.name} ({where}), not only matmuls with constant weights"


def _bias_add(mm: Operation, n: int) -> Operation | None:
    """The ADD of a constant per output channel right after ``mm`` (its only reader), if any."""
    out = mm.results[0]
    if len(out.uses) != 1:
        return None
    add, index = out.uses[0]
    if add.opdef is not nn.ADD or len(add.operands) != 2 or add.results[0].type != out.type:
        return None
    c = constant_array(add.operands[1 - index])
    return add if c is not None and _per_channel(c, n) is not None else None


def find_sites(fn: Function, config: Config) -> tuple[list[Site], dict[str, str]]:
    """The LayerNorms the passes can rewrite, and the others with the reason."""
    sites, refused = [], {}
    for op in fn.ops:
        if not op.results or not _is_core(op):
            continue
        core = op.results[0]
        label = (op.label or core.name_hint or "layer_norm").rsplit("/", 1)[0]
        channels = _channels(core)
        if channels is None:
            refused[label] = "not applicable: the channel count (last dim) is not static"
            continue
        scale, shift = np.ones(channels), np.zeros(channels)
        v, chain = core, []
        while len(v.uses) == 1:
            user = v.uses[0][0]
            step = _affine_step(user, v, channels)
            if step is None:
                break
            kind, c = step
            scale, shift = (scale * c, shift * c) if kind == "mul" else (scale, shift + c)
            chain.append(user)
            v = user.results[0]
        reason = _refusal(fn, v, chain, channels, config, label)
        if isinstance(reason, str):
            refused[label] = reason
        else:
            sites.append(Site(label, core, v, chain, scale, shift, reason))
    return sites, refused


def _refusal(fn: Function, v: Value, chain: list[Operation], channels: int, config: Config,
             label: str) -> list[Reader] | str:
    if not chain:
        return "not applicable: no gamma or beta after the normalization to fold or scale into"
    if any(config.excludes(o.label, o.name) for o in chain) or label in config.exclude:
        return "excluded by the configuration"
    if v in fn.outputs:
        return "not applicable: the LayerNorm output is a model output"
    readers = []
    for user, index in v.uses:
        r = _reader(user, index, v, channels)
        if isinstance(r, str):
            return r
        if config.excludes(user.label, user.name):
            return f"excluded by the configuration ({user.label or user.name})"
        readers.append(r)
    return readers


# -- the candidates and their simulated integer error ---------------------------------------------

@dataclass(frozen=True)
class Candidate:
    """A rewrite of one site: the matmuls read ``core·mul + add`` (``mul`` None: ``core`` itself)
    with weights ``diag(s)·W``; ``fold_shift``: β·W goes into the bias (``add`` then 0)."""

    name: str
    s: np.ndarray
    mul: np.ndarray | None
    add: np.ndarray
    fold_shift: bool


def candidates(site: Site, passes: Sequence[str], x_max: np.ndarray | None) -> list[Candidate]:
    """The forms the enabled passes may give ``site`` (``x_max``: per-channel max|X| of the matmul
    input as the non-smoothed form computes it, needed for the α grid)."""
    a, b = site.scale, site.shift
    fold = FOLD in passes
    out = [Candidate("gamma folded", a.copy(), None, np.zeros_like(b), True)] if fold else []
    if SMOOTH in passes and x_max is not None:
        out.append(Candidate("gamma kept", np.ones_like(a), a.copy(), np.zeros_like(b) if fold else b.copy(), fold))
        w_max = np.max(np.abs(np.concatenate([r.weight for r in site.readers], axis=1)), axis=1)
        for alpha in ALPHAS:
            with np.errstate(divide="ignore", invalid="ignore"):
                s = np.power(x_max, alpha) / np.power(w_max, 1.0 - alpha)
            s = np.where(np.isfinite(s) & (s > 0), s, 1.0)   # dead channels (γ_j = 0, W_j = 0) stay
            out.append(Candidate(f"alpha {alpha:.1f}", s, a / s, np.zeros_like(b) if fold else b / s, fold))
    return out


def _fake_quant_act(x: np.ndarray, config: Config) -> np.ndarray:
    """``x`` through one per-tensor activation quantizer with the configured method's range."""
    if config.activations == "int16":   # int16 takes min/max, symmetric (Config.activations)
        m = float(np.max(np.abs(x))) or 1.0
        step = m / 32767.0
        return np.clip(np.round(x / step), -32768, 32767) * step
    obs = HistogramObserver() if METHODS[Method(config.method)].observer is HistogramObserver else MinMaxObserver()
    obs.update(x.astype(np.float32))
    lo, hi = compute_range(config.method_options, obs)
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    step = (hi - lo) / 255.0 or 1.0
    zp = np.round(-128.0 - lo / step)
    return (np.clip(np.round(x / step) + zp, -128, 127) - zp) * step


def _fake_quant_weights(w: np.ndarray, per_channel: bool) -> np.ndarray:
    """Symmetric int8 weights, one scale per output channel (column of ``[C, N]``) or per tensor."""
    m = np.max(np.abs(w), axis=0, keepdims=True) if per_channel else np.max(np.abs(w))
    step = np.where(m > 0, m / 127.0, 1.0)
    return np.clip(np.round(w / step), -127, 127) * step


def simulated_error(site: Site, cand: Candidate, rows: np.ndarray, config: Config) -> float:
    """Relative squared error of the site's matmul outputs when computed the candidate's way with
    int8 (fake-quantized) tensors, against the float outputs: ``Σ‖Y_q − Y‖² / Σ‖Y‖²`` over the
    readers, on ``rows`` of ``n``. ``n`` is quantized as itself; a MUL (and ADD) is one more
    quantized tensor; the weights are ``diag(s)·W`` quantized as the solver does (symmetric)."""
    a, b = site.scale, site.shift
    n_q = _fake_quant_act(rows, config)
    x = n_q if cand.mul is None else _fake_quant_act(n_q * cand.mul + cand.add, config)
    x_float = rows * a + b
    num = den = 0.0
    for r in site.readers:
        ref = x_float @ r.weight
        got = x @ _fake_quant_weights(cand.s[:, None] * r.weight, config.per_channel)
        if cand.fold_shift:
            got = got + b @ r.weight
        num += float(np.sum((got - ref) ** 2))
        den += float(np.sum(ref ** 2))
    return num / den if den > 0 else 0.0


def choose(site: Site, cands: list[Candidate], rows: np.ndarray, config: Config) -> tuple[Candidate, dict[str, float]]:
    """The candidate with the smallest simulated error, and each one's error in dB."""
    errors = {c.name: simulated_error(site, c, rows, config) for c in cands}
    best = min(cands, key=lambda c: errors[c.name])
    return best, {k: float(10 * np.log10(v)) if v > 0 else float("-inf") for k, v in errors.items()}


# -- statistics on the float graph -----------------------------------------------------------------

@dataclass
class _RowStats:
    lo: np.ndarray
    hi: np.ndarray
    rows: list[np.ndarray]
    kept: int = 0

    def update(self, n: np.ndarray) -> None:
        flat = n.reshape(-1, n.shape[-1]).astype(np.float64)
        self.lo, self.hi = np.minimum(self.lo, flat.min(0)), np.maximum(self.hi, flat.max(0))
        if self.kept < KEPT_ROWS:   # evenly spaced rows of each batch: every sample, not the first few
            take = flat[:: max(1, len(flat) // ROWS_PER_BATCH)][: KEPT_ROWS - self.kept]
            self.rows.append(take)
            self.kept += len(take)


def row_statistics(fn: Function, sites: list[Site], dataset: DatasetManager, config: Config,
                   make_engine: EngineFactory) -> dict[str, _RowStats]:
    """Per site: per-channel min/max of ``n`` over the first ``STATISTICS_SAMPLES`` calibration
    samples, and up to ``KEPT_ROWS`` of its rows, from the float function (``config.engine``)."""
    names = [s.core.name_hint for s in sites]
    engine = make_engine(fn, names, config.engine)
    stats = {n: _RowStats(np.full(s.core.type.shape[-1], np.inf), np.full(s.core.type.shape[-1], -np.inf), [])
             for n, s in zip(names, sites)}
    limit = STATISTICS_SAMPLES if config.max_samples is None else min(config.max_samples, STATISTICS_SAMPLES)
    for batch in dataset.batches(input_specs(fn), config.batch_size, limit):
        out = engine.run(batch)
        for n in names:
            stats[n].update(np.asarray(out[n]))
    return stats


def remembering(dataset: DatasetManager) -> tuple[DatasetManager, DatasetManager]:
    """``(head, whole)``: ``head`` reads the dataset from its start and remembers what it read;
    ``whole``'s first reading gives that again and then the rest of the same reading (a generator,
    which can be read once, loses nothing), later readings start afresh."""
    live: Iterator = dataset._source()
    seen: list = []
    readings = [0]

    def head() -> Iterator:
        for feeds in live:
            seen.append(feeds)
            yield feeds

    def whole() -> Iterator:
        readings[0] += 1
        if readings[0] > 1:
            yield from dataset._source()
            return
        yield from seen
        seen.clear()
        yield from live
    return (DatasetManager(head, dataset.description, dataset.num_samples),
            DatasetManager(whole, dataset.description, dataset.num_samples))


# -- rewriting ----------------------------------------------------------------------------------------

def _constant(fn: Function, before: Operation, array: np.ndarray, name: str) -> Value:
    attr = elements_attr(np.ascontiguousarray(array, np.float32))
    c = fn.body.insert_before(before, arith.CONSTANT.build([], [attr.type], value=attr)).results[0]
    c.name_hint = name
    return c


def _new_op(fn: Function, before: Operation, opdef, operands: list[Value], like: Value, label: str,
            name: str) -> Value:
    op = opdef.build(operands, [like.type])
    op.label, op.loc = label, before.loc
    out = fn.body.insert_before(before, op).results[0]
    out.name_hint = name
    return out


def rewrite(fn: Function, site: Site, cand: Candidate) -> None:
    """Give ``site`` the candidate's form: the readers read ``core·mul + add`` (or ``core``), their
    weights become ``diag(s)·W`` and, with ``fold_shift``, their biases ``β·W + b``."""
    first = site.chain[0]
    name = site.output.name_hint or site.label
    x = site.core
    if cand.mul is not None:
        x = _new_op(fn, first, nn.MUL, [x, _constant(fn, first, cand.mul, f"{name}.smooth_scale")], site.core,
                    f"{site.label}/smoothed", f"{name}.smoothed")
        if np.any(cand.add):
            x = _new_op(fn, first, nn.ADD, [x, _constant(fn, first, cand.add, f"{name}.smooth_shift")], site.core,
                        f"{site.label}/smoothed_shift", f"{name}.smoothed_shift")
    for r in site.readers:
        _rewrite_reader(fn, r, cand.s, site.shift @ r.weight if cand.fold_shift else None)
    site.output.replace_all_uses_with(x)
    for op in reversed(site.chain):
        consts = [o for o in op.operands if constant_array(o) is not None]
        fn.body.erase(op)
        for c in consts:
            if not c.uses:
                fn.body.erase(c.op)


def _rewrite_reader(fn: Function, r: Reader, s: np.ndarray, extra_bias: np.ndarray | None) -> None:
    op = r.op
    old_w = op.operands[1]
    w = constant_array(old_w).astype(np.float64)
    trans_b = op.opdef is nn.GEMM and op.attr("trans_b", 0)
    new_w = w * (s[None, :] if trans_b else s[:, None])
    op.set_operand(1, _constant(fn, op, new_w, f"{old_w.name_hint or 'weight'}.scaled"))
    if not old_w.uses:
        fn.body.erase(old_w.op)
    if extra_bias is None or not np.any(extra_bias):
        return
    if r.bias_add is not None:
        add = r.bias_add
        i = 1 if add.operands[0] is op.results[0] else 0
        old_b = add.operands[i]
        b = _per_channel(constant_array(old_b), len(extra_bias))
        add.set_operand(i, _constant(fn, add, b + extra_bias, f"{old_b.name_hint or 'bias'}.folded"))
        if not old_b.uses:
            fn.body.erase(old_b.op)
        return
    if op.opdef is nn.GEMM and len(op.operands) > 2 and op.operands[2] is not None and float(op.attr("beta", 1.0)):
        old_c = op.operands[2]
        c = np.asarray(constant_array(old_c), np.float64)
        add_c = extra_bias / float(op.attr("beta", 1.0))   # Gemm adds beta·C
        op.set_operand(2, _constant(fn, op, c + add_c, f"{old_c.name_hint or 'bias'}.folded"))
        if not old_c.uses:
            fn.body.erase(old_c.op)
        return
    # no bias to fold into: a constant ADD after the matmul (the FC pattern takes it as its bias)
    out = op.results[0]
    after = fn.body.ops[fn.body.ops.index(op) + 1]
    users = list(out.uses)
    added = _new_op(fn, after, nn.ADD, [out, _constant(fn, after, extra_bias, f"{out.name_hint}.folded_bias")],
                    out, f"{op.label or op.name}/folded_bias", f"{out.name_hint}.folded_bias")
    for user, index in users:
        user.set_operand(index, added)


# -- the pass ------------------------------------------------------------------------------------------

def run(fn: Function, dataset: DatasetManager, config: Config,
        make_engine: EngineFactory) -> tuple[OutlierStats, DatasetManager]:
    """Apply ``config.outliers`` to ``fn`` in place; returns what was done and the dataset to
    calibrate with (the same samples: what the statistics read is not lost)."""
    passes = tuple(p for p in PASSES if p in (config.outliers or ()))
    stats = OutlierStats(passes)
    if not passes:
        return stats, dataset
    sites, refused = find_sites(fn, config)
    stats.not_applied.update(refused)
    if not sites:
        return stats, dataset
    rows: dict[str, _RowStats] = {}
    if SMOOTH in passes:
        head, dataset = remembering(dataset)
        rows = row_statistics(fn, sites, head, config, make_engine)
    for site in sites:
        rs = rows.get(site.core.name_hint)
        x_max = None
        if rs is not None and np.all(np.isfinite(rs.hi)):
            b = 0.0 if FOLD in passes else site.shift
            x_max = np.maximum(np.abs(rs.hi * site.scale + b), np.abs(rs.lo * site.scale + b))
        cands = candidates(site, passes, x_max)
        if not cands:
            stats.not_applied[site.label] = "no calibration rows reached this LayerNorm"
            continue
        if len(cands) == 1:
            best, detail = cands[0], ""
        else:
            best, errs = choose(site, cands, np.concatenate(rs.rows), config)
            detail = f" (simulated int error {errs[best.name]:.1f} dB; " + ", ".join(
                f"{k} {v:.1f}" for k, v in errs.items() if k != best.name) + ")"
        if best.name == "gamma kept" and not best.fold_shift:   # smoothing alone, and the site as it is won
            stats.not_applied[site.label] = f"kept as it is: no alpha lowered the simulated int error{detail}"
            continue
        rewrite(fn, site, best)
        readers = ", ".join(r.op.label or r.op.results[0].name_hint or r.op.name for r in site.readers)
        entry = f"{site.label}: {best.name} into {readers}{detail}"
        pass_name = SMOOTH if best.name.startswith("alpha") else FOLD   # "gamma kept" here: beta folded
        stats.applied.setdefault(pass_name, []).append(entry)
    ensure_names(fn)
    return stats, dataset


def summary_lines(stats: OutlierStats) -> list[str]:
    """The summary's account of the outlier passes."""
    if not stats.passes or not (stats.applied or stats.not_applied):
        return []
    total = sum(len(v) for v in stats.applied.values()) + len(stats.not_applied)
    lines = [f"outlier passes ({', '.join(stats.passes)}) on {total} LayerNorms:"]
    for p in stats.passes:
        done = stats.applied.get(p, [])
        lines.append(f"  {p}: {len(done)} ({DOCS[p]})")
        lines += [f"    {e}" for e in done]
    if stats.not_applied:
        lines.append(f"  left as they are: {len(stats.not_applied)}")
        lines += [f"    {label}: {why}" for label, why in stats.not_applied.items()]
    return lines


def has_sites(fn: Function) -> bool:
    """Is there a normalization core in ``fn`` (an already written-out LayerNorm) the passes may rewrite?"""
    return any(op.results and _is_core(op) for op in fn.ops)

