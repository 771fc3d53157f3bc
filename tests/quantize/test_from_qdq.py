"""Pre-quantized ONNX QDQ models to the integer module with the model's own parameters
(quantize.from_qdq, quantir.convert_qdq): ONNX Runtime's own quantize_static output of the
Fashion-MNIST CNN, and small hand-built QDQ graphs for each repair and each refusal."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from quantir import api  # noqa: E402
from quantir.errors import QuantirError  # noqa: E402
from quantir.ir.dialects import arith, qnn, quant  # noqa: E402
from quantir.quantize.from_qdq import QdqError  # noqa: E402
from quantir.runtime import run  # noqa: E402
from quantir.text import print_module  # noqa: E402

fm = pytest.importorskip("quantir.datasets.fashion_mnist")
REPO = Path(__file__).resolve().parents[2]
CNN = REPO / "models" / "fashion_mnist_cnn.onnx"
needs_data = pytest.mark.skipif(not fm.is_available(), reason="Fashion-MNIST is not installed (make data)")


def ort_quantize_static(path: Path, activations: str = "int8", per_channel: bool = True, n: int = 100,
                        weights: str = "int8", quant_format: str = "QDQ") -> Path:
    """ONNX Runtime's quantize_static of the Fashion-MNIST CNN (QDQ or QOperator, int8 weights)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    xtr, _ = fm.load_fashion_mnist("train")
    x = fm.to_model_input(xtr[:n])

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"input": x[i:i + 1]} for i in range(n)])

        def get_next(self):
            return next(self.it, None)
    act = QuantType.QInt8 if activations == "int8" else QuantType.QUInt8
    quantize_static(str(CNN), str(path), Reader(), quant_format=QuantFormat[quant_format], activation_type=act,
                    weight_type=QuantType.QInt8 if weights == "int8" else QuantType.QUInt8, per_channel=per_channel)
    return path


@pytest.fixture(scope="module")
def cnn_qdq(tmp_path_factory):
    if not fm.is_available():
        pytest.skip("Fashion-MNIST is not installed (make data)")
    return ort_quantize_static(tmp_path_factory.mktemp("qdq") / "cnn_qdq.onnx")


@pytest.fixture(scope="module")
def converted(cnn_qdq):
    return api.convert_qdq(cnn_qdq)


def _initializers(path: Path) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}


def _stored(fn, storage: str) -> list[np.ndarray]:
    """The integer constants of the module behind quant.scast of ``storage`` (i8 weights, i32 bias)."""
    out = []
    for op in fn.ops:
        if op.opdef is quant.SCAST and op.operands[0].op.opdef is arith.CONSTANT:
            a = op.operands[0].op.attr("value").array
            if str(a.dtype) == storage:
                out.append(np.asarray(a))
    return out


# -- ONNX Runtime's quantize_static output ------------------------------------------------------

def test_weights_and_biases_are_the_files_integers(cnn_qdq, converted):
    init = _initializers(cnn_qdq)
    file_w = [a for n, a in init.items() if n.endswith("_quantized") and a.dtype == np.int8]
    file_b = [a for n, a in init.items() if n.endswith("_quantized") and a.dtype == np.int32]
    mod_w, mod_b = _stored(converted.module.main, "int8"), _stored(converted.module.main, "int32")
    assert len(file_w) == len(mod_w) == 13 and len(file_b) == len(mod_b) == 13
    unmatched = list(mod_w)
    for w in file_w:   # each file weight appears once, bit for bit, in the converted module
        hit = next(i for i, m in enumerate(unmatched) if m.shape == w.shape and np.array_equal(m, w))
        unmatched.pop(hit)
    assert sorted(b.tobytes() for b in file_b) == sorted(b.tobytes() for b in mod_b)


