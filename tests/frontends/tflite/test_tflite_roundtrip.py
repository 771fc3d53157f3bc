"""Models quantized by quantir and written by its TFLite exporter, read back by the frontend:
every tensor LiteRT computes equals what quantir's interpreter computes on the imported IR."""
from pathlib import Path

import numpy as np
import pytest

import quantir as qr
from .tfl_graph import compare, litert, op_names

pytestmark = pytest.mark.oracle
litert()
export = pytest.importorskip("quantir.backends.tflite.export")

ROOT = Path(__file__).resolve().parents[3]
EFFNET = ROOT / ".cache" / "models" / "efficientnet_lite0.onnx"


def _roundtrip(path: Path, x: np.ndarray, batch: int):
    name = qr.load(path).main.arg_attrs[0]["quantir.name"].value
    result = qr.quantize(path, {name: x}, qr.Config(progress=False))
    return compare(export.export_tflite(result.module).to_bytes(), [x[:batch]])


def test_small_cnn_roundtrip(tmp_path):
    from ...quantize import tiny_models
    path = tmp_path / "cnn.onnx"
    rng = tiny_models.cnn(path)
    imported = _roundtrip(path, rng.normal(size=(64, 1, 8, 8)).astype(np.float32), batch=4)
    assert {"qnn.conv", "qnn.add", "qnn.max_pool", "qnn.mean", "qnn.fully_connected", "qnn.softmax"} <= \
        set(op_names(imported))


@pytest.mark.skipif(not EFFNET.exists(), reason="EfficientNet-Lite0 is not in .cache/models (make models)")
def test_efficientnet_lite0_roundtrip():
    x = np.random.default_rng(0).normal(size=(8, 3, 224, 224)).astype(np.float32)
    imported = _roundtrip(EFFNET, x, batch=1)
    # the exporter's NCHW input -> TRANSPOSE -> CONV_2D chain imports without any transpose
    assert op_names(imported).count("nn.transpose") == 0 and len(imported.bindings) > 60
