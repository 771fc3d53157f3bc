"""Transpose, Squeeze and Unsqueeze at every rank LiteRT's TRANSPOSE takes (1 to 6, the batch
dim dynamic): quantized as copies of stored integers and bit-exact with LiteRT's reference
kernels in the .tflite export."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.runtime import run
from quantir.verify import verify_tflite

RNG = np.random.default_rng(3)


def _case(op_type: str, rank: int):
    """A Relu (something computed) then ``op_type``; the input dims, with a unit dim for Squeeze."""
    dims = [2 + i for i in range(rank - 1)]
    inits = []
    if op_type == "Transpose":
        node = helper.make_node("Transpose", ["r"], ["y"], perm=[0, *range(rank - 1, 0, -1)])
    else:
        if op_type == "Squeeze":
            dims[0] = 1
        axis = 1 if op_type == "Squeeze" else rank
        node = helper.make_node(op_type, ["r", "axes"], ["y"])
        inits = [numpy_helper.from_array(np.array([axis], np.int64), "axes")]
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), node], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, *dims])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), dims


def _expected(op_type, r):
    if op_type == "Transpose":
        return r.transpose(0, *range(r.ndim - 1, 0, -1))
    return np.squeeze(r, 1) if op_type == "Squeeze" else np.expand_dims(r, r.ndim)


CASES = ([("Transpose", k) for k in range(1, 7)] + [("Unsqueeze", 1), ("Unsqueeze", 5)]   # to ranks 2 and 6
         + [("Squeeze", 2), ("Squeeze", 6)])


@pytest.mark.parametrize("op_type,rank", CASES)
def test_movement_at_every_rank(tmp_path, op_type, rank):
    model, dims = _case(op_type, rank)
    x = RNG.normal(size=(16, *dims)).astype(np.float32)
    r = qr.quantize(model, {"x": x}, qr.Config(progress=False))
    assert not r.annotation.float_ops and r.cast_counts() == (1, 1)
    y = run(r.module, {"x": x[:2]})["y"]
    relu = np.maximum(x[:2], 0)
    step = float(r.module.main.ops[0].results[0].type.element_type.scale)
    want = _expected(op_type, relu)
    assert y.shape == want.shape and np.abs(y - want).max() <= step   # the Relu's int8 output, moved
    report = verify_tflite(r.save(tmp_path / "m.tflite"), {"x": x[:4]}, intermediates=False)
    assert report.ok, report.text()
