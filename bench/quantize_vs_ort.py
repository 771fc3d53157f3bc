"""quantir vs onnxruntime.quantization.quantize_static: same model, same calibration data, same method.

For each model (the Fashion-MNIST CNN, 500 calibration images; EfficientNet-Lite0, 64 crops)
and each method (MinMax, Percentile, Entropy):

Quantize time. Each tool quantizes in a fresh subprocess, ``--repeats`` times (default 3),
alternating quantir / ORT so that drifting load on a shared machine hits both alike. What is
timed is the same for both (``timing`` in the JSON):

* ``seconds``: the quantize call, from the float model's path and the calibration arrays in
  memory to the int8 QDQ ``.onnx`` file on disk — ``quantir.quantize(...)`` followed by
  ``save_quantized(..., format="qdq")``, against ``quantize_static(...)`` (which writes its
  file). The tool's top-level import and loading the calibration data are done before the
  clock starts; whatever a tool imports lazily during the call is counted.
* ``import_seconds``: the top-level imports (``quantir``, ``quantir.api``, its ONNX frontend
  and ``onnxruntime``; ``from onnxruntime.quantization import ...``), reported separately, and
  ``cpu_seconds``: process CPU time over the timed call (all threads).

Reported per tool: the median and the minimum over the repeats; ``quantize_time_ratio`` is
quantir's median over ORT's median (``..._min`` the ratio of minimums). Peak RSS is the
child's own maximum resident set at the end of the timed call, the largest over its repeats.
ORT is configured as quantir's defaults are: QDQ, per-channel int8 weights, int8 activations
(QInt8/QInt8). On a loaded machine the quantize ratios still move by ±0.1-0.2 between whole
runs (the latency ratios, measured interleaved, by ±0.02); compare runs, not single rows.

Exported-model latency. ONNX Runtime, CPU provider, one intra-op thread, a batch of
``latency_batch`` (32) samples — the test images repeated to fill the batch when there are
fewer (EfficientNet has 7 test photos). All models of a row (fp32, quantir QDQ and QOperator,
each with int8 and uint8 activation storage, ORT's QDQ with QInt8 and with QUInt8
activations) run in turn, round after round, so load changes hit them alike; a model's
latency is the median over the rounds and its ratio to fp32 the median of the per-round
ratios (``..._min``: ratio of the minimums). ORT's QUInt8 model (its recommended x86 form) is
quantized once per method, for latency only; its time is recorded but not in the ratios.

Accuracy: top-1 (Fashion-MNIST test labels) and top-1 agreement with fp32 on the test set.

Prints a table and writes bench/results/quantize_vs_ort.json.

Usage: python bench/quantize_vs_ort.py [--models fashion_mnist efficientnet] [--methods minmax ...]
       [--repeats 3] [--rounds 20] [--round-budget 60] [--out bench/results/quantize_vs_ort.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
from _results import round_robin  # noqa: E402

RESULTS = ROOT / "bench" / "results"
ORT_METHODS = {"minmax": "MinMax", "percentile": "Percentile", "entropy": "Entropy"}
TARGETS = {"quantize_time_ratio": 0.5, "int8_latency_ratio_vs_fp32": 0.6}
TIMING = ("seconds: the quantize call from model path + in-memory calibration arrays to the int8 QDQ .onnx "
          "on disk (quantir: quantize() + save_quantized(qdq); ORT: quantize_static()); top-level imports and "
          "calibration-data loading excluded for both (import_seconds reports the imports); median and min of "
          "`repeats` fresh subprocesses per tool, alternating tools")


def fashion_data():
    from quantir.datasets.fashion_mnist import load_fashion_mnist, to_model_input
    xtr, _ = load_fashion_mnist("train")
    xte, yte = load_fashion_mnist("test")
    return ROOT / "models" / "fashion_mnist_cnn.onnx", to_model_input(xtr[:500]), to_model_input(xte), yte


def effnet_data():
    from quantir.datasets import photos as P
    test = P.preprocess_efficientnet_lite([p.image for p in P.load_photos()])
    return ROOT / ".cache" / "models" / "efficientnet_lite0.onnx", P.calibration_crops(64), test, None


CHILD = r'''
import sys, time, json, resource, numpy as np
sys.path.insert(0, {src!r})
tool, method, model, calib_path, out, act = sys.argv[1:7]


def peak_rss_mb():
    # VmHWM belongs to this program's address space; ru_maxrss would carry the forking parent's
    # high-water mark across exec (Linux), so a child of a big bench process reported the parent's
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
calib = np.load(calib_path)
name = list(calib.files)[0]
data = calib[name]
t0 = time.perf_counter()
if tool == "quantir":
    import quantir as qr
    import quantir.api, quantir.frontends.onnx   # the library and its onnx / onnxruntime dependencies,
    import onnxruntime                            # as ORT's child imports onnxruntime.quantization (+ onnx)
    from quantir.backends.onnx.quantized import save_quantized
else:
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)
imported = time.perf_counter() - t0
t0, c0 = time.perf_counter(), time.process_time()
if tool == "quantir":
    r = qr.quantize(model, {{name: data}}, qr.Config(method=method, progress=False))
    save_quantized(r.module, out, format="qdq")
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = peak_rss_mb()
    # the other exports, untimed and not in the peak RSS
    save_quantized(r.module, out.replace(".onnx", ".u8.onnx"), format="qdq", activations="uint8")
    save_quantized(r.module, out.replace(".onnx", ".qop.onnx"), format="qoperator")
    save_quantized(r.module, out.replace(".onnx", ".qop.u8.onnx"), format="qoperator", activations="uint8")
else:
    class Reader(CalibrationDataReader):
        def __init__(self): self.i = 0
        def get_next(self):
            if self.i >= len(data): return None
            bs = next(b for b in (50, 32, 16, 8, 1) if len(data) % b == 0)  # ORT's histograms need equal batches
            b = data[self.i:self.i + bs]; self.i += bs
            return {{name: b}} if b.shape[0] > 0 else None
        def rewind(self): self.i = 0
    static_batch = {static!r}
    if static_batch:
        class Reader(CalibrationDataReader):  # noqa: F811  a model with a fixed batch of 1
            def __init__(self): self.i = 0
            def get_next(self):
                if self.i >= len(data): return None
                self.i += 1
                return {{name: data[self.i - 1:self.i]}}
            def rewind(self): self.i = 0
    quantize_static(model, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8 if act == "uint8" else QuantType.QInt8,
                    weight_type=QuantType.QInt8,
                    calibrate_method=getattr(CalibrationMethod, {{"minmax": "MinMax", "percentile": "Percentile",
                                                                 "entropy": "Entropy"}}[method]))
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = peak_rss_mb()
print(json.dumps({{"seconds": elapsed, "cpu_seconds": cpu, "import_seconds": imported, "peak_rss_mb": rss}}))
'''


def run_child(tool: str, method: str, model: Path, calib_path: Path, out: Path, static_batch: bool,
              activations: str = "int8") -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD.format(src=str(ROOT / "src"), static=static_batch), tool,
                           method, str(model), str(calib_path), str(out), activations], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])   # the child's own time and peak RSS


def summarize_runs(runs: list[dict]) -> dict:
    """Median and minimum of the repeated children (an error in any of them is reported)."""
    errors = [r["error"] for r in runs if "error" in r]
    if errors:
        return {"error": errors[0]}
    out = {"repeats": len(runs), "seconds_all": [round(r["seconds"], 4) for r in runs]}
    for key in ("seconds", "cpu_seconds", "import_seconds"):
        values = [r[key] for r in runs]
        out[key] = statistics.median(values)
        out[f"{key}_min"] = min(values)
    out["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    return out


def session(path: Path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def latencies(paths: dict[str, Path], x: np.ndarray, input_name: str, rounds: int, budget_s: float,
              min_rounds: int = 5) -> dict[str, list[float]]:
    """Milliseconds per run of each model, in turn, round after round (after one warm-up run each);
    stops after ``rounds`` rounds, or earlier once ``budget_s`` is spent and ``min_rounds`` are done."""
    return round_robin({k: session(p) for k, p in paths.items()}, {input_name: x}, rounds, budget_s, min_rounds)


def predict(path: Path, x: np.ndarray, input_name: str, batch: int) -> np.ndarray:
    s = session(path)
    return np.concatenate([s.run(None, {input_name: x[i:i + batch]})[0] for i in range(0, len(x), batch)])


def latency_batch(test: np.ndarray, n: int) -> np.ndarray:
    """``n`` samples: the test set, repeated when it has fewer."""
    return np.ascontiguousarray(np.resize(test, (n,) + test.shape[1:]))


def _fmt_ratio(v) -> str:
    return "  n/a" if v is None else f"{v:5.2f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=["fashion_mnist", "efficientnet"])
    ap.add_argument("--methods", nargs="*", default=["minmax", "percentile", "entropy"])
    ap.add_argument("--repeats", type=int, default=3, help="quantize runs per tool (fresh subprocesses)")
    ap.add_argument("--rounds", type=int, default=20, help="latency rounds (at most)")
    ap.add_argument("--round-budget", type=float, default=60.0,
                    help="seconds of latency rounds per row (at least 5 rounds)")
    ap.add_argument("--latency-batch", type=int, default=32)
    ap.add_argument("--out", type=Path, default=RESULTS / "quantize_vs_ort.json")
    args = ap.parse_args()
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    results = {"timing": TIMING, "targets": TARGETS, "repeats": args.repeats,
               "latency": {"threads": 1, "batch": args.latency_batch, "statistic": "median over interleaved rounds; "
                           "ratio = median of per-round ratios to fp32"},
               "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "onnxruntime": ort.__version__,
                           "loadavg_start": os.getloadavg()},
               "models": {}}
    table = []
    for name in args.models:
        model, calib, test, labels = fashion_data() if name == "fashion_mnist" else effnet_data()
        if not model.exists():
            print(f"{name}: {model} is missing (make models): skipped")
            continue
        input_name = ort.InferenceSession(str(model)).get_inputs()[0].name
        static = ort.InferenceSession(str(model)).get_inputs()[0].shape[0] == 1
        batch = 1 if static else 500
        lat_n = 1 if static else args.latency_batch
        x_lat = latency_batch(test, lat_n)
        ref = predict(model, test, input_name, batch)
        entry = {"latency_batch": lat_n, "latency_input": f"{len(test)} test samples repeated to {lat_n}"
                 if len(test) < lat_n else f"the first {lat_n} test samples", "methods": {}}
        if labels is not None:
            entry["fp32_top1"] = float(np.mean(ref.argmax(1) == labels))
        work = Path(tempfile.mkdtemp(prefix="quantize_vs_ort_"))
        calib_path = work / "calib.npz"
        np.savez(calib_path, **{input_name: calib})
        fp32_lat = []
        for method in args.methods:
            runs = {"quantir": [], "onnxruntime": []}
            outs = {"quantir": work / f"{name}_{method}_quantir.onnx",
                    "onnxruntime": work / f"{name}_{method}_ort.onnx"}
            for i in range(args.repeats):
                order = ("quantir", "onnxruntime") if i % 2 == 0 else ("onnxruntime", "quantir")
                for tool in order:
                    runs[tool].append(run_child(tool, method, model, calib_path, outs[tool], static))
            row = {tool: summarize_runs(r) for tool, r in runs.items()}
            ort_u8 = work / f"{name}_{method}_ort.u8.onnx"
            u8_info = run_child("onnxruntime", method, model, calib_path, ort_u8, static, activations="uint8")
            row["onnxruntime_uint8"] = {k: v for k, v in u8_info.items() if k in ("seconds", "error")}
            q = outs["quantir"]
            exports = {}
            if "error" not in row["quantir"]:
                exports.update({"quantir_qdq": q, "quantir_qdq_uint8": q.with_suffix(".u8.onnx"),
                                "quantir_qoperator": q.with_suffix(".qop.onnx"),
                                "quantir_qoperator_uint8": q.with_suffix(".qop.u8.onnx")})
            if "error" not in row["onnxruntime"]:
                exports["onnxruntime_qdq"] = outs["onnxruntime"]
            if "error" not in u8_info:
                exports["onnxruntime_qdq_uint8"] = ort_u8
            times = latencies({"fp32": model, **exports}, x_lat, input_name, args.rounds, args.round_budget)
            fp32 = np.asarray(times["fp32"])
            fp32_lat += list(fp32)
            row["fp32_latency_ms"] = float(np.median(fp32))
            row["latency_rounds"] = len(fp32)
            ratios = {}
            for key, path in exports.items():
                t = np.asarray(times[key])
                got = predict(path, test, input_name, batch)
                m = {"latency_ms": float(np.median(t)), "latency_ms_min": float(t.min()),
                     "latency_ratio_vs_fp32": float(np.median(t / fp32)),
                     "latency_ratio_vs_fp32_min": float(t.min() / fp32.min()),
                     "top1_agreement_with_fp32": float(np.mean(got.argmax(1) == ref.argmax(1)))}
                if labels is not None:
                    m["top1"] = float(np.mean(got.argmax(1) == labels))
                row.setdefault("exports", {})[key] = m
                ratios[key] = m["latency_ratio_vs_fp32"]
            if all("error" not in row[t] for t in ("quantir", "onnxruntime")):
                qi, oi = row["quantir"], row["onnxruntime"]
                row["quantize_time_ratio"] = qi["seconds"] / oi["seconds"]
                row["quantize_time_ratio_min"] = qi["seconds_min"] / oi["seconds_min"]
                row["quantize_cpu_ratio"] = qi["cpu_seconds"] / oi["cpu_seconds"]
                row["peak_rss_ratio"] = qi["peak_rss_mb"] / oi["peak_rss_mb"]
                # the default export (QDQ, int8 activations) and the uint8-activation export, each against fp32
                row["int8_latency_ratio_vs_fp32"] = ratios.get("quantir_qdq")
                row["uint8_latency_ratio_vs_fp32"] = ratios.get("quantir_qdq_uint8")
                row["ort_int8_latency_ratio_vs_fp32"] = ratios.get("onnxruntime_qdq")
                row["targets_met"] = {
                    "quantize_time": row["quantize_time_ratio"] <= TARGETS["quantize_time_ratio"],
                    "latency_qdq_int8": (ratios.get("quantir_qdq") or 99) <= TARGETS["int8_latency_ratio_vs_fp32"],
                    "latency_qdq_uint8": (ratios.get("quantir_qdq_uint8") or 99)
                    <= TARGETS["int8_latency_ratio_vs_fp32"]}
            entry["methods"][method] = row
            table.append((name, method, row))
            print(_line(name, method, row), flush=True)
        entry["fp32_latency_ms"] = float(np.median(fp32_lat)) if fp32_lat else None
        results["models"][name] = entry
        shutil.rmtree(work, ignore_errors=True)
    results["machine"]["loadavg_end"] = os.getloadavg()
    print()
    print(f"quantize seconds: median of {args.repeats} fresh processes per tool, the call only (imports and data "
          f"loading excluded for both); latency: 1 thread, batch {args.latency_batch}, median of interleaved rounds")
    print(f"{'model':14} {'method':10} {'quantir s':>9} {'ORT s':>7} {'ratio':>5} | int8/fp32 latency: "
          f"{'qdq':>5} {'qdq-u8':>6} {'qop':>5} {'qop-u8':>6} {'ORT':>5} {'ORT-u8':>6}")
    for name, method, row in table:
        e = row.get("exports", {})
        lat = [e.get(k, {}).get("latency_ratio_vs_fp32")
               for k in ("quantir_qdq", "quantir_qdq_uint8", "quantir_qoperator", "quantir_qoperator_uint8",
                         "onnxruntime_qdq", "onnxruntime_qdq_uint8")]
        print(f"{name:14} {method:10} {row['quantir'].get('seconds', float('nan')):9.2f} "
              f"{row['onnxruntime'].get('seconds', float('nan')):7.2f} {_fmt_ratio(row.get('quantize_time_ratio'))} | "
              f"{'':18} {_fmt_ratio(lat[0])} {_fmt_ratio(lat[1]):>6} {_fmt_ratio(lat[2])} {_fmt_ratio(lat[3]):>6} "
              f"{_fmt_ratio(lat[4])} {_fmt_ratio(lat[5]):>6}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    return 0


def _line(name: str, method: str, row: dict) -> str:
    q, o = row.get("quantir", {}), row.get("onnxruntime", {})
    e = row.get("exports", {})

    def acc(key):
        m = e.get(key, {})
        return m.get("top1", m.get("top1_agreement_with_fp32", float("nan")))
    errors = " ".join(f"[{t} error: {row[t]['error']}]" for t in ("quantir", "onnxruntime")
                      if "error" in row.get(t, {}))
    nan = float("nan")
    return (f"{name:14} {method:10} quantir {q.get('seconds', nan):6.2f}s (min {q.get('seconds_min', nan):.2f}) "
            f"{q.get('peak_rss_mb', 0):5.0f}MB top1 {acc('quantir_qdq'):.4f} | ORT {o.get('seconds', nan):6.2f}s "
            f"(min {o.get('seconds_min', nan):.2f}) {o.get('peak_rss_mb', 0):5.0f}MB top1 "
            f"{acc('onnxruntime_qdq'):.4f} | "
            f"time ratio {_fmt_ratio(row.get('quantize_time_ratio'))} | latency vs fp32 "
            f"{row.get('fp32_latency_ms', nan):.1f}ms: "
            f"qdq {_fmt_ratio(row.get('int8_latency_ratio_vs_fp32'))} "
            f"qdq-u8 {_fmt_ratio(row.get('uint8_latency_ratio_vs_fp32'))} "
            f"ORT {_fmt_ratio(row.get('ort_int8_latency_ratio_vs_fp32'))} {errors}")


if __name__ == "__main__":
    sys.exit(main())
