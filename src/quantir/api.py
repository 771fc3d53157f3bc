"""The public API: load a model, quantize it, look at what happened, save it.

>>> import numpy as np, quantir as qr                                    # doctest: +SKIP
>>> model = qr.load("models/fashion_mnist_cnn.onnx")                    # doctest: +SKIP
>>> result = qr.quantize(model, calibration={"input": images[:500]})    # doctest: +SKIP
>>> print(result.summary())                                             # doctest: +SKIP
>>> result.save("fashion_mnist_cnn.int8.mlir")                          # doctest: +SKIP

This module sits above every layer: it wires the frontends, the quantizer, the runtime
(calibration executors, per-layer error) and the backends together.
"""
from __future__ import annotations

import json
import os
import warnings as _warnings
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .errors import QuantirError, QuantizationWarning
from .ir import Function, Module, Operation, Value, clone_module
from .ir.dialects import quant
from .quantize import check as spec_view
from .quantize.calibrate import Statistics, calibrate, ensure_names, input_specs
from .quantize.config import DEFAULT_BUDGET, Config
from .quantize.data import as_dataset
from .quantize.expand import expand, would_expand
from .quantize import outliers as _outliers
from .quantize import channel_split as _channel_split
from .quantize.health import check as check_health
from .quantize.lower import lower
from .quantize.naming import integer_name
from .quantize.ops import EXPANSIONS
from .quantize.patterns import Annotation, annotate, is_integer_computation
from .quantize.attention_mask import ADDITIVE_ATTENTION_MASK, BOUND_ATTENTION_MASK
from .quantize.precision import (Promotion, at_least_about, class_score_outputs, parse_budget, promote,
                                 quantity_outputs, samples_of, score)
from .ir.names import output_names
from .quantize.params import hessian_applies, region_bits
from .quantize.solver import ActParams, int16_classes, solve, told_apart
from .quantize import stats_ir
from .report.layers import LayerError, add_sums, error_sums, from_sums
from .runtime.interpreter import available_cpus
from .rewrite import RewriteStats

HELD_OUT = 32   # calibration samples set aside to measure a budget on (Config.budget)


def load(path: str | os.PathLike | Any, *, qdq: bool = False) -> Module:
    """A model file as a Module: ``.onnx`` (or an ``onnx.ModelProto``), ``.mlir`` text, int8 ``.tflite``.
    ``qdq=True``: an ONNX QDQ or QOperator model as its integer module (``quant``/``qnn`` ops with the
    model's own parameters, repaired where LiteRT needs it: ``convert_qdq``, whose summary lists the repairs)."""
    if isinstance(path, Module):
        return path
    if qdq:
        return convert_qdq(path).module
    if not isinstance(path, (str, os.PathLike)):
        from .frontends.onnx import load_onnx
        return load_onnx(path)
    p = Path(path)
    if p.suffix == ".mlir":
        from .text import parse_module
        from .text.files import read_ir_file
        return parse_module(read_ir_file(p), str(p))
    if p.suffix == ".tflite":
        from .frontends.tflite import load_tflite
        return load_tflite(p)
    from .frontends.onnx import load_onnx
    return load_onnx(p)


def make_engine(fn: Function, names: Sequence[str], engine: str):
    """An executor of ``fn`` with ``names`` exposed. ``"ort"``: the fp32 function in ONNX Runtime
    when able, else numpy; ``"interpreter"``: quantir's interpreter (for an integer function,
    LiteRT's reference arithmetic); ``"ort-qdq"`` / ``"ort-qoperator"``: an integer function as
    ONNX Runtime runs that export of it (``runtime.ort.OrtIntegerExecutor``; no fallback: the caller asked
    for that runtime's arithmetic)."""
    if engine in ("ort-qdq", "ort-qoperator"):
        from .runtime.ort import OrtIntegerExecutor
        return OrtIntegerExecutor(fn, expose=list(names), format=engine.removeprefix("ort-"))
    if engine == "ort":
        try:
            from .runtime.ort import OrtExecutor
            return OrtExecutor(fn, expose=list(names))
        except (ImportError, QuantirError) as e:
            import warnings
            warnings.warn(f"ONNX Runtime cannot run this model ({e}); calibrating with the numpy interpreter")
    from .runtime import Interpreter

    class _Interpreter:
        def __init__(self):
            self._interpreter = Interpreter(fn)

        def run(self, feeds):
            return self._interpreter.run(feeds, intermediates=list(names))

        def run_all(self, batches, workers=None):
            return self._interpreter.run_all(batches, intermediates=list(names), workers=workers)
    return _Interpreter()


def _run_all(engine, batches, workers: int | None) -> list[dict]:
    """Every batch through ``engine``: on ``workers`` threads where it is the interpreter (ONNX
    Runtime runs its own threads)."""
    if hasattr(engine, "run_all"):
        return engine.run_all(batches, workers)
    return [engine.run(b) for b in batches]


def _rows_of(arrays) -> set[int]:
    """The sizes of axis 0 of ``arrays`` (a scalar has none: -1)."""
    return {np.shape(a)[0] if np.ndim(a) else -1 for a in arrays}


def _batch_dynamic(fn: Function) -> bool:
    """Every input of ``fn`` takes any number of rows on axis 0 (so a part of a batch can be fed)."""
    shapes = [getattr(a.type, "shape", None) for a in fn.arguments]
    return bool(shapes) and all(s is not None and len(s) > 0 and s[0] is None for s in shapes)


