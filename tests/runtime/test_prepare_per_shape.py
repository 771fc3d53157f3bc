"""LiteRT prepares an op again when its input is resized; so does quantir's interpreter. One
integer module run at 8x8 and then at 2x2 gives, at 2x2, what a fresh module gives."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

import quantir as qr  # noqa: E402
from quantir.runtime import run  # noqa: E402


def _quantized(make_onnx_model):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((4, 2, 3, 3)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("GlobalAveragePool", ["c"], ["y"], name="gap")]
    model = make_onnx_model(nodes, [("x", np.float32, [None, 2, "H", "W"])], [("y", np.float32, None)], {"w": w})
    calib = {"x": rng.standard_normal((32, 2, 8, 8)).astype(np.float32)}
    return model, calib


def test_mean_after_a_resize_equals_a_fresh_run(make_onnx_model):
    model, calib = _quantized(make_onnx_model)
    config = qr.Config(progress=False, engine="interpreter")
    result = qr.quantize(model, calib, config)
    assert any(op.name == "qnn.mean" for op in result.module.main.ops)
    x8 = np.random.default_rng(1).standard_normal((1, 2, 8, 8)).astype(np.float32)
    x2 = np.random.default_rng(2).standard_normal((1, 2, 2, 2)).astype(np.float32)
    first = run(result.module, {"x": x8})["y"]
    after_resize = run(result.module, {"x": x2})["y"]              # raised "prepared for 64 elements" before
    fresh = run(qr.quantize(model, calib, config).module, {"x": x2})["y"]
    np.testing.assert_array_equal(after_resize, fresh)
    np.testing.assert_array_equal(run(result.module, {"x": x8})["y"], first)   # and back
