"""Latency of quantir's integer interpreter against ONNX Runtime fp32 on the original model.

Issue 13 item 5: evaluating an integer model must be fast enough to decide with (choosing methods,
bias correction, mixed precision run it many times). Per model, one process, one thread
everywhere (ORT ``intra_op_num_threads=1``; numpy's BLAS limited to 1 by the interpreter), same
batch:

* ``ort_fp32``: ``onnxruntime.InferenceSession`` on the original float .onnx;
* ``quantir_int``: ``quantir.runtime.run`` on the quantized module (LiteRT reference arithmetic);
* ``quantir_float``: ``quantir.runtime.run`` on the imported float module.

Models: the Fashion-MNIST CNN (``models/fashion_mnist_cnn.onnx``, quantized with 500 training
images, batch 500) and EfficientNet-Lite0 (``.cache/models/efficientnet_lite0.onnx``, quantized with
``photos.calibration_crops(64)``, batch 32), default Config. Each engine gets ``--warmup`` untimed
runs, then ``--rounds`` rounds in which every engine runs once, in turn; the table shows the median
per engine and the median of the per-round ratios (the machine is shared: a ratio within a round
is steadier than a time). The process CPU time is recorded too, and its ratio printed: with every
engine on one thread it leaves out the time the process waited for a core that other programs
held. Whether the compiled loops (numba) were on is printed and recorded.

Prints the table and writes bench/results/latency_integer.json. ``--profile`` also prints, per
model, where the integer interpreter spends its time: the process CPU time of each op kind and of
the slowest single ops, over ``--rounds`` more runs after the timed ones. The issue's target is
3x (``TARGET_RATIO``); ``GOAL_RATIO`` is the margin kept for a loaded machine.

Usage: PYTHONPATH=src python bench/latency_integer.py [--rounds 5] [--warmup 1] [--models fashion,efficientnet]
       [--profile]
"""
from __future__ import annotations

import argparse
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import numpy as np  # noqa: E402
from _results import machine, write_json  # noqa: E402
import onnxruntime as ort  # noqa: E402

import quantir as qr  # noqa: E402
from quantir.runtime.interpreter import Interpreter  # noqa: E402
from quantir.runtime.qkernels import _jit  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "latency_integer.json"
TARGET_RATIO = 3.0
GOAL_RATIO = 2.6


def fashion():
    from quantir.datasets.fashion_mnist import load_fashion_mnist, to_model_input
    path = ROOT / "models" / "fashion_mnist_cnn.onnx"
    train, _ = load_fashion_mnist("train")
    test, _ = load_fashion_mnist("test")
    return path, to_model_input(train[:500]), to_model_input(test[:500])


def efficientnet():
    from quantir.datasets import photos
    path = ROOT / ".cache" / "models" / "efficientnet_lite0.onnx"
    calib = photos.calibration_crops(64, seed=0)
    return path, calib, calib[:32]


MODELS = {"fashion": fashion, "efficientnet": efficientnet}


def profiled(interpreter: Interpreter) -> dict:
    """Wrap every kernel of ``interpreter`` to add its process CPU time to the returned dict (by op)."""
    spent: dict = {}

    def timed(op, kernel):
        def run(o, *args):
            c0 = time.process_time()
            try:
                return kernel(o, *args)
            finally:
                spent[op] = spent.get(op, 0.0) + time.process_time() - c0
        return run

    for op, kernel in list(interpreter.kernels.items()):
        interpreter.kernels[op] = timed(op, kernel)
    return spent


def print_profile(spent: dict, rounds: int, top: int = 8) -> None:
    kinds: dict = {}
    for op, t in spent.items():
        kinds[op.name] = kinds.get(op.name, 0.0) + t
    total = sum(spent.values())
    print(f"    integer interpreter, CPU ms per run: {total / rounds * 1e3:.1f} in kernels")
    for kind, t in sorted(kinds.items(), key=lambda kv: -kv[1])[:top]:
        print(f"      {kind:24s} {t / rounds * 1e3:8.1f}")
    for op, t in sorted(spent.items(), key=lambda kv: -kv[1])[:top]:
        shape = getattr(op.operands[0].type, "shape", None) if op.operands else None
        print(f"      {t / rounds * 1e3:8.1f}  {op.name} {op.label or ''} {list(shape) if shape else ''}")