def _run_split(engine, batches: list[dict], workers: int | None, like: list[dict]) -> tuple[list[dict], list[int]]:
    """``_run_all``, with a batch of several samples cut along axis 0 into up to ``workers`` parts
    that run at once and are joined again: calibration stacks same-size samples into one batch
    (a dynamic batch dimension), which ``run_all`` alone would run on one thread. An output need not
    keep the samples on axis 0 (a recognizer's ``[T, N, C]``), so a batch is cut only where every
    input and every output of ``like`` (the expected outputs of the same batches, keyed as
    ``engine``'s) has as many rows as the batch has samples, and joined only where every output of
    every part has as many rows as the part and the joined outputs have ``like``'s shapes;
    otherwise it runs whole. Returns the outputs and the indices of the batches that were cut (whose
    equality with a whole run the caller checks once: ``_budget_measure``)."""
    workers = workers or available_cpus()
    if not hasattr(engine, "run_all") or workers < 2:
        return _run_all(engine, batches, workers), []
    parts, sizes = [], []
    for batch, ref in zip(batches, like):
        n = next(iter(batch.values())).shape[0] if batch else 0
        if n < 2 or _rows_of(batch.values()) != {n} or _rows_of(ref.values()) != {n}:
            parts.append(batch)
            sizes.append(None)
            continue
        cuts = [len(c) for c in np.array_split(np.arange(n), min(workers, n))]
        starts = np.cumsum([0] + cuts)
        parts += [{k: a[s:s + c] for k, a in batch.items()} for s, c in zip(starts, cuts)]
        sizes.append(cuts)
    outs = engine.run_all(parts, workers)
    joined, cut, i = [], [], 0
    for j, (batch, ref, parts_of) in enumerate(zip(batches, like, sizes)):
        if parts_of is None:
            joined.append(outs[i])
            i += 1
            continue
        mine, i = outs[i:i + len(parts_of)], i + len(parts_of)
        together = {k: np.concatenate([o[k] for o in mine]) for k in mine[0]} \
            if all(_rows_of(o.values()) == {c} for o, c in zip(mine, parts_of)) else None
        if together is not None and all(np.shape(together.get(k)) == np.shape(v) for k, v in ref.items()):
            joined.append(together)
            cut.append(j)
        else:
            joined.append(engine.run(batch))
    return joined, cut


