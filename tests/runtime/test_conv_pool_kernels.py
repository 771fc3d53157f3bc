"""Conv and pool kernels against ONNX Runtime over the shapes the node tests miss:
every conv code path (pointwise, depthwise with multipliers, grouped im2col, 1-D/3-D),
asymmetric pads, strides with dilations, ceil-mode pooling."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.runtime import run  # noqa: E402


def compare(make_onnx_model, node, x, inits, rtol=1e-4):
    model = make_onnx_model([node], [("x", np.float32, x.shape)], [("y", np.float32, None)], inits)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": x})[0]
    got = run(load_onnx(model), {"x": x})["y"]
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=1e-4)


CONVS = {
    "pointwise": dict(c=8, m=16, k=(1, 1), attrs={}),
    "pointwise_strided": dict(c=8, m=4, k=(1, 1), attrs={"strides": [2, 2]}),
    "3x3_pad": dict(c=3, m=8, k=(3, 3), attrs={"pads": [1, 1, 1, 1]}),
    "asym_pads_stride": dict(c=4, m=6, k=(3, 2), attrs={"pads": [0, 1, 2, 0], "strides": [2, 1]}),
    "dilated": dict(c=4, m=4, k=(3, 3), attrs={"dilations": [2, 3], "pads": [2, 3, 2, 3]}),
    "depthwise": dict(c=6, m=6, k=(3, 3), attrs={"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "depthwise_x2": dict(c=4, m=8, k=(5, 5), attrs={"group": 4, "pads": [2, 2, 2, 2]}),
    "grouped": dict(c=8, m=12, k=(3, 3), attrs={"group": 4, "pads": [1, 0, 1, 0]}),
    "same_upper": dict(c=3, m=5, k=(4, 4), attrs={"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "same_lower": dict(c=3, m=5, k=(3, 3), attrs={"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
}


@pytest.mark.parametrize("name", CONVS)
def test_conv2d(name, make_onnx_model, rng):
    cfg = CONVS[name]
    group = cfg["attrs"].get("group", 1)
    x = rng.standard_normal((2, cfg["c"], 11, 9)).astype(np.float32)
    w = rng.standard_normal((cfg["m"], cfg["c"] // group, *cfg["k"])).astype(np.float32)
    b = rng.standard_normal(cfg["m"]).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **cfg["attrs"])
    compare(make_onnx_model, node, x, {"w": w, "b": b})


@pytest.mark.parametrize("spatial", [(13,), (5, 6, 7)])
def test_conv_1d_3d(spatial, make_onnx_model, rng):
    n = len(spatial)
    x = rng.standard_normal((1, 4, *spatial)).astype(np.float32)
    w = rng.standard_normal((6, 2, *(3,) * n)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=2, pads=[1] * (2 * n), strides=[2] * n)
    compare(make_onnx_model, node, x, {"w": w})


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 2], "group": 2},
    {"strides": [2, 3], "pads": [1, 0, 0, 1], "output_padding": [1, 0]},
    {"dilations": [2, 1], "group": 4},
])
def test_conv_transpose(attrs, make_onnx_model, rng):
    group = attrs.get("group", 1)
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    w = rng.standard_normal((4, 6 // group if group != 4 else 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(w.shape[1] * group).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    compare(make_onnx_model, node, x, {"w": w, "b": b})


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [2, 3], "pads": [1, 0, 0, 1], "dilations": [2, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
])
def test_pools(op, attrs, make_onnx_model, rng):
    x = rng.standard_normal((2, 3, 10, 9)).astype(np.float32)
    compare(make_onnx_model, helper.make_node(op, ["x"], ["y"], **attrs), x, {})
