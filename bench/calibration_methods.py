"""Time quantir's calibration methods against ONNX Runtime's HistogramCollector.

Both sides histogram the same 1e6 float32 samples with 2048 bins and derive thresholds from them.
Collection is timed per histogram pass (ORT builds one histogram per method: |x| for symmetric
percentile, signed for the rest; ours builds both in one ``update``). Threshold computation is
timed on its own. Each timing is the best of ``--repeat`` runs (ORT's entropy: fewer, it takes
seconds). Prints a table and writes bench/results/calibration_methods.json.

Usage: PYTHONPATH=src python bench/calibration_methods.py [--samples 1000000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import onnxruntime
from onnxruntime.quantization.calibrate import HistogramCollector

from quantir.quantize.methods import (
    EntropyOptions,
    MinMaxOptions,
    MseOptions,
    PercentileOptions,
    compute_range,
)
from quantir.quantize.observers import HistogramObserver

BINS = 2048
PERCENTILE = 99.999
RESULTS = Path(__file__).parent / "results" / "calibration_methods.json"


def best_of(repeat: int, fn) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def ort_collector(method: str, symmetric: bool, x: np.ndarray) -> HistogramCollector:
    c = HistogramCollector(method, symmetric, BINS, 128, PERCENTILE, "same")
    with contextlib.redirect_stdout(io.StringIO()):
        c.collect({"t": x})
    return c


def ort_thresholds(c: HistogramCollector) -> tuple[float, float]:
    with contextlib.redirect_stdout(io.StringIO()):
        lo, hi = c.compute_collection_result()["t"][:2]
    return float(lo), float(hi)


def bench_dataset(name: str, x: np.ndarray, repeat: int) -> dict:
    amax = float(np.abs(x).max())
    row: dict = {"dataset": name, "samples": int(x.size), "min": float(x.min()),
                 "max": float(x.max()), "methods": {}}

    t_ours_collect, obs = best_of(repeat, lambda: _observed(x))
    t_ort_signed, _ = best_of(repeat, lambda: ort_collector("entropy", False, x))
    t_ort_abs, _ = best_of(repeat, lambda: ort_collector("percentile", True, x))
    row["collect"] = {
        "ours_signed_and_abs_s": t_ours_collect,
        "ort_signed_s": t_ort_signed,
        "ort_abs_s": t_ort_abs,
        "ratio_ort_both_over_ours": (t_ort_signed + t_ort_abs) / t_ours_collect,
    }

    cases = [  # (label, our options, ORT (method, symmetric) computing the same thing or None)
        ("minmax", MinMaxOptions(), None),
        ("percentile_asymmetric", PercentileOptions(PERCENTILE), ("percentile", False)),
        ("percentile_symmetric", PercentileOptions(PERCENTILE, symmetric=True), ("percentile", True)),
        ("entropy_symmetric_128", EntropyOptions(128, "symmetric", exclude_zeros=False),
         ("entropy", False)),
        ("entropy_abs_128", EntropyOptions(128, "abs"), None),
        ("entropy_asymmetric_256", EntropyOptions(256, "asymmetric"), None),
        ("mse_asymmetric_256", MseOptions(256), None),
        ("mse_symmetric_255", MseOptions(255, symmetric=True), None),
    ]
    for label, opts, ort in cases:
        t_ours, r = best_of(repeat, lambda o=opts: compute_range(o, obs))
        entry = {"ours_s": t_ours, "ours_range": [r.rmin, r.rmax]}
        if ort is not None:
            collector = ort_collector(*ort, x)
            n = 1 if ort[0] == "entropy" else repeat
            t_ort, (lo, hi) = best_of(n, lambda c=collector: ort_thresholds(c))
            entry.update(ort_s=t_ort, ort_range=[lo, hi], speedup=t_ort / t_ours,
                         max_abs_diff_over_amax=max(abs(r.rmin - lo), abs(r.rmax - hi)) / amax)
        row["methods"][label] = entry
    return row


def _observed(x: np.ndarray) -> HistogramObserver:
    obs = HistogramObserver(BINS, name="bench")
    obs.update(x)
    return obs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    n = args.samples
    datasets = {
        "normal": rng.normal(size=n),
        "laplace": rng.laplace(size=n),
        "relu": np.maximum(rng.normal(0.3, 1.0, size=n), 0.0),
    }
    rows = [bench_dataset(k, v.astype(np.float32), args.repeat) for k, v in datasets.items()]

    print(f"{'dataset':9} {'method':24} {'ours ms':>9} {'ORT ms':>9} {'speedup':>8} {'|diff|/amax':>11}")
    for row in rows:
        c = row["collect"]
        print(f"{row['dataset']:9} {'collect (2 histograms)':24} {1e3 * c['ours_signed_and_abs_s']:9.2f} "
              f"{1e3 * (c['ort_signed_s'] + c['ort_abs_s']):9.2f} {c['ratio_ort_both_over_ours']:8.2f}")
        for label, e in row["methods"].items():
            ort = f"{1e3 * e['ort_s']:9.2f} {e['speedup']:8.1f} {e['max_abs_diff_over_amax']:11.4f}" \
                if "ort_s" in e else f"{'-':>9} {'-':>8} {'-':>11}"
            print(f"{row['dataset']:9} {label:24} {1e3 * e['ours_s']:9.2f} {ort}")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "bins": BINS, "percentile": PERCENTILE, "repeat": args.repeat,
        "numpy": np.__version__, "onnxruntime": onnxruntime.__version__,
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "results": rows,
    }, indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
