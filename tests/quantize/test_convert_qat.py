"""A QAT model from PyTorch (torch.ao eager, exported to ONNX QDQ by scripts/train_fashion_qat.py as
models/fashion_qat_qdq.onnx) converted to an integer .tflite with its own parameters: the file's
integers and scales, bit-exact in LiteRT's reference kernels, top-1 against ONNX Runtime running the
QDQ model. What QAT's export adds over ONNX Runtime's quantize_static: float weights behind a
QuantizeLinear, float biases, uint8 activations, int8 weights at -128, and no pair after MaxPool and
Flatten (they run on the quantized tensor and keep its parameters)."""
from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from quantir import api  # noqa: E402
from quantir.ir.dialects import arith, quant  # noqa: E402
from quantir.quantize.from_qdq import QdqError  # noqa: E402
from quantir.runtime import run  # noqa: E402
from quantir.types import UniformQuantizedType  # noqa: E402

from ..cli.test_run_show import REPO, assert_one_line_error, quantir  # noqa: E402

fm = pytest.importorskip("quantir.datasets.fashion_mnist")
QAT = REPO / "models" / "fashion_qat_qdq.onnx"
needs_data = pytest.mark.skipif(not fm.is_available(), reason="Fashion-MNIST is not installed (make data)")


@pytest.fixture(scope="module")
def converted():
    return api.convert_qdq(QAT)


@pytest.fixture(scope="module")
def graph():
    return onnx.load(str(QAT)).graph


def _init(graph) -> dict[str, np.ndarray]:
    """Initializers, and Identity outputs of them (the exporter shares zero points through Identity)."""
    arrays = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for n in graph.node:
        if n.op_type == "Identity" and n.input[0] in arrays:
            arrays[n.output[0]] = arrays[n.input[0]]
    return arrays


def _quantize_linear(x: np.ndarray, scale: np.ndarray, zp: np.ndarray) -> np.ndarray:
    """ONNX QuantizeLinear, per tensor: saturate(round_half_even(x / scale) + zp)."""
    info = np.iinfo(zp.dtype)
    return np.clip(np.rint(x / np.float32(scale.reshape(()))) + int(zp.reshape(())), info.min, info.max)


def _stored_int8(fn) -> list[np.ndarray]:
    return [np.asarray(op.operands[0].op.attr("value").array) for op in fn.ops
            if op.opdef is quant.SCAST and op.operands[0].op.opdef is arith.CONSTANT
            and str(op.operands[0].op.attr("value").array.dtype) == "int8"]


def test_the_qat_export_has_what_the_conversion_must_handle(graph):
    ops = [n.op_type for n in graph.node]
    assert ops.count("QuantizeLinear") == ops.count("DequantizeLinear") == 7
    init = _init(graph)
    zps = [init[n.input[2]] for n in graph.node if n.op_type == "QuantizeLinear"]
    assert {z.dtype for z in zps} == {np.dtype(np.uint8), np.dtype(np.int8)}   # activations uint8, weights int8
    float_weights = [n.input[0] for n in graph.node if n.op_type == "QuantizeLinear" and n.input[0] in init]
    assert len(float_weights) == 3   # weights stored float, quantized by a QuantizeLinear in the graph
    pooled = {n.output[0] for n in graph.node if n.op_type in ("MaxPool", "Flatten")}
    assert not pooled & {n.input[0] for n in graph.node if n.op_type == "QuantizeLinear"}


def test_converts_fully_integer_with_the_files_weights(graph, converted):
    text = converted.summary()
    assert "left float: 0" in text and "LiteRT int8 spec check: 0 violations" in text
    init = _init(graph)
    want = []   # what the file's QuantizeLinear makes of each float weight, -128 clipped to -127
    for n in graph.node:
        if n.op_type == "QuantizeLinear" and n.input[0] in init:
            q = _quantize_linear(init[n.input[0]], init[n.input[1]], init[n.input[2]])
            want.append(np.maximum(q, -127).astype(np.int8))
    got = _stored_int8(converted.module.main)
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):   # in the file's order and layout (OIHW, [out, in])
        assert g.shape == w.shape and np.array_equal(g, w)
    clipped = [r for r in converted.repairs if "weights at -128" in r.problem]
    assert len(clipped) == 3 and all(r.max_error_steps is not None and r.max_error_steps <= 1 for r in clipped)


