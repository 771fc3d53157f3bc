"""quantir's entropy calibration against ONNX Runtime's, tensor by tensor, and what it does to accuracy.

For each model (the Fashion-MNIST CNNs, EfficientNet-Lite0 on photo crops, the onnx wheel's
``light_*`` models; data as in bench/_mr_data.py) one calibration pass observes every tensor
quantir quantizes (``HistogramObserver``). On those same histograms:

* ``entropy``      quantir's entropy method (defaults: |x| windows, P resampled to 2 sub-bins per
                   level, the grid's level count, exact zeros and atoms out of P inside the window);
* ``entropy_trt``  the TensorRT construction quantir used before (``EntropyOptions(resolution=None)``:
                   P at the histogram's own bins, 128 levels);
* ``percentile``, ``minmax`` for reference.

ONNX Runtime's thresholds come from ``create_calibrator(..., CalibrationMethod.Entropy)`` on the same
float model and the same calibration samples (batches of ``--ort-batch``), read per tensor from
``compute_data()``: with its defaults (``num_bins`` 128: the window search then has a single
candidate, the whole histogram, so ORT's entropy is its min/max) and with ``num_bins=2048``
(TensorRT's histogram size, where the search does run).

Every range is scored by the **histogram SQNR** of quantizing that tensor alone to the int8 grid
the range gets: signal power over the rounding noise ``Δ²/12`` of every non-zero value inside the
range plus the squared clipping error of the values outside (bin centres of quantir's histogram).
Each tensor row also says why a threshold may differ: the share of exact zeros, the share of the
non-zero mass in atoms (bins far above their neighbours: repeated values), whether the tensor is
one-signed, and the mass each range clips.

With ``--accuracy`` each method also quantizes the model and quantir's integer interpreter runs it on
the evaluation samples: top-1 (Fashion-MNIST labels) and top-1 agreement with fp32 (ONNX Runtime).

Prints the per-tensor tables (largest quantir-vs-ORT differences first) and writes
bench/results/entropy_vs_ort.json.

Usage: python bench/entropy_vs_ort.py [--models fashion gate efficientnet light] [--accuracy]
       [--n-calib-fashion 500] [--n-eval-photos 64] [--n-eval-light 16] [--no-ort-2048] [--top 12]
       [--out bench/results/entropy_vs_ort.json]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
RESULTS = ROOT / "bench" / "results"

import _mr_data as D  # noqa: E402

import quantir as qr  # noqa: E402
from quantir.quantize.methods import (  # noqa: E402
    EntropyOptions,
    MinMaxOptions,
    PercentileOptions,
    _split_atoms,
    _without_zeros,
    compute_range,
)

METHODS = {
    "entropy": EntropyOptions(),
    "entropy_trt": EntropyOptions(resolution=None),
    "percentile": PercentileOptions(),
    "minmax": MinMaxOptions(),
}


# -- per-tensor scoring ------------------------------------------------------------------------------

def histogram_sqnr(obs, lo: float, hi: float) -> float | None:
    """SQNR (dB) of quantizing the observed values to 256 levels over ``[lo, hi]`` (bin centres)."""
    h = obs.histogram
    x = 0.5 * (h.edges[:-1] + h.edges[1:])
    c = h.counts.astype(np.float64)
    nonzero = _without_zeros(h, obs.zero_count).astype(np.float64)
    step = (hi - lo) / 255.0
    inside = (x >= lo) & (x <= hi)
    err = (nonzero[inside].sum() * step * step / 12.0 + (c[x > hi] * (x[x > hi] - hi) ** 2).sum()
           + (c[x < lo] * (x[x < lo] - lo) ** 2).sum())
    signal = float((c * x * x).sum())
    if signal <= 0:
        return None
    return 10.0 * math.log10(signal / err) if err > 0 else math.inf


def clipped_share(obs, lo: float, hi: float) -> float:
    """Share of the values outside ``[lo, hi]`` (histogram bins wholly outside)."""
    h = obs.histogram
    c = h.counts
    out = c[h.edges[1:] <= lo].sum() + c[h.edges[:-1] > hi].sum()
    return float(out) / max(int(c.sum()), 1)


def tensor_traits(obs) -> dict:
    h = obs.abs_histogram
    counts = _without_zeros(h, obs.zero_count)
    _, atoms = _split_atoms(counts)
    nonzero = max(float(counts.sum()), 1.0)
    amax = max(-obs.min, obs.max)
    return {"min": obs.min, "max": obs.max, "zeros": obs.zero_count / obs.num_values,
            "atoms": float(atoms.sum()) / nonzero,
            "one_signed": bool(obs.min >= -0.1 * amax or obs.max <= 0.1 * amax)}


def why(traits: dict, q: tuple, o: tuple) -> str:
    """A short reading of where quantir's and ORT's thresholds part (for the table)."""
    reasons = []
    tq, to = max(-q[0], q[1]), max(-o[0], o[1])
    if traits["zeros"] > 0.05:
        reasons.append(f"{100 * traits['zeros']:.0f}% exact zeros (ORT keeps them in P)")
    if traits["atoms"] > 0.05:
        reasons.append(f"{100 * traits['atoms']:.0f}% of the mass in atoms")
    if traits["one_signed"]:
        reasons.append("one-signed: the int8 grid has 256 levels over [0,t], ORT's Q 64 (128 over [-t,t])")
    if not reasons:
        reasons.append("shallow KL minimum (histogram grids differ)")
    return ("ORT clips more: " if to < tq else "quantir clips more: ") + "; ".join(reasons)


# -- ONNX Runtime ------------------------------------------------------------------------------------

def ort_thresholds(case: D.Case, num_bins: int | None, batch: int) -> dict[str, tuple[float, float]]:
    from onnxruntime.quantization.calibrate import CalibrationDataReader, CalibrationMethod, create_calibrator

    data = case.calib
    # ORT stacks the batches of a tensor into one array: they must all have the same size
    step = next(b for b in (batch, 50, 32, 16, 8, 1) if len(data) % b == 0) if case.batch > 1 else 1

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.i = 0

        def get_next(self):
            if self.i >= len(data):
                return None
            b = data[self.i:self.i + step]
            self.i += step
            return {case.input_name: b}

    extra = {} if num_bins is None else {"num_bins": num_bins}
    with tempfile.TemporaryDirectory() as d:
        cal = create_calibrator(str(case.path), None, augmented_model_path=os.path.join(d, "augmented.onnx"),
                                calibrate_method=CalibrationMethod.Entropy, extra_options=extra)
        devnull = open(os.devnull, "w")
        saved, sys.stdout = sys.stdout, devnull   # ORT prints progress lines per tensor
        try:
            cal.collect_data(Reader())
            data_out = cal.compute_data()
        finally:
            sys.stdout = saved
            devnull.close()
    return {k: (float(v.range_value[0]), float(v.range_value[1])) for k, v in data_out.data.items()}


# -- accuracy ----------------------------------------------------------------------------------------

def fp32_outputs(case: D.Case) -> np.ndarray:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(str(case.path), so, providers=["CPUExecutionProvider"])
    return np.concatenate([s.run(None, {case.input_name: case.evaluate[i:i + case.batch]})[0]
                           for i in range(0, len(case.evaluate), case.batch)])


def accuracy(case: D.Case, options, fp32: np.ndarray) -> dict:
    from quantir.runtime import run
    config = qr.Config(method=options.method.value, method_options=options, progress=False)
    t0 = time.perf_counter()
    result = qr.quantize(str(case.path), {case.input_name: case.calib}, config)
    t1 = time.perf_counter()
    out = np.concatenate([next(iter(run(result.module, {case.input_name: case.evaluate[i:i + case.batch]}).values()))
                          for i in range(0, len(case.evaluate), case.batch)])
    pred, ref = out.reshape(len(out), -1).argmax(1), fp32.reshape(len(fp32), -1).argmax(1)
    row = {"agreement": float((pred == ref).mean()), "quantize_s": round(t1 - t0, 2),
           "worst_layer_sqnr_db": min((e.sqnr_db for e in result.layer_errors() if e.sqnr_db is not None),
                                      default=None)}
    if case.labels is not None:
        row["top1"] = float((pred == case.labels).mean())
    return row


# -- one model ---------------------------------------------------------------------------------------

def measure(case: D.Case, args) -> dict:
    print(f"\n== {case.name}: {case.data}", flush=True)
    result = qr.quantize(str(case.path), {case.input_name: case.calib},
                         qr.Config(method="entropy", progress=False, bias_correction="off"))
    ort_default = ort_thresholds(case, None, args.ort_batch)
    # ORT's KL search is a Python loop per window: ~1 s per tensor at 2048 bins (minutes on DenseNet)
    ort_2048 = ort_thresholds(case, 2048, args.ort_batch) if not args.no_ort_2048 else {}
    tensors = []
    for obs_list in result.statistics.observers.values():
        obs = obs_list[0]
        if obs.is_constant:
            continue
        row = {"tensor": obs.name, **tensor_traits(obs)}
        for key, opts in METHODS.items():
            lo, hi = compute_range(opts, obs)
            row[key] = {"range": [lo, hi], "sqnr_db": histogram_sqnr(obs, lo, hi),
                        "clipped": clipped_share(obs, lo, hi)}
        for key, table in (("ort_entropy", ort_default), ("ort_entropy_2048", ort_2048)):
            if obs.name in table:
                lo, hi = table[obs.name]
                row[key] = {"range": [lo, hi], "sqnr_db": histogram_sqnr(obs, lo, hi),
                            "clipped": clipped_share(obs, lo, hi)}
        tensors.append(row)

    def gap(row, key, ref):
        if key not in row or ref not in row:
            return 0.0
        amax = max(-row["min"], row["max"]) or 1.0
        return abs(max(-row[key]["range"][0], row[key]["range"][1]) -
                   max(-row[ref]["range"][0], row[ref]["range"][1])) / amax

    for label, key in (("quantir entropy (new)", "entropy"),
                       ("quantir entropy (TensorRT construction, before)", "entropy_trt")):
        ranked = sorted(tensors, key=lambda r: -gap(r, key, "ort_entropy_2048"))[: args.top]
        print(f"\n{label} vs ORT entropy num_bins=2048 (ORT default num_bins=128 = its min/max), largest threshold "
              "differences; SQNR in dB of quantizing that tensor alone")
        print(f"  {'tensor':44s} {'max|x|':>7s} {'quantir t':>9s} {'sq':>5s} {'ORT2048 t':>9s} {'sq':>5s} "
              f"{'ORT128':>5s} {'pct':>5s}  why")
        for r in ranked:
            if "ort_entropy_2048" not in r:
                continue
            q, o = r[key]["range"], r["ort_entropy_2048"]["range"]
            def f(v):
                return f"{v:5.1f}" if v is not None and math.isfinite(v) else "  inf"
            print(f"  {r['tensor'][-44:]:44s} {max(-r['min'], r['max']):7.3f} {max(-q[0], q[1]):9.3f} "
                  f"{f(r[key]['sqnr_db'])} {max(-o[0], o[1]):9.3f} {f(r['ort_entropy_2048']['sqnr_db'])} "
                  f"{f(r.get('ort_entropy', {}).get('sqnr_db'))} {f(r['percentile']['sqnr_db'])}  "
                  f"{why(r, q, o)}")

    moved = sorted(tensors, key=lambda r: -gap(r, "entropy", "entropy_trt"))[: args.top]
    print("\nwhere the fix moved quantir's threshold most (TensorRT construction -> resampled, grid levels, atoms)")
    print(f"  {'tensor':44s} {'max|x|':>7s} {'before t':>9s} {'sq':>5s} {'after t':>9s} {'sq':>5s} "
          f"{'zeros':>6s} {'atoms':>6s}")
    for r in moved:
        b, a = r["entropy_trt"], r["entropy"]
        print(f"  {r['tensor'][-44:]:44s} {max(-r['min'], r['max']):7.3f} {max(-b['range'][0], b['range'][1]):9.3f} "
              f"{b['sqnr_db'] or 0:5.1f} {max(-a['range'][0], a['range'][1]):9.3f} {a['sqnr_db'] or 0:5.1f} "
              f"{100 * r['zeros']:5.0f}% {100 * r['atoms']:5.0f}%")

    def mean_sqnr(key):
        v = [r[key]["sqnr_db"] for r in tensors if key in r and r[key]["sqnr_db"] is not None
             and math.isfinite(r[key]["sqnr_db"])]
        return round(float(np.mean(v)), 2) if v else None

    summary = {k: mean_sqnr(k) for k in (*METHODS, "ort_entropy", "ort_entropy_2048")}
    worst = {k: round(min((r[k]["sqnr_db"] for r in tensors if k in r and r[k]["sqnr_db"] is not None), default=0), 2)
             for k in (*METHODS, "ort_entropy", "ort_entropy_2048")}
    print(f"\n  mean histogram SQNR over {len(tensors)} tensors (dB): {summary}")
    print(f"  worst tensor SQNR (dB): {worst}")
    out = {"data": case.data, "tensors": tensors, "mean_sqnr_db": summary, "worst_sqnr_db": worst}
    if args.accuracy:
        fp32 = fp32_outputs(case)
        out["fp32_top1"] = float((fp32.argmax(1) == case.labels).mean()) if case.labels is not None else None
        # constant-weight models (light_*) may give one class whatever the input: agreement is then moot
        out["fp32_distinct_classes"] = int(np.unique(fp32.reshape(len(fp32), -1).argmax(1)).size)
        if out["fp32_distinct_classes"] == 1:
            print("  fp32 predicts one class for every sample: agreement says nothing here")
        out["accuracy"] = {}
        for key, opts in METHODS.items():
            out["accuracy"][key] = accuracy(case, opts, fp32)
            print(f"  {key:12s} {out['accuracy'][key]}", flush=True)
        if out["fp32_top1"] is not None:
            print(f"  fp32 top1 {out['fp32_top1']:.4f}")
    return out


def cases(args) -> list:
    builders = []
    for m in args.models:
        if m == "fashion":
            builders.append(lambda: D.fashion(ROOT / "models" / "fashion_mnist_cnn.onnx", args.n_calib_fashion, None))
        elif m == "gate":
            builders.append(lambda: D.fashion(ROOT / "models" / "fashion_gate_cnn.onnx", args.n_calib_fashion, None))
        elif m == "efficientnet":
            builders.append(lambda: D.efficientnet(64, args.n_eval_photos))
        elif m == "light":
            builders += [lambda p=p: D.light(p, 16, args.n_eval_light) for p in D.light_paths()
                         if p.stem.removeprefix("light_") not in args.skip_light]
        else:
            raise SystemExit(f"unknown model set {m!r}: fashion, gate, efficientnet, light")
    return builders


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=["fashion", "gate", "efficientnet", "light"])
    ap.add_argument("--accuracy", action="store_true", help="also quantize with each method and evaluate")
    ap.add_argument("--n-calib-fashion", type=int, default=500)
    ap.add_argument("--n-eval-photos", type=int, default=64)
    ap.add_argument("--n-eval-light", type=int, default=16)
    ap.add_argument("--skip-light", nargs="*", default=["bvlc_alexnet", "zfnet512", "vgg19"],
                    help="light_* models left out (the large classifiers, as in make test)")
    ap.add_argument("--ort-batch", type=int, default=50)
    ap.add_argument("--no-ort-2048", action="store_true",
                    help="skip ORT's entropy at num_bins=2048 (its search is slow on large graphs)")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--out", type=Path, default=RESULTS / "entropy_vs_ort.json")
    args = ap.parse_args()
    results = {}
    for build in cases(args):
        try:
            case = build()
        except D.CaseUnavailable as e:
            print(f"skipped: {e}")
            continue
        results[case.name] = measure(case, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, default=float))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
