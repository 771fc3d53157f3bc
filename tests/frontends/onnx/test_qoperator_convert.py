"""QOperator ONNX models (QLinearConv, QLinearMatMul, com.microsoft QGemm / QLinear*: ONNX Runtime's
``quantize_static(quant_format=QuantFormat.QOperator)``) to the integer module and .tflite with the
file's own integers and parameters (``frontends.onnx.qoperator_to_qdq`` rewrites them to QDQ in
memory, ``convert_qdq`` converts). ONNX Runtime's output of the Fashion-MNIST CNN end to end (file's
integers, LiteRT BUILTIN_REF bit-exact, top-1 against ONNX Runtime on the QOperator file), small
hand-built graphs per op against ONNX Runtime running the QOperator model, and the refusals."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from quantir import api  # noqa: E402
from quantir.errors import UnsupportedOpError  # noqa: E402
from quantir.ir.dialects import arith, qnn, quant  # noqa: E402
from quantir.quantize.from_qdq import QdqError  # noqa: E402
from quantir.runtime import run  # noqa: E402
from quantir.text import print_module  # noqa: E402

from ...cli.test_run_show import assert_one_line_error, quantir  # noqa: E402
from ...quantize.test_from_qdq import ort_quantize_static  # noqa: E402

fm = pytest.importorskip("quantir.datasets.fashion_mnist")
litert = pytest.importorskip("quantir.backends.tflite.litert")
needs_data = pytest.mark.skipif(not fm.is_available(), reason="Fashion-MNIST is not installed (make data)")
needs_litert = pytest.mark.skipif(not litert.litert_available(), reason="LiteRT (ai-edge-litert) is not installed")
MS = "com.microsoft"


def _ort(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _init(path: Path) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}


def _stored(fn, storage: str) -> list[np.ndarray]:
    """The integer constants of the module behind quant.scast of ``storage`` (i8 weights, i32 bias)."""
    return [np.asarray(op.operands[0].op.attr("value").array) for op in fn.ops
            if op.opdef is quant.SCAST and op.operands[0].op.opdef is arith.CONSTANT
            and str(op.operands[0].op.attr("value").array.dtype) == storage]


# -- ONNX Runtime's QOperator output of the Fashion-MNIST CNN ----------------------------------------

@pytest.fixture(scope="module")
def qop(tmp_path_factory) -> Path:
    if not fm.is_available():
        pytest.skip("Fashion-MNIST is not installed (make data)")
    return ort_quantize_static(tmp_path_factory.mktemp("qop") / "cnn_qop.onnx", quant_format="QOperator")


@pytest.fixture(scope="module")
def converted(qop):
    return api.convert_qdq(qop)


def test_the_files_weight_and_bias_integers_are_carried(qop, converted):
    graph, init = onnx.load(str(qop)).graph, _init(qop)
    quantized = [n for n in graph.node if n.op_type in ("QLinearConv", "QGemm")]
    assert len(quantized) == 13
    file_w = [init[n.input[3]] for n in quantized]
    file_b = [init[n.input[8] if n.op_type == "QLinearConv" else n.input[6]] for n in quantized]
    assert {w.dtype for w in file_w} == {np.dtype(np.int8)} and {b.dtype for b in file_b} == {np.dtype(np.int32)}
    mod_w, mod_b = _stored(converted.module.main, "int8"), _stored(converted.module.main, "int32")
    assert len(mod_w) == len(mod_b) == 13
    for w in file_w:   # each weight bit for bit (conv weights as stored: OIHW; the FC's (N, K))
        assert any(m.shape == w.shape and np.array_equal(m, w) for m in mod_w), w.shape
    assert sorted(b.tobytes() for b in file_b) == sorted(b.tobytes() for b in mod_b)


def _file_activation_params(path: Path) -> dict[str, tuple[float, int]]:
    """The float tensor each quantized output stands for -> (scale, zero point) as the file states them."""
    graph, init = onnx.load(str(path)).graph, _init(path)
    out = {}
    for n in graph.node:
        if n.op_type == "QuantizeLinear":
            out[n.input[0]] = (n.input[1], n.input[2])
        elif n.op_type in ("QLinearConv", "QLinearAdd", "QGemm", "QLinearSoftmax", "QLinearConcat"):
            ys, yz = {"QLinearConv": (6, 7), "QLinearAdd": (6, 7), "QGemm": (7, 8), "QLinearSoftmax": (3, 4),
                      "QLinearConcat": (0, 1)}[n.op_type]
            out[n.output[0].removesuffix("_quantized")] = (n.input[ys], n.input[yz])
    return {k: (float(init[s]), int(init[z]) - (128 if init[z].dtype == np.uint8 else 0)) for k, (s, z) in out.items()}


def test_activation_parameters_are_the_files(qop, converted):
    given = _file_activation_params(qop)
    seen = 0
    for op in converted.module.main.ops:
        if op.name.startswith("qnn.") and op.opdef is not qnn.REQUANTIZE:
            name = op.results[0].name_hint.removesuffix("__q")
            # where the file dequantizes an output to its float name, the op's own float output is '<name>_1'
            name = name[:-2] if name not in given and name.endswith("_1") else name
            t = op.results[0].type.element_type
            assert (np.float32(t.scale), t.zero_point) == (np.float32(given[name][0]), given[name][1]), name
            seen += 1
    # 12 conv, 2 add, concat, gemm, softmax, and 4 HardSwish the file runs in float between DQ and Q
    assert seen == 21


def test_summary_lists_the_ops_left_float_and_the_one_repair(converted):
    text = converted.summary()
    # ONNX Runtime's QOperator form runs the last HardSwish, the pooling and Flatten in float: so does this
    assert "left float: 3" in text and "LiteRT int8 spec check: 0 violations" in text
    assert sorted(op.label for op, _ in converted.annotation.float_ops) == [
        "/net/Flatten", "/net/act_4/HardSwish", "/net/pool/GlobalAveragePool"]
    assert [r.kind for r in converted.repairs] == ["CONCATENATION"]
    assert converted.repairs[0].max_error_steps is not None and converted.spec_violations == []
    ops = converted.module.main.ops
    assert sum(op.opdef is quant.QCAST for op in ops) == 2 and sum(op.opdef is quant.DCAST for op in ops) == 2
    floats = [op.name for op in ops if op.name.startswith("nn.")]
    assert floats == ["nn.hard_swish", "nn.global_average_pool", "nn.flatten"]


def test_strict_refuses_the_concat_naming_the_node(qop):
    with pytest.raises(QdqError, match=r"'/net/Concat' \(CONCATENATION\).*--strict"):
        api.convert_qdq(qop, strict=True)


def test_uint8_activations_give_the_same_int8_module(tmp_path, converted):
    u8 = ort_quantize_static(tmp_path / "u8.onnx", "uint8", quant_format="QOperator")
    assert print_module(api.convert_qdq(u8).module) == print_module(converted.module)


def test_load_with_qdq_and_a_proto_give_the_same_module(qop, converted):
    import quantir as qr
    before = qop.read_bytes()
    proto = onnx.load(str(qop))
    copy = proto.SerializeToString()
    assert print_module(qr.load(qop, qdq=True)) == print_module(converted.module)
    assert print_module(api.convert_qdq(proto).module) == print_module(converted.module)
    assert print_module(api.convert_qdq(before).module) == print_module(converted.module)   # serialized bytes
    assert proto.SerializeToString() == copy and qop.read_bytes() == before   # nothing written back


@pytest.fixture(scope="module")
def work(qop, tmp_path_factory):
    d = tmp_path_factory.mktemp("qop_cli")
    xte, _ = fm.load_fashion_mnist("test")
    np.savez(d / "test.npz", input=fm.to_model_input(xte[:100]))
    before = hashlib.sha256(qop.read_bytes()).hexdigest()
    r = quantir("convert", qop, "-o", d / "cnn.tflite", "--inputs", d / "test.npz")
    assert r.returncode == 0, r.stdout + r.stderr
    assert hashlib.sha256(qop.read_bytes()).hexdigest() == before   # the input model is only read
    d.joinpath("convert.txt").write_text(r.stdout)
    return d


def test_cli_summary_and_check(work):
    out = (work / "convert.txt").read_text()
    assert "nothing recalibrated" in out and "errors measured on 100 given samples" in out
    assert "/net/Concat (CONCATENATION)" in out and f"wrote {work / 'cnn.tflite'}" in out
    r = quantir("check", work / "cnn.tflite")
    assert r.returncode == 0 and ", 0 violations" in r.stdout, r.stdout + r.stderr


@pytest.mark.oracle
@needs_litert
def test_tflite_integer_ops_are_bit_exact_in_litert_reference(work):
    r = quantir("verify", work / "cnn.tflite", "--inputs", work / "test.npz", "--isolated",
                "--json", work / "verify.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "output probs [100, 10]: 0 differing elements" in r.stdout
    report = json.loads((work / "verify.json").read_text())
    # every tensor, the float ops the file leaves float (HardSwish, GlobalAveragePool, Flatten) too:
    # quantir's side runs them in LiteRT's float32 arithmetic
    assert len(report["intermediates"]) >= 30
    assert [t["name"] for t in report["outputs"] + report["intermediates"] if t["differing"]] == []
    assert [o["op"] for o in report["ops"] if o["differing"]] == []


def _top1(qop: Path, tflite: Path, n: int) -> tuple[float, float, float]:
    """Top-1 (%) of the .tflite in LiteRT BUILTIN_REF and of ONNX Runtime on the QOperator file, first
    ``n`` test images, and their agreement (%)."""
    xte, yte = fm.load_fashion_mnist("test")
    x, y = fm.to_model_input(xte[:n]), yte[:n]
    blob = tflite.read_bytes()
    p_lite = np.concatenate([litert.run_model(blob, [x[i:i + 1000]])[0].argmax(1) for i in range(0, n, 1000)])
    session = ort.InferenceSession(str(qop), providers=["CPUExecutionProvider"])
    p_ort = np.concatenate([session.run(None, {"input": x[i:i + 1000]})[0].argmax(1) for i in range(0, n, 1000)])
    return (p_lite == y).mean() * 100, (p_ort == y).mean() * 100, (p_lite == p_ort).mean() * 100


@pytest.mark.oracle
@needs_litert
def test_top1_in_litert_within_half_a_point_of_onnx_runtime_on_1000_images(qop, work):
    lite, ref, agree = _top1(qop, work / "cnn.tflite", 1000)
    assert abs(lite - ref) <= 0.5 and agree >= 99.0, (lite, ref, agree)
    assert lite >= 85.0   # a trained classifier, not a constant one


@pytest.mark.slow
@pytest.mark.oracle
@needs_litert
def test_top1_in_litert_within_0_1_point_of_onnx_runtime_on_10000_images(qop, work):
    lite, ref, agree = _top1(qop, work / "cnn.tflite", 10000)
    assert abs(lite - ref) <= 0.1, (lite, ref, agree)


# -- hand-built QOperator graphs, each against ONNX Runtime running it -----------------------------------

def _save(path: Path, nodes, inputs: dict[str, list[int]], output: tuple[str, list[int]], inits: dict,
          opset: int = 17) -> Path:
    """A QOperator model: float inputs, ``nodes``, one float output; ``inits`` name -> array."""
    graph = helper.make_graph(
        nodes, path.stem, [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in inputs.items()],
        [helper.make_tensor_value_info(output[0], TensorProto.FLOAT, output[1])],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _q(x: str, s: float, z: int) -> tuple[onnx.NodeProto, dict]:
    """QuantizeLinear of float input ``x`` at (s, z) into ``x_q``, and its parameters as initializers."""
    return (helper.make_node("QuantizeLinear", [x, f"{x}_s", f"{x}_z"], [f"{x}_q"], name=f"q_{x}"),
            {f"{x}_s": np.float32(s), f"{x}_z": np.int8(z)})


def _dq(y: str, s: str, z: str) -> onnx.NodeProto:
    return helper.make_node("DequantizeLinear", [f"{y}_q", s, z], [y], name=f"dq_{y}")


def _compare(path: Path, feeds: dict[str, np.ndarray], steps: float, out_scale: str = "y_s", **kw):
    """convert_qdq of ``path``, its output in quantir's interpreter against ONNX Runtime on the file:
    at most ``steps`` output steps apart. Returns the conversion and the max difference in steps."""
    c = api.convert_qdq(path, **kw)
    want = _ort(path, feeds)
    got = next(iter(run(c.module.main, feeds).values()))
    s_out = float(_init(path)[out_scale])
    diff = float(np.abs(got.astype(np.float64) - want).max()) / s_out
    assert diff <= steps + 1e-3, diff
    return c, diff


def _rng_inputs(shapes: dict[str, tuple], lo=-3.0, hi=3.0, seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.uniform(lo, hi, s).astype(np.float32) for k, s in shapes.items()}


def test_qgemm_with_bias_and_alpha_keeps_the_files_integers(tmp_path):
    rng = np.random.default_rng(1)
    qx, px = _q("x", 0.02, 3)
    b = rng.integers(-127, 128, (4, 8)).astype(np.int8)
    c = rng.integers(-3000, 3000, 4).astype(np.int32)
    inits = {**px, "b": b, "b_s": np.array([0.01, 0.02, 0.015, 0.03], np.float32), "b_z": np.zeros(4, np.int8),
             "c": c, "y_s": np.float32(0.05), "y_z": np.int8(-5)}
    gemm = helper.make_node("QGemm", ["x_q", "x_s", "x_z", "b", "b_s", "b_z", "c", "y_s", "y_z"], ["y_q"],
                            name="fc", domain=MS, alpha=0.5, transB=1)
    path = _save(tmp_path / "qgemm.onnx", [qx, gemm, _dq("y", "y_s", "y_z")], {"x": [3, 8]}, ("y", [3, 4]), inits)
    conv, _ = _compare(path, _rng_inputs({"x": (3, 8)}), 1.0, strict=True)   # nothing to repair
    assert conv.repairs == [] and conv.annotation.float_ops == []
    (w,) = _stored(conv.module.main, "int8")
    (bias,) = _stored(conv.module.main, "int32")
    assert np.array_equal(w, b) and np.array_equal(bias, c)
    fc = next(op for op in conv.module.main.ops if op.opdef is qnn.FULLY_CONNECTED)
    w_scales = np.asarray(fc.operands[1].type.element_type.scales, np.float32)
    assert np.array_equal(w_scales, (np.float32(0.5) * inits["b_s"]).astype(np.float32))   # alpha in the scale


def test_qlinear_matmul_per_column(tmp_path):
    rng = np.random.default_rng(2)
    qx, px = _q("x", 0.03, -2)
    inits = {**px, "w": rng.integers(-127, 128, (8, 5)).astype(np.int8),
             "w_s": np.linspace(0.005, 0.02, 5).astype(np.float32), "w_z": np.zeros(5, np.int8),
             "y_s": np.float32(0.04), "y_z": np.int8(7)}
    mm = helper.make_node("QLinearMatMul", ["x_q", "x_s", "x_z", "w", "w_s", "w_z", "y_s", "y_z"], ["y_q"], name="mm")
    path = _save(tmp_path / "matmul.onnx", [qx, mm, _dq("y", "y_s", "y_z")], {"x": [4, 8]}, ("y", [4, 5]), inits)
    conv, _ = _compare(path, _rng_inputs({"x": (4, 8)}), 1.0)
    assert conv.repairs == [] and conv.annotation.float_ops == []
    assert [np.array_equal(w, inits["w"].T) for w in _stored(conv.module.main, "int8")] == [True]


def test_qlinear_add_and_mul(tmp_path):
    qa, pa = _q("a", 0.02, 1)
    qb, pb = _q("b", 0.03, -4)
    inits = {**pa, **pb, "s_add": np.float32(0.05), "z_add": np.int8(-3), "y_s": np.float32(0.08), "y_z": np.int8(2)}
    add = helper.make_node("QLinearAdd", ["a_q", "a_s", "a_z", "b_q", "b_s", "b_z", "s_add", "z_add"], ["add_q"],
                           name="add", domain=MS)
    mul = helper.make_node("QLinearMul", ["add_q", "s_add", "z_add", "b_q", "b_s", "b_z", "y_s", "y_z"], ["y_q"],
                           name="mul", domain=MS)
    path = _save(tmp_path / "addmul.onnx", [qa, qb, add, mul, _dq("y", "y_s", "y_z")], {"a": [2, 16], "b": [2, 16]},
                 ("y", [2, 16]), inits)
    conv, _ = _compare(path, _rng_inputs({"a": (2, 16), "b": (2, 16)}, -2.0, 2.0), 1.0)
    assert conv.repairs == [] and [op.name for op in conv.module.main.ops if op.name.startswith("qnn.")] == [
        "qnn.add", "qnn.mul"]


def test_qlinear_concat_of_other_scales_is_a_listed_repair_refused_under_strict(tmp_path):
    qa, pa = _q("a", 0.02, 1)
    qb, pb = _q("b", 0.05, -4)
    inits = {**pa, **pb, "y_s": np.float32(0.04), "y_z": np.int8(0)}
    cat = helper.make_node("QLinearConcat", ["y_s", "y_z", "a_q", "a_s", "a_z", "b_q", "b_s", "b_z"], ["y_q"],
                           name="cat", domain=MS, axis=1)
    path = _save(tmp_path / "concat.onnx", [qa, qb, cat, _dq("y", "y_s", "y_z")], {"a": [2, 3], "b": [2, 5]},
                 ("y", [2, 8]), inits)
    conv, _ = _compare(path, _rng_inputs({"a": (2, 3), "b": (2, 5)}, -2.0, 2.0), 1.0)
    (r,) = conv.repairs
    assert r.kind == "CONCATENATION" and r.node == "cat" and "keeps one scale" in r.problem
    assert r.max_error_steps is not None and r.max_error_steps <= 1.0
    with pytest.raises(QdqError, match=r"'cat' \(CONCATENATION\).*--strict"):
        api.convert_qdq(path, strict=True)


def _softmax(path: Path, opset: int, axis: int, shape: list[int]) -> Path:
    qx, px = _q("x", 0.05, 0)
    inits = {**px, "y_s": np.float32(1 / 256), "y_z": np.int8(-128)}
    sm = helper.make_node("QLinearSoftmax", ["x_q", "x_s", "x_z", "y_s", "y_z"], ["y_q"], name="softmax",
                          domain=MS, opset=opset, axis=axis)
    return _save(path, [qx, sm, _dq("y", "y_s", "y_z")], {"x": shape}, ("y", shape), inits)


def test_qlinear_softmax_over_the_last_axis_converts_in_either_opset(tmp_path):
    for opset, axis in ((13, -1), (12, 1)):   # opset 12, axis 1 of a 2-D input: the last axis
        path = _softmax(tmp_path / f"softmax{opset}.onnx", opset, axis, [3, 10])
        conv, _ = _compare(path, _rng_inputs({"x": (3, 10)}), 1.0, strict=True)
        assert conv.repairs == [] and any(op.opdef is qnn.SOFTMAX for op in conv.module.main.ops)


def test_qlinear_softmax_before_opset_13_over_a_middle_axis_is_refused(tmp_path):
    path = _softmax(tmp_path / "softmax12.onnx", 12, 1, [2, 3, 4])
    _ort(path, _rng_inputs({"x": (2, 3, 4)}))   # a valid model ONNX Runtime runs (over dims 1 and 2 together)
    with pytest.raises(UnsupportedOpError, match=r"'softmax' \(com.microsoft.QLinearSoftmax\).*opset 12.*"
                                                 r"axis 1 together.*last axis"):
        api.convert_qdq(path)


def test_integer_pad_maxpool_reshape_pass_through_exactly(tmp_path):
    qx, px = _q("x", 0.04, -6)
    # ONNX Runtime's QOperator Pad pads with the zero point (0.0): quantir's LiteRT PAD does the same
    inits = {**px, "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pad_value": np.int8(-6),
             "shape": np.array([1, 2, 16], np.int64)}
    nodes = [qx,
             helper.make_node("Pad", ["x_q", "pads", "pad_value"], ["p_q"], name="pad"),
             helper.make_node("MaxPool", ["p_q"], ["m_q"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["m_q", "shape"], ["r_q"], name="reshape"),
             helper.make_node("QLinearConcat", ["x_s", "x_z", "r_q", "x_s", "x_z", "r_q", "x_s", "x_z"], ["y_q"],
                              name="cat", domain=MS, axis=2),
             _dq("y", "x_s", "x_z")]
    path = _save(tmp_path / "pass.onnx", nodes, {"x": [1, 2, 6, 6]}, ("y", [1, 2, 32]), inits)
    x = _rng_inputs({"x": (1, 2, 6, 6)}, -5.0, 3.0)   # negative rows next to the pad: it wins the max there
    conv, diff = _compare(path, x, 0.0, out_scale="x_s", strict=True)
    assert diff == 0 and conv.repairs == [] and conv.annotation.float_ops == []
    names = [op.name for op in conv.module.main.ops if op.opdef is not arith.CONSTANT]
    assert names == ["quant.qcast", "qnn.pad", "qnn.max_pool", "nn.reshape", "qnn.concat", "quant.dcast",
                     "func.return"], names


# -- refusals ---------------------------------------------------------------------------------------

def test_unknown_qlinear_op_is_refused_naming_the_node(tmp_path):
    qx, px = _q("x", 0.05, 0)
    node = helper.make_node("QLinearFrobnicate", ["x_q", "x_s", "x_z", "x_s", "x_z"], ["y_q"], name="frob",
                            domain=MS)
    model = helper.make_model(helper.make_graph(
        [qx, node, _dq("y", "x_s", "x_z")], "frob", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in px.items()]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    with pytest.raises(UnsupportedOpError, match=r"node 'frob' \(com.microsoft.QLinearFrobnicate\): a quantized op "
                                                 r"with no QDQ rewrite"):
        api.convert_qdq(model)


@pytest.fixture(scope="module")
def dynamic(tmp_path_factory) -> Path:
    """ONNX Runtime's quantize_dynamic of a float MatMul + Add: DynamicQuantizeLinear, MatMulInteger."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    d = tmp_path_factory.mktemp("dyn")
    rng = np.random.default_rng(3)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Add", ["m", "b"], ["y"])],
        "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [numpy_helper.from_array(rng.normal(size=(16, 8)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.normal(size=8).astype(np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(d / "float.onnx"))
    quantize_dynamic(str(d / "float.onnx"), str(d / "dyn.onnx"), weight_type=QuantType.QInt8)
    return d / "dyn.onnx"