def test_activation_parameters_are_the_files_and_pools_keep_their_inputs(graph, converted):
    init = _init(graph)
    given = {n.input[0]: (np.float32(init[n.input[1]].reshape(())), int(init[n.input[2]].reshape(())) - 128)
             for n in graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in init}
    by_name = {}   # the integer module's types, by the file's tensor names
    for op in converted.module.main.ops:
        for v in op.results:
            t = getattr(v.type, "element_type", None)
            if isinstance(t, UniformQuantizedType) and v.name_hint:
                by_name[v.name_hint.removesuffix("__q")] = (np.float32(t.scale), t.zero_point)
    for name, file_name in (("/conv1/Relu_output_0",) * 2, ("/conv2/Relu_output_0",) * 2,
                            ("logits", "/fc/Gemm_output_0")):
        assert by_name[name] == given[file_name], name
    assert by_name["/pool/MaxPool_output_0"] == given["/conv1/Relu_output_0"]
    assert by_name["/pool_1/MaxPool_output_0"] == by_name["/Flatten_output_0"] == given["/conv2/Relu_output_0"]
    carried = [r for r in converted.repairs if "after quantized" in r.problem]
    assert sorted(r.kind for r in carried) == ["MAX_POOL_2D", "MAX_POOL_2D", "RESHAPE"]


@needs_data
def test_carried_parameters_hold_onnx_runtimes_pooled_tensors_exactly(graph, converted):
    """The claim behind carrying a quantized input's parameters through MaxPool/Flatten: ONNX Runtime's
    float output there is on that grid, inside the int8 range."""
    model = onnx.load(str(QAT))
    names = ["/pool/MaxPool_output_0", "/Flatten_output_0"]
    model.graph.output.extend([helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names])
    xte, _ = fm.load_fashion_mnist("test")
    outs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        names, {"input": fm.to_model_input(xte[:200])})
    params = {v.name_hint: p for v, p in converted.params.items() if hasattr(v, "name_hint") and hasattr(p, "scale")}
    for name, y in zip(names, outs):
        p = params[name]
        q = np.rint(y.astype(np.float64) / np.float32(p.scale)) + p.zero_point
        assert q.min() >= -128 and q.max() <= 127, name
        # every value is some int8 step dequantized as DequantizeLinear computes it, bit for bit
        assert np.array_equal((q - p.zero_point).astype(np.float32) * np.float32(p.scale), y), name


def test_strict_refuses_the_weights_at_minus_128(tmp_path):
    with pytest.raises(QdqError, match=r"'/conv1/weight_fake_quant/DequantizeLinear'.*-128.*--strict"):
        api.convert_qdq(QAT, strict=True)


