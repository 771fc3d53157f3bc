"""LayerNorm end to end: the form exporters write (ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div, then
Mul gamma, Add beta) and the ONNX LayerNormalization op become MEAN, SUB, BATCH_MATMUL (each row's sum
of squares), ADD, RSQRT, MUL (+ MUL sqrt(C) folded into gamma, ADD) with every interior value
observed; the .tflite is bit-exact with LiteRT's reference kernels and the ONNX exports run in ONNX
Runtime."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.runtime import run
from quantir.verify import verify_tflite

D = 48
RNG = np.random.default_rng(0)
# rows with per-channel offsets and spreads, as a transformer's residual stream has
X = (RNG.normal(size=(24, 10, D)) * RNG.uniform(0.3, 3.0, D) + RNG.normal(0, 1.0, D)).astype(np.float32)
GAMMA = RNG.uniform(0.5, 1.5, D).astype(np.float32)
BETA = RNG.normal(0, 0.2, D).astype(np.float32)
# the written form has no gamma constant to fold sqrt(C) into: one MUL more
EXPECTED = {"onnx": ["qnn.mean", "qnn.sub", "qnn.batch_matmul", "qnn.add", "qnn.rsqrt", "qnn.mul", "qnn.mul",
                     "qnn.add"],
            "written": ["qnn.mean", "qnn.sub", "qnn.batch_matmul", "qnn.add", "qnn.rsqrt", "qnn.mul", "qnn.mul",
                        "qnn.mul", "qnn.add"]}


def _c(name, value):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def _written(two=2.0, var_axes=(-1,)):
    nodes = [helper.make_node("ReduceMean", ["x"], ["mu"], axes=[-1]), helper.make_node("Sub", ["x", "mu"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["d2"]),
             helper.make_node("ReduceMean", ["d2"], ["var"], axes=list(var_axes)),
             helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["d", "sd"], ["xn"]), helper.make_node("Mul", ["xn", "gamma"], ["xg"]),
             helper.make_node("Add", ["xg", "beta"], ["y"])]
    return nodes, [_c("two", two), _c("eps", 1e-5), _c("gamma", GAMMA), _c("beta", BETA)], 13


def _onnx_op():
    return ([helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5)],
            [_c("gamma", GAMMA), _c("beta", BETA)], 17)


def _save(tmp_path, form) -> str:
    nodes, inits, opset = form
    g = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 10, D])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10, D])], inits)
    path = str(tmp_path / "ln.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _layer_norm(x):
    x = x.astype(np.float64)
    d = x - x.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) * GAMMA + BETA


def _cosine(a, b):
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.parametrize("form", ["written", "onnx"])
def test_layer_norm_becomes_litert_ops(tmp_path, form):
    path = _save(tmp_path, _written() if form == "written" else _onnx_op())
    r = qr.quantize(path, {"x": X}, qr.Config(progress=False))
    assert [op.name for op in r.module.main.ops if op.name.startswith("qnn.")] == EXPECTED[form]
    assert r.cast_counts() == (1, 1) and not r.annotation.float_ops
    assert r.spec_report().ok
    assert r.summary_dict()["rewritten"] == {"layer_norm_written" if form == "written" else "layer_norm": 1}
    y = run(r.module, {"x": X})["y"]
    step = r.module.main.ops[-2].operands[0].type.element_type.scale
    err = np.abs(y - _layer_norm(X))
    # nine int8 roundings in a row: the output is within a few steps everywhere, and about one on average
    assert _cosine(y, _layer_norm(X)) > 0.999
    assert err.mean() < 1.0 * step and err.max() < 8 * step


def test_layer_norm_tflite_is_bit_exact_and_onnx_exports_run(tmp_path):
    r = qr.quantize(_save(tmp_path, _written()), {"x": X}, qr.Config(progress=False))
    r.save(tmp_path / "ln.tflite")
    report = verify_tflite(tmp_path / "ln.tflite", {"x": X[:4]})
    assert all(t.differing == 0 for t in report.outputs + report.intermediates), report
    ours = run(r.module, {"x": X[:4]})["y"]
    for fmt in ("qdq", "qoperator"):
        r.save(tmp_path / f"ln_{fmt}.onnx", format=fmt)
        y = ort.InferenceSession(str(tmp_path / f"ln_{fmt}.onnx")).run(None, {"x": X[:4]})[0]
        # ONNX Runtime runs the QDQ graph with float arithmetic between the Q/DQ pairs: a few steps
        step = r.module.main.ops[-2].operands[0].type.element_type.scale
        assert np.abs(y - ours).max() <= 4 * step and _cosine(y, _layer_norm(X[:4])) > 0.999


@pytest.mark.parametrize("near_miss, reason", [
    (dict(two=4.0), "not LayerNorm: the exponent is [4.0], not 2"),
    (dict(var_axes=(1,)), "the mean is taken over axes [2] and the variance over [1]"),
])
def test_near_miss_is_not_expanded(tmp_path, near_miss, reason):
    r = qr.quantize(_save(tmp_path, _written(**near_miss)), {"x": X}, qr.Config(progress=False))
    assert "rsqrt" not in r.quantized_ops() and r.summary_dict()["rewritten"] == {}
    assert reason in r.summary_dict()["not_rewritten"]["layer_norm_written"]
    assert {op.name for op, _ in r.annotation.float_ops} >= {"nn.sqrt", "nn.div"}
