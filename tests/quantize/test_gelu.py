"""GELU end to end: ONNX Gelu and the arithmetic exporters write for it become one int8 lookup
table (LiteRT GELU), bit-exact with LiteRT's reference kernels, and survive every export."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.frontends.tflite import import_tflite
from quantir.backends.tflite.reader import read_model
from quantir.runtime import run

X = np.random.default_rng(0).normal(size=(256, 16)).astype(np.float32) * 2.0


def _c(name, value):
    return numpy_helper.from_array(np.array(value, np.float32), name)


def _erf(half=0.5, scale=("Div", 1.4142135)):
    op, value = scale
    return ([helper.make_node(op, ["x", "s"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["one", "e"], ["a"]), helper.make_node("Mul", ["x", "h"], ["xh"]),
             helper.make_node("Mul", ["a", "xh"], ["y"])],
            [_c("s", value), _c("one", 1.0), _c("h", half)], 17)


def _tanh():
    return ([helper.make_node("Mul", ["x", "x"], ["x2"]), helper.make_node("Mul", ["x2", "x"], ["x3"]),
             helper.make_node("Mul", ["k", "x3"], ["kx3"]), helper.make_node("Add", ["x", "kx3"], ["i"]),
             helper.make_node("Mul", ["i", "ts"], ["it"]), helper.make_node("Tanh", ["it"], ["t"]),
             helper.make_node("Add", ["t", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["xa"]),
             helper.make_node("Mul", ["h", "xa"], ["y"])],
            [_c("k", 0.044715), _c("ts", np.sqrt(2 / np.pi)), _c("one", 1.0), _c("h", 0.5)], 17)


def _onnx_gelu(approximate="none"):
    return [helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)], [], 20


FORMS = {"onnx": (_onnx_gelu(), False), "onnx_tanh": (_onnx_gelu("tanh"), True), "erf_div": (_erf(), False),
         "erf_mul": (_erf(scale=("Mul", 0.70710677)), False), "tanh_cube": (_tanh(), True)}


def _save(tmp_path, form) -> str:
    nodes, inits, opset = form
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 16])], inits)
    path = str(tmp_path / "gelu.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _gelu(x, tanh):
    from math import erf
    if tanh:
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


@pytest.mark.parametrize("name", sorted(FORMS))
def test_every_form_becomes_one_integer_gelu(tmp_path, name):
    form, tanh = FORMS[name]
    r = qr.quantize(_save(tmp_path, form), {"x": X}, qr.Config(progress=False))
    ops = [op.name for op in r.module.main.ops]
    assert ops == ["quant.qcast", "qnn.gelu", "quant.dcast", "func.return"]
    assert r.module.main.ops[1].attr("approximate") is tanh
    assert r.spec_report().ok
    y = run(r.module, {"x": X})["y"]
    s_in = r.module.main.ops[0].results[0].type.element_type.scale
    s_out = r.module.main.ops[1].results[0].type.element_type.scale
    # the table rounds GELU of the dequantized input to the nearest step; the input itself is off by
    # at most half a step, and GELU's slope stays below 1.13
    assert np.abs(y - _gelu(X.astype(np.float64), tanh)).max() <= 0.5 * s_out + 1.13 * 0.5 * s_in + 1e-6


@pytest.mark.parametrize("name", ["erf_div", "tanh_cube"])
def test_bit_exact_with_litert_after_export_and_read_back(tmp_path, name):
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    form, tanh = FORMS[name]
    r = qr.quantize(_save(tmp_path, form), {"x": X}, qr.Config(progress=False))
    r.save(tmp_path / "m.tflite")
    report = verify_tflite(tmp_path / "m.tflite", {"x": X[:64]})
    assert report.ok, report.text()
    back = import_tflite(read_model((tmp_path / "m.tflite").read_bytes(), "m.tflite")).module
    gelus = [op for op in back.main.ops if op.name == "qnn.gelu"]
    assert len(gelus) == 1 and gelus[0].attr("approximate") is tanh


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
def test_onnx_exports_run_in_onnx_runtime_within_one_step(tmp_path, fmt):
    form, _ = FORMS["erf_div"]
    r = qr.quantize(_save(tmp_path, form), {"x": X}, qr.Config(progress=False))
    out = tmp_path / f"m.{fmt}.onnx"
    r.save(out, format=fmt)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    ours = run(r.module, {"x": X})["y"]
    step = r.module.main.ops[1].results[0].type.element_type.scale
    assert np.abs(got - ours).max() <= step * 1.0001


def test_a_different_constant_is_not_gelu_and_stays_arithmetic(tmp_path):
    form = _erf(half=0.6)
    r = qr.quantize(_save(tmp_path, form), {"x": X}, qr.Config(progress=False))
    assert "qnn.gelu" not in [op.name for op in r.module.main.ops]
    erf = [why for op, why in r.annotation.float_ops if op.name == "nn.erf"]
    assert erf == ["no quantizer pattern for 'nn.erf'"]
