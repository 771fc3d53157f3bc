"""``Config(activations="int16")``: LiteRT's 16x8 mode (int16 symmetric activations, int8 weights).

An attention-like block built with onnx.helper (FC, BATCH_MATMUL, MUL by a constant, SOFTMAX,
residual ADDs, an FC with bias and a fused ReLU, MEAN and SUB): quantized both ways, run in
quantir's interpreter (LiteRT BUILTIN_REF's integer kernels), compared with ONNX Runtime's float
result on held-out inputs. Its weights lie on their int8 grid (each output channel reaches 127), so
the difference between the two modules is the activations' width alone. The Fashion-MNIST CNN has
ops without a 16x8 kernel (CONV_2D, HARD_SWISH): they stay int8 between requantizes.
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from tests.backends.onnx.test_qoperator_16bit import on_input_grid
from quantir.errors import CalibrationError, QuantizationWarning
from quantir.ir.dialects import arith, quant
from quantir.quantize import check
from quantir.runtime import run
from quantir.types import UniformQuantizedType

N = helper.make_node
D, S = 16, 8
RNG = np.random.default_rng(15)


def _on_grid(q: np.ndarray) -> np.ndarray:
    """float32 weights whose per-channel int8 quantization is exact: integers times one step, each
    output channel (column of a MatMul weight) reaching 127."""
    q = q.copy()
    q[np.arange(D), np.arange(D)] = 127
    return (q * np.float32(0.6 / np.sqrt(D) / 127)).astype(np.float32)


INITS = {**{n: _on_grid(RNG.integers(-60, 61, size=(D, D))) for n in ("wq", "wk", "wv", "wo", "w1", "w2")},
         "b1": (RNG.normal(size=D) * 0.1).astype(np.float32), "scale": np.float32(1 / np.sqrt(D)),
         "axes": np.array([-1], np.int64)}


def _block():
    nodes = [N("MatMul", ["x", "wq"], ["q"]), N("MatMul", ["x", "wk"], ["k"]), N("MatMul", ["x", "wv"], ["v"]),
             N("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), N("MatMul", ["q", "kt"], ["qk"]),
             N("Mul", ["qk", "scale"], ["scores"]), N("Softmax", ["scores"], ["p"], axis=-1),
             N("MatMul", ["p", "v"], ["att"]), N("MatMul", ["att", "wo"], ["o"]), N("Add", ["x", "o"], ["h"]),
             N("MatMul", ["h", "w1"], ["f0"]), N("Add", ["f0", "b1"], ["f1"]), N("Relu", ["f1"], ["f"]),
             N("MatMul", ["f", "w2"], ["g"]), N("Add", ["h", "g"], ["r"]),
             N("ReduceMean", ["r", "axes"], ["m"], keepdims=1), N("Sub", ["r", "m"], ["y"])]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", S, D])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", S, D])],
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in INITS.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])
    m.ir_version = 9
    return m


CALIBRATION = [{"x": RNG.uniform(-1, 1, size=(1, S, D)).astype(np.float32)} for _ in range(64)]
HELD_OUT = {"x": RNG.uniform(-1, 1, size=(32, S, D)).astype(np.float32)}


def _sqnr(want: np.ndarray, got: np.ndarray) -> float:
    return float(10 * np.log10((want.astype(np.float64) ** 2).sum() / ((want - got).astype(np.float64) ** 2).sum()))


def _output(module, feeds) -> np.ndarray:
    out = run(module, feeds)
    return next(iter(out.values())) if isinstance(out, dict) else out[0]


def _activation_types(module):
    """(op name, quantized result type) of every activation an op computes (constants excluded)."""
    for op in module.main.ops:
        if op.opdef in (arith.CONSTANT, quant.SCAST):
            continue
        for v in op.results:
            t = getattr(v.type, "element_type", None)
            if isinstance(t, UniformQuantizedType):
                yield op.name, t


@pytest.fixture(scope="module")
def block():
    want = ort.InferenceSession(_block().SerializeToString()).run(None, HELD_OUT)[0]
    return want, {act: qr.quantize(_block(), CALIBRATION, qr.Config(progress=False, activations=act, method="minmax"))
                  for act in ("int8", "int16")}


def test_activations_is_validated():
    with pytest.raises(CalibrationError, match="activations must be 'int8' or 'int16'"):
        qr.Config(activations="int4")
    assert qr.Config().activations == "int8"


def test_every_activation_of_the_block_is_int16_with_zero_point_0(block):
    _, results = block
    types = list(_activation_types(results["int16"].module))
    names = {name for name, _ in types}
    assert {"qnn.fully_connected", "qnn.batch_matmul", "qnn.softmax", "qnn.add", "qnn.mul", "qnn.mean",
            "qnn.sub"} <= names
    for name, t in types:
        assert t.storage_type.width == 16 and t.zero_point == 0, (name, t)
    assert results["int16"].summary_dict()["int8_ops"] == []
    assert "int8_ops" not in results["int8"].summary_dict()
    softmax = [t for name, t in types if name == "qnn.softmax"]
    assert softmax and all(t.scale == 1 / 32768 for t in softmax)
    assert all(t.storage_type.width == 8 for _, t in _activation_types(results["int8"].module))


def test_int16_is_20_db_above_int8_against_float(block):
    want, results = block
    sqnr = {act: _sqnr(want, _output(r.module, HELD_OUT)) for act, r in results.items()}
    print(f"SQNR vs float on held-out inputs: {sqnr}")
    assert sqnr["int16"] > sqnr["int8"] + 20.0, sqnr


def test_the_int16_module_passes_the_spec_check(block):
    _, results = block
    report = check.check_module(results["int16"].module)
    assert report.checked >= 15 and not report.unknown
    assert report.ok, [str(v) for v in report.violations]


def test_the_16x8_check_refuses_int8_parameters_in_an_int16_op(block):
    """The check is not vacuous: an int16 softmax with the int8 fixed output, or a nonzero int16 zero
    point, is a violation."""
    from quantir.quantize import spec
    from quantir.quantize.rules import QParams, QuantizedOp
    x = QParams("int16", 1e-3, 0)
    bad_out = QuantizedOp("SOFTMAX", "s", (x,), (QParams("int16", 1 / 256, 0),))
    assert any("output parameters" in v.message for v in spec.check_op(bad_out))
    bad_zp = QuantizedOp("ADD", "a", (x, QParams("int16", 1e-3, 3)), (x,))
    assert any("zero point 0" in v.message for v in spec.check_op(bad_zp))
    no_kernel = QuantizedOp("HARD_SWISH", "h", (x,), (x,))
    assert any("16x8 kernel" in v.message for v in spec.check_op(no_kernel))


def test_fashion_cnn_is_int16_throughout(repo_root):
    """CONV_2D has its 16x8 kernel (tests/quantize/test_int16_conv.py) and HARD_SWISH (no int16 kernel
    in LiteRT) becomes int16 ADD, MUL, MUL (tests/quantize/test_int16_hard_swish.py): every op computes
    in int16, with no requantize between widths; the module runs and passes the spec check."""
    path = repo_root / "models" / "fashion_mnist_cnn.onnx"
    x = RNG.normal(size=(32, 1, 28, 28)).astype(np.float32)
    r = qr.quantize(path, {"input": x}, qr.Config(progress=False, activations="int16"))
    widths: dict[str, set[int]] = {}
    for name, t in _activation_types(r.module):
        widths.setdefault(name, set()).add(t.storage_type.width)
    assert "qnn.hard_swish" not in widths and "qnn.requantize" not in widths
    for name in ("qnn.conv", "qnn.fully_connected", "qnn.add", "qnn.mean", "qnn.softmax", "qnn.concat"):
        assert widths[name] == {16}, name
    assert r.summary_dict()["int8_ops"] == []
    assert "requantized at their boundary (no 16x8 kernel): 0" in r.summary()
    report = check.check_module(r.module)
    assert report.ok, [str(v) for v in report.violations]
    t = RNG.normal(size=(8, 1, 28, 28)).astype(np.float32)
    want = ort.InferenceSession(str(path)).run(None, {"input": t})[0]
    assert _sqnr(want, _output(r.module, {"input": t})) > 20.0


def test_the_tflite_export_is_bit_exact_with_litert_builtin_ref(block, tmp_path):
    """The .tflite (16x8 FC with an int32 bias: quantized_bias_type INT32) in LiteRT's reference
    kernels gives quantir's interpreter's results on every element of 64 held-out inputs."""
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.backends.tflite.litert import run_model
    _, results = block
    path = tmp_path / "block16.tflite"
    results["int16"].save(path)
    x = np.concatenate([HELD_OUT["x"], RNG.uniform(-1, 1, size=(32, S, D)).astype(np.float32)])
    litert = run_model(path.read_bytes(), [x])[0]
    mine = _output(results["int16"].module, {"x": x})
    assert litert.shape == mine.shape == (64, S, D)
    np.testing.assert_array_equal(litert, mine)


def test_the_qdq_export_is_int16_and_runs_in_onnx_runtime(block, tmp_path):
    import onnx
    want, results = block
    path = tmp_path / "block16.onnx"
    results["int16"].save(path)
    model = onnx.load(path)
    assert {o.version for o in model.opset_import if o.domain in ("", "ai.onnx")} == {21}
    inits = {i.name: i for i in model.graph.initializer}
    zero_points = [inits[n.input[2]] for n in model.graph.node if n.op_type == "QuantizeLinear"]
    assert zero_points and all(z.data_type == onnx.TensorProto.INT16 for z in zero_points)
    got = ort.InferenceSession(str(path)).run(None, HELD_OUT)[0]
    assert _sqnr(want, got) > _sqnr(want, _output(results["int8"].module, HELD_OUT)) + 20.0


def test_the_qoperator_export_of_int16_ops_is_integer_and_exact(block, tmp_path):
    """ONNX Runtime's QLinear ops are 8-bit, so the QOperator export writes the int16 ops' 16x8
    arithmetic in its integer ops (backends/onnx/sixteen.py): the save is silent, the file has one
    QuantizeLinear, and ONNX Runtime's output equals the interpreter's."""
    import warnings

    import onnx
    _, results = block
    with warnings.catch_warnings():
        warnings.simplefilter("error", QuantizationWarning)
        path = results["int16"].save(tmp_path / "block16.qop.onnx", format="qoperator")
    ops = [n.op_type for n in onnx.load(str(path)).graph.node]
    assert ops.count("QuantizeLinear") == 1 and ops.count("DequantizeLinear") == 1
    # the same input integers in both runtimes (on_input_grid says why), then the same integers out
    grid = {k: on_input_grid(results["int16"].module, v) for k, v in HELD_OUT.items()}
    got = ort.InferenceSession(str(path)).run(None, grid)[0]
    np.testing.assert_array_equal(got, _output(results["int16"].module, grid))


def _reduce_sum():
    """ReduceSum, which ONNX Runtime has no int8 kernel for: its QOperator form is DQ → ReduceSum → Q."""
    nodes = [N("MatMul", ["x", "wq"], ["h"]), N("ReduceSum", ["h", "axes"], ["s"], keepdims=1),
             N("Add", ["h", "s"], ["y"])]
    graph = helper.make_graph(nodes, "sum", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", S, D])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", S, D])],
                              [numpy_helper.from_array(np.asarray(INITS[n]), n) for n in ("wq", "axes")])
    m = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])
    m.ir_version = 9
    return m


def test_the_cli_prints_what_a_qoperator_export_computes_in_float(tmp_path, capsys):
    """A QOperator save that computes an op in float says which and why, one line; the int16 block's
    says nothing (every op has an integer form)."""
    import onnx

    from quantir.cli.main import main
    np.savez(tmp_path / "calib.npz", x=np.concatenate([c["x"] for c in CALIBRATION]))
    lines = {}
    for name, model, extra in (("block", _block(), ["--activations", "int16"]), ("sum", _reduce_sum(), [])):
        onnx.save(model, tmp_path / f"{name}.onnx")
        assert main(["quantize", str(tmp_path / f"{name}.onnx"), "--data", str(tmp_path / "calib.npz"), "-q",
                     *extra, "--format", "qoperator", "-o", str(tmp_path / f"{name}.q.onnx")]) == 0
        lines[name] = [line for line in capsys.readouterr().err.splitlines() if "QOperator export" in line]
    assert lines["block"] == []
    (line,) = lines["sum"]
    assert line.startswith("quantir quantize: warning: QOperator export: 1 op(s) computed in float") and \
        "ReduceSum" in line, line


@pytest.mark.slow
def test_minilm_int16_minmax_reaches_cosine_0_99(minilm_path, minilm_tokenizer_files):
    """all-MiniLM-L6-v2, fully integer but for the mask Cast, the mean-pooling Clip and Div: with
    int16 activations and min/max ranges the sentence embeddings of 128 held-out pydoc sentences
    stay within cosine 0.99 of fp32 on average in quantir's interpreter (measured 0.997; int8: 0.66)."""
    from quantir.datasets import sentences
    from quantir.datasets.wordpiece import WordPiece, batches_by_length
    tok = WordPiece.from_file(minilm_tokenizer_files["vocab.txt"])
    cal = [f for _, f in batches_by_length(tok, list(sentences.calibration_sentences()[:128]), max_length=128,
                                           batch_size=16)]
    ev = [f for _, f in batches_by_length(tok, list(sentences.evaluation_sentences()[:128]), max_length=128,
                                          batch_size=32)]
    r = qr.quantize(minilm_path, cal, qr.Config(progress=False, activations="int16", method="minmax"))
    assert check.check_module(r.module).ok
    fp32 = ort.InferenceSession(str(minilm_path))
    cos = []
    for f in ev:
        a, b = fp32.run(None, f)[0], _output(r.module, f)
        cos.append((a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1))
    assert np.concatenate(cos).mean() >= 0.99


