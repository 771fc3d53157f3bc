"""Issue 13's two extra Fashion-MNIST CNNs, made by scripts/train_fashion_gate_cnn.py and
scripts/train_heldout_cnn.py: each committed file keeps the contract its JSON states (I/O,
op histogram, fp32 accuracy on the first 1,000 test images) and loads in quantir.

The held-out model is for the issue's final check only, so nothing here quantizes it; the
development model is quantized to show every op of its graph is handled.
"""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from quantir.datasets.fashion_mnist import is_available, load_fashion_mnist, to_model_input

needs_data = pytest.mark.skipif(
    not is_available(),
    reason="Fashion-MNIST not installed: run `apt-get install dataset-fashion-mnist` "
    "(files land in /usr/share/datasets/fashion-mnist)",
)

MODELS = ["fashion_gate_cnn", "heldout_cnn"]


def meta_of(repo_root, name: str) -> dict:
    return json.loads((repo_root / "models" / f"{name}.json").read_text())


@pytest.mark.parametrize("name", MODELS)
def test_graph_matches_its_json(repo_root, name):
    onnx = pytest.importorskip("onnx", reason="onnx not installed")
    path = repo_root / "models" / f"{name}.onnx"
    meta = meta_of(repo_root, name)
    assert path.stat().st_size < 1_000_000, "committed models must stay under 1 MB"
    model = onnx.load(str(path))
    assert [i.name for i in model.graph.input] == [meta["input"]["name"]] == ["input"]
    assert [o.name for o in model.graph.output] == [meta["output"]["name"]] == ["probs"]
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param and [d.dim_value for d in dims[1:]] == [1, 28, 28]  # dynamic batch
    assert dict(Counter(n.op_type for n in model.graph.node)) == meta["ops"]
    assert meta["fp32_test_correct"] == round(meta["fp32_test_top1"] * meta["test_images"])


def test_gate_cnn_has_the_issue_ops(repo_root):
    ops = meta_of(repo_root, "fashion_gate_cnn")["ops"]
    assert ops["Conv"] == 11
    for op in ("HardSwish", "Sigmoid", "Mul", "LeakyRelu", "Concat", "Add", "ReduceMean", "Gemm", "Softmax"):
        assert ops.get(op, 0) >= 1, op


def test_heldout_differs_from_the_gate_cnn(repo_root):
    gate, held = meta_of(repo_root, "fashion_gate_cnn")["ops"], meta_of(repo_root, "heldout_cnn")["ops"]
    assert gate != held
    assert {"AveragePool", "MaxPool", "HardSigmoid"} <= held.keys() - gate.keys()


@needs_data
@pytest.mark.parametrize("name", MODELS)
def test_fp32_accuracy_on_first_1000(repo_root, name):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    meta = meta_of(repo_root, name)
    n = meta["subset_images"]
    images, labels = load_fashion_mnist("test")
    sess = ort.InferenceSession(str(repo_root / "models" / f"{name}.onnx"), providers=["CPUExecutionProvider"])
    probs = sess.run(["probs"], {"input": to_model_input(images[:n])})[0]
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-4)
    top1 = float((probs.argmax(axis=1) == labels[:n]).mean())
    assert abs(top1 - meta["fp32_subset_top1"]) <= 0.01
    assert 0.85 <= meta["fp32_test_top1"] <= 0.93  # a usable classifier, not a saturated one


@needs_data
@pytest.mark.parametrize("name", MODELS)
def test_loads_in_quantir_and_runs_as_in_onnxruntime(repo_root, name):
    """quantir's import of the graph computes what ONNX Runtime computes (float interpreter)."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    import quantir as qr

    path = repo_root / "models" / f"{name}.onnx"
    images, _ = load_fashion_mnist("test")
    x = to_model_input(images[:16])
    got = qr.run(qr.load(path), {"input": x})["probs"]
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(["probs"], {"input": x})[0]
    np.testing.assert_allclose(got, want, atol=1e-5)


@needs_data
def test_gate_cnn_quantizes_without_float_ops(repo_root):
    import quantir as qr

    images, _ = load_fashion_mnist("train")
    result = qr.quantize(repo_root / "models" / "fashion_gate_cnn.onnx",
                         calibration={"input": to_model_input(images[:300])})
    assert result.annotation.float_ops == []
    quantized = result.quantized_ops()
    assert quantized["conv"] == 11
    for kind in ("hard_swish", "sigmoid", "mul", "leaky_relu", "concat", "add", "mean", "gemm", "softmax"):
        assert quantized[kind] >= 1, kind