@dataclass
class Result:
    """The integer module and everything that explains it."""

    module: Module
    float_function: Function
    annotation: Annotation
    params: dict[Value, ActParams]
    statistics: Statistics
    config: Config
    _layers: list[LayerError] | None = field(default=None, repr=False)
    _runs_in_float: list[str] | None = field(default=None, repr=False)   # region outputs ORT computes in float
    # what looks fine and is not (quantize.health): degenerate calibration data, constant
    # activations, weights that quantize to zeros; also emitted as QuantizationWarning
    warnings: list[str] = field(default_factory=list)
    degenerate_data: bool = False   # the calibration samples, hence the summary's SQNR, say nothing
    # the expansions run before calibration (quantize.expand): hits per rule, and refusals with their reason
    rewrites: RewriteStats = field(default_factory=RewriteStats)
    # automatic mixed precision (Config.budget): what was measured and promoted, or None
    promotion: Promotion | None = None
    # the LayerNorm outlier passes (Config.outliers, quantize.outliers): what each rewrote, what it left and why
    outliers: _outliers.OutlierStats = field(default_factory=_outliers.OutlierStats)
    # conv -> activation -> depthwise conv sites split in channel groups (Config.channel_split, quantize.channel_split)
    channel_groups: _channel_split.SplitStats = field(default_factory=_channel_split.SplitStats)
    # weight_rounding="auto" once tensors are int16 (promoted, or every activation): the metric of
    # each rounding measured and the one kept ({"nearest", "hessian", "metric", "kept"}), or None when it did not apply
    rounding: dict | None = None

    # -- inspection -----------------------------------------------------------------------------
    def cast_counts(self) -> tuple[int, int]:
        """(quant.qcast, quant.dcast) ops left in the integer function."""
        ops = self.module.main.ops
        return sum(op.opdef is quant.QCAST for op in ops), sum(op.opdef is quant.DCAST for op in ops)

    def quantized_ops(self) -> Counter:
        return Counter(r.pattern.name for r in self.annotation.regions)

    def layer_errors(self) -> list[LayerError]:
        """Per quantized layer: the dequantized integer output against float, on calibration samples."""
        if self._layers is None:
            self._layers = _layer_errors(self)
        return self._layers

    def onnxruntime_float_ops(self) -> list[tuple[str, str]]:
        """(label, kind) of each quantized op that ONNX Runtime (CPU, default optimizations) runs in
        float in the QDQ export — DequantizeLinear → float op → QuantizeLinear, no QLinear kernel —
        so its integer semantics are not LiteRT's. Computed with ``target="onnxruntime"`` only."""
        if self.config.target != "onnxruntime":
            return []
        self.layer_errors()
        by_name = {r.output.name_hint: r for r in self.annotation.regions}
        return [(by_name[n].label, by_name[n].pattern.kind) for n in self._runs_in_float or ()]

    def spec_report(self):
        return spec_view.check_module(self.module)

    def rewritten(self) -> dict[str, int]:
        """Float forms rewritten before calibration into ops LiteRT has (LayerNorm, HardSigmoid): hits per rule."""
        return dict(self.rewrites.hits)

    def _left_float_reason(self, op: Operation, why: str) -> str:
        """An op a near-miss expansion left alone says why the expansion refused it."""
        refused = [f"{rule}: {reason}" for (rule, at), reason in self.rewrites.refused.items() if at is op]
        return refused[0] if refused and why.startswith("no quantizer pattern") else why

    def summary_dict(self, worst: int = 10) -> dict:
        q, d = self.cast_counts()
        report = self.spec_report()
        layers = sorted(self.layer_errors(), key=lambda e: e.sqnr_db)
        return {
            "warnings": list(self.warnings),
            "calibration_samples": self.statistics.num_samples,
            "method": self.config.method,
            "per_channel": self.config.per_channel,
            "quantized": dict(self.quantized_ops()),
            "rewritten": self.rewritten(),
            "outliers": self.outliers.as_dict(),
            "channel_groups": self.channel_groups.as_dict(),
            "not_rewritten": {rule: reason for (rule, _), reason in self.rewrites.refused.items()},
            "left_float": [{"op": op.label or op.name, "kind": op.name, "reason": self._left_float_reason(op, why)}
                           for op, why in self.annotation.float_ops if not is_integer_computation(op)],
            # shape arithmetic on i64 (and other integer ops): exact as it is, not a float island
            "integer_ops": [{"op": op.label or op.name, "kind": op.name}
                            for op, _ in self.annotation.float_ops if is_integer_computation(op)],
            "quantize_ops": q, "dequantize_ops": d,
            "spec_check": {"checked": report.checked, "violations": [str(v) for v in report.violations]},
            "worst_layers": [e.as_dict() for e in layers[:worst]],
            "sqnr_on_degenerate_data": self.degenerate_data,
            "target": self.config.target,
            "onnxruntime_float_ops": [{"op": label, "kind": kind} for label, kind in self.onnxruntime_float_ops()],
            **({"int8_ops": self._int8_ops()} if self.config.activations == "int16" else {}),
            **({"mixed_precision": self._promotion_dict()} if self.promotion is not None else {}),
            **({"weight_rounding": self.rounding} if self.rounding is not None else {}),
        }

    def _promotion_dict(self) -> dict:
        p = self.promotion
        return {"budget": p.budget.describe(), "all_int8": p.before, "with_promotions": p.after, "met": p.met,
                "refused": p.refused, "best_tried": p.best_tried,
                "candidates": p.candidates, "integer_runs": p.evaluations, "samples": p.samples,
                "held_out": p.held_out,
                "promoted": [{"tensors": c.names, "sqnr_int8_db": c.sqnr8, "sqnr_int16_db": c.sqnr16}
                             for c in p.promoted], "kept_float": list(p.kept_float)}

    def _int8_ops(self) -> list[dict]:
        """Under ``activations="int16"``: the quantized ops that stay int8 (no 16x8 kernel in quantir)."""
        return [{"op": r.label, "kind": r.pattern.op.name} for r in self.annotation.regions
                if r.pattern.op.output_quantized and region_bits(r, "int16") == 8]

    def summary(self, worst: int = 10) -> str:
        s = self.summary_dict(worst)
        lines = [f"WARNING: {w}" for w in s["warnings"]]
        lines += [f"quantized {sum(s['quantized'].values())} ops on {s['calibration_samples']} calibration samples "
                 f"(method {s['method']}, {'per-channel' if s['per_channel'] else 'per-tensor'} weights):"]
        lines += [f"  {n:<14} {k}" for k, n in sorted(s["quantized"].items(), key=lambda kv: -kv[1])]
        if s["rewritten"]:
            lines.append("rewritten before calibration (each interior value observed):")
            lines += [f"  {n:<14} {k} ({_rewrite_doc(k)})" for k, n in sorted(s["rewritten"].items())]
        lines += _outliers.summary_lines(self.outliers)
        lines += _channel_split.summary_lines(self.channel_groups)
        if s["integer_ops"]:
            kinds = Counter(f["kind"] for f in s["integer_ops"])
            lines.append(f"integer shape ops kept as they are: {len(s['integer_ops'])} ("
                         + ", ".join(f"{k} {n}" for k, n in kinds.most_common()) + "; exact integer arithmetic "
                         "on shapes or integer inputs, never quantized)")
        lines.append(f"left float: {len(s['left_float'])}")
        lines += [f"  {f['op']} ({f['kind']}): {f['reason']}" for f in s["left_float"]]
        if "int8_ops" in s:
            kinds = Counter(f["kind"] for f in s["int8_ops"])
            lines.append(f"int16 activations (LiteRT 16x8); ops kept int8, requantized at their boundary (no 16x8 "
                         f"kernel): {len(s['int8_ops'])}" + ("" if not kinds else " (" + ", ".join(
                             f"{k} {n}" for k, n in kinds.most_common()) + ")"))
        if "mixed_precision" in s:
            lines += _promotion_lines(s["mixed_precision"])
        if "weight_rounding" in s:
            lines.append(_rounding_line(s["weight_rounding"]))
        lines.append(f"quantize ops left: {s['quantize_ops']}, dequantize ops left: {s['dequantize_ops']}")
        spec = s["spec_check"]
        lines.append(f"LiteRT int8 spec check: {spec['checked']} ops, {len(spec['violations'])} violations")
        lines += [f"  {v}" for v in spec["violations"]]
        if s["target"] == "onnxruntime":
            ran = s["onnxruntime_float_ops"]
            lines.append(f"ONNX Runtime runs {len(ran)} quantized ops of the QDQ export in float "
                         f"(DequantizeLinear -> op -> QuantizeLinear, no QLinear fusion; "
                         f"not LiteRT's integer semantics)"
                         + (":" if ran else ""))
            lines += [f"  {f['op']} ({f['kind']})" for f in ran]
        on = f"{min(32, s['calibration_samples'])} samples"
        if s["sqnr_on_degenerate_data"]:
            on += " of degenerate calibration data: NOT evidence of accuracy, see the warnings"
        arithmetic = " as ONNX Runtime computes the QDQ export" if s["target"] == "onnxruntime" else ""
        lines.append(f"lowest SQNR layers (dB, against float on {on}{arithmetic}):")
        for e in s["worst_layers"]:
            sq = f"{e['sqnr_db']:7.2f}" if e["sqnr_db"] is not None else "   -inf" if e["cosine"] == 0 else "    inf"
            lines.append(f"  {sq}  cos {e['cosine']:.5f}  max err {e['max_error_steps']:.1f} steps  "
                         f"{e['name']} ({e['kind']})")
        return "\n".join(lines)

    # -- output ---------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike, *, format: str | None = None, io: str = "float",
             activations: str = "int8", make_parents: bool = False) -> Path:
        """Write the integer model atomically; the format follows the extension (.mlir, .onnx, .tflite,
        .json). ``format`` chooses the ONNX flavour: "qdq" (default) or "qoperator";
        ``activations`` their storage: "int8" (the module's own) or "uint8" (the same real values
        with zero points + 128, which ONNX Runtime on x86 runs fully in integer kernels). ``io``
        is the .tflite interface: "float" (QUANTIZE in, DEQUANTIZE out) or "int8".

        The file gets the mode of the one it replaces, or 0666 less the umask. A missing parent
        directory is an ``OutputError`` unless ``make_parents``; so are a destination that is a
        directory or under a read-only one. This method cannot know the input model: a caller
        that has it checks first with ``fileio.check_outputs`` (the CLI does)."""
        from .fileio import atomic_write, prepare_output
        p = Path(path)
        if p.suffix not in (".mlir", ".onnx", ".tflite", ".json"):
            raise QuantirError(f"unknown output format '{p.suffix}' for {p}: use .mlir, .onnx or .tflite")
        prepare_output(p, make_parents=make_parents)  # before exporting: fail fast; the backends need the directory
        if p.suffix == ".mlir":
            from .text import print_module
            atomic_write(p, print_module(self.module).encode())
        elif p.suffix == ".onnx":
            from .backends.onnx import save_quantized  # type: ignore[attr-defined]
            from .backends.onnx.qoperator import requantized_message
            requantized: list = []
            save_quantized(self.module, p, format=format or "qdq", activations=activations, requantized=requantized)
            if requantized:
                _warnings.warn(requantized_message(requantized), QuantizationWarning, stacklevel=2)
        elif p.suffix == ".tflite":
            from .backends.tflite.export import save_tflite
            save_tflite(self.module, p, io=io)
        else:  # .json
            atomic_write(p, json.dumps(self.summary_dict(), indent=2).encode())
        return p


