"""quantir demo: static int8 quantization of a real model on real data, beside ONNX Runtime.

1. Load the bundled Fashion-MNIST CNN (models/fashion_mnist_cnn.onnx: depthwise-separable convs,
   ReLU6, HardSwish, a residual Add, a Concat, global average pooling, Gemm, Softmax).
2. Calibrate on 500 real training images and quantize to an integer-only model (int8
   activations and weights, int32 bias, fixed-point requantization, LiteRT semantics).
3. Evaluate fp32 and int8 top-1 on all 10,000 test images; quantize the same model with
   ONNX Runtime's quantize_static (MinMax, Entropy, Percentile; per-channel QDQ int8) on the
   same 500 images and evaluate those too.
4. Write the int8 model (MLIR text, ONNX QDQ, TFLite) and its summary to out/, and run the
   .tflite in LiteRT's reference kernels on test images: every output element must equal
   quantir's integer interpreter (`quantir verify` does the same from the command line).
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import quantir as qr  # noqa: E402
from quantir.datasets.fashion_mnist import load_fashion_mnist, to_model_input  # noqa: E402

MODEL = ROOT / "models" / "fashion_mnist_cnn.onnx"
OUT = ROOT / "out"
CALIBRATION_SAMPLES = 500
VERIFY_SAMPLES = 2000   # LiteRT's reference kernels take ~7 ms per image here


def evaluate(predict, images: np.ndarray, labels: np.ndarray, batch: int = 1000) -> float:
    hits = 0
    for i in range(0, len(images), batch):
        hits += int(np.sum(predict(images[i:i + batch]).argmax(1) == labels[i:i + batch]))
    return hits / len(images)


def ort_quantize_static(calib: np.ndarray, method_name: str) -> Path:
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.i = 0

        def get_next(self):
            if self.i >= len(calib):
                return None
            self.i += 50
            return {"input": calib[self.i - 50:self.i]}

        def rewind(self) -> None:
            self.i = 0

    out = Path(tempfile.mkdtemp()) / f"ort_{method_name}.onnx"
    quantize_static(str(MODEL), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=getattr(CalibrationMethod, method_name))
    return out


def main() -> int:
    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    try:
        train_x, _ = load_fashion_mnist("train")
        test_x, test_y = load_fashion_mnist("test")
    except Exception as e:
        print(f"Fashion-MNIST is not available: {e}")
        return 1
    calib = to_model_input(train_x[:CALIBRATION_SAMPLES])
    test = to_model_input(test_x)
    print(f"model: {MODEL.relative_to(ROOT)}; calibration: {len(calib)} training images; "
          f"evaluation: {len(test)} test images")

    session = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"])
    fp32 = evaluate(lambda x: session.run(None, {"input": x})[0], test, test_y)

    rows = []
    # None: the default method (entropy); the others for comparison.
    for method in (None, "percentile", "minmax"):
        t0 = time.perf_counter()
        config = qr.Config(progress=False) if method is None else qr.Config(method=method, progress=False)
        result = qr.quantize(MODEL, {"input": calib}, config)
        seconds = time.perf_counter() - t0
        acc = evaluate(lambda x: qr.run(result.module, {"input": x})["probs"], test, test_y)
        label = f"{config.method} (default)" if method is None else method
        rows.append((f"quantir {label} (integer interpreter, LiteRT kernels)", acc, seconds))
        if method is None:
            best = result
    for method in ("MinMax", "Entropy", "Percentile"):
        t0 = time.perf_counter()
        path = ort_quantize_static(calib, method)
        seconds = time.perf_counter() - t0
        s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        rows.append((f"onnxruntime quantize_static {method} (QDQ, per-channel)", evaluate(
            lambda x: s.run(None, {"input": x})[0], test, test_y), seconds))

    print()
    print(best.summary())
    print()
    print(f"{'':64} {'top-1':>7} {'vs fp32':>8} {'quantize':>9}")
    print(f"{'fp32 (onnxruntime)':64} {fp32:7.2%}")
    for name, acc, seconds in rows:
        print(f"{name:64} {acc:7.2%} {100 * (acc - fp32):+7.2f}p {seconds:8.1f}s")
    ort_best = max(acc for name, acc, _ in rows if name.startswith("onnxruntime"))
    print(f"\nquantir (default, {best.config.method}) - fp32: {100 * (rows[0][1] - fp32):+.2f} points; "
          f"quantir - best onnxruntime: {100 * (rows[0][1] - ort_best):+.2f} points")

    OUT.mkdir(exist_ok=True)
    written = [best.save(OUT / "fashion_mnist_cnn.int8.mlir"), best.save(OUT / "fashion_mnist_cnn.int8.json")]
    try:
        written.append(best.save(OUT / "fashion_mnist_cnn.int8.onnx"))
    except Exception as e:  # the ONNX export of integer modules may be unavailable
        print(f"(ONNX export skipped: {e})")
    tflite = best.save(OUT / "fashion_mnist_cnn.int8.tflite")
    written.append(tflite)
    print("wrote " + ", ".join(str(p.relative_to(ROOT)) for p in written))
    return verify_in_litert(tflite, test[:VERIFY_SAMPLES], test_y[:VERIFY_SAMPLES])


def verify_in_litert(path: Path, images: np.ndarray, labels: np.ndarray) -> int:
    try:
        from quantir.verify import verify_tflite
        t0 = time.perf_counter()
        report = verify_tflite(path, {"input": images}, batch=500)
    except Exception as e:  # LiteRT is an optional (oracle) dependency
        print(f"(LiteRT check skipped: {e})")
        return 0
    seconds = time.perf_counter() - t0
    from quantir.backends.tflite.litert import run_model
    probs = np.concatenate([run_model(path.read_bytes(), [images[i:i + 500]])[0] for i in range(0, len(images), 500)])
    out = report.outputs[0]
    print(f"\nLiteRT (reference kernels) on {path.name}, first {len(images)} test images: top-1 "
          f"{(probs.argmax(1) == labels).mean():.2%}; vs quantir's interpreter: {out.differing} of "
          f"{len(images) * probs.shape[1]} output elements differ, "
          f"{sum(d.differing for d in report.intermediates)} in {len(report.intermediates)} intermediate tensors "
          f"({seconds:.0f} s)")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
