"""HardSigmoid has no LiteRT builtin: it expands, before calibration, into MUL and ADD with a fused
RELU (the bound 0; the bound 1 is the end of the output's range, where int8 and int16 storage both
saturate); each interior value is observed and has its own parameters.
Written-out hard-swish (x·HardSigmoid(x), x·Relu6(x + 3)/6) becomes one HARD_SWISH."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.quantize.methods import Range
from quantir.runtime import run
from quantir.text import print_module

X = (np.random.default_rng(0).normal(size=(256, 16)) * 4).astype(np.float32)


def _c(name, value):
    return numpy_helper.from_array(np.array(value, np.float32), name)


def _save(tmp_path, nodes, inits=(), name="m.onnx") -> str:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 16])], list(inits))
    path = str(tmp_path / name)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _hard_sigmoid(tmp_path, alpha=0.2, beta=0.5):
    return _save(tmp_path, [helper.make_node("HardSigmoid", ["x"], ["y"], alpha=alpha, beta=beta)])


def _ops(r):
    return [op.name for op in r.module.main.ops if op.name not in ("arith.constant", "quant.scast")]


def test_hard_sigmoid_is_mul_then_add_in_int8(tmp_path):
    r = qr.quantize(_hard_sigmoid(tmp_path), {"x": X}, qr.Config(progress=False))
    assert _ops(r) == ["quant.qcast", "qnn.mul", "qnn.add", "quant.dcast", "func.return"]
    assert r.spec_report().ok
    add = next(op for op in r.module.main.ops if op.name == "qnn.add")
    out = add.results[0].type.element_type
    assert (out.scale, out.zero_point) == (pytest.approx(1 / 255), -128)   # the range [0, 1]: saturation clamps
    assert add.attr("activation") == "RELU"          # a no-op at int8 (zero point -128), the bound 0 at int16
    y = run(r.module, {"x": X})["y"]
    want = np.clip(0.2 * X + 0.5, 0, 1)
    assert y.min() == 0.0 and y.max() == pytest.approx(1.0)
    s_in = r.module.main.ops[0].results[0].type.element_type.scale
    s_mul = next(op for op in r.module.main.ops if op.name == "qnn.mul").results[0].type.element_type.scale
    # the input's rounding (scaled by 0.2), then MUL's and ADD's own roundings
    assert np.abs(y - want).max() <= 0.2 * s_in / 2 + s_mul / 2 + out.scale / 2 + 1e-6


def test_hard_sigmoid_computes_in_int16_under_16x8(tmp_path):
    """int16 activations: MUL and ADD stay int16 (the ADD's RELU clamps at 0, int16 saturation at
    the range's end), so the gate has 65,535 steps, not 255; LiteRT's BUILTIN_REF gives the same
    integers and both ONNX exports run them (the QOperator file with one QuantizeLinear, exact)."""
    from quantir.types import UniformQuantizedType
    from tests.backends.onnx.test_qoperator_16bit import on_input_grid
    r = qr.quantize(_hard_sigmoid(tmp_path), {"x": X}, qr.Config(progress=False, activations="int16"))
    assert _ops(r) == ["quant.qcast", "qnn.mul", "qnn.add", "quant.dcast", "func.return"]
    add = next(op for op in r.module.main.ops if op.name == "qnn.add")
    out = add.results[0].type.element_type
    assert isinstance(out, UniformQuantizedType) and out.storage_type.width == 16 and out.zero_point == 0
    assert add.attr("activation") == "RELU" and out.scale == pytest.approx(1 / 32767)
    y = run(r.module, {"x": X})["y"]
    want = np.clip(0.2 * X + 0.5, 0, 1)
    assert y.min() == 0.0 and y.max() == pytest.approx(1.0)
    assert np.abs(y - want).max() <= 2e-4          # the int8 module above errs by up to ~0.01 (1/255 steps)
    r.save(tmp_path / "q.onnx", format="qdq")
    got = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    s_in = r.module.main.ops[0].results[0].type.element_type.scale
    s_mul = next(op for op in r.module.main.ops if op.name == "qnn.mul").results[0].type.element_type.scale
    # float arithmetic between QDQ pairs: a step of the input (scaled by 0.2), of MUL and of ADD apart
    assert np.abs(got - y).max() <= 0.2 * s_in + s_mul + out.scale + 1e-7
    r.save(tmp_path / "q.qop.onnx", format="qoperator")
    qop = onnx.load(str(tmp_path / "q.qop.onnx"))
    assert [n.op_type for n in qop.graph.node].count("QuantizeLinear") == 1
    grid = on_input_grid(r.module, X)
    got = ort.InferenceSession(str(tmp_path / "q.qop.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": grid})
    assert np.array_equal(got[0], run(r.module, {"x": grid})["y"])
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    r.save(tmp_path / "m.tflite")
    report = verify_tflite(tmp_path / "m.tflite", {"x": X[:64]})
    assert report.ok, report.text()


def test_interior_values_are_observed_and_seen_by_callbacks(tmp_path):
    seen = {}

    def callback(info):
        seen[info.region.pattern.name] = ([v.name_hint for v in info.region.inputs],
                                          [a.shape for a in info.quantized_inputs()])
        return info.output_range()
    r = qr.quantize(_hard_sigmoid(tmp_path), {"x": X}, qr.Config(progress=False, callback=callback))
    assert seen["mul"][0] == ["x", "y.alpha"] and seen["add"][0] == ["y.scaled", "y.beta"]
    assert seen["add"][1][0] == (32, 16)          # the interior value, as the integer graph computes it
    scaled = next(v for v in r.statistics.observers if v.name_hint == "y.scaled")
    rng = r.statistics.range(scaled, r.config)
    assert (rng.rmin, rng.rmax) == pytest.approx((0.2 * X.min(), 0.2 * X.max()))
    assert isinstance(rng, Range)


def test_litert_runs_it_bit_exact(tmp_path):
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    r = qr.quantize(_hard_sigmoid(tmp_path, alpha=0.25, beta=0.4), {"x": X}, qr.Config(progress=False))
    r.save(tmp_path / "m.tflite")
    report = verify_tflite(tmp_path / "m.tflite", {"x": X[:64]})
    assert report.ok, report.text()


def test_onnx_runtime_runs_the_qdq_export_within_one_step(tmp_path):
    r = qr.quantize(_hard_sigmoid(tmp_path), {"x": X}, qr.Config(progress=False))
    r.save(tmp_path / "q.onnx", format="qdq")
    got = ort.InferenceSession(str(tmp_path / "q.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    assert np.abs(got - run(r.module, {"x": X})["y"]).max() <= 1 / 255 + 1e-6


def test_an_excluded_hard_sigmoid_stays_whole_and_float(tmp_path):
    r = qr.quantize(_save(tmp_path, [helper.make_node("HardSigmoid", ["x"], ["h"], name="gate"),
                                     helper.make_node("Relu", ["h"], ["y"])]),
                    {"x": X}, qr.Config(progress=False, exclude=("gate",)))
    assert "nn.hard_sigmoid" in _ops(r)


def test_a_module_passed_in_is_not_changed(tmp_path):
    module = qr.load(_hard_sigmoid(tmp_path))
    before = print_module(module)
    qr.quantize(module, {"x": X}, qr.Config(progress=False))
    assert print_module(module) == before


@pytest.mark.parametrize("form", ["hard_sigmoid", "relu6"])
def test_written_out_hard_swish_is_one_hard_swish(tmp_path, form):
    if form == "hard_sigmoid":
        nodes, inits = [helper.make_node("HardSigmoid", ["x"], ["h"], alpha=1 / 6, beta=0.5),
                        helper.make_node("Mul", ["h", "x"], ["y"])], []
    else:
        nodes = [helper.make_node("Add", ["three", "x"], ["a"]), helper.make_node("Clip", ["a", "zero", "six"], ["r"]),
                 helper.make_node("Mul", ["x", "r"], ["m"]), helper.make_node("Div", ["m", "six"], ["y"])]
        inits = [_c("three", 3.0), _c("zero", 0.0), _c("six", 6.0)]
    r = qr.quantize(_save(tmp_path, nodes, inits), {"x": X}, qr.Config(progress=False))
    assert _ops(r) == ["quant.qcast", "qnn.hard_swish", "quant.dcast", "func.return"]
    y = run(r.module, {"x": X})["y"]
    step = r.module.main.ops[1].results[0].type.element_type.scale
    assert np.abs(y - X * np.clip(X + 3, 0, 6) / 6).max() <= 2 * step


def test_x_times_another_hard_sigmoid_is_not_hard_swish(tmp_path):
    nodes = [helper.make_node("HardSigmoid", ["x"], ["h"], alpha=0.2, beta=0.5),
             helper.make_node("Mul", ["h", "x"], ["y"])]
    r = qr.quantize(_save(tmp_path, nodes), {"x": X}, qr.Config(progress=False))
    assert _ops(r) == ["quant.qcast", "qnn.mul", "qnn.add", "qnn.mul", "quant.dcast", "func.return"]
