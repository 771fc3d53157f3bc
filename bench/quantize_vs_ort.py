"""quantir vs onnxruntime.quantization.quantize_static, same model, same calibration data, one run.

For each model (the Fashion-MNIST CNN and EfficientNet-Lite0) and each method (MinMax,
Percentile, Entropy): quantize with both tools, each in its own subprocess so peak memory
(max RSS) is measured alone; then evaluate accuracy and the latency in ONNX Runtime of the
fp32 model and both int8 exports (quantir's ONNX QOperator and QDQ exports, ORT's QDQ), batch 1,
median of repeated runs. Prints ratios and writes bench/results/quantize_vs_ort.json.

Usage: python bench/quantize_vs_ort.py [--models fashion_mnist efficientnet] [--methods minmax ...]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
RESULTS = ROOT / "bench" / "results"
ORT_METHODS = {"minmax": "MinMax", "percentile": "Percentile", "entropy": "Entropy"}


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
import sys, time, json, numpy as np
sys.path.insert(0, {src!r})
tool, method, model, calib_path, out = sys.argv[1:6]
calib = np.load(calib_path)
name = list(calib.files)[0]
t0 = time.perf_counter()
if tool == "quantir":
    import quantir as qr
    r = qr.quantize(model, {{name: calib[name]}}, qr.Config(method=method, progress=False))
    elapsed = time.perf_counter() - t0
    r.save(out, format="qoperator")
    r.save(out.replace(".onnx", ".qdq.onnx"), format="qdq")
else:
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)
    data = calib[name]
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
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=getattr(CalibrationMethod, {{"minmax": "MinMax", "percentile": "Percentile",
                                                                 "entropy": "Entropy"}}[method]))
    elapsed = time.perf_counter() - t0
import resource
print(json.dumps({{"seconds": elapsed, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
'''


def run_child(tool: str, method: str, model: Path, calib: np.ndarray, input_name: str, out: Path,
              static_batch: bool) -> dict:
    with tempfile.TemporaryDirectory() as d:
        calib_path = Path(d) / "calib.npz"
        np.savez(calib_path, **{input_name: calib})
        proc = subprocess.run([sys.executable, "-c", CHILD.format(src=str(ROOT / "src"), static=static_batch), tool,
                               method, str(model), str(calib_path), str(out)], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])   # the child's own peak RSS and time


def latency(path: Path, x: np.ndarray, input_name: str, repeats: int = 30, batch: int = 1) -> float:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    feed = {input_name: x[:batch]}
    for _ in range(3):
        s.run(None, feed)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        s.run(None, feed)
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1000)


def predict(path: Path, x: np.ndarray, input_name: str, batch: int) -> np.ndarray:
    import onnxruntime as ort
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.concatenate([s.run(None, {input_name: x[i:i + batch]})[0] for i in range(0, len(x), batch)])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=["fashion_mnist", "efficientnet"])
    ap.add_argument("--methods", nargs="*", default=["minmax", "percentile", "entropy"])
    args = ap.parse_args()
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    results = {"models": {}}
    for name in args.models:
        model, calib, test, labels = fashion_data() if name == "fashion_mnist" else effnet_data()
        if not model.exists():
            print(f"{name}: {model} is missing (make models): skipped")
            continue
        input_name = ort.InferenceSession(str(model)).get_inputs()[0].name
        static = ort.InferenceSession(str(model)).get_inputs()[0].shape[0] == 1
        batch = 1 if static else 500
        ref = predict(model, test, input_name, batch)
        lat_batch = 1 if static else 32   # batch 1 of a 0.1 ms model measures only overhead
        entry = {"latency_batch": lat_batch, "fp32_latency_ms": latency(model, test, input_name, batch=lat_batch),
                 "methods": {}}
        if labels is not None:
            entry["fp32_top1"] = float(np.mean(ref.argmax(1) == labels))
        work = Path(tempfile.mkdtemp())
        for method in args.methods:
            row = {}
            for tool in ("quantir", "onnxruntime"):
                out = work / f"{name}_{method}_{tool}.onnx"
                info = run_child(tool, method, model, calib, input_name, out, static)
                if "error" not in info:
                    paths = {"qoperator": out, "qdq": out.with_suffix(".qdq.onnx")} if tool == "quantir" else {"qdq": out}
                    for fmt, p in paths.items():
                        got = predict(p, test, input_name, batch)
                        m = {"latency_ms": latency(p, test, input_name, batch=lat_batch),
                             "top1_agreement_with_fp32": float(np.mean(got.argmax(1) == ref.argmax(1)))}
                        if labels is not None:
                            m["top1"] = float(np.mean(got.argmax(1) == labels))
                        info[fmt] = m
                row[tool] = info
            if all("error" not in row[t] for t in row):
                row["quantize_time_ratio"] = row["quantir"]["seconds"] / row["onnxruntime"]["seconds"]
                row["peak_rss_ratio"] = row["quantir"]["peak_rss_mb"] / row["onnxruntime"]["peak_rss_mb"]
                # the default export (QDQ) and the QOperator export, each against fp32
                row["int8_latency_ratio_vs_fp32"] = row["quantir"]["qdq"]["latency_ms"] / entry["fp32_latency_ms"]
                row["qoperator_latency_ratio_vs_fp32"] = row["quantir"]["qoperator"]["latency_ms"] / entry["fp32_latency_ms"]
                row["ort_int8_latency_ratio_vs_fp32"] = row["onnxruntime"]["qdq"]["latency_ms"] / entry["fp32_latency_ms"]
            entry["methods"][method] = row
            q, o = row.get("quantir", {}), row.get("onnxruntime", {})
            print(f"{name:14} {method:10} quantir {q.get('seconds', float('nan')):6.2f}s "
                  f"{q.get('peak_rss_mb', 0):6.0f}MB top1 {q.get('qdq', {}).get('top1', q.get('qdq', {}).get('top1_agreement_with_fp32', float('nan'))):.4f} | "
                  f"ORT {o.get('seconds', float('nan')):6.2f}s {o.get('peak_rss_mb', 0):6.0f}MB "
                  f"top1 {o.get('qdq', {}).get('top1', o.get('qdq', {}).get('top1_agreement_with_fp32', float('nan'))):.4f} | "
                  f"time ratio {row.get('quantize_time_ratio', float('nan')):.2f} "
                  f"int8/fp32 latency quantir {row.get('int8_latency_ratio_vs_fp32', float('nan')):.2f} "
                  f"ORT {row.get('ort_int8_latency_ratio_vs_fp32', float('nan')):.2f} "
                  + " ".join(f"[{t} error: {row[t]['error']}]" for t in ("quantir", "onnxruntime") if "error" in row.get(t, {})))
        results["models"][name] = entry
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "quantize_vs_ort.json").write_text(json.dumps(results, indent=2))
    print(f"wrote {RESULTS / 'quantize_vs_ort.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