def _first_dynamic_node(path: Path) -> onnx.NodeProto:
    return next(n for n in onnx.load(str(path)).graph.node
                if n.op_type in ("DynamicQuantizeLinear", "MatMulInteger", "ConvInteger"))


def test_dynamic_quantization_is_refused_naming_the_node(dynamic):
    node = _first_dynamic_node(dynamic)
    assert {n.op_type for n in onnx.load(str(dynamic)).graph.node} >= {"DynamicQuantizeLinear", "MatMulInteger"}
    with pytest.raises(UnsupportedOpError, match=rf"node '{node.name}' \({node.op_type}\).*dynamic quantization"):
        api.convert_qdq(dynamic)


def test_cli_refuses_dynamic_quantization_in_one_line_writing_nothing(dynamic, tmp_path):
    node = _first_dynamic_node(dynamic)
    before = dynamic.read_bytes()
    r = quantir("convert", dynamic, "-o", tmp_path / "dyn.tflite")
    assert r.returncode == 1
    assert_one_line_error(r, f"node '{node.name}' ({node.op_type})", "dynamic quantization", str(dynamic))
    assert not (tmp_path / "dyn.tflite").exists() and list(tmp_path.iterdir()) == []
    assert dynamic.read_bytes() == before


def test_loading_without_qdq_says_how_to_read_the_model(qop):
    """quantir.load of a QOperator model (its QLinear ops are not float ops) names the node and
    points at the conversion that reads it."""
    with pytest.raises(UnsupportedOpError, match=r"QLinear\w+.*quantized already \(QOperator\).*quantir "
                                                 r"convert MODEL\.onnx -o OUT\.tflite.*qdq=True"):
        api.load(qop)
