"""Integer arithmetic in a model is not quantized: only float tensors get int8 parameters."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import quantir as qr
from quantir.errors import QuantirError
from quantir.runtime import run


def _model(nodes, inputs, outputs, inits=()):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(*i) for i in inputs],
                         [h.make_tensor_value_info(*o) for o in outputs], initializer=list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_an_integer_only_model_has_nothing_to_quantize_and_says_why():
    model = _model([h.make_node("Mul", ["x", "y"], ["z"], name="imul")],
                   [("x", TP.INT8, [3, 4]), ("y", TP.INT8, [3, 4])], [("z", TP.INT8, [3, 4])])
    rng = np.random.default_rng(0)
    feeds = {n: rng.integers(-5, 5, size=(4, 3, 4), dtype=np.int8) for n in ("x", "y")}
    with pytest.raises(QuantirError, match=r"nothing to quantize in this model \(imul: its result is i8, "
                                           r"not float: integer arithmetic is kept as it is\)"):
        qr.quantize(model, feeds, qr.Config(progress=False, engine="interpreter"))


def test_an_integer_side_path_keeps_its_exact_values_beside_a_quantized_conv():
    rng = np.random.default_rng(1)
    w = nh.from_array(rng.normal(size=(4, 1, 3, 3)).astype(np.float32), "w")
    model = _model([h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
                    h.make_node("Add", ["i", "j"], ["k"], name="iadd")],
                   [("x", TP.FLOAT, [1, 1, 6, 6]), ("i", TP.INT32, [1, 3]), ("j", TP.INT32, [1, 3])],
                   [("c", TP.FLOAT, [1, 4, 6, 6]), ("k", TP.INT32, [1, 3])], [w])
    feeds = {"x": rng.normal(size=(20, 1, 1, 6, 6)).astype(np.float32),
             "i": rng.integers(-1000, 1000, size=(20, 1, 3), dtype=np.int32),
             "j": rng.integers(-1000, 1000, size=(20, 1, 3), dtype=np.int32)}
    result = qr.quantize(model, {k: v.reshape(-1, *v.shape[2:]) for k, v in feeds.items()},
                         qr.Config(progress=False, engine="interpreter"))
    assert dict(result.quantized_ops()) == {"conv": 1}
    assert [(op.label, why) for op, why in result.annotation.float_ops] == [
        ("iadd", "its result is i32, not float: integer arithmetic is kept as it is")]
    i = np.array([[2**30, -7, 5]], np.int32)
    j = np.array([[2**30 - 1, 7, -9]], np.int32)
    out = run(result.module, {"x": feeds["x"][0], "i": i, "j": j})
    assert out["k"].dtype == np.int32 and out["k"].tolist() == [[2**31 - 1, 0, -4]]
