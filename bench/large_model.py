"""Quantize time and peak memory on a large model: quantir vs onnxruntime.quantization.quantize_static.

VGG19 from the onnx wheel (``light_vgg19``: the real graph, whose weights ConstantOfShape builds
at load, 548 MB of float32 in memory with a 25088 x 4096 classifier) and ResNet50, on 8 seeded
normal samples (the weights are constants, so only time and memory mean anything here). Each tool
runs in fresh subprocesses, alternating, with the child of ``quantize_vs_ort.py`` (same timing:
the call from the model path to the QDQ file; peak memory: the child's own VmHWM). Prints the
ratios and writes bench/results/large_model.json.

Usage: python bench/large_model.py [--models vgg19 resnet50] [--repeats 2] [--out ...]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quantize_vs_ort import RESULTS, run_child  # noqa: E402  (the same child and timing)


def light_model(name: str) -> tuple[Path, str, tuple[int, ...]]:
    import onnx
    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"
    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    inp = next(i for i in model.graph.input if i.name not in inits)
    return path, inp.name, tuple(d.dim_value or 1 for d in inp.type.tensor_type.shape.dim)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=["vgg19", "resnet50"])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=str(RESULTS / "large_model.json"))
    args = ap.parse_args()
    results = {"samples": 8, "method": "minmax", "repeats": args.repeats, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            path, input_name, shape = light_model(name)
            calib = Path(tmp) / f"{name}.npz"
            np.savez(calib, **{input_name: np.random.default_rng(0).normal(size=(8, *shape[1:])).astype(np.float32)})
            runs = {"quantir": [], "onnxruntime": []}
            for _ in range(args.repeats):
                for tool in runs:
                    r = run_child(tool, "minmax", path, calib, Path(tmp) / f"{name}.{tool}.onnx", static_batch=True)
                    if "error" in r:
                        raise SystemExit(f"{name} / {tool}: {r['error']}")
                    runs[tool].append(r)
            row = {tool: {"seconds": statistics.median(r["seconds"] for r in rs),
                          "peak_rss_mb": max(r["peak_rss_mb"] for r in rs)} for tool, rs in runs.items()}
            row["time_ratio"] = row["quantir"]["seconds"] / row["onnxruntime"]["seconds"]
            row["memory_ratio"] = row["quantir"]["peak_rss_mb"] / row["onnxruntime"]["peak_rss_mb"]
            results["models"][name] = row
            q, o = row["quantir"], row["onnxruntime"]
            print(f"{name:9s} quantir {q['seconds']:6.2f}s {q['peak_rss_mb']:6.0f}MB | "
                  f"ORT {o['seconds']:6.2f}s {o['peak_rss_mb']:6.0f}MB | time ratio {row['time_ratio']:.2f}, "
                  f"memory ratio {row['memory_ratio']:.2f}", flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
