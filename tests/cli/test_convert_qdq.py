"""``quantir convert QDQ.onnx -o OUT.tflite``: ONNX Runtime's quantize_static output of the
Fashion-MNIST CNN to a .tflite with the model's own parameters, then check and verify (LiteRT
BUILTIN_REF against quantir's interpreter) on it."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from ..quantize.test_from_qdq import ort_quantize_static
from .test_run_show import REPO, assert_one_line_error, quantir

pytest.importorskip("ai_edge_litert.interpreter")
pytest.importorskip("onnxruntime.quantization")
fm = pytest.importorskip("quantir.datasets.fashion_mnist")
pytestmark = [pytest.mark.oracle,
              pytest.mark.skipif(not fm.is_available(), reason="Fashion-MNIST is not installed (make data)")]


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("convert_qdq")
    qdq = ort_quantize_static(d / "cnn_qdq.onnx")
    xte, _ = fm.load_fashion_mnist("test")
    np.savez(d / "test.npz", input=fm.to_model_input(xte[:100]))
    before = hashlib.sha256(qdq.read_bytes()).hexdigest()
    r = quantir("convert", qdq, "-o", d / "cnn.tflite", "--inputs", d / "test.npz")
    assert r.returncode == 0, r.stdout + r.stderr
    assert hashlib.sha256(qdq.read_bytes()).hexdigest() == before   # the input model is only read
    d.joinpath("convert.txt").write_text(r.stdout)
    return d


def test_summary_lists_the_repairs_with_their_measured_error(work):
    out = (work / "convert.txt").read_text()
    assert "nothing recalibrated" in out and "errors measured on 100 given samples" in out
    assert "/Softmax (SOFTMAX): output at (0.00392157, -128), LiteRT's SOFTMAX writes (0.00390625, -128)" in out
    assert "/net/Concat (CONCATENATION)" in out and "measured against ONNX Runtime" in out
    assert "LiteRT int8 spec check: 0 violations" in out and f"wrote {work / 'cnn.tflite'}" in out


def test_the_tflite_passes_check(work):
    r = quantir("check", work / "cnn.tflite")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ", 0 violations" in r.stdout


def test_the_tflite_is_bit_exact_in_litert_reference_kernels(work):
    r = quantir("verify", work / "cnn.tflite", "--inputs", work / "test.npz", "--json", work / "verify.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "output probs [100, 10]: 0 differing elements" in r.stdout and "bit-exact" in r.stdout
    report = json.loads((work / "verify.json").read_text())
    assert report["bit_exact"] and len(report["intermediates"]) >= 25
    assert all(t["differing"] == 0 for t in report["outputs"] + report["intermediates"])


def test_strict_refuses_with_one_line_naming_the_node(work):
    r = quantir("convert", work / "cnn_qdq.onnx", "-o", work / "strict.tflite", "--strict")
    assert_one_line_error(r, "'/net/Concat' (CONCATENATION)", "--strict refuses")
    assert not (work / "strict.tflite").exists()


def test_strict_on_a_float_model_is_refused(tmp_path):
    r = quantir("convert", REPO / "models" / "fashion_mnist_cnn.onnx", "-o", tmp_path / "f.mlir", "--strict")
    assert_one_line_error(r, "--strict and --inputs apply to an ONNX QDQ model")


EFFNET = REPO / ".cache" / "models" / "efficientnet_lite0.onnx"


@pytest.mark.slow
@pytest.mark.skipif(not EFFNET.exists(), reason=f"{EFFNET} is missing: run `make models`")
def test_efficientnet_lite0_from_onnx_runtime_qdq_is_integer_bit_exact_and_agrees(tmp_path):
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from quantir import api
    from quantir.runtime import run
    photos = pytest.importorskip("quantir.datasets.photos")
    crops = photos.calibration_crops(16, seed=0)
    name = ort.InferenceSession(str(EFFNET), providers=["CPUExecutionProvider"]).get_inputs()[0].name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{name: crops[i:i + 1]} for i in range(len(crops))])

        def get_next(self):
            return next(self.it, None)
    qdq = tmp_path / "effnet_qdq.onnx"
    quantize_static(str(EFFNET), str(qdq), Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8, per_channel=True)
    x = photos.preprocess_efficientnet_lite([p.image for p in photos.load_photos()])
    np.savez(tmp_path / "photos.npz", **{name: x})
    r = quantir("convert", qdq, "-o", tmp_path / "e.tflite", "--inputs", tmp_path / "photos.npz")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "left float: 0" in r.stdout and "LiteRT int8 spec check: 0 violations" in r.stdout
    r = quantir("verify", tmp_path / "e.tflite", "--inputs", tmp_path / "photos.npz")
    assert r.returncode == 0 and "bit-exact" in r.stdout, r.stdout + r.stderr
    assert quantir("check", tmp_path / "e.tflite").returncode == 0
    converted = api.convert_qdq(qdq)
    want = ort.InferenceSession(str(qdq), providers=["CPUExecutionProvider"]).run(None, {name: x})[0]
    got = next(iter(run(converted.module.main, {name: x}).values()))
    assert np.array_equal(want.argmax(1), got.argmax(1))