def test_activation_parameters_are_the_files(cnn_qdq, converted):
    init = _initializers(cnn_qdq)
    graph = onnx.load(str(cnn_qdq)).graph
    given = {}   # tensor quantized -> (scale, zp), from each QuantizeLinear
    for n in graph.node:
        if n.op_type == "QuantizeLinear":
            given[n.input[0]] = (float(init[n.input[1]]), int(init[n.input[2]]))
    seen = 0
    for op in converted.module.main.ops:
        if op.name.startswith("qnn.") and op.opdef is not qnn.REQUANTIZE:
            name = op.results[0].name_hint.removesuffix("__q")
            t = op.results[0].type.element_type
            if op.opdef is qnn.SOFTMAX:   # the one repair of this model's outputs: LiteRT's fixed 1/256
                assert (t.scale, t.zero_point) == (1 / 256, -128) and given["probs_QuantizeLinear_Input"][0] != 1 / 256
                continue
            assert (np.float32(t.scale), t.zero_point) == (np.float32(given[name][0]), given[name][1]), name
            seen += 1
    assert seen == 22


def test_repairs_of_ort_output_are_listed_and_measured(converted):
    kinds = sorted(r.kind for r in converted.repairs)
    assert kinds == ["CONCATENATION", "SOFTMAX"]
    softmax = next(r for r in converted.repairs if r.kind == "SOFTMAX")
    assert "0.00392157" in softmax.problem and "0.00390625" in softmax.problem
    assert all(r.max_error_steps is not None and r.max_error_steps < 16 for r in converted.repairs)
    text = converted.summary()
    assert "repairs (least changes for LiteRT's int8 kernels): 2" in text
    assert "LiteRT int8 spec check: 0 violations" in text and "left float: 0" in text
    # the requantize after the softmax brings the output back to the model's 1/255
    ops = converted.module.main.ops
    i = next(k for k, op in enumerate(ops) if op.opdef is qnn.SOFTMAX)
    assert ops[i + 1].opdef is qnn.REQUANTIZE
    assert np.isclose(ops[i + 1].results[0].type.element_type.scale, 1 / 255)


def test_strict_refuses_naming_the_node(cnn_qdq):
    with pytest.raises(QdqError, match=r"'/net/Concat' \(CONCATENATION\).*--strict"):
        api.convert_qdq(cnn_qdq, strict=True)


@needs_data
def test_uint8_activations_become_the_same_int8_module(tmp_path, converted):
    u8 = api.convert_qdq(ort_quantize_static(tmp_path / "u8.onnx", "uint8"))
    assert print_module(u8.module) == print_module(converted.module)


@needs_data
def test_top1_agrees_with_onnx_runtime_on_300_images(cnn_qdq, converted):
    xte, yte = fm.load_fashion_mnist("test")
    x = fm.to_model_input(xte[:300])
    session = ort.InferenceSession(str(cnn_qdq), providers=["CPUExecutionProvider"])
    p_ort = session.run(None, {"input": x})[0].argmax(1)
    p_q = run(converted.module.main, {"input": x})["probs"].argmax(1)
    assert (p_ort == p_q).mean() >= 0.99
    assert abs((p_ort == yte[:300]).sum() - (p_q == yte[:300]).sum()) <= 2


@pytest.mark.slow
@needs_data
def test_top1_on_10000_images_within_0_1_point_of_onnx_runtime(cnn_qdq, converted):
    xte, yte = fm.load_fashion_mnist("test")
    x = fm.to_model_input(xte)
    session = ort.InferenceSession(str(cnn_qdq), providers=["CPUExecutionProvider"])
    p_ort = np.concatenate([session.run(None, {"input": x[i:i + 1000]})[0] for i in range(0, 10000, 1000)])
    p_q = np.concatenate([run(converted.module.main, {"input": x[i:i + 1000]})["probs"]
                          for i in range(0, 10000, 1000)])
    acc_ort, acc_q = (p_ort.argmax(1) == yte).mean() * 100, (p_q.argmax(1) == yte).mean() * 100
    assert abs(acc_ort - acc_q) <= 0.1, (acc_ort, acc_q)


# -- hand-built QDQ graphs: each repair, each refusal ---------------------------------------------

