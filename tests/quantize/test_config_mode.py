"""``Config(mode="dynamic")`` (issue 16): ``quantize`` without calibration data returns the dynamic
model of the configured target — LiteRT's dynamic-range ops, or ONNX Runtime's
DynamicQuantizeLinear/MatMulInteger graph — each of which computes close to the float model."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.errors import QuantirError
from quantir.runtime import run


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((48, 64)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((64, 32)).astype(np.float32) * 0.3
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 48])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 32])],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("target, ops", [("litert", {"hybrid.fully_connected"}),
                                         ("onnxruntime", {"nn.matmul_integer"})])
def test_dynamic_mode_needs_no_data_and_follows_the_target(model, target, ops):
    x = np.random.default_rng(4).standard_normal((16, 48)).astype(np.float32)
    r = qr.quantize(model, config=qr.Config(mode="dynamic", target=target))
    names = {op.name for op in r.module.main.ops}
    assert ops <= names and "nn.matmul" not in names, names
    ref = next(iter(run(qr.load(model), {"x": x}).values()))
    got = next(iter(run(r.module, {"x": x}).values()))
    assert np.abs(got - ref).max() <= 0.02 * np.abs(ref).max()


def test_dynamic_mode_refuses_calibration_data_and_static_needs_it(model):
    x = np.zeros((4, 48), np.float32)
    with pytest.raises(QuantirError, match="takes no calibration data"):
        qr.quantize(model, {"x": x}, qr.Config(mode="dynamic"))
    with pytest.raises(ValueError, match="mode must be"):
        qr.Config(mode="hybrid")
    with pytest.raises(QuantirError):
        qr.quantize(model)
