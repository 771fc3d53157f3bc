"""The committed Fashion-MNIST ViT (models/vit_fmnist.onnx, made by ``make vit``): quantir imports
the dynamo export and computes what ONNX Runtime computes."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import quantir as qr
from quantir.datasets import fashion_mnist as fm

MODEL = Path(__file__).resolve().parents[2] / "models" / "vit_fmnist.onnx"
META = MODEL.with_suffix(".json")

pytestmark = pytest.mark.skipif(not fm.is_available(), reason="Fashion-MNIST is not installed (make data)")


@pytest.fixture(scope="module")
def meta() -> dict:
    return json.loads(META.read_text())


@pytest.fixture(scope="module")
def module():
    return qr.load(MODEL)


@pytest.fixture(scope="module")
def test_set():
    return fm.load_fashion_mnist("test")


def test_vit_is_the_encoder_the_script_describes():
    # what the issue asks the ViT to exercise: MatMul/Softmax attention, exact GELU (Erf), LayerNorm
    onnx = pytest.importorskip("onnx")
    ops = Counter(n.op_type for n in onnx.load(str(MODEL)).graph.node)
    assert ops["Softmax"] == 4 and ops["Erf"] == 4 and ops["LayerNormalization"] == 9
    assert ops["MatMul"] >= 4 * 2 + 4 * 4   # QK^T and PV per block, 4 projections per block
    assert MODEL.stat().st_size <= 3 * 2**20


def test_vit_matches_onnxruntime_on_test_images(module, test_set):
    ort = pytest.importorskip("onnxruntime")
    x = fm.to_model_input(test_set[0][:16])
    ours = qr.run(module, {"input": x})["logits"]
    ref = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"]).run(["logits"], {"input": x})[0]
    assert ours.shape == ref.shape == (16, 10)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-5)


def test_vit_batch_is_dynamic(module, test_set):
    # one image and an odd batch run through the same imported graph, each row as in the batch of 16
    x = fm.to_model_input(test_set[0][:16])
    full = qr.run(module, {"input": x})["logits"]
    one = qr.run(module, {"input": x[3:4]})["logits"]
    odd = qr.run(module, {"input": x[5:12]})["logits"]
    np.testing.assert_allclose(one, full[3:4], rtol=0, atol=1e-5)
    np.testing.assert_allclose(odd, full[5:12], rtol=0, atol=1e-5)


@pytest.mark.slow
def test_vit_fp32_top1_is_the_recorded_figure(module, test_set, meta):
    images, labels = test_set
    x = fm.to_model_input(images)
    correct = 0
    for i in range(0, len(x), 500):
        correct += int((qr.run(module, {"input": x[i:i + 500]})["logits"].argmax(1) == labels[i:i + 500]).sum())
    assert correct == meta["fp32_test_correct"]
    assert correct / len(x) == pytest.approx(meta["fp32_test_top1"], abs=5e-5)


def test_vit_tflite_is_bit_exact_with_litert_and_passes_the_spec_check(module, test_set, tmp_path):
    """The quantized ViT (defaults: its int8 outputs meet the budget, nothing is promoted) as a
    .tflite: every output and intermediate equals LiteRT's BUILTIN_REF on 50 test images, and
    `quantir check` finds no violation."""
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.cli.main import main
    from quantir.verify import verify_tflite
    name = module.main.arg_attrs[0]["quantir.name"].value
    train, _ = fm.load_fashion_mnist("train")
    result = qr.quantize(MODEL, {name: fm.to_model_input(train[:200])}, qr.Config(progress=False))
    path = result.save(tmp_path / "vit.tflite")
    report = verify_tflite(path, {name: fm.to_model_input(test_set[0][:50])})
    assert report.samples == 50 and len(report.intermediates) > 100
    assert all(t.differing == 0 for t in report.outputs + report.intermediates), report
    assert main(["check", str(path)]) == 0
