"""MaxPool / AveragePool with ceil_mode=1 (issue 14): the overhang of the last window becomes
explicit end padding that never counts, so the pools quantize; checked against ONNX Runtime
(the float op on the integer op's input values) and LiteRT's reference kernels (.tflite)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.runtime import run
from quantir.verify import verify_tflite

RNG = np.random.default_rng(2)
C = 4


def _model(tmp_path, op_type, hw, kernel, strides, pads=(0, 0, 0, 0), count_include_pad=0) -> str:
    attrs = dict(kernel_shape=[kernel] * 2, strides=[strides] * 2, pads=list(pads), ceil_mode=1)
    if op_type == "AveragePool":
        attrs["count_include_pad"] = count_include_pad
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
             helper.make_node(op_type, ["c"], ["y"], name="pool", **attrs)]
    w = numpy_helper.from_array(RNG.normal(size=(C, C, 1, 1)).astype(np.float32) * 0.5, "w")
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, C, *hw])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    path = str(tmp_path / "pool.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]), path)
    return path


def _pool_only(path) -> bytes:
    """The model's pool alone, fed with ``c``: ONNX Runtime's float pool on given values."""
    m = onnx.load(path)
    pool = m.graph.node[1]
    g = helper.make_graph([pool], "p", [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]).SerializeToString()


CASES = [  # op, H x W, kernel, stride, pads: the overhang made explicit is SAME, or PADV2 for max
    ("MaxPool", (7, 9), 2, 2, (0, 0, 0, 0)),
    ("MaxPool", (6, 6), 3, 2, (1, 1, 1, 1)),    # end pads 2: neither SAME nor VALID (PADV2 + VALID)
    ("MaxPool", (8, 5), 3, 3, (0, 0, 0, 0)),
    ("AveragePool", (7, 9), 2, 2, (0, 0, 0, 0)),
    ("AveragePool", (5, 5), 3, 2, (0, 0, 0, 0)),
]


@pytest.mark.parametrize("op_type,hw,kernel,strides,pads", CASES)
def test_ceil_mode_pools_match_onnx_runtime_and_litert(tmp_path, op_type, hw, kernel, strides, pads):
    path = _model(tmp_path, op_type, hw, kernel, strides, pads)
    r = qr.quantize(path, {"x": RNG.normal(size=(16, C, *hw)).astype(np.float32)}, qr.Config(progress=False))
    assert not r.annotation.float_ops
    x = RNG.normal(size=(2, C, *hw)).astype(np.float32)
    got = run(r.module, {"x": x})
    want = ort.InferenceSession(_pool_only(path), providers=["CPUExecutionProvider"]).run(None, {"c": got["c"]})[0]
    assert got["y"].shape == want.shape
    if op_type == "MaxPool":   # a max of the very values: exact
        np.testing.assert_array_equal(got["y"], want)
    else:   # LiteRT rounds the mean to the nearest step (ties away from zero)
        step = np.diff(np.unique(got["c"])).min()
        assert np.abs(got["y"] - want).max() <= 0.5 * step * 1.001
    report = verify_tflite(r.save(tmp_path / "pool.tflite"), {"x": x}, intermediates=False)
    assert report.ok, report.text()


def test_average_pool_whose_overhang_is_not_same_padding_stays_float(tmp_path):
    path = _model(tmp_path, "AveragePool", (6, 6), 3, 2, (1, 1, 1, 1))
    r = qr.quantize(path, {"x": RNG.normal(size=(16, C, 6, 6)).astype(np.float32)}, qr.Config(progress=False))
    assert {op.label: why for op, why in r.annotation.float_ops} == {"pool": (
        "AveragePool with ceil_mode=1 on 6x6 pads (1, 1, 2, 2) (the overhang made explicit), neither SAME nor "
        "VALID: LiteRT AVERAGE_POOL_2D takes no other padding")}


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_ceil_mode_2x2_stride_2_on_a_dynamic_size_is_same(tmp_path, op_type):
    path = _model(tmp_path, op_type, (None, None), 2, 2)
    r = qr.quantize(path, {"x": RNG.normal(size=(16, C, 7, 9)).astype(np.float32)}, qr.Config(progress=False))
    assert not r.annotation.float_ops
    (pool,) = (op for op in r.module.main.ops if op.label == "pool")
    assert pool.attr("auto_pad") == "SAME_UPPER"
    tfl = r.save(tmp_path / "pool.tflite")
    for hw in ((7, 9), (6, 10)):   # odd sizes: the overhang; even: none
        x = RNG.normal(size=(2, C, *hw)).astype(np.float32)
        got = run(r.module, {"x": x})
        want = ort.InferenceSession(_pool_only(path), providers=["CPUExecutionProvider"]).run(None, {"c": got["c"]})[0]
        assert got["y"].shape == want.shape == (2, C, -(-hw[0] // 2), -(-hw[1] // 2))
        step = np.diff(np.unique(got["c"])).min()
        assert np.abs(got["y"] - want).max() <= (0 if op_type == "MaxPool" else 0.5 * step * 1.001)
        report = verify_tflite(tfl, {"x": x}, intermediates=False)
        assert report.ok, report.text()


def test_ceil_mode_with_a_stride_on_a_dynamic_size_stays_float(tmp_path):
    path = _model(tmp_path, "MaxPool", (None, None), 3, 2)
    r = qr.quantize(path, {"x": RNG.normal(size=(16, C, 7, 9)).astype(np.float32)}, qr.Config(progress=False))
    (why,) = [why for op, why in r.annotation.float_ops if op.label == "pool"]
    assert why.startswith("ceil_mode=1 with strides (2, 2) on a dynamic spatial size")