def _promotion_lines(m: dict) -> list[str]:
    """The summary's account of automatic mixed precision (``Config.budget``)."""
    held = "held-out calibration samples" if m.get("held_out") else "calibration samples (too few to hold any out)"
    head = (f"mixed precision: budget {m['budget']} on {m['samples']} {held}; all int8 "
            f"{m['all_int8']:.5g}")
    if not m["promoted"]:
        why = (f"the kernels refuse the promotion ({m['refused']})" if m["refused"] else
               f"none of {m['candidates']} tensor classes can be int16")
        if not m["met"] and not m["refused"] and m["candidates"]:
            best = m.get("best_tried")
            why = (f"promoting the {m['candidates']} tensor classes that can be int16 reached at best "
                   f"{best:.5g}, under a quarter of the way" if best is not None else "nothing promoted")
        return [head + (" (met: nothing promoted)" if m["met"] else f" (missed: {why}; kept int8)")]
    n = sum(len(c["tensors"]) for c in m["promoted"])
    lines = [head + f"; {len(m['promoted'])} of {m['candidates']} tensor classes ({n} tensors) promoted to int16 "
             f"-> {m['with_promotions']:.5g} ({'met' if m['met'] else 'MISSED: the best measured is kept'}; "
             f"{m['integer_runs']} integer runs). Each, with its own rounding SQNR int8 -> int16:"]
    for c in m["promoted"]:
        more = f" (+{len(c['tensors']) - 1} in its class)" if len(c["tensors"]) > 1 else ""
        lines.append(f"  {c['sqnr_int8_db']:7.2f} -> {c['sqnr_int16_db']:7.2f} dB  {c['tensors'][0]}{more}")
    if m.get("kept_float"):
        lines.append(f"  and kept float (no 16-bit kernel; the promotions alone missed the budget): "
                     f"{', '.join(m['kept_float'])}")
    return lines


def _rounding_line(r: dict) -> str:
    return (f"int16 model's weights (weight_rounding='auto', {r['metric']}): nearest {r['nearest']:.5g}, "
            f"hessian (GPTQ) {r['hessian']:.5g} -> {r['kept']} kept")


def _rewrite_doc(name: str) -> str:
    rules = [*EXPANSIONS, ADDITIVE_ATTENTION_MASK, BOUND_ATTENTION_MASK]
    return next((r.doc for r in rules if r.name == name), "")


def quantize(model: Any, calibration: Any = None, config: Config | None = None) -> Any:
    """Quantize a float model to int8 with calibration data.

    ``model``: a path (.onnx, .mlir), an ``onnx.ModelProto`` or a Module. ``calibration``:
    arrays or an .npz path keyed by input name (axis 0 indexes samples), an iterable of feed
    dicts, or an ONNX Runtime ``CalibrationDataReader``. Raises ``CalibrationError`` for
    unusable data and ``QuantirError`` when nothing in the model can be quantized.

    ``Config(mode="dynamic")`` takes no calibration data and returns the dynamic model of
    ``config.target`` (``quantize_hybrid`` for LiteRT, ``quantize_dynamic`` for ONNX Runtime).
    """
    config = config or Config()
    if config.mode == "dynamic":
        if calibration is not None:
            raise QuantirError("Config(mode='dynamic') quantizes activations at run time and takes no calibration "
                               "data: pass calibration=None, or use mode='static'")
        return quantize_hybrid(model) if config.target == "litert" else quantize_dynamic(model)
    module = load(model)
    if stats_ir.holds_stats(module):   # statistics written by --emit-stats: used, or replaced by the data's
        if calibration is None:
            return _quantize_from_stats(clone_module(module), config)
        module = Module([stats_ir.read(clone_module(module))[0]])
    fn = module.main
    # the caller's Module is theirs: rewrite a copy
    if module is model and (would_expand(fn, config) or (config.outliers and _outliers.has_sites(fn))):
        module = clone_module(module)
        fn = module.main
    ensure_names(fn)
    rewrites = expand(fn, config)
    if rewrites.modified:   # ops with no LiteRT builtin, as ops that have one (quantize.expand)
        ensure_names(fn)
    dataset = as_dataset(calibration, [s.name for s in input_specs(fn)])
    # LayerNorm outliers into the matmul weights (quantize.outliers); the dataset it returns still holds every sample
    outlier_stats, dataset = _outliers.run(fn, dataset, config, make_engine)
    # channels far smaller than their tensor's, before a depthwise conv: a group of their own (channel_split)
    splits, dataset = _channel_split.plan(fn, dataset, config, make_engine)
    if splits and module is model:
        module = clone_module(module)
        fn = module.main
    split_stats = _channel_split.apply(fn, splits, config)
    annotation = annotate(fn, config)
    if not annotation.regions:
        reasons = "; ".join(f"{op.label or op.name}: {why}" for op, why in annotation.float_ops[:8])
        raise QuantirError(f"nothing to quantize in this model ({reasons})")
    budget = _judging(parse_budget(config.budget), fn)
    searching = budget is not None and config.activations == "int8" and not config.int16
    # the budget is measured on samples the ranges never saw (quantize.precision)
    statistics = calibrate(fn, annotation, dataset, config, make_engine, hold_out=HELD_OUT if searching else 0)
    params = solve(annotation, statistics, config, fn)
    int_fn = lower(fn, annotation, params, config)
    promotion = rounding = None
    # weight_rounding="auto": once tensors are int16 the int8 weights' rounding matters more, so
    # hessian rounding is measured against nearest there (Config.weight_rounding)
    auto = config.weight_rounding == "auto" and any(hessian_applies(r) for r in annotation.regions)
    if searching and samples_of(statistics):
        measure = _budget_measure(fn, statistics, config, budget)
        names, promotion = _mixed_precision(fn, annotation, statistics, config, params, int_fn, budget, measure)
        if names:   # the fewest int16 tensors that meet the budget (quantize.precision)
            config = replace(config, int16=names)
            params = solve(annotation, statistics, config, fn)
            int_fn = lower(fn, annotation, params, config)
            def better_rounding():   # of the module as it stands when called (after a fallback: that one)
                return _better_rounding(fn, annotation, statistics, config, params, int_fn, measure,
                                        (promotion.after, promotion.met), budget.describe(), budget.kind)
            if not promotion.met and auto:   # the weights' rounding before keeping any op float
                config, params, int_fn, rounding, (promotion.after, promotion.met) = better_rounding()
                promotion.evaluations += 1
            if not promotion.met:
                floating = replace(config, weight_rounding="nearest" if auto else config.weight_rounding)
                fallback = _float_fallback(fn, annotation, statistics, floating, measure, promotion)
                if fallback is not None:
                    annotation, config, params, int_fn, promotion = _search_again(
                        fn, statistics, budget, measure, promotion, *fallback)
                    rounding = None
            if auto and rounding is None:
                config, params, int_fn, rounding, (promotion.after, promotion.met) = better_rounding()
                promotion.evaluations += 1
    elif config.activations == "int16" and auto and samples_of(statistics):
        # no search to reuse: measured with the budget's metric, the default cosine for none or a callback
        judge = budget if budget is not None and budget.kind != "callback" else \
            _judging(parse_budget(DEFAULT_BUDGET), fn)
        measure = _budget_measure(fn, statistics, config, judge)
        config, params, int_fn, rounding, _ = _better_rounding(fn, annotation, statistics, config, params, int_fn,
                                                               measure, measure(int_fn), judge.describe(), judge.kind)
    health = check_health(fn, annotation, statistics, params, config)
    for message in health.warnings:
        _warnings.warn(message, QuantizationWarning, stacklevel=_user_stacklevel())
    return Result(Module([int_fn]), fn, annotation, params, statistics, config,
                  warnings=health.warnings, degenerate_data=health.degenerate_data, rewrites=rewrites,
                  promotion=promotion, outliers=outlier_stats, rounding=rounding, channel_groups=split_stats)