def bench_model(name: str, rounds: int, warmup: int, profile: bool = False) -> dict:
    path, calib, x = MODELS[name]()
    float_module = qr.load(path)
    input_name = float_module.main.arg_attrs[0]["quantir.name"].value
    t0 = time.perf_counter()
    result = qr.quantize(qr.load(path), {input_name: calib}, qr.Config(progress=False))
    quantize_s = time.perf_counter() - t0

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    ort_name = session.get_inputs()[0].name
    integer = Interpreter(result.module)
    floating = Interpreter(float_module)
    feeds = {input_name: x}
    engines = {
        "ort_fp32": lambda: session.run(None, {ort_name: x}),
        "quantir_int": lambda: integer.run(feeds, blas_threads=1),
        "quantir_float": lambda: floating.run(feeds, blas_threads=1),
    }
    for fn in engines.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in engines}
    cpu: dict[str, list[float]] = {k: [] for k in engines}
    for _ in range(rounds):
        for k, fn in engines.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            samples[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)

    def ratios_of(times):
        base = times["ort_fp32"]
        return {k: statistics.median(t / b for t, b in zip(v, base)) for k, v in times.items() if k != "ort_fp32"}

    ratios, cpu_ratios = ratios_of(samples), ratios_of(cpu)
    if profile:   # separate runs after the timed rounds: the wrappers stay out of the ratios
        spent = profiled(integer)
        for _ in range(rounds):
            engines["quantir_int"]()
        print_profile(spent, rounds)
    return {
        "model": path.name, "batch": int(x.shape[0]), "input_shape": list(x.shape),
        "median_ms": {k: statistics.median(v) * 1e3 for k, v in samples.items()},
        "ratio_to_ort_fp32": ratios, "samples_ms": {k: [t * 1e3 for t in v] for k, v in samples.items()},
        "median_cpu_ms": {k: statistics.median(v) * 1e3 for k, v in cpu.items()},
        "cpu_ratio_to_ort_fp32": cpu_ratios,
        "quantize_s": quantize_s, "meets_target": ratios["quantir_int"] <= TARGET_RATIO,
        "meets_goal": ratios["quantir_int"] <= GOAL_RATIO,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds, every engine once per round (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs of each engine first (default 1)")
    ap.add_argument("--models", default="fashion,efficientnet", help="comma-separated: fashion, efficientnet")
    ap.add_argument("--profile", action="store_true", help="then print the integer interpreter's CPU time per op "
                    "kind and its slowest ops, over --rounds more runs")
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        sys.exit(f"latency_integer.py: unknown model(s) {unknown}; choose from {sorted(MODELS)}")
    jit = "numba " + _jit.numba.__version__ if _jit.AVAILABLE else "off (numba missing or QUANTIR_NO_JIT set)"
    print(f"1 thread; {args.rounds} rounds after {args.warmup} warm-up run(s); compiled loops: {jit}")
    print(f"  {'model':24s} {'batch':>5s} {'ORT fp32 ms':>12s} {'int ms':>9s} {'x ORT':>6s} {'float ms':>9s} "
          f"{'x ORT':>6s} {'int x ORT (CPU time)':>21s}")
    rows = []
    for name in names:
        row = bench_model(name, args.rounds, args.warmup, args.profile)
        rows.append(row)
        ms, ratio = row["median_ms"], row["ratio_to_ort_fp32"]
        print(f"  {row['model']:24s} {row['batch']:5d} {ms['ort_fp32']:12.1f} {ms['quantir_int']:9.1f} "
              f"{ratio['quantir_int']:6.2f} {ms['quantir_float']:9.1f} {ratio['quantir_float']:6.2f} "
              f"{row['cpu_ratio_to_ort_fp32']['quantir_int']:21.2f}", flush=True)
    result = {
        "target_int_ratio": TARGET_RATIO, "goal_int_ratio": GOAL_RATIO, "threads": 1, "rounds": args.rounds,
        "warmup": args.warmup,
        "compiled_loops": jit, "models": rows,
        "versions": {"onnxruntime": ort.__version__, "numpy": np.__version__, "python": platform.python_version()},
        "machine": machine(),
    }
    write_json(result, RESULTS, ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