def _qdq_model(path: Path, *, pool_scale: float = 0.05, w_zp: int = 0, bias_scale: float | None = None,
               w_scale: np.ndarray | None = None, w_dtype=TensorProto.INT8, block_size: int | None = None) -> Path:
    """x -> Q/DQ -> Conv (int8 per-channel weights, int32 bias) -> Q/DQ (0.05, -10) -> MaxPool -> Q/DQ
    (pool_scale, -10) -> y. The knobs break one rule each."""
    rng = np.random.default_rng(0)
    s_in, s_out = np.float32(0.02), np.float32(0.05)
    w_scale = np.asarray([0.01, 0.02, 0.015], np.float32) if w_scale is None else w_scale
    wq = rng.integers(-127, 128, size=(3, 2, 3, 3)).astype(np.int8)
    per_channel = w_scale.reshape(3, -1)[:, 0]   # a blocked scale's first block stands for its channel
    b_scale = (s_in * per_channel).astype(np.float32) if bias_scale is None else np.full(3, bias_scale, np.float32)
    bq = rng.integers(-500, 500, size=3).astype(np.int32)
    w_tensor = numpy_helper.from_array(wq, "w_q")
    if w_dtype == TensorProto.INT4:
        w_tensor = helper.make_tensor("w_q", TensorProto.INT4, wq.shape, np.clip(wq, -8, 7).ravel().tolist())
    inits = [
        numpy_helper.from_array(np.array(s_in), "s_in"), numpy_helper.from_array(np.array(5, np.int8), "z_in"),
        numpy_helper.from_array(np.array(s_out), "s_out"), numpy_helper.from_array(np.array(-10, np.int8), "z_out"),
        numpy_helper.from_array(np.array(np.float32(pool_scale)), "s_pool"),
        numpy_helper.from_array(np.array(-10, np.int8), "z_pool"),
        w_tensor, numpy_helper.from_array(w_scale, "w_s"),
        numpy_helper.from_array(np.full(w_scale.shape, w_zp, np.int8), "w_z"),
        numpy_helper.from_array(bq, "b_q"), numpy_helper.from_array(b_scale, "b_s"),
        numpy_helper.from_array(np.zeros(3, np.int32), "b_z"),
    ]
    w_inputs = ["w_q", "w_s"] if w_dtype == TensorProto.INT4 else ["w_q", "w_s", "w_z"]
    w_attrs = {"axis": 0} if block_size is None else {"axis": 1, "block_size": block_size}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s_in", "z_in"], ["x_q"], name="q_x"),
        helper.make_node("DequantizeLinear", ["x_q", "s_in", "z_in"], ["x_dq"], name="dq_x"),
        helper.make_node("DequantizeLinear", w_inputs, ["w"], name="dq_w", **w_attrs),
        helper.make_node("DequantizeLinear", ["b_q", "b_s", "b_z"], ["b"], name="dq_b", axis=0),
        helper.make_node("Conv", ["x_dq", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["c", "s_out", "z_out"], ["c_q"], name="q_c"),
        helper.make_node("DequantizeLinear", ["c_q", "s_out", "z_out"], ["c_dq"], name="dq_c"),
        helper.make_node("MaxPool", ["c_dq"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("QuantizeLinear", ["p", "s_pool", "z_pool"], ["p_q"], name="q_p"),
        helper.make_node("DequantizeLinear", ["p_q", "s_pool", "z_pool"], ["y"], name="dq_p"),
    ]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


def _repairs(path: Path, **kw):
    c = api.convert_qdq(path, **kw)
    return c, {r.kind: r for r in c.repairs}


def test_consistent_small_model_converts_exactly_without_repairs(tmp_path):
    path = _qdq_model(tmp_path / "ok.onnx")
    c, repairs = _repairs(path)
    assert repairs == {} and c.spec_violations == []
    x = np.random.default_rng(1).uniform(-2, 2, (1, 2, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = run(c.module.main, {"x": x})["y"]
    assert np.abs(got - want).max() <= 0.05 * 1.001   # at most one step of the output (rounding)


def test_same_scale_op_with_another_input_scale_is_requantized(tmp_path):
    c, repairs = _repairs(_qdq_model(tmp_path / "pool.onnx", pool_scale=0.04))
    r = repairs["MAX_POOL_2D"]
    assert r.node == "pool" and "keeps one scale" in r.problem and r.max_error_steps is not None
    assert r.max_error_steps <= 1.0   # one rounding of a requantize: at most one step from ONNX Runtime
    assert c.spec_violations == []
    ops = c.module.main.ops
    i = next(k for k, op in enumerate(ops) if op.opdef is qnn.MAX_POOL)
    assert ops[i - 1].opdef is qnn.REQUANTIZE   # before the pool: LiteRT's MAX_POOL keeps one scale
    with pytest.raises(QdqError, match=r"'pool' \(MAX_POOL_2D\).*--strict"):
        api.convert_qdq(tmp_path / "pool.onnx", strict=True)


def test_asymmetric_weights_are_rerounded_and_listed(tmp_path):
    c, repairs = _repairs(_qdq_model(tmp_path / "asym.onnx", w_zp=3))
    assert "asymmetric int8 weights" in repairs["CONV_2D"].problem and repairs["CONV_2D"].node == "dq_w"
    assert c.spec_violations == []
    with pytest.raises(QdqError, match=r"'dq_w'.*asymmetric"):
        api.convert_qdq(tmp_path / "asym.onnx", strict=True)


def test_bias_at_another_scale_is_requantized_and_listed(tmp_path):
    c, repairs = _repairs(_qdq_model(tmp_path / "bias.onnx", bias_scale=1e-4))
    assert "bias scale 0.0001 is not input scale x weight scale" in repairs["CONV_2D"].problem
    assert c.spec_violations == []
    with pytest.raises(QdqError, match=r"'dq_b'.*--strict"):
        api.convert_qdq(tmp_path / "bias.onnx", strict=True)


def test_zero_scale_is_a_clear_error(tmp_path):
    path = _qdq_model(tmp_path / "zero.onnx", w_scale=np.asarray([0.01, 0.0, 0.015], np.float32))
    with pytest.raises(QuantirError, match=r"scale.*(finite and positive|corrupt)"):
        api.convert_qdq(path)


def test_int4_weight_with_a_blocked_scale_and_no_block_size_is_a_clear_error(tmp_path):
    path = _qdq_model(tmp_path / "int4.onnx", w_dtype=TensorProto.INT4,
                      w_scale=np.full((3, 1, 3, 3), 0.01, np.float32))
    with pytest.raises(QuantirError, match=r"'dq_w'.*scale of shape \(3, 1, 3, 3\).*blocked"):
        api.convert_qdq(path)


def test_a_module_is_refused(converted):
    with pytest.raises(QuantirError, match="reads the ONNX file"):
        api.convert_qdq(converted.module)


def test_int4_per_channel_weights_widen_to_int8_exactly(tmp_path):
    path = _qdq_model(tmp_path / "int4_ok.onnx", w_dtype=TensorProto.INT4)
    c = api.convert_qdq(path)
    stored = numpy_helper.to_array(next(i for i in onnx.load(str(path)).graph.initializer if i.name == "w_q"))
    (w,) = _stored(c.module.main, "int8")
    assert c.repairs == [] and np.array_equal(w, stored.astype(np.int8))


def test_an_op_left_float_before_a_same_scale_op_takes_its_parameters(tmp_path):
    # ONNX Runtime leaves ReduceMean float before a quantized Reshape (EfficientNet-Lite0's head)
    inits = [numpy_helper.from_array(np.array(np.float32(0.03)), "s"),
             numpy_helper.from_array(np.array(-20, np.int8), "z"),
             numpy_helper.from_array(np.array(np.float32(0.01)), "s2"),
             numpy_helper.from_array(np.array(3, np.int8), "z2"),
             numpy_helper.from_array(np.array([1, 4], np.int64), "shape"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "axes")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["x_q"]),
             helper.make_node("DequantizeLinear", ["x_q", "s", "z"], ["x_dq"]),
             helper.make_node("ReduceMean", ["x_dq", "axes"], ["m"], name="mean", keepdims=1),
             helper.make_node("Reshape", ["m", "shape"], ["r"], name="reshape"),
             helper.make_node("QuantizeLinear", ["r", "s2", "z2"], ["r_q"]),
             helper.make_node("DequantizeLinear", ["r_q", "s2", "z2"], ["y"])]
    graph = helper.make_graph(nodes, "mean", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    path = tmp_path / "mean.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, str(path))
    c = api.convert_qdq(path)
    (r,) = c.repairs
    assert r.kind == "MEAN" and "same-scale 'reshape'" in r.problem and c.annotation.float_ops == []
    assert r.max_error_steps is not None and r.max_error_steps <= 1.0   # LiteRT's MEAN rounds once more
    mean = next(op for op in c.module.main.ops if op.opdef is qnn.MEAN)
    assert (mean.results[0].type.element_type.scale, mean.results[0].type.element_type.zero_point) == \
        (np.float32(0.01), 3)
    strict = api.convert_qdq(path, strict=True)   # nothing breaks the spec: strict keeps the model's float op
    assert strict.repairs == [] and [op.label for op, _ in strict.annotation.float_ops] == ["mean", "reshape"]


@needs_data
def test_per_tensor_weights_keep_the_files_integers_and_scale(tmp_path):
    path = ort_quantize_static(tmp_path / "per_tensor.onnx", per_channel=False)
    c = api.convert_qdq(path)
    init = _initializers(path)
    file_w = {a.tobytes() for n, a in init.items() if n.endswith("_quantized") and a.dtype == np.int8}
    assert {w.tobytes() for w in _stored(c.module.main, "int8")} == file_w
    convs = [op for op in c.module.main.ops if op.opdef in (qnn.CONV, qnn.FULLY_CONNECTED)]
    assert len(convs) == 13 and all(not hasattr(op.operands[1].type.element_type, "scales") for op in convs)
    assert c.spec_violations == []


def test_load_with_qdq_gives_the_integer_module(cnn_qdq, converted):
    import quantir as qr
    module = qr.load(cnn_qdq, qdq=True)
    assert print_module(module) == print_module(converted.module)
    assert sum(op.opdef is quant.QCAST for op in module.main.ops) == 1


def _unary_model(path: Path, op_type: str, out_scale: float, out_zp: int, dtype=TensorProto.INT8) -> Path:
    """x -> Q/DQ -> op -> Q/DQ (out_scale, out_zp) -> y."""
    np_zp = helper.tensor_dtype_to_np_dtype(dtype)
    inits = [numpy_helper.from_array(np.array(np.float32(0.05)), "s"), numpy_helper.from_array(np.array(2, np_zp), "z"),
             numpy_helper.from_array(np.array(np.float32(out_scale)), "s2"),
             numpy_helper.from_array(np.array(out_zp, np_zp), "z2")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["x_q"]),
             helper.make_node("DequantizeLinear", ["x_q", "s", "z"], ["x_dq"]),
             helper.make_node(op_type, ["x_dq"], ["a"], name="act"),
             helper.make_node("QuantizeLinear", ["a", "s2", "z2"], ["a_q"]),
             helper.make_node("DequantizeLinear", ["a_q", "s2", "z2"], ["y"])]
    graph = helper.make_graph(nodes, "unary", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


def test_logistic_output_at_another_scale_is_emitted_at_litert_fixed_and_requantized(tmp_path):
    path = _unary_model(tmp_path / "sigmoid.onnx", "Sigmoid", 1 / 255, -128)
    c = api.convert_qdq(path)
    (r,) = c.repairs
    assert r.kind == "LOGISTIC" and "LiteRT's LOGISTIC writes (0.00390625, -128)" in r.problem
    assert r.max_error_steps is not None and r.max_error_steps <= 1.5
    x = np.random.default_rng(2).uniform(-6, 6, (2, 16)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = run(c.module.main, {"x": x})["y"]
    assert np.abs(got - want).max() <= 1.5 / 255   # LiteRT's 1/256 grid, requantized to the file's 1/255
    with pytest.raises(QdqError, match=r"'act' \(LOGISTIC\).*--strict"):
        api.convert_qdq(path, strict=True)


def test_int16_activations_are_refused_clearly(tmp_path):
    path = _unary_model(tmp_path / "int16.onnx", "Relu", 0.001, 0, TensorProto.INT16)
    with pytest.raises(QdqError, match=r"int16 activations are not converted yet"):
        api.convert_qdq(path)


@needs_data
def test_uint8_weights_at_zero_are_clipped_one_step_keeping_the_files_scales(tmp_path):
    path = ort_quantize_static(tmp_path / "wu8.onnx", "uint8", weights="uint8")
    c = api.convert_qdq(path)
    init = _initializers(path)
    clipped = [r for r in c.repairs if "clipped to -127" in r.fix]
    assert len(clipped) == 13 and all("uint8 0 with zero point 128" in r.problem for r in clipped)
    assert c.spec_violations == []
    file_w = [a.astype(np.int64) - 128 for n, a in init.items() if n.endswith("_quantized") and a.dtype == np.uint8]
    mod_w = _stored(c.module.main, "int8")
    for w in file_w:   # the file's integers, a -128 (uint8 0) raised to -127 and nothing else changed
        assert any(m.shape == w.shape and np.array_equal(m, np.maximum(w, -127)) for m in mod_w)


@needs_data
def test_save_writes_mlir_and_a_qdq_onnx_that_onnx_runtime_runs(tmp_path, converted):
    from quantir.text import parse_module
    converted.save(tmp_path / "c.mlir")
    assert print_module(parse_module((tmp_path / "c.mlir").read_text())) == print_module(converted.module)
    converted.save(tmp_path / "c.onnx")
    xte, _ = fm.load_fashion_mnist("test")
    x = fm.to_model_input(xte[:100])
    session = ort.InferenceSession(str(tmp_path / "c.onnx"), providers=["CPUExecutionProvider"])
    again = session.run(None, {"input": x})[0]
    assert (again.argmax(1) == run(converted.module.main, {"input": x})["probs"].argmax(1)).mean() >= 0.98
    with pytest.raises(QuantirError, match="unknown output format"):
        converted.save(tmp_path / "c.pb")


def test_block_wise_weights_are_rerounded_per_channel_and_listed(tmp_path):
    path = _qdq_model(tmp_path / "blocked.onnx", w_scale=np.full((3, 1, 3, 3), 0.01, np.float32), block_size=2)
    c, repairs = _repairs(path)
    r = repairs["CONV_2D"]
    assert "block-wise weights (block 2)" in r.problem and "re-rounded" in r.fix and c.spec_violations == []
    assert r.max_error_steps is not None and r.max_error_steps <= 1.0   # one scale per block was one per channel
    with pytest.raises(QdqError, match=r"'dq_w'.*block-wise.*--strict"):
        api.convert_qdq(path, strict=True)


def test_a_conv_whose_weights_the_model_leaves_float_stays_float(tmp_path):
    path = _qdq_model(tmp_path / "float_w.onnx")
    model = onnx.load(str(path))
    dq_w = next(n for n in model.graph.node if n.name == "dq_w")
    w = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "w_q")).astype(np.float32)
    model.graph.node.remove(dq_w)
    model.graph.initializer.append(numpy_helper.from_array(w * np.float32(0.01), "w"))
    onnx.save(model, str(path))
    c = api.convert_qdq(path)
    (conv, why), = [(op, why) for op, why in c.annotation.float_ops]
    assert conv.label == "conv" and "leaves its weights 'w' float" in why
    assert c.spec_violations == [] and any(op.opdef is qnn.MAX_POOL for op in c.module.main.ops)
