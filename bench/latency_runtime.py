"""Latency of quantir's two executors relative to plain ONNX Runtime on the original file.

Model: EfficientNet-Lite0 (``.cache/models/efficientnet_lite0.onnx``, made by
scripts/export_efficientnet_lite0.py) when present, else the light model of the onnx wheel
with the most nodes. Batch 1, random normal input. Each engine gets ``--warmup`` untimed
runs, then the median of ``--repeat`` timed runs (fewer for the slow numpy interpreter):

* ``ort_original``: ``onnxruntime.InferenceSession`` on the original file (the baseline);
* ``ort_executor``: ``quantir.runtime.ort.OrtExecutor`` on the imported module (exported
  back to ONNX: BatchNorm folded, constants folded, same feeds and output names);
* ``ort_executor_expose_all``: the same with every activation exposed (calibration's pass);
* ``interpreter``: ``quantir.runtime.run``, the numpy reference interpreter.

All ORT sessions get the same options: ONNX Runtime's default thread count (``--threads``
sets it) and no spin-waiting of idle pool threads — with spinning on, the threads of the
session that just ran would compete with the next one in the round. Prints the ratios and
writes bench/results/latency_runtime.json.

Usage: PYTHONPATH=src python bench/latency_runtime.py [--repeat 20] [--warmup 3] [--threads N]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402
from _results import machine, write_json  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.runtime import run as interpret  # noqa: E402
from quantir.runtime.ort import OrtExecutor  # noqa: E402

EFFICIENTNET = ROOT / ".cache" / "models" / "efficientnet_lite0.onnx"
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
RESULTS = ROOT / "bench" / "results" / "latency_runtime.json"


def pick_model() -> Path:
    if EFFICIENTNET.is_file():
        return EFFICIENTNET
    light = sorted(LIGHT_DIR.glob("light_*.onnx"), key=lambda p: len(onnx.load(str(p)).graph.node))
    return light[-1]


def time_rounds(engines: dict, warmup: int, rounds: int) -> dict[str, list[float]]:
    """Seconds per run of each engine, ``rounds`` rounds of one run each, in turn."""
    for fn in engines.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(rounds):
        for name, fn in engines.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=20, help="timed rounds (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs of each engine first (default 3)")
    ap.add_argument("--threads", type=int, default=None, help="ONNX Runtime intra-op threads (default: ORT's)")
    ap.add_argument("--model", type=Path, default=None, help="another .onnx model (default: see above)")
    args = ap.parse_args()

    path = args.model or pick_model()
    config = {"session.intra_op.allow_spinning": "0"}
    options = ort.SessionOptions()
    options.log_severity_level = 3
    for key, value in config.items():
        options.add_session_config_entry(key, value)
    if args.threads is not None:
        options.intra_op_num_threads = args.threads
    baseline = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    (inp,) = baseline.get_inputs()
    shape = [d if isinstance(d, int) else 1 for d in inp.shape]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    feeds = {inp.name: x}

    t0 = time.perf_counter()
    module = load_onnx(path)
    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    executor = OrtExecutor(module, intra_op_threads=args.threads, session_config=config)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    exposing = OrtExecutor(module, expose="all", intra_op_threads=args.threads, session_config=config)
    build_all_s = time.perf_counter() - t0

    # The engines must agree before their speed means anything.
    want = baseline.run(None, feeds)[0]
    for name, got in (("ort_executor", executor.run(feeds)), ("interpreter", interpret(module, feeds))):
        out = next(iter(got.values()))
        err = float(np.max(np.abs(out - want)) / max(float(np.max(np.abs(want))), 1e-30))
        if err > 1e-4:
            sys.exit(f"latency_runtime.py: {name} disagrees with ONNX Runtime (relative error {err:.2e})")

    samples = time_rounds({"ort_original": lambda: baseline.run(None, feeds),
                           "ort_executor": lambda: executor.run(feeds),
                           "ort_executor_expose_all": lambda: exposing.run(feeds),
                           "interpreter": lambda: interpret(module, feeds)}, args.warmup, args.repeat)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    base = samples["ort_original"]
    ratios = {k: statistics.median(t / b for t, b in zip(v, base)) for k, v in samples.items() if k != "ort_original"}

    print(f"{path.name}, batch 1, input {tuple(shape)}; {args.repeat} rounds after {args.warmup} warm-up runs")
    print(f"  {'engine':26s} {'median ms':>10s} {'x ORT':>8s}")
    for k, v in medians.items():
        print(f"  {k:26s} {v * 1e3:10.2f} {ratios.get(k, 1.0):8.2f}")
    print(f"  (import {import_s:.2f} s, executor build {build_s:.2f} s, expose-all build {build_all_s:.2f} s, "
          f"{len(exposing.exposed)} exposed tensors)")

    result = {
        "model": path.name,
        "batch": 1,
        "input_shape": shape,
        "median_ms": {k: v * 1e3 for k, v in medians.items()},
        "ratio_to_ort_original": ratios,
        "samples_ms": {k: [t * 1e3 for t in v] for k, v in samples.items()},
        "rounds": args.repeat,
        "warmup": args.warmup,
        "session_config": config,
        "intra_op_threads": args.threads,
        "exposed_tensors": len(exposing.exposed),
        "import_s": import_s,
        "executor_build_s": build_s,
        "expose_all_build_s": build_all_s,
        "versions": {"onnxruntime": ort.__version__, "onnx": onnx.__version__, "numpy": np.__version__,
                     "python": platform.python_version()},
        "machine": machine(),
    }
    write_json(result, RESULTS, ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