# -- the table lookups and a LayerNorm in 16x8 ---------------------------------------------------------

V = 40


def _lookups():
    """An int16 embedding table (GATHER), LayerNormalization (MEAN, SUB, MUL, ADD, RSQRT, MUL, ADD), an
    FC, then GELU, LOGISTIC and TANH side by side (CONCATENATION)."""
    rng = np.random.default_rng(3)
    inits = {"table": (rng.normal(size=(V, D)) * 0.5).astype(np.float32),
             "w": (rng.normal(size=(D, D)) / 4).astype(np.float32),
             "g": (1 + 0.1 * rng.normal(size=D)).astype(np.float32), "b": (0.1 * rng.normal(size=D)).astype(np.float32)}
    nodes = [N("Gather", ["table", "ids"], ["e"], axis=0),
             N("LayerNormalization", ["e", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
             N("MatMul", ["n", "w"], ["h"]), N("Gelu", ["h"], ["a"]), N("Sigmoid", ["h"], ["s"]),
             N("Tanh", ["h"], ["t"]), N("Concat", ["a", "s", "t"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "lookups", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", S])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", S, 3 * D])],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 20)])
    m.ir_version = 9
    return m


def test_lookups_and_layer_norm_in_16x8_match_litert(tmp_path):
    rng = np.random.default_rng(4)
    cal = [{"ids": rng.integers(0, V, size=(1, S)).astype(np.int64)} for _ in range(64)]
    x = {"ids": rng.integers(0, V, size=(64, S)).astype(np.int64)}
    want = ort.InferenceSession(_lookups().SerializeToString()).run(None, x)[0]
    r = {act: qr.quantize(_lookups(), cal, qr.Config(progress=False, activations=act, method="minmax"))
         for act in ("int8", "int16")}
    wide = r["int16"]
    types = list(_activation_types(wide.module))
    assert {"qnn.gelu", "qnn.logistic", "qnn.tanh", "qnn.rsqrt", "qnn.concat", "nn.gather"} <= {n for n, _ in types}
    assert all(t.storage_type.width == 16 and t.zero_point == 0 for _, t in types)
    assert {n: t.scale for n, t in types if n in ("qnn.logistic", "qnn.tanh")} == \
        {"qnn.logistic": 1 / 32768, "qnn.tanh": 1 / 32768}
    assert check.check_module(wide.module).ok
    mine = _output(wide.module, x)
    assert _sqnr(want, mine) > _sqnr(want, _output(r["int8"].module, x)) + 10.0   # the FC's int8 weights cap it
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.backends.tflite.litert import run_model
    wide.save(tmp_path / "lookups16.tflite")
    litert = run_model((tmp_path / "lookups16.tflite").read_bytes(), [x["ids"]])[0]
    # LOGISTIC, TANH (and everything before them) bit-exact; GELU: quantir's int16 table gives one step
    # less than BUILTIN_REF for one input (q = 11539 at s_in = 1.06593e-4, s_out = 1.06568e-4), found here
    np.testing.assert_array_equal(litert[..., D:], mine[..., D:])
    step = float(np.float32(types[-1][1].scale))
    assert np.abs(litert[..., :D] - mine[..., :D]).max() <= step * 1.01