def calibration_stats(model: Any, calibration: Any, config: Config | None = None) -> Module:
    """The float module calibration runs on (after the expansions and outlier passes of ``config``)
    with a ``quant.stats`` op on every observed tensor (``quantize.stats_ir``): what ``quantize``
    would observe, so ``quantize(module, None, config)`` then gives the same integer module. Samples
    a default budget holds out are not observed here either and are not carried (see below)."""
    config = config or Config()
    module = clone_module(load(model))
    if stats_ir.holds_stats(module):   # statistics of an earlier run: observed again
        module = Module([stats_ir.read(module)[0]])
    fn = module.main
    ensure_names(fn)
    if expand(fn, config).modified:
        ensure_names(fn)
    dataset = as_dataset(calibration, [s.name for s in input_specs(fn)])
    _, dataset = _outliers.run(fn, dataset, config, make_engine)
    # no channel groups (Config.channel_split): they depend on the samples, and statistics of one
    # model from two sets of samples must merge (merge_stats); quantize from them splits nothing either
    annotation = annotate(fn, config)
    searching = parse_budget(config.budget) is not None and config.activations == "int8" and not config.int16
    statistics = calibrate(fn, annotation, dataset, config, make_engine, hold_out=HELD_OUT if searching else 0)
    return stats_ir.to_module(fn, statistics, annotation, config)


def merge_stats(a: Any, b: Any) -> Module:
    """Two statistics modules (paths or Modules from ``calibration_stats``) of one model as one:
    min of mins, max of maxes, histograms added (``quantize.stats_ir.merge``)."""
    return stats_ir.merge(load(a), load(b))


def _quantize_from_stats(module: Module, config: Config) -> Result:
    """``quantize`` from the ``quant.stats`` ops of ``module`` alone. No samples are carried, so the
    mixed-precision budget is not searched (``budget`` acts as None) and the options that need
    samples (empirical bias correction, hessian rounding, callbacks, outlier passes: those already
    ran when the statistics were written) are refused."""
    needs = [what for what, on in (("bias_correction='empirical'", config.bias_correction == "empirical"),
                                   ("weight_rounding='hessian'", config.weight_rounding == "hessian"),
                                   ("a calibration callback", config.callback is not None),
                                   (f"outliers={config.outliers}", bool(config.outliers))) if on]
    if needs:
        raise QuantirError(f"quantizing from quant.stats ops (no calibration data): {', '.join(needs)} needs the "
                           f"samples themselves; pass calibration data, or leave the option at its default")
    fn, statistics = stats_ir.read(module)
    annotation = annotate(fn, config)
    if not annotation.regions:
        raise QuantirError("nothing to quantize in this model")
    stats_ir.check_covers(annotation, statistics, config)
    params = solve(annotation, statistics, config, fn)
    int_fn = lower(fn, annotation, params, config)
    health = check_health(fn, annotation, statistics, params, config)
    for message in health.warnings:
        _warnings.warn(message, QuantizationWarning, stacklevel=_user_stacklevel())
    return Result(Module([int_fn]), fn, annotation, params, statistics, config,
                  warnings=health.warnings, degenerate_data=health.degenerate_data)


def _judging(budget, fn):
    """``budget`` with the outputs whose top-1 a cosine floor also holds (``precision.class_score_outputs``)
    and those whose quantities it holds one by one (``precision.quantity_outputs``)."""
    if budget is None or budget.kind != "cosine" or not budget.decide:
        return budget
    return replace(budget, decisions=class_score_outputs(fn), quantities=quantity_outputs(fn))


def _budget_measure(fn, statistics, config, budget):
    """``measure(int_fn) -> (metric, met)``: an integer module's outputs in the target's arithmetic
    against the float outputs on the budget's samples (the held-out ones, ``precision.samples_of``),
    the float side run once."""
    kept = samples_of(statistics)
    float_names = output_names(fn)
    engine = make_engine(fn, [], config.engine)
    reference = [{n: np.asarray(engine.run(b)[n]) for n in float_names} for b in kept]

    cut_is_whole: bool | None = None   # does a cut batch give the whole batch's integers? (None: not yet seen)

    def measure(int_fn: Function) -> tuple[float, bool]:
        nonlocal cut_is_whole
        run_int = make_engine(int_fn, [], config.integer_engine)
        pairs = list(zip(float_names, output_names(int_fn)))
        if _batch_dynamic(int_fn) and cut_is_whole is not False:
            outs, cut = _run_split(run_int, kept, config.workers,
                                   [{m: r[n] for n, m in pairs} for r in reference])
            if cut and cut_is_whole is None:
                # once, on the first module cut: a model that mixes the samples of a batch (a reduction
                # over axis 0) gives other integers when cut; then its batches run whole from here on
                whole = {j: run_int.run(kept[j]) for j in cut}
                cut_is_whole = all(np.array_equal(outs[j][k], w[k]) for j, w in whole.items() for k in w)
                outs = [whole.get(j, o) for j, o in enumerate(outs)]
        else:
            outs = _run_all(run_int, kept, config.workers)
        got = [{n: np.asarray(out[m], np.float32) for n, m in pairs} for out in outs]
        return score(budget, reference, got)
    return measure


