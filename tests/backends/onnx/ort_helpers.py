"""Helpers for the ONNX backend tests: ONNX Runtime sessions and the real models.

(A plain module, not a conftest: ``tests/`` has several conftest.py files.)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

REPO = Path(__file__).resolve().parents[3]
LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
LIGHT = sorted(p.stem.removeprefix("light_") for p in LIGHT_DIR.glob("light_*.onnx"))
FASHION_MNIST = REPO / "models" / "fashion_mnist_cnn.onnx"
EFFICIENTNET = REPO / ".cache" / "models" / "efficientnet_lite0.onnx"


def session(model) -> "ort.InferenceSession":
    """A CPU session on a path or a ModelProto, warnings off."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    source = str(model) if isinstance(model, (str, Path)) else model.SerializeToString()
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def random_feeds(sess, rng: np.random.Generator, batch: int = 1) -> dict[str, np.ndarray]:
    """Standard-normal float feeds for every input of ``sess`` (dynamic dims -> ``batch``)."""
    dtypes = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16}
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else batch for d in i.shape]
        feeds[i.name] = rng.standard_normal(shape).astype(dtypes.get(i.type, np.float32))
    return feeds


def with_all_outputs(model: "onnx.ModelProto") -> "onnx.ModelProto":
    """A copy of ``model`` whose every node output is also a graph output (untyped: ORT infers)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    listed = {o.name for o in m.graph.output}
    for node in m.graph.node:
        for name in node.output:
            if name and name not in listed:
                listed.add(name)
                m.graph.output.append(onnx.ValueInfoProto(name=name))
    return m


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want| (0 for two zero tensors)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = np.max(np.abs(want)) if want.size else 0.0
    diff = np.max(np.abs(got - want)) if want.size else 0.0
    return float(diff / scale) if scale else float(diff)


def light_path(name: str) -> Path:
    return LIGHT_DIR / f"light_{name}.onnx"
