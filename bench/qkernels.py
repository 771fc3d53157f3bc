#!/usr/bin/env python3
"""Throughput of the integer kernels (quantir.runtime.qkernels) on realistic shapes.

* conv2d / depthwise_conv2d / fully_connected on EfficientNet-Lite0 layer shapes
  (224x224 input), batch 1 and 32: wall time per call and GMAC/s;
* the Fashion-MNIST CNN's op sequence (random int8 weights, the same shapes and ops as
  scripts/train_fashion_mnist.py) evaluated on 10,000 images in batches.

Writes bench/results/qkernels.json. Run from the repository root:

    PYTHONPATH=src .venv/bin/python bench/qkernels.py            # full run
    PYTHONPATH=src .venv/bin/python bench/qkernels.py --quick    # batch 1 and 8, 2,000 images
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from quantir.runtime import qkernels as qk  # noqa: E402

# (name, kind, C_in, C_out, H_in, kernel, stride) — EfficientNet-Lite0, one layer of each shape class.
EFFICIENTNET_LITE0 = [
    ("stem_conv3x3_s2", "conv", 3, 32, 224, 3, 2),
    ("b1_dw3x3", "dw", 32, 32, 112, 3, 1),
    ("b1_pw_project", "conv", 32, 16, 112, 1, 1),
    ("b2_pw_expand", "conv", 16, 96, 112, 1, 1),
    ("b2_dw3x3_s2", "dw", 96, 96, 112, 3, 2),
    ("b2_pw_project", "conv", 96, 24, 56, 1, 1),
    ("b3_dw5x5_s2", "dw", 144, 144, 56, 5, 2),
    ("b3_pw_project", "conv", 144, 40, 28, 1, 1),
    ("b4_pw_expand", "conv", 40, 240, 28, 1, 1),
    ("b4_dw3x3_s2", "dw", 240, 240, 28, 3, 2),
    ("b5_pw_expand", "conv", 80, 480, 14, 1, 1),
    ("b5_dw5x5", "dw", 480, 480, 14, 5, 1),
    ("b5_pw_project", "conv", 480, 112, 14, 1, 1),
    ("b6_dw5x5_s2", "dw", 672, 672, 14, 5, 2),
    ("b7_pw_expand", "conv", 192, 1152, 7, 1, 1),
    ("b7_dw5x5", "dw", 1152, 1152, 7, 5, 1),
    ("head_pw", "conv", 320, 1280, 7, 1, 1),
    ("classifier_fc", "fc", 1280, 1000, 1, 1, 1),
]


def _time(fn, repeat: int) -> tuple[float, float]:
    """Best wall-clock and best process-CPU seconds over ``repeat`` calls (after a warm-up).

    CPU time is reported too because the benchmark machine may be shared: under load the
    wall clock includes time spent waiting for a core.
    """
    fn()  # warm-up
    wall = cpu = float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    return wall, cpu


def bench_layer(rng, name, kind, c_in, c_out, size, k, stride, batch):
    s_in, s_out = np.float32(0.05), np.float32(0.08)
    w_scales = rng.uniform(0.002, 0.02, c_out).astype(np.float32)
    bias = rng.integers(-2000, 2000, c_out).astype(np.int32)
    if kind == "fc":
        x = rng.integers(-128, 128, (batch, c_in)).astype(np.int8)
        w = rng.integers(-127, 128, (c_out, c_in)).astype(np.int8)
        p = qk.prepare_fully_connected(s_in, w_scales, s_out, 3, channels=c_out)
        fn = lambda: qk.fully_connected(x, w, bias, input_zero_point=-1, **p.as_kwargs())  # noqa: E731
        macs = batch * c_in * c_out
    else:
        x = rng.integers(-128, 128, (batch, c_in, size, size)).astype(np.int8)
        pads = qk.tflite_pads("same", (size, size), (k, k), (stride, stride))
        p = qk.prepare_conv2d(s_in, w_scales, s_out, -5, "relu6")
        out = -(-size // stride)
        if kind == "dw":
            w = rng.integers(-127, 128, (c_out, 1, k, k)).astype(np.int8)
            fn = lambda: qk.depthwise_conv2d(x, w, bias, input_zero_point=-1, strides=(stride, stride), pads=pads,  # noqa: E731
                                             **p.as_kwargs())
            macs = batch * c_out * out * out * k * k
        else:
            w = rng.integers(-127, 128, (c_out, c_in, k, k)).astype(np.int8)
            fn = lambda: qk.conv2d(x, w, bias, input_zero_point=-1, strides=(stride, stride), pads=pads,  # noqa: E731
                                   **p.as_kwargs())
            macs = batch * c_out * out * out * c_in * k * k
    seconds, cpu = _time(fn, 3 if batch == 1 else 1)
    return {"layer": name, "kind": kind, "batch": batch, "c_in": c_in, "c_out": c_out, "size": size, "kernel": k,
            "stride": stride, "macs": macs, "seconds": seconds, "cpu_seconds": cpu,
            "gmac_per_s": macs / seconds / 1e9, "gmac_per_cpu_s": macs / cpu / 1e9, "images_per_s": batch / seconds}


class FashionCNN:
    """The Fashion-MNIST network's integer graph with random int8 weights (NCHW)."""

    def __init__(self, rng):
        self.rng = rng
        self.s = np.float32(0.05)

    def conv(self, c_in, c_out, k, groups=1):
        w = self.rng.integers(-127, 128, (c_out, c_in // groups, k, k)).astype(np.int8)
        b = self.rng.integers(-500, 500, c_out).astype(np.int32)
        return w, b

    def build(self):
        s = self.s
        self.layers = {
            "stem": self.conv(1, 16, 3), "down1_dw": self.conv(16, 16, 3, 16), "down1_pw": self.conv(16, 32, 1),
            "block1_dw": self.conv(32, 32, 3, 32), "block1_pw": self.conv(32, 32, 1),
            "mix_a": self.conv(32, 32, 1), "mix_b_dw": self.conv(32, 32, 3, 32), "mix_b_pw": self.conv(32, 32, 1),
            "down2_dw": self.conv(64, 64, 3, 64), "down2_pw": self.conv(64, 96, 1),
            "block2_dw": self.conv(96, 96, 3, 96), "block2_pw": self.conv(96, 96, 1),
        }
        self.fc = (self.rng.integers(-127, 128, (10, 96)).astype(np.int8),
                   self.rng.integers(-500, 500, 10).astype(np.int32))
        ws = np.float32(0.01)
        self.p_relu6 = qk.prepare_conv2d(s, ws, s, -128, "relu6")
        self.p_lin = qk.prepare_conv2d(s, ws, s, 0)
        self.p_hs = qk.prepare_hard_swish(s, 0, s, -20)
        self.p_add = qk.prepare_add(s, s, s, 0)
        self.p_req = qk.prepare_requantize(s, s)
        self.p_mean = qk.prepare_mean(s, -20, s, 0, count=49)
        self.p_fc = qk.prepare_fully_connected(s, np.full(10, ws), np.float32(0.1), 0, channels=10)
        self.p_sm = qk.prepare_softmax(np.float32(0.1))
        return self

    def _c(self, x, name, params, zp, stride=1, groups=1):
        w, b = self.layers[name]
        k = w.shape[2]
        pads = qk.tflite_pads("same", x.shape[2:], (k, k), (stride, stride))
        return qk.conv2d(x, w, b, input_zero_point=zp, strides=(stride, stride), pads=pads, groups=groups,
                         **params.as_kwargs())

    def _ds(self, x, prefix, zp, stride=1):
        c = x.shape[1]
        y = self._c(x, f"{prefix}_dw", self.p_relu6, zp, stride, groups=c)
        return self._c(y, f"{prefix}_pw", self.p_lin, -128)

    def __call__(self, x):
        hs = lambda v: qk.hard_swish(v, **self.p_hs.as_kwargs())  # noqa: E731
        add = lambda a, b: qk.add(a, b, input1_zero_point=0, input2_zero_point=-20, **self.p_add.as_kwargs())  # noqa: E731
        x = self._c(x, "stem", self.p_relu6, 0)                                     # 16 x 28 x 28
        x = hs(self._ds(x, "down1", -128, 2))                                       # 32 x 14 x 14
        x = hs(add(self._ds(x, "block1", -20), x))
        a = qk.requantize(self._c(x, "mix_a", self.p_relu6, -20), input_zero_point=-128, output_zero_point=-20,
                          **self.p_req.as_kwargs())
        x = qk.concatenation([a, hs(self._ds(x, "mix_b", -20))], axis=1)            # 64 x 14 x 14
        x = hs(self._ds(x, "down2", -20, 2))                                        # 96 x 7 x 7
        x = hs(add(self._ds(x, "block2", -20), x))
        g = qk.mean(x, axes=(2, 3), keepdims=False, **self.p_mean.as_kwargs())      # 96
        w, b = self.fc
        logits = qk.fully_connected(g, w, b, input_zero_point=0, **self.p_fc.as_kwargs())
        return qk.softmax(logits, **self.p_sm.as_kwargs())


def bench_fashion(rng, images: int, batch: int):
    net = FashionCNN(rng).build()
    x = rng.integers(-128, 128, (images, 1, 28, 28)).astype(np.int8)
    t0, c0 = time.perf_counter(), time.process_time()
    outs = [net(x[i:i + batch]) for i in range(0, images, batch)]
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert sum(o.shape[0] for o in outs) == images
    return {"images": images, "batch": batch, "seconds": seconds, "cpu_seconds": cpu,
            "images_per_s": images / seconds}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small batches and fewer images")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "qkernels.json"))
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    batches = (1, 8) if args.quick else (1, 32)
    rows = []
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average at start: {load:.2f} on {os.cpu_count()} CPUs")
    print(f"{'layer':22s} {'kind':5s} {'batch':>5s} {'ms':>9s} {'cpu ms':>9s} {'GMAC/s':>8s} {'img/s':>9s}")
    for batch in batches:
        for spec in EFFICIENTNET_LITE0:
            r = bench_layer(rng, *spec, batch)
            rows.append(r)
            print(f"{r['layer']:22s} {r['kind']:5s} {batch:5d} {1e3 * r['seconds']:9.2f} {1e3 * r['cpu_seconds']:9.2f} "
                  f"{r['gmac_per_s']:8.2f} {r['images_per_s']:9.1f}")
    fashion = bench_fashion(rng, 2000 if args.quick else 10_000, 500)
    print(f"Fashion-MNIST CNN (int8 kernels, random weights): {fashion['images']} images in "
          f"{fashion['seconds']:.2f} s wall, {fashion['cpu_seconds']:.2f} s CPU = "
          f"{fashion['images_per_s']:.0f} images/s")
    load_end = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    result = {"machine": {"python": platform.python_version(), "numpy": np.__version__,
                          "cpus": os.cpu_count(), "platform": platform.platform(),
                          "load_average_start": load, "load_average_end": load_end},
              "efficientnet_lite0_layers": rows, "fashion_mnist_cnn": fashion}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