def _pool_model(pool: str) -> onnx.ModelProto:
    """x -> Q/DQ (uint8) -> {pool} -> Conv (float weights behind QuantizeLinear) -> Q/DQ -> y."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(np.array([0.02], np.float32), "s"),
             numpy_helper.from_array(np.array([100], np.uint8), "z"),
             numpy_helper.from_array(np.array([0.01], np.float32), "sw"),
             numpy_helper.from_array(np.array([0], np.int8), "zw"),
             numpy_helper.from_array(rng.uniform(-1, 1, (4, 2, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.uniform(-1, 1, 4).astype(np.float32), "b"),
             numpy_helper.from_array(np.array([0.05], np.float32), "so")]
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node(pool, ["xd"], ["p"], name="pool", **attrs),
             helper.make_node("QuantizeLinear", ["w", "sw", "zw"], ["wq"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"]),
             helper.make_node("Conv", ["p", "wd", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "so", "z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "so", "z"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_max_pool_carries_its_inputs_parameters_and_average_pool_stays_float():
    mx = api.convert_qdq(_pool_model("MaxPool"))
    assert "left float: 0" in mx.summary()
    (carried,) = mx.repairs
    assert carried.kind == "MAX_POOL_2D" and carried.max_error_steps == 0   # measured against ONNX Runtime
    x = np.random.default_rng(1).uniform(-2, 2, (1, 2, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(_pool_model("MaxPool").SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = run(mx.module.main, {"x": x})["y"]
    assert np.abs(got - want).max() <= 0.05 + 1e-6   # one output step at most
    # averaging leaves the grid: the model's float there is not representable, so it is not guessed
    avg = api.convert_qdq(_pool_model("AveragePool"))
    assert not any("after quantized" in r.problem for r in avg.repairs)
    assert "pool (nn.average_pool): the model leaves 'p' float" in avg.summary()


# -- the .tflite: check, verify, top-1 in LiteRT ------------------------------------------------------

litert = pytest.importorskip("quantir.backends.tflite.litert")
needs_litert = pytest.mark.skipif(not litert.litert_available(), reason="LiteRT (ai-edge-litert) is not installed")


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    if not fm.is_available():
        pytest.skip("Fashion-MNIST is not installed (make data)")
    d = tmp_path_factory.mktemp("qat")
    xte, _ = fm.load_fashion_mnist("test")
    np.savez(d / "test.npz", input=fm.to_model_input(xte[:100]))
    r = quantir("convert", QAT, "-o", d / "qat.tflite", "--inputs", d / "test.npz")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "left float: 0" in r.stdout and "errors measured on 100 given samples" in r.stdout
    return d


@pytest.mark.oracle
@needs_litert
def test_cli_tflite_passes_check_and_is_bit_exact_in_litert_reference(work):
    r = quantir("check", work / "qat.tflite")
    assert r.returncode == 0 and ", 0 violations" in r.stdout, r.stdout + r.stderr
    r = quantir("verify", work / "qat.tflite", "--inputs", work / "test.npz", "--json", work / "verify.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "output logits [100, 10]: 0 differing elements" in r.stdout and "bit-exact" in r.stdout
    report = json.loads((work / "verify.json").read_text())
    assert report["bit_exact"] and len(report["intermediates"]) >= 8
    assert all(t["differing"] == 0 for t in report["outputs"] + report["intermediates"])


@pytest.mark.oracle
@needs_litert
def test_cli_strict_refuses_with_one_line(work):
    r = quantir("convert", QAT, "-o", work / "strict.tflite", "--strict")
    assert_one_line_error(r, "'/conv1/weight_fake_quant/DequantizeLinear'", "--strict refuses")
    assert not (work / "strict.tflite").exists()


def _top1(work, n: int) -> tuple[float, float, float]:
    """Top-1 (%) of the .tflite in LiteRT BUILTIN_REF and of ONNX Runtime on the QDQ file, first ``n``
    test images, and their agreement."""
    xte, yte = fm.load_fashion_mnist("test")
    x, y = fm.to_model_input(xte[:n]), yte[:n]
    blob = (work / "qat.tflite").read_bytes()
    p_lite = np.concatenate([litert.run_model(blob, [x[i:i + 1000]])[0].argmax(1) for i in range(0, n, 1000)])
    session = ort.InferenceSession(str(QAT), providers=["CPUExecutionProvider"])
    p_ort = np.concatenate([session.run(None, {"input": x[i:i + 1000]})[0].argmax(1) for i in range(0, n, 1000)])
    return (p_lite == y).mean() * 100, (p_ort == y).mean() * 100, (p_lite == p_ort).mean() * 100


@pytest.mark.oracle
@needs_litert
def test_top1_in_litert_within_half_a_point_of_onnx_runtime_on_1000_images(work):
    lite, ref, agree = _top1(work, 1000)
    assert abs(lite - ref) <= 0.5 and agree >= 99.0, (lite, ref, agree)
    assert lite >= 85.0   # a trained classifier, not a constant one


@pytest.mark.slow
@pytest.mark.oracle
@needs_litert
def test_top1_in_litert_within_0_1_point_of_onnx_runtime_on_10000_images(work):
    lite, ref, agree = _top1(work, 10000)
    assert abs(lite - ref) <= 0.1, (lite, ref, agree)
    meta = json.loads(QAT.with_suffix(".json").read_text())   # the provenance states what ONNX Runtime measures
    assert round(ref / 100, 4) == meta["qdq_onnxruntime_test_top1"]
