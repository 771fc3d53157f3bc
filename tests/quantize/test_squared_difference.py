"""SQUARED_DIFFERENCE end to end: ``(x - m)·(x - m)`` and ``Pow(x - m, 2)`` whose difference nothing else
reads become one LiteRT SQUARED_DIFFERENCE, bit-exact with LiteRT's reference kernels in the .tflite,
within one step in ONNX Runtime's QDQ (exact in QOperator's table); a difference read elsewhere, as in
quantir's own LayerNorm expansion, stays SUB then MUL. TensorFlow's LayerNorm as a hand-built .tflite
(MEAN, SQUARED_DIFFERENCE, MEAN, ADD, RSQRT, SUB, MUL) imports and verifies bit-exact."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.backends.tflite.reader import read_model
from quantir.frontends.tflite import import_tflite
from quantir.numerics import asymmetric_qparams
from quantir.runtime import run

RNG = np.random.default_rng(15)
X = (RNG.normal(size=(192, 6, 16)) * 2 + RNG.normal(size=(192, 6, 1))).astype(np.float32)
M = RNG.normal(size=(192, 6, 1)).astype(np.float32)


def _square(form: str) -> tuple[list, list]:
    if form == "mul":
        return [helper.make_node("Mul", ["d", "d"], ["sq"])], []
    exponent = {"pow": 2.0, "pow3": 3.0}[form]
    return [helper.make_node("Pow", ["d", "e"], ["sq"])], [numpy_helper.from_array(np.array(exponent, np.float32), "e")]


def _save(tmp_path, form: str, mean_input: bool = False, extra_reader: bool = False) -> str:
    """``sq = (x - m)²`` and ``var = mean(sq)`` over the last axis; ``m`` is the row mean, or a second
    input when ``mean_input`` (so the op reads graph inputs directly); ``extra_reader`` also outputs
    ``d + sq``, a second reader of the difference."""
    nodes = [] if mean_input else [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1], keepdims=1)]
    nodes.append(helper.make_node("Sub", ["x", "m"], ["d"]))
    square, inits = _square(form)
    nodes += square + [helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1], keepdims=1)]
    outputs = [helper.make_tensor_value_info("sq", TensorProto.FLOAT, [None, 6, 16]),
               helper.make_tensor_value_info("var", TensorProto.FLOAT, [None, 6, 1])]
    if extra_reader:
        nodes.append(helper.make_node("Add", ["d", "sq"], ["other"]))
        outputs.append(helper.make_tensor_value_info("other", TensorProto.FLOAT, [None, 6, 16]))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 6, 16])]
    if mean_input:
        inputs.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, [None, 6, 1]))
    path = str(tmp_path / f"{form}.onnx")
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _feeds(mean_input: bool) -> dict:
    return {"x": X, "m": M} if mean_input else {"x": X}


def _quantize(tmp_path, form, mean_input=False, extra_reader=False):
    path = _save(tmp_path, form, mean_input, extra_reader)
    return qr.quantize(path, _feeds(mean_input), qr.Config(progress=False)), path


def _op(r, name):
    (op,) = [op for op in r.module.main.ops if op.name == name]
    return op


def _scale(v) -> float:
    return float(v.type.element_type.scale)


@pytest.mark.parametrize("form", ["mul", "pow"])
def test_the_square_of_a_difference_read_once_becomes_one_squared_difference(tmp_path, form):
    r, path = _quantize(tmp_path, form)
    assert [op.name for op in r.module.main.ops if op.name.startswith("qnn.")] == [
        "qnn.mean", "qnn.squared_difference", "qnn.mean"]
    assert r.spec_report().ok


@pytest.mark.parametrize("form", ["mul", "pow"])
def test_the_integer_square_is_within_its_rounding_bound_of_float(tmp_path, form):
    path = _save(tmp_path, form)
    r = qr.quantize(path, {"x": X}, qr.Config(method="minmax", progress=False))   # no clipped range
    sd = _op(r, "qnn.squared_difference")
    s_x, s_mean, s_out = (_scale(v) for v in (sd.operands[0], sd.operands[1], sd.results[0]))
    ours = run(r.module, {"x": X})["sq"]
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(["sq"], {"x": X})[0]
    # the difference is off by x's rounding (half a step), the mean's (its own half step plus the mean
    # of x's roundings) and the kernel's rescaling of the finer input to max(s)/128; squaring multiplies
    # that by at most 2|d| + error; the output rounds once more (half a step)
    err = s_x + 0.5 * s_mean + max(s_x, s_mean) / 128
    d = np.abs(X - X.mean(axis=-1, keepdims=True))
    assert np.all(np.abs(ours - expected) <= (2 * d + err) * err + 0.5 * s_out + 1e-5)


@pytest.mark.parametrize("form", ["mul", "pow"])
def test_tflite_is_bit_exact_with_litert_and_reads_back(tmp_path, form):
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    r, _ = _quantize(tmp_path, form)
    r.save(tmp_path / "m.tflite")
    report = verify_tflite(tmp_path / "m.tflite", {"x": X[:64]})   # every tensor
    assert report.ok, report.text()
    assert len(report.intermediates) >= 3   # the means and the square compared too, not only the outputs
    back = import_tflite(read_model((tmp_path / "m.tflite").read_bytes(), "m.tflite")).module
    assert [op.name for op in back.main.ops].count("qnn.squared_difference") == 1


@pytest.mark.parametrize("form", ["mul", "pow"])
def test_onnx_exports_run_in_onnx_runtime(tmp_path, form):
    # x and m are graph inputs, so the op reads exactly what ONNX Runtime dequantizes
    r, _ = _quantize(tmp_path, form, mean_input=True)
    feeds = _feeds(True)
    ours = run(r.module, feeds)["sq"]
    step = _scale(_op(r, "qnn.squared_difference").results[0])
    for fmt in ("qdq", "qoperator"):
        out = tmp_path / f"m.{fmt}.onnx"
        r.save(out, format=fmt)
        got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(["sq"], feeds)[0]
        if fmt == "qdq":   # float Sub and Mul, rounded once: LiteRT's 7-bit rescaling is within a step of it
            assert np.abs(got - ours).max() <= step * 1.0001
        else:              # QOperator: a table of quantir's own kernel over every int8 pair
            assert np.array_equal(got, ours)


def test_a_difference_with_another_reader_stays_sub_and_mul(tmp_path):
    r, _ = _quantize(tmp_path, "mul", extra_reader=True)
    names = [op.name for op in r.module.main.ops]
    assert "qnn.squared_difference" not in names
    assert names.count("qnn.sub") == 1 and names.count("qnn.mul") == 1


def test_a_cube_is_not_a_square(tmp_path):
    r, _ = _quantize(tmp_path, "pow3")
    names = [op.name for op in r.module.main.ops]
    assert "qnn.squared_difference" not in names and "qnn.sub" in names and "nn.pow" in names


def test_layer_norm_expansion_keeps_sub_and_mul(tmp_path):
    """quantir's own LayerNorm over a non-last axis squares the centred value with MUL(d, d); d is read
    by the normalization too, so no SQUARED_DIFFERENCE claims it."""
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=1, epsilon=1e-5)]
    inits = [numpy_helper.from_array(np.ones((6, 16), np.float32), "g"),
             numpy_helper.from_array(np.zeros((6, 16), np.float32), "b")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 6, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 6, 16])], inits)
    path = str(tmp_path / "ln.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    r = qr.quantize(path, {"x": X}, qr.Config(progress=False))
    names = [op.name for op in r.module.main.ops]
    assert "qnn.squared_difference" not in names
    squares = [op for op in r.module.main.ops if op.name == "qnn.mul" and op.operands[0] is op.operands[1]]
    assert len(squares) == 1


# -- TensorFlow's LayerNorm as the TFLite converter writes it --------------------------------------------

def _params(v: np.ndarray) -> tuple[float, int]:
    s, z = asymmetric_qparams(min(float(v.min()), 0.0), max(float(v.max()), 0.0))
    return float(np.float32(s)), int(z)


def _tf_layer_norm(x: np.ndarray, eps: float = 0.01) -> tuple[bytes, dict[str, tuple[float, int]]]:
    """MEAN, SQUARED_DIFFERENCE, MEAN, ADD eps, RSQRT, SUB, MUL over the last axis, int8 in and out; each
    tensor's parameters from its float values over ``x``'s rows. Returns the file and the parameters."""
    from quantir.backends.tflite import AddOptions, ModelBuilder, MulOptions, Quantization, ReducerOptions, SubOptions
    from quantir.backends.tflite import BuiltinOperator as OP
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    inv = 1 / np.sqrt(var + eps)
    values = {"x": x, "mean": mean, "squared_difference": (x - mean) ** 2, "variance": var,
              "variance_eps": var + eps, "rsqrt": inv, "centered": x - mean, "y": (x - mean) * inv}
    params = {name: _params(v) for name, v in values.items()}
    b = ModelBuilder(description="TensorFlow's LayerNorm")
    t = {name: b.add_tensor(name, (1,) + v.shape[1:], np.int8, Quantization((params[name][0],), (params[name][1],), 0))
         for name, v in values.items()}
    axis = b.add_constant("axis", np.array([x.ndim - 1], np.int32))
    eps_t = b.add_constant("eps", np.array([127], np.int8), Quantization((float(np.float32(eps / 127)),), (0,), 0))
    b.add_operator(OP.MEAN, [t["x"], axis], [t["mean"]], ReducerOptions(keep_dims=True))
    b.add_operator(OP.SQUARED_DIFFERENCE, [t["x"], t["mean"]], [t["squared_difference"]])
    b.add_operator(OP.MEAN, [t["squared_difference"], axis], [t["variance"]], ReducerOptions(keep_dims=True))
    b.add_operator(OP.ADD, [t["variance"], eps_t], [t["variance_eps"]], AddOptions())
    b.add_operator(OP.RSQRT, [t["variance_eps"]], [t["rsqrt"]])
    b.add_operator(OP.SUB, [t["x"], t["mean"]], [t["centered"]], SubOptions())
    b.add_operator(OP.MUL, [t["centered"], t["rsqrt"]], [t["y"]], MulOptions())
    b.set_io([t["x"]], [t["y"]])
    return b.finish(), params


def test_tensorflow_layer_norm_tflite_imports_and_is_bit_exact(tmp_path):
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.backends.tflite.check import check_tflite
    from quantir.verify import verify_tflite
    x = X[:64, :5]
    data, params = _tf_layer_norm(x)
    path = tmp_path / "tf_layer_norm.tflite"
    path.write_bytes(data)
    module = qr.load(path)
    assert [op.name for op in module.main.ops if op.name.startswith("qnn.")] == [
        "qnn.mean", "qnn.squared_difference", "qnn.mean", "qnn.add", "qnn.rsqrt", "qnn.sub", "qnn.mul"]
    assert check_tflite(str(path)).ok
    s_x, z_x = params["x"]
    x_q = np.clip(np.round(x / np.float32(s_x)) + z_x, -128, 127).astype(np.int8)
    report = verify_tflite(path, {"x": x_q})   # 64 samples, every tensor
    assert report.ok, report.text()
    assert {d.name for d in report.intermediates} >= {"squared_difference", "variance", "rsqrt"}
    # and it is a LayerNorm: the rows come out normalized, within a few output steps of float
    y_q = np.concatenate([next(iter(run(module, {"x": x_q[i:i + 1]}).values())) for i in range(len(x_q))])
    s_y, z_y = params["y"]
    y = (y_q.astype(np.float32) - z_y) * s_y
    mean = x.mean(-1, keepdims=True)
    expected = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 0.01)
    assert np.abs(y - expected).mean() < 2 * s_y


def test_int16_activations_keep_it_an_int8_island(tmp_path):
    """LiteRT has no int16 SQUARED_DIFFERENCE: under 16x8 it reads and writes int8 through QUANTIZEs,
    and the .tflite still verifies bit-exact."""
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    r = qr.quantize(_save(tmp_path, "mul"), {"x": X}, qr.Config(progress=False, activations="int16"))
    sd = _op(r, "qnn.squared_difference")
    assert [v.type.element_type.storage_type.width for v in (*sd.operands, *sd.results)] == [8, 8, 8]
    assert all(v.op.name == "qnn.requantize" for v in sd.operands)
    means = [op for op in r.module.main.ops if op.name == "qnn.mean"]
    assert [op.results[0].type.element_type.storage_type.width for op in means] == [16, 16]
    assert r.spec_report().ok
    r.save(tmp_path / "m.tflite")
    report = verify_tflite(tmp_path / "m.tflite", {"x": X[:32]})
    assert report.ok, report.text()