def _mixed_precision(fn, annotation, statistics, config, params, int_fn, budget, measure):
    """``precision.promote`` with the runs it needs: the integer module of each candidate
    promotion, measured in the target's arithmetic (``_budget_measure``)."""
    def evaluate(names: tuple[str, ...]):
        cfg = replace(config, int16=names)
        return measure(lower(fn, annotation, solve(annotation, statistics, cfg, fn), cfg) if names else int_fn)
    return promote(fn, statistics, config, params, budget, evaluate,
                   lambda: int16_classes(annotation, statistics, config, fn), told_apart(annotation))


def _float_fallback(fn, annotation, statistics, config, measure, promotion):
    """A budget the int16 promotions missed: the regions that cannot be int16 (their op has no 16x8
    kernel: an LSTM) kept float, the promotions as they are. Kept when that meets the budget, with the
    reason in the summary and ``Promotion.kept_float``; else None (the promoted model stays). Their
    inputs and outputs were observed as the neighbours' values, so the statistics serve as they are,
    unless keeping them float splits a fused group elsewhere (then None too)."""
    narrow = [r for r in annotation.regions if r.pattern.op.output_quantized and region_bits(r, "int16") == 8]
    labels = sorted({r.label for r in narrow})
    if not narrow or any(not label for label in labels):
        return None
    cfg = replace(config, exclude=tuple(config.exclude) + tuple(labels))
    floated = annotate(fn, cfg)
    if any(r.label in labels for r in floated.regions) or not floated.regions:
        return None
    # a region the floated ops split (a fused group's interior now at an edge) was never observed:
    # that fallback needs calibrating again, which the budget search does not do
    edges = lambda a: {v for r in a.regions for v in (*r.inputs, r.output)}  # noqa: E731
    if any(v not in statistics.observers for v in edges(floated) - edges(annotation)):
        return None
    try:
        p = solve(floated, statistics, cfg, fn)
        f = lower(fn, floated, p, cfg)
        metric, met = measure(f)
    except QuantirError:
        return None
    promotion.evaluations += 1
    if not met:
        promotion.best_tried = max(promotion.best_tried or metric, metric)
        return None
    why = "kept float to meet the budget: with every tensor it could promote int16 the budget was missed, " \
          "and this op has no 16-bit kernel"
    floated.float_ops = [(op, why if (op.label or op.name) in labels else reason) for op, reason in floated.float_ops]
    promotion.after, promotion.met, promotion.kept_float = metric, True, labels
    return floated, replace(config, exclude=cfg.exclude), p, f


def _search_again(fn, statistics, budget, measure, promotion, annotation, config, params, int_fn):
    """With the fallback's ops float, fewer promotions may meet the budget: the search again from all
    int8 (its report keeps the first one's all-int8 figure, runs and kept-float ops); the fallback's
    module when the search misses."""
    base = replace(config, int16=())
    p8 = solve(annotation, statistics, base, fn)
    f8 = lower(fn, annotation, p8, base)
    names, again = _mixed_precision(fn, annotation, statistics, base, p8, f8, budget, measure)
    if not again.met:
        promotion.evaluations += again.evaluations
        return annotation, config, params, int_fn, promotion
    again.before, again.kept_float = promotion.before, promotion.kept_float
    again.evaluations += promotion.evaluations
    if not names:
        return annotation, base, p8, f8, again
    config = replace(base, int16=names)
    params = solve(annotation, statistics, config, fn)
    return annotation, config, params, lower(fn, annotation, params, config), again


