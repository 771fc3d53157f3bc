"""ConvTranspose end to end: the float forms exporters write (bias inside, or Paddle's separate
per-channel Add; a following Relu) become one int8 TRANSPOSE_CONV, which runs in quantir's
interpreter within its rounding of ONNX Runtime's float result, verifies bit-exact against
LiteRT's reference kernels after the .tflite export, reads back, and runs in ONNX Runtime as
QDQ and QOperator. Geometries TFLite cannot express stay float with the reason."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.errors import UnsupportedOpError
from quantir.backends.tflite.reader import read_model
from quantir.frontends.tflite import import_tflite
from quantir.runtime import run

RNG = np.random.default_rng(0)
X = RNG.normal(size=(24, 3, 6, 5)).astype(np.float32)


def _graph(tmp_path, *, bias="inside", relu=True, k=2, s=2, pads=(0, 0, 0, 0), output_padding=None, group=1,
           batch=None, name="ct.onnx") -> str:
    """Conv(3→4, 3x3 SAME) → ConvTranspose(4→5) [+ Add bias] [→ Relu]."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.normal(size=(4, 3, 3, 3)).astype(np.float32) * 0.3, "cw"),
             numpy_helper.from_array(rng.normal(size=(4,)).astype(np.float32) * 0.1, "cb"),
             numpy_helper.from_array(rng.normal(size=(4, 5 // group if group == 1 else 1, k, k)).astype(np.float32)
                                     * 0.4, "tw")]
    ct_inputs = ["h", "tw"]
    if bias == "inside":
        inits.append(numpy_helper.from_array(rng.normal(size=(5 if group == 1 else 4,)).astype(np.float32), "tb"))
        ct_inputs.append("tb")
    attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=list(pads), group=group)
    if output_padding:
        attrs["output_padding"] = list(output_padding)
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("ConvTranspose", ct_inputs, ["t"], **attrs)]
    last = "t"
    if bias == "add":
        inits.append(numpy_helper.from_array(rng.normal(size=(1, 5, 1, 1)).astype(np.float32), "ab"))
        nodes.append(helper.make_node("Add", ["t", "ab"], ["tb_out"]))
        last = "tb_out"
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [last], ["y"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 6, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path = str(tmp_path / name)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _ort(path, x):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _quantize(path):
    return qr.quantize(path, {"x": X}, qr.Config(progress=False))


def _tc(r):
    return [op for op in r.module.main.ops if op.name == "qnn.transpose_conv"]


@pytest.mark.parametrize("bias,relu", [("inside", True), ("add", True), ("none", False), ("add", False)])
def test_each_form_becomes_one_integer_transpose_conv(tmp_path, bias, relu):
    path = _graph(tmp_path, bias=bias, relu=relu)
    r = _quantize(path)
    assert [op.name for op in r.module.main.ops if op.name.startswith("qnn.")] == ["qnn.conv", "qnn.transpose_conv"]
    assert not r.annotation.float_ops
    (tc,) = _tc(r)
    assert tc.attr("activation") == ("RELU" if relu else "NONE")
    assert r.spec_report().ok
    ref = _ort(path, X)
    got = run(r.module, {"x": X})["y"]
    step = tc.results[0].type.element_type.scale
    # int8 everywhere: a few output steps from float (the first conv's and the weights' rounding)
    assert np.abs(got - ref).max() <= 6 * step, (np.abs(got - ref).max(), step)
    cos = float((got * ref).sum() / np.linalg.norm(got) / np.linalg.norm(ref))
    assert cos > 0.999


@pytest.mark.parametrize("geometry", [
    dict(k=2, s=2), dict(k=3, s=2, output_padding=(1, 1)), dict(k=3, s=2, pads=(0, 0, 1, 1)),
    dict(k=4, s=2, pads=(1, 1, 1, 1)), dict(k=3, s=1, pads=(1, 1, 1, 1))])
def test_same_and_valid_geometries_match_float_and_litert(tmp_path, geometry):
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    path = _graph(tmp_path, **geometry)
    r = _quantize(path)
    (tc,) = _tc(r)
    got, ref = run(r.module, {"x": X})["y"], _ort(path, X)
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= 6 * tc.results[0].type.element_type.scale
    r.save(tmp_path / "m.tflite")
    report = verify_tflite(tmp_path / "m.tflite", {"x": X[:8]})
    assert report.ok, report.text()
    back = import_tflite(read_model((tmp_path / "m.tflite").read_bytes(), "m.tflite")).module
    (tc_back,) = [op for op in back.main.ops if op.name == "qnn.transpose_conv"]
    for attr in ("strides", "adjust", "padding", "activation"):
        assert tc_back.attr(attr) == tc.attr(attr), attr


def test_dynamic_batch_tflite_computes_the_output_shape(tmp_path):
    """With a dynamic batch the .tflite computes output_shape from the input's SHAPE; LiteRT runs
    batches of 1 and 8 bit-exactly."""
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.backends.tflite.schema import BuiltinOperator as OP
    from quantir.verify import verify_tflite
    r = _quantize(_graph(tmp_path, batch="N", bias="add"))
    r.save(tmp_path / "m.tflite")
    model = read_model((tmp_path / "m.tflite").read_bytes(), "m.tflite")
    codes = {model.operator_codes[o.opcode_index].builtin_code for o in model.subgraphs[0].operators}
    assert {OP.SHAPE, OP.MUL, OP.ADD, OP.TRANSPOSE_CONV} <= codes
    for n in (1, 8):
        report = verify_tflite(tmp_path / "m.tflite", {"x": X[:n]}, batch=n)
        assert report.ok, report.text()


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
def test_onnx_exports_run_in_onnx_runtime_within_one_step(tmp_path, fmt):
    path = _graph(tmp_path, k=3, s=2, output_padding=(1, 1), bias="add", batch="N")
    r = _quantize(path)
    out = tmp_path / f"m.{fmt}.onnx"
    r.save(out, format=fmt)
    for x in (X[:1], X[:5]):
        got = _ort(str(out), x)
        ours = run(r.module, {"x": x})["y"]
        step = _tc(r)[0].results[0].type.element_type.scale
        assert np.abs(got - ours).max() <= step * 1.0001


@pytest.mark.parametrize("geometry,reason", [
    (dict(k=3, s=2, pads=(1, 1, 0, 0)), "neither TFLite's SAME nor VALID"),
    # PyTorch's ConvTranspose2d(k=3, s=2, padding=1, output_padding=1): the crop starts one pixel later
    # than TFLite's SAME (which puts the odd pixel at the end)
    (dict(k=3, s=2, pads=(1, 1, 1, 1), output_padding=(1, 1)), "neither TFLite's SAME nor VALID"),
    (dict(k=2, s=2, group=4), "TFLite TRANSPOSE_CONV has no groups"),
])
def test_what_tflite_cannot_express_stays_float_with_the_reason(tmp_path, geometry, reason):
    r = _quantize(_graph(tmp_path, relu=False, **geometry))
    assert not _tc(r)
    reasons = [why for op, why in r.annotation.float_ops if op.name == "nn.conv_transpose"]
    assert len(reasons) == 1 and reason in reasons[0], reasons
    assert [op.name for op in r.module.main.ops if op.name == "qnn.conv"] == ["qnn.conv"]   # the rest stays integer


def test_dynamic_height_and_width_tflite_reads_back_and_is_bit_exact(tmp_path):
    """Dynamic H and W: the output_shape is computed at run time, read back as the same adjust, and
    LiteRT agrees bit for bit at two sizes."""
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    path = _graph(tmp_path, k=3, s=2, output_padding=(1, 1), bias="add", batch="N")
    model = onnx.load(path)
    for d, name in zip(model.graph.input[0].type.tensor_type.shape.dim[2:], ("H", "W")):
        d.ClearField("dim_value")
        d.dim_param = name
    onnx.save(model, path)
    r = _quantize(path)
    try:
        r.save(tmp_path / "m.tflite")
    except UnsupportedOpError as e:   # (the exporter of dynamic H, W is newer than this op)
        pytest.skip(str(e))
    back = import_tflite(read_model((tmp_path / "m.tflite").read_bytes(), "m.tflite")).module
    (tc_back,) = [op for op in back.main.ops if op.name == "qnn.transpose_conv"]
    assert tc_back.attr("adjust") == _tc(r)[0].attr("adjust")
    for shape in ((2, 3, 6, 5), (1, 3, 4, 9)):
        x = RNG.normal(size=shape).astype(np.float32)
        report = verify_tflite(tmp_path / "m.tflite", {"x": x}, batch=shape[0])
        assert report.ok, report.text()
