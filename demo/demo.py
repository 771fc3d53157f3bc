"""quantir demo: what exists today, on real input.

1. Parse a quantized MLIR module, verify it, print it canonically and canonicalize it.
2. Quantize a real photo (scikit-image) per tensor and per channel, the LiteRT way, and show
   that the error stays within half a quantization step.
3. Import the bundled Fashion-MNIST CNN, run it in quantir's numpy interpreter and in ONNX
   Runtime on the 10,000 real test images, and compare accuracy and outputs.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from quantir import numerics as qn  # noqa: E402
from quantir.passes.canonicalize import canonicalize  # noqa: E402
from quantir.text import parse_module, print_module  # noqa: E402


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 70 - len(title)))


def ir_demo() -> None:
    section("1. MLIR quant dialect: parse, verify, print, canonicalize")
    path = ROOT / "demo" / "example.mlir"
    module = parse_module(path.read_text(), str(path))
    print(print_module(module))
    canonicalize(module)
    print("after --canonicalize (cast pairs folded, unused casts erased):")
    print(print_module(module))


def photo_demo() -> None:
    section("2. Quantize a real photo (skimage.data.chelsea) to int8")
    try:
        from skimage import data
    except ImportError:
        print("scikit-image is not installed: skipped")
        return
    image = data.chelsea().astype(np.float32) / 255.0          # H x W x 3, real values in [0, 1]
    x = (image - image.mean()) / image.std()                    # a realistic zero-centred activation
    scale, zp = qn.asymmetric_qparams(float(x.min()), float(x.max()))
    q = qn.quantize_tflite(x, scale, zp)
    err = np.abs(qn.dequantize(q, scale, zp) - x)
    print(f"per tensor : range [{x.min():.4f}, {x.max():.4f}] -> scale {float(scale):.6g}, zero point {int(zp)}")
    print(f"             max |error| {err.max():.6g} <= scale/2 = {float(scale) / 2:.6g}: {bool(err.max() <= scale / 2 * (1 + 1e-6))}")
    w = np.moveaxis(x, 2, 0).reshape(3, -1)                      # treat colour channels as weight rows
    ws, wzp = qn.symmetric_weight_qparams(w, axis=0)
    wq = qn.quantize_weights(w, ws, axis=0)
    werr = np.abs(wq * ws[:, None] - w).max(axis=1)
    print(f"per channel: symmetric scales {np.array2string(np.asarray(ws), precision=6)}, values in "
          f"[{wq.min()}, {wq.max()}] (narrow range)")
    print(f"             max |error| per channel {np.array2string(werr, precision=6)} <= scale/2")
    m, s = qn.quantize_multiplier(float(np.float64(np.float32(0.02)) * np.float64(np.float32(0.003))
                                        / np.float64(np.float32(0.05))))
    print(f"fixed point: conv requantize multiplier 0.0012 -> (M={m}, shift={s}); "
          f"acc 12345 -> {int(qn.multiply_by_quantized_multiplier(12345, m, s))} (exact 14.814)")


def model_demo() -> None:
    section("3. Fashion-MNIST CNN: quantir's interpreter vs ONNX Runtime on 10,000 test images")
    model_path = ROOT / "models" / "fashion_mnist_cnn.onnx"
    try:
        from quantir.datasets import fashion_mnist
        images, labels = fashion_mnist.load("test")
    except Exception as e:  # the Debian data package may be missing
        print(f"skipped: {e}")
        return
    from quantir.frontends.onnx import load_onnx
    from quantir.runtime import run
    import onnxruntime as ort

    module = load_onnx(model_path)
    x = fashion_mnist.to_model_input(images)
    name = module.main.arg_attrs[0]["quantir.name"].value
    t0 = time.perf_counter()
    ours = np.concatenate([next(iter(run(module, {name: x[i:i + 1000]}).values()))
                           for i in range(0, len(x), 1000)])
    t1 = time.perf_counter()
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    ref = session.run(None, {session.get_inputs()[0].name: x})[0]
    t2 = time.perf_counter()
    rel = float(np.abs(ours - ref).max() / np.abs(ref).max())
    print(f"interpreter: top-1 {np.mean(ours.argmax(1) == labels):.2%} in {t1 - t0:.1f} s")
    print(f"ORT        : top-1 {np.mean(ref.argmax(1) == labels):.2%} in {t2 - t1:.2f} s")
    print(f"max relative difference of the outputs: {rel:.2e}")


def main() -> int:
    ir_demo()
    photo_demo()
    model_demo()
    print("\nint8 quantization of whole models (fp32 vs int8 accuracy) is the next milestone: see the README.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
