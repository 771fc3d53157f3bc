"""MatMul of two activations (attention: MatMul(q, Transpose(k)) · scale -> Softmax -> MatMul(·, v)) becomes
LiteRT BATCH_MATMUL (the Transpose absorbed as adj_y): .tflite bit-exact with BUILTIN_REF, QDQ and QOperator
run in ONNX Runtime."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.errors import QuantirError
from quantir.runtime import run
from quantir.verify import verify_tflite

RNG = np.random.default_rng(0)
SHAPE = [2, 12, 8]   # heads, tokens, head dim
FEEDS = {k: RNG.normal(size=(16, *SHAPE)).astype(np.float32) for k in "qkv"}


def _attention(tmp_path, perm=(0, 1, 3, 2)) -> str:
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=list(perm)),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Mul", ["s", "scale"], ["ss"]), helper.make_node("Softmax", ["ss"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", *SHAPE]) for n in "qkv"]
    g = helper.make_graph(nodes, "attn", io, [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", *SHAPE])],
                          [numpy_helper.from_array(np.array(8 ** -0.5, np.float32), "scale")])
    path = str(tmp_path / "attn.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def _cosine(a, b):
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_attention_becomes_batch_matmul(tmp_path):
    path = _attention(tmp_path)
    r = qr.quantize(path, FEEDS, qr.Config(progress=False))
    mm = [op for op in r.module.main.ops if op.name == "qnn.batch_matmul"]
    assert [(bool(op.attr("adj_x")), bool(op.attr("adj_y"))) for op in mm] == [(False, True), (False, False)]
    assert not r.annotation.float_ops and r.spec_report().ok
    assert not any(op.name == "nn.transpose" for op in r.module.main.ops)
    ref = ort.InferenceSession(path).run(None, {k: v[:4] for k, v in FEEDS.items()})[0]
    ours = run(r.module, {k: v[:4] for k, v in FEEDS.items()})["y"]
    step = mm[-1].results[0].type.element_type.scale
    assert _cosine(ours, ref) > 0.998 and np.abs(ours - ref).max() < 6 * step
    r.save(tmp_path / "attn.tflite")
    report = verify_tflite(tmp_path / "attn.tflite", {k: v[:4] for k, v in FEEDS.items()})
    assert all(t.differing == 0 for t in report.outputs + report.intermediates), report
    for fmt in ("qdq", "qoperator"):
        r.save(tmp_path / f"attn_{fmt}.onnx", format=fmt)
        y = ort.InferenceSession(str(tmp_path / f"attn_{fmt}.onnx")).run(None, {k: v[:4] for k, v in FEEDS.items()})[0]
        assert np.abs(y - ours).max() <= 4 * step


def test_matmul_with_a_vector_stays_float_with_its_reason(tmp_path):
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mv",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 8]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])])
    path = str(tmp_path / "mv.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    feeds = {"a": RNG.normal(size=(32, 1, 8)).astype(np.float32), "b": RNG.normal(size=(32, 8)).astype(np.float32)}
    with pytest.raises(QuantirError, match=r"MatMul of operands of rank \(2, 1\): LiteRT BATCH_MATMUL takes"):
        qr.quantize(path, feeds, qr.Config(progress=False))   # its only op stays float: nothing to quantize
