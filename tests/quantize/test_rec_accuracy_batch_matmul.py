"""QOperator export of BATCH_MATMUL as ONNX's QLinearMatMul (issue 14 item 4; the SVTR attention of the
PP-OCR recognizers): no float MatMul and no DequantizeLinear around it, adj_x / adj_y as an int8
Transpose, batch dims broadcast as numpy's matmul. ONNX Runtime requantizes the int32 product in
float where LiteRT uses a fixed-point multiplier: within one step of quantir's interpreter."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import quantir as qr
from quantir.runtime import run

RNG = np.random.default_rng(5)


def _matmul(tmp_path, a_shape, b_shape, adj_a=False, adj_b=False) -> str:
    """y = MatMul(a or its last-two-dims Transpose, b or its Transpose)."""
    nodes, a, b = [], "a", "b"
    for name, adj, shape in (("a", adj_a, a_shape), ("b", adj_b, b_shape)):
        if adj:
            n = len(shape)
            nodes.append(helper.make_node("Transpose", [name], [name + "t"], perm=[*range(n - 2), n - 1, n - 2]))
    a, b = ("at" if adj_a else "a"), ("bt" if adj_b else "b")
    nodes.append(helper.make_node("MatMul", [a, b], ["y"]))
    g = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", *a_shape[1:]]),
                                        helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", *b_shape[1:]])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = str(tmp_path / "mm.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


@pytest.mark.parametrize("a_shape,b_shape,adj_a,adj_b", [
    ((1, 2, 12, 8), (1, 2, 12, 8), False, True),     # q · kᵀ
    ((1, 2, 12, 12), (1, 2, 12, 8), False, False),   # p · v
    ((1, 2, 8, 12), (1, 2, 8, 5), True, False),      # adj_x
    ((1, 3, 6, 4), (1, 1, 4, 7), False, False),      # a broadcast batch dim
])
def test_batch_matmul_exports_as_qlinear_matmul(tmp_path, a_shape, b_shape, adj_a, adj_b):
    feeds = {"a": (RNG.normal(size=(32, *a_shape[1:])) * 1.5).astype(np.float32),
             "b": (RNG.normal(size=(32, *b_shape[1:])) + 0.3).astype(np.float32)}
    r = qr.quantize(_matmul(tmp_path, a_shape, b_shape, adj_a, adj_b), feeds, qr.Config(progress=False))
    (mm,) = [op for op in r.module.main.ops if op.name == "qnn.batch_matmul"]
    r.save(tmp_path / "q.onnx", format="qoperator")
    model = onnx.load(str(tmp_path / "q.onnx"))
    kinds = [n.op_type for n in model.graph.node]
    assert kinds.count("QLinearMatMul") == 1 and "MatMul" not in kinds, kinds
    assert kinds.count("DequantizeLinear") == 1 and kinds.count("QuantizeLinear") == 2, kinds   # model I/O only
    assert kinds.count("Transpose") == int(adj_a) + int(adj_b)
    few = {k: v[:8] for k, v in feeds.items()}
    ours = run(r.module, few)["y"]
    y = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"]).run(None, few)[0]
    step = mm.results[0].type.element_type.scale
    assert y.shape == ours.shape
    assert np.abs(y - ours).max() <= 1.01 * step, np.abs(y - ours).max() / step