def _better_rounding(fn, annotation, statistics, config, params, int_fn, measure, nearest: tuple[float, bool],
                     metric: str, kind: str):
    """``weight_rounding="auto"``: the module quantized with hessian-rounded conv/FC weights, measured
    by ``measure`` (``metric`` says what it computes, ``kind`` is the budget's) against ``nearest``
    (the nearest-rounded module's (metric, met)). Hessian is kept when it meets the budget, or when
    neither does and it measures at least about as well (``precision.at_least_about``: PicoDet with
    every class int16, cosine 0.99738 both ways, boxes 92.4% nearest, 96.9% hessian): where both
    meet it the outputs' metric barely separates them (PicoDet
    with the defaults: worst-output cosine 0.99656 nearest, 0.99634 hessian). With every activation
    int16 the task metrics measured prefer hessian (PicoDet boxes 92.4% -> 96.9%, EfficientNet-Lite0
    agreement 96.5% -> 99.0%, ddddocr strings 89% -> 97%); PicoDet's defaults (3 classes left int8)
    did not (boxes 92.5% nearest, 90.8% hessian). Returns (config, params, int_fn, {"nearest",
    "hessian", "metric", "kept"}, the kept module's (metric, met))."""
    cfg = replace(config, weight_rounding="hessian")
    p = solve(annotation, statistics, cfg, fn)
    f = lower(fn, annotation, p, cfg)
    hessian = measure(f)
    figures = {"nearest": nearest[0], "hessian": hessian[0], "metric": metric}
    if hessian[1] or (not nearest[1] and at_least_about(hessian[0], nearest[0], kind)):
        return cfg, p, f, {**figures, "kept": "hessian"}, hessian
    return replace(config, weight_rounding="nearest"), params, int_fn, {**figures, "kept": "nearest"}, nearest


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the first caller outside quantir (a warning then points at the user's
    call, whether it came through ``qr.quantize``, the CLI or ``quantir.api.quantize``)."""
    import sys
    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


LAYER_REPORT_WORKERS = 2   # batches whose every layer the per-layer report holds at once


def _layer_errors(result: Result) -> list[LayerError]:
    """Per region output: float (the fast fp32 executor) against the integer module as the
    target computes it (``Config.integer_engine``: the interpreter, or ONNX Runtime on the QDQ
    export, which cannot expose a value it removed: such layers are left out)."""
    regions = result.annotation.regions
    kept = result.statistics.kept
    if not kept:
        return []
    fn = result.float_function
    int_fn = result.module.main
    names = [r.output.name_hint for r in regions]
    qnames = {v.name_hint for op in int_fn.ops for v in op.results}
    wanted = [n for n in names if integer_name(n) in qnames]
    integer = make_engine(int_fn, [integer_name(n) for n in wanted], result.config.integer_engine)
    if result.config.target == "onnxruntime":
        missing = set(integer.unavailable)
        wanted = [n for n in wanted if integer_name(n) not in missing]
        in_float = set(integer.float_computed)
        result._runs_in_float = [n for n in names if integer_name(n) in in_float]
    engine = make_engine(fn, wanted, result.config.engine)   # float side: the fast executor
    by_name = {r.output.name_hint: r for r in regions}
    params = {n: result.params[by_name[n].output] for n in wanted}
    # a value saturated on purpose where its readers cannot tell values apart (a conv output below
    # -3 read by hard-swish) is compared within that interval: its loss beyond costs nothing. Both
    # sides: an int16 range (min/max) reaches beyond it, where the float side clipped alone showed
    # PP-OCRv5 rec's hard-swish inputs at 0.8-5 dB, its worst layers, for values no reader tells apart
    bounds = told_apart(result.annotation)
    # error sums batch by batch (batches may differ in size: dynamic dims); holding every layer's
    # tensors for every kept sample took tens of GB on a detector, so at most LAYER_REPORT_WORKERS
    # batches are held at once, however many CPUs the machine has
    sums: dict[str, np.ndarray] = {}
    workers = min(result.config.workers or available_cpus(), LAYER_REPORT_WORKERS)
    for start in range(0, len(kept), workers):   # the integer side a few batches at a time (run_all)
        group = kept[start:start + workers]
        for batch, got in zip(group, _run_all(integer, group, workers)):
            ref = engine.run(batch)
            for n in wanted:
                p = params[n]
                q = np.asarray(got[integer_name(n)]).astype(np.int64)
                deq = np.float32(p.scale) * (q - p.zero_point).astype(np.float32)
                r = np.asarray(ref[n])
                if n in bounds:
                    r, deq = np.clip(r, *bounds[n]).astype(r.dtype), np.clip(deq, *bounds[n]).astype(deq.dtype)
                s = error_sums(r, deq)
                sums[n] = add_sums(sums[n], s) if n in sums else s
            del ref
    out = []
    for n in wanted:
        region = by_name[n]
        sqnr, cos, err = from_sums(sums[n])
        out.append(LayerError(region.label, region.pattern.kind, sqnr, cos, err, params[n].scale))
    return out


def quantize_weights(model: Any, config: Any = None, calibration: Any = None):
    """Weight-only quantization (``quantize.weight_only``): int8 or int4 weights, per channel or
    block-wise, float activations; no calibration data needed. With ``calibration`` (as for
    ``quantize``), the rounding search weights each weight element's error by the mean square of
    the input channel it multiplies. Returns a ``WeightOnlyResult`` (``summary()``, ``save()``)."""
    from .quantize import weight_only as wo
    config = config or wo.WeightOnlyConfig()
    module = load(model)
    importance = None
    if calibration is not None:
        fn = module.main
        ensure_names(fn)
        sites, _ = wo.find_sites(fn, config)
        dataset = as_dataset(calibration, [s.name for s in input_specs(fn)])

        def run_batches(names):
            engine = make_engine(fn, names, "ort")
            for batch in dataset.batches(input_specs(fn), 32):
                yield engine.run(batch)
        importance = wo.input_importance(fn, sites, run_batches)
    result = wo.quantize_weights(module, config, importance)
    result.calibrated = importance is not None
    result._writer = _save_weight_only
    return result


def _save_weight_only(result, path, *, matmul_nbits: bool = True, make_parents: bool = False) -> Path:
    """``WeightOnlyResult.save``: ``.onnx`` (4-bit blocked weights as ONNX Runtime's MatMulNBits and
    GatherBlockQuantized, the rest DequantizeLinear; ``matmul_nbits=False``: all DequantizeLinear),
    ``.tflite`` (per-channel int8/int4 weights + DEQUANTIZE; block-wise ones are refused) or
    ``.mlir``, atomically."""
    from .fileio import atomic_write, prepare_output
    p = Path(path)
    if p.suffix not in (".onnx", ".mlir", ".tflite"):
        raise QuantirError(f"unknown output format '{p.suffix}' for {p}: a weight-only model is saved as .onnx, "
                           f".tflite or .mlir")
    prepare_output(p, make_parents=make_parents)
    if p.suffix == ".tflite":
        from .backends.tflite.export_weight_only import save_weight_only_tflite
        save_weight_only_tflite(result.module, p)
    elif p.suffix == ".mlir":
        from .text import print_module
        atomic_write(p, print_module(result.module).encode())
    else:
        from .backends.onnx.weight_only import save_weight_only
        save_weight_only(result.module, p, matmul_nbits=matmul_nbits)
    return p


def quantize_dynamic(model: Any, config: Any = None):
    """Dynamic quantization (``quantize.dynamic``): MatMul/Gemm weights int8 per output channel,
    activations quantized at run time (DynamicQuantizeLinear + MatMulInteger); no calibration
    data. Returns a ``DynamicResult`` (``summary()``, ``save()`` to .onnx or .mlir)."""
    from .quantize import dynamic as dy
    result = dy.quantize_dynamic(load(model), config or dy.DynamicConfig())
    result._writer = _save_dynamic
    return result


def quantize_hybrid(model: Any, config: Any = None):
    """LiteRT dynamic-range quantization (``quantize.hybrid``): int8 weights per channel on
    FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D and EMBEDDING_LOOKUP, float activations quantized
    inside each kernel at run time; no calibration data. Returns a ``HybridResult``
    (``summary()``, ``save()`` to .tflite or .mlir)."""
    from .quantize import hybrid as hy
    result = hy.quantize_hybrid(load(model), config or hy.HybridConfig())
    result._writer = _save_hybrid
    return result


def _save_hybrid(result, path, *, make_parents: bool = False) -> Path:
    """``HybridResult.save``: ``.tflite`` (LiteRT's dynamic-range model) or ``.mlir``, atomically."""
    from .fileio import atomic_write, prepare_output
    p = Path(path)
    if p.suffix not in (".tflite", ".mlir"):
        raise QuantirError(f"unknown output format '{p.suffix}' for {p}: a dynamic-range (LiteRT hybrid) model is "
                           f"saved as .tflite or .mlir")
    prepare_output(p, make_parents=make_parents)
    if p.suffix == ".mlir":
        from .text import print_module
        atomic_write(p, print_module(result.module).encode())
    else:
        from .backends.tflite.export import export_tflite
        atomic_write(p, export_tflite(result.module).to_bytes())
    return p


def _save_dynamic(result, path, *, opset: int | None = None, make_parents: bool = False) -> Path:
    """``DynamicResult.save``: ``.onnx`` (the module op for op: standard ONNX ops) or ``.mlir``, atomically."""
    from .fileio import atomic_write, prepare_output
    p = Path(path)
    if p.suffix not in (".onnx", ".mlir"):
        raise QuantirError(f"unknown output format '{p.suffix}' for {p}: a dynamic model is saved as .onnx or .mlir")
    prepare_output(p, make_parents=make_parents)
    if p.suffix == ".mlir":
        from .text import print_module
        atomic_write(p, print_module(result.module).encode())
    else:
        from .backends.onnx.api import export
        from .backends.onnx.exporter import write_model
        model = export(result.module, opset=opset).model
        model.doc_string = "quantir dynamic quantization: int8 weights per channel, activations at run time"
        write_model(model, p)
    return p


def convert_qdq(model: Any, *, strict: bool = False, samples: Any = None):
    """A model quantized already (ONNX QDQ: ``QuantizeLinear -> DequantizeLinear`` pairs and
    dequantized integer weights, e.g. ONNX Runtime's ``quantize_static`` output) as an integer
    module with the model's own scales, zero points and integers; nothing is recalibrated
    (``quantize.from_qdq``). Where the given parameters break LiteRT's int8 spec, the least change
    is made and listed in ``summary()`` with its error measured against the QDQ model in ONNX
    Runtime on ``samples`` (arrays or an .npz path keyed by input name; default: 8 random inputs
    over the input's quantized range); ``strict=True`` raises ``QdqError`` instead. Returns a
    ``from_qdq.Converted`` (``summary()``, ``save()`` to .tflite, .mlir or .onnx).

    A QOperator model (``QLinearConv``, ``QLinearMatMul``, ``com.microsoft`` ``QGemm``/``QLinear*``:
    ``quantize_static(quant_format=QuantFormat.QOperator)``) is first rewritten in memory into the
    equivalent QDQ model with the same integers and parameters (``frontends.onnx.qoperator_to_qdq``;
    the file is only read), and repairs are measured against that QDQ model. A quantized op with no
    QDQ form (dynamic quantization's ``MatMulInteger``, an unknown ``QLinear*``) raises
    ``UnsupportedOpError`` naming the node.

    IR (a Module or an ``.mlir`` path) with fake-quant ops or ``quant.qcast -> quant.dcast`` pairs
    converts the same way (``_convert_ir``; docs/mlir-quant-spec.md §8.2)."""
    from .frontends.onnx import load_onnx
    from .frontends.onnx.qoperator_to_qdq import as_qdq
    from .quantize import from_qdq
    from .runtime import run
    if isinstance(model, Module) or isinstance(model, (str, os.PathLike)) and str(model).endswith(".mlir"):
        return _convert_ir(model, strict)
    model = as_qdq(model)   # a QOperator model as QDQ (a new proto); anything else unchanged
    converted = from_qdq.convert(load_onnx(model, keep_qdq=True, optimize=False), strict=strict)
    if converted.repairs:
        reference_fn = load_onnx(model, keep_qdq=True, optimize=False).main
        names = [s.name for s in input_specs(converted.module.main)]
        feeds = (list(as_dataset(samples, names).batches(input_specs(converted.module.main), 32))
                 if samples is not None else from_qdq.random_feeds(converted.given, converted.float_function))

        def reference(wanted):
            return make_engine(reference_fn, wanted, "ort").run

        def integer(wanted):
            return lambda batch: run(converted.module.main, batch, intermediates=wanted)
        from_qdq.measure(converted, reference, integer, feeds[:4])
        n = sum(len(next(iter(f.values()))) for f in feeds[:4])
        converted.measured_on = f"{n} given samples" if samples is not None else \
            f"{n} random inputs over the input's quantized range"
    converted._writer = _save_converted
    return converted


def _convert_ir(model: Any, strict: bool):
    """``convert_qdq`` of IR (a Module, left unchanged, or an .mlir path) holding fake-quant ops
    (``quant.const_fake_quant``, as a QAT tool writes them) or ``quant.qcast -> quant.dcast`` pairs:
    the ops become pairs (``passes.fake_quant``), the pairs QDQ pairs (``quantize.from_casts``), then
    as an ONNX QDQ model. Repairs are listed, not measured (no ONNX Runtime reference for IR)."""
    from .passes.fake_quant import convert_fake_quant
    from .quantize import from_qdq
    from .quantize.from_casts import casts_to_qdq
    from .text import parse_module
    from .text.files import read_ir_file
    module = clone_module(model) if isinstance(model, Module) else parse_module(read_ir_file(model), str(model))
    if any(op.name.startswith("qnn.") for op in module.main.ops):
        raise QuantirError("convert_qdq: this module is integer already (qnn ops); it reads the ONNX file (a path "
                           "or ModelProto) of a QDQ model, or IR with fake-quant ops or qcast -> dcast pairs")
    convert_fake_quant(module)
    casts_to_qdq(module)
    converted = from_qdq.convert(module, strict=strict)
    converted._writer = _save_converted
    return converted


def _save_converted(result, path, *, io: str = "float", make_parents: bool = False) -> Path:
    """``Converted.save``: ``.tflite`` (``io`` as in ``Result.save``), ``.mlir`` or ONNX QDQ ``.onnx``."""
    from .fileio import atomic_write, prepare_output
    p = Path(path)
    if p.suffix not in (".tflite", ".mlir", ".onnx"):
        raise QuantirError(f"unknown output format '{p.suffix}' for {p}: a converted QDQ model is saved as "
                           f".tflite, .mlir or .onnx")
    prepare_output(p, make_parents=make_parents)
    if p.suffix == ".mlir":
        from .text import print_module
        atomic_write(p, print_module(result.module).encode())
    elif p.suffix == ".onnx":
        from .backends.onnx import save_quantized  # type: ignore[attr-defined]
        save_quantized(result.module, p, format="qdq")
    else:
        from .backends.tflite.export import save_tflite
        save_tflite(result.module, p, io=io)
    return p
