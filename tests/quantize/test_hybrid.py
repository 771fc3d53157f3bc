"""quantize_hybrid: float ONNX models -> LiteRT dynamic-range ops (int8 weights, float activations).

Oracles: ONNX Runtime runs the float model and, for the weight checks, the same model with the
dequantized weights; the hybrid kernels themselves are held to LiteRT in
tests/runtime/qkernels/test_qk_hybrid.py and end to end in tests/backends/tflite/test_export_hybrid.py.
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import quantir
from quantir.ir.dialects import hybrid, quant
from quantir.quantize.check import check_module
from quantir.quantize.hybrid import HybridConfig, HybridError, quantize_hybrid
from quantir.runtime import run
from quantir.text import parse_module, print_module


def _model(nodes, inputs, outputs, inits) -> onnx.ModelProto:
    g = h.make_graph(nodes, "g", inputs, outputs, [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def text_model(rng, vocab=300, d=16, hidden=128, out=10) -> onnx.ModelProto:
    """Gather(table) -> MatMul + Add(bias) -> Relu -> MatMul -> Gemm(transB, C): an embedding and three layers."""
    inits = {"table": rng.standard_normal((vocab, d)).astype(np.float32),
             "w1": (rng.standard_normal((d, hidden)) * 0.3).astype(np.float32),
             "b1": rng.standard_normal(hidden).astype(np.float32),
             "w2": (rng.standard_normal((hidden, 64)) * 0.1).astype(np.float32),
             "w3": (rng.standard_normal((out, 64)) * 0.1).astype(np.float32),
             "b3": rng.standard_normal(out).astype(np.float32)}
    nodes = [h.make_node("Gather", ["table", "ids"], ["emb"], name="embed"),
             h.make_node("MatMul", ["emb", "w1"], ["h1"], name="fc1"),
             h.make_node("Add", ["h1", "b1"], ["h1b"], name="fc1_bias"),
             h.make_node("Relu", ["h1b"], ["h1r"], name="relu1"),
             h.make_node("MatMul", ["h1r", "w2"], ["h2"], name="fc2"),
             h.make_node("Gemm", ["h2", "w3", "b3"], ["y"], name="fc3", transB=1)]
    return _model(nodes, [h.make_tensor_value_info("ids", TP.INT64, [6])],
                  [h.make_tensor_value_info("y", TP.FLOAT, [6, out])], inits)


def conv_model(rng) -> onnx.ModelProto:
    """Conv 3x3 (pads 1) -> Relu -> depthwise Conv 3x3 stride 2 (group = C) with bias."""
    inits = {"wc": (rng.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32),
             "bc": rng.standard_normal(16).astype(np.float32),
             "wd": (rng.standard_normal((16, 1, 3, 3)) * 0.3).astype(np.float32),
             "bd": rng.standard_normal(16).astype(np.float32)}
    nodes = [h.make_node("Conv", ["x", "wc", "bc"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             h.make_node("Conv", ["r1", "wd", "bd"], ["y"], name="dw", group=16, strides=[2, 2], pads=[1, 1, 1, 1])]
    return _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [2, 8, 9, 9])],
                  [h.make_tensor_value_info("y", TP.FLOAT, [2, 16, 5, 5])], inits)


def _load(model: onnx.ModelProto, tmp_path, name="m.onnx"):
    path = tmp_path / name
    onnx.save(model, path)
    return quantir.load(str(path)), path


def _ort(model: onnx.ModelProto, feeds: dict) -> dict:
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def _hybrid_ops(module) -> list:
    return [op for op in module.main.ops if op.opdef in hybrid.HYBRID_OPS]


def _weight(op) -> tuple[np.ndarray, np.ndarray]:
    w = op.operands[1]
    q = w.type.element_type
    return np.asarray(quant.stored_constant(w)), np.asarray(q.scales, np.float32)


def test_text_model_becomes_four_hybrid_ops_with_bias_and_relu_fused(tmp_path):
    module, _ = _load(text_model(np.random.default_rng(0)), tmp_path)
    r = quantize_hybrid(module, HybridConfig(min_elements=100))
    ops = _hybrid_ops(r.module)
    assert [op.name for op in ops] == ["hybrid.embedding_lookup", "hybrid.fully_connected",
                                       "hybrid.fully_connected", "hybrid.fully_connected"]
    assert [op.name for op in r.module.main.ops if op.name.startswith("nn.")] == []   # Add, Relu absorbed
    fc1 = ops[1]
    assert fc1.attr("activation") == "RELU" and len(fc1.operands) == 3
    assert all(op.attr("asymmetric_quantize_inputs") for op in ops[1:])   # LiteRT's converter default
    assert [x.label for x in r.layers] == ["embed", "fc1", "fc2", "fc3"] and r.floats == []
    assert check_module(r.module).ok and check_module(r.module).checked == 4


def test_weights_are_symmetric_per_channel_narrow_range_and_within_half_a_step(tmp_path):
    model = text_model(np.random.default_rng(1))
    module, _ = _load(model, tmp_path)
    r = quantize_hybrid(module, HybridConfig(min_elements=100))
    inits = {t.name: nh.to_array(t) for t in model.graph.initializer}
    # the float weight of each op in the hybrid op's layout: table [rows, D], FC [C_out, K]
    expected = [inits["table"], inits["w1"].T, inits["w2"].T, inits["w3"]]
    for op, w in zip(_hybrid_ops(r.module), expected):
        q, s = _weight(op)
        qt = op.operands[1].type.element_type
        assert q.dtype == np.int8 and q.shape == w.shape and q.min() >= -127 and q.max() <= 127
        assert qt.quantized_dimension == 0 and set(qt.zero_points) == {0} and s.size == w.shape[0]
        assert np.all(np.abs(q.astype(np.float64) * s[:, None] - w) <= s[:, None] / 2 * (1 + 1e-6))
        assert np.array_equal(np.abs(q).max(axis=1), np.full(w.shape[0], 127))   # each channel's max -> 127


def test_hybrid_model_stays_close_to_the_float_model_in_onnx_runtime(tmp_path):
    rng = np.random.default_rng(2)
    model = text_model(rng)
    module, _ = _load(model, tmp_path)
    ids = rng.integers(0, 300, 6)
    want = _ort(model, {"ids": ids})["y"]
    for asym in (True, False):
        got = run(quantize_hybrid(module, HybridConfig(min_elements=100, asymmetric_quantize_inputs=asym)).module,
                  {"ids": ids})["y"]
        rel = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert rel < 0.02, (asym, rel)


def test_asymmetric_quantize_inputs_both_ways_changes_the_result(tmp_path):
    rng = np.random.default_rng(3)
    module, _ = _load(text_model(rng), tmp_path)
    ids = rng.integers(0, 300, 6)
    a = quantize_hybrid(module, HybridConfig(min_elements=100, asymmetric_quantize_inputs=True))
    s = quantize_hybrid(module, HybridConfig(min_elements=100, asymmetric_quantize_inputs=False))
    assert not any(op.attr("asymmetric_quantize_inputs") for op in _hybrid_ops(s.module)[1:])
    # fc2 reads a ReLU output (one sign): the two run-time quantizations differ there
    assert not np.array_equal(run(a.module, {"ids": ids}, intermediates=["h2"])["h2"],
                              run(s.module, {"ids": ids}, intermediates=["h2"])["h2"])


def test_min_elements_keeps_small_weights_float_with_the_reason(tmp_path):
    module, _ = _load(text_model(np.random.default_rng(4)), tmp_path)
    r = quantize_hybrid(module)   # LiteRT's 1024: w1 16x128 = 2048 stays quantized, w3 10x64 = 640 does not
    assert [x.label for x in r.layers] == ["embed", "fc1", "fc2"]
    (left,) = r.floats
    assert left.op == "fc3" and left.elements == 640 and "under min_elements 1024" in left.reason
    assert [op.name for op in r.module.main.ops if op.name == "nn.gemm"] == ["nn.gemm"]
    assert "fc3" in r.summary() and r.summary_dict()["float"][0]["reason"] == left.reason


def test_exclude_and_ops_choose_what_is_quantized(tmp_path):
    module, _ = _load(text_model(np.random.default_rng(5)), tmp_path)
    r = quantize_hybrid(module, HybridConfig(min_elements=100, exclude=("fc2",), ops=("matmul", "gemm")))
    assert [x.label for x in r.layers] == ["fc1", "fc3"]
    assert {f.op: f.reason for f in r.floats} == {"embed": "gather weights not chosen (ops: matmul, gemm)",
                                                  "fc2": "excluded"}
    with pytest.raises(HybridError, match="unknown dynamic-range ops"):
        HybridConfig(ops=("lstm",))
    with pytest.raises(HybridError, match="min_elements"):
        HybridConfig(min_elements=-1)


def test_sizes_count_int8_values_and_scales(tmp_path):
    module, _ = _load(text_model(np.random.default_rng(6)), tmp_path)
    r = quantize_hybrid(module, HybridConfig(min_elements=100))
    floats = 4 * (300 * 16 + 16 * 128 + 128 + 128 * 64 + 10 * 64 + 10)
    assert r.bytes_before == floats
    # int8 weights + one f32 scale per channel; the biases stay f32
    assert r.bytes_after == floats - sum(x.float_bytes - x.quantized_bytes for x in r.layers)
    assert [x.quantized_bytes for x in r.layers] == [300 * 16 + 4 * 300, 128 * 16 + 4 * 128, 64 * 128 + 4 * 64,
                                                     10 * 64 + 4 * 10]
    assert r.summary_dict()["bytes_after"] == r.bytes_after


def test_text_round_trip_prints_parses_and_runs_the_same(tmp_path):
    rng = np.random.default_rng(7)
    module, _ = _load(text_model(rng), tmp_path)
    r = quantize_hybrid(module, HybridConfig(min_elements=100))
    text = print_module(r.module)
    assert '"hybrid.fully_connected"' in text and "!quant.uniform<i8<-127:127>:f32:0" in text
    back = parse_module(text)
    assert print_module(back) == text
    ids = rng.integers(0, 300, 6)
    assert np.array_equal(run(back, {"ids": ids})["y"], run(r.module, {"ids": ids})["y"])


def test_conv_and_depthwise_become_hybrid_conv(tmp_path):
    rng = np.random.default_rng(8)
    model = conv_model(rng)
    module, _ = _load(model, tmp_path)
    r = quantize_hybrid(module, HybridConfig(min_elements=100))
    conv, dw = _hybrid_ops(r.module)
    assert conv.attr("activation") == "RELU" and tuple(conv.attr("pads")) == (1, 1, 1, 1)
    assert dw.attr("group") == 16 and tuple(dw.attr("strides")) == (2, 2)
    x = rng.standard_normal((2, 8, 9, 9)).astype(np.float32)
    got, want = run(r.module, {"x": x})["y"], _ort(model, {"x": x})["y"]
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 0.02
    # dw has 16 * 9 = 144 weights: LiteRT's default keeps it float
    assert [f.op for f in quantize_hybrid(module).floats] == ["dw"]


def batched_model(rng) -> onnx.ModelProto:
    """MatMul of x [4, 3, 64] with a constant B [4, 64, 32] (per-head weights), and a 1-D Conv."""
    inits = {"w": (rng.standard_normal((4, 64, 32)) * 0.2).astype(np.float32),
             "wc": rng.standard_normal((8, 4, 5)).astype(np.float32)}
    nodes = [h.make_node("MatMul", ["x", "w"], ["y"], name="batched"),
             h.make_node("Conv", ["s", "wc"], ["z"], name="conv1d")]
    return _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [4, 3, 64]),
                          h.make_tensor_value_info("s", TP.FLOAT, [1, 4, 20])],
                  [h.make_tensor_value_info("y", TP.FLOAT, [4, 3, 32]),
                   h.make_tensor_value_info("z", TP.FLOAT, [1, 8, 16])], inits)


def test_a_batched_constant_b_becomes_batch_matmul_and_a_1d_conv_stays_float(tmp_path):
    rng = np.random.default_rng(9)
    model = batched_model(rng)
    module, _ = _load(model, tmp_path)
    r = quantize_hybrid(module, HybridConfig(min_elements=100))
    (op,) = _hybrid_ops(r.module)
    assert op.name == "hybrid.batch_matmul" and op.attr("asymmetric_quantize_inputs")
    q, s = _weight(op)
    assert q.shape == (4, 64, 32) and op.operands[1].type.element_type.quantized_dimension == 2 and s.size == 32
    assert [(f.op, "1-D convolution" in f.reason) for f in r.floats] == [("conv1d", True)]
    feeds = {"x": rng.standard_normal((4, 3, 64)).astype(np.float32),
             "s": rng.standard_normal((1, 4, 20)).astype(np.float32)}
    got, want = run(r.module, feeds)["y"], _ort(model, feeds)["y"]
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 0.02
    assert check_module(r.module).ok


@pytest.mark.slow
def test_minilm_hybrid_keeps_cosine_0_998_and_a_quarter_of_the_weights(minilm_path, minilm_tokenizer_files):
    """all-MiniLM-L6-v2 with LiteRT's defaults (min_elements 1024, asymmetric inputs): 36 FC and two
    embedding tables int8 (the 2x384 token-type table stays float), constants 0.253x; mean cosine
    vs fp32 over 128 held-out sentences measured 0.99891 (symmetric inputs 0.99735)."""
    from quantir.datasets import sentences
    from quantir.datasets.wordpiece import WordPiece, batches_by_length
    tok = WordPiece.from_file(minilm_tokenizer_files["vocab.txt"])
    ev = [f for _, f in batches_by_length(tok, list(sentences.evaluation_sentences()[:128]), max_length=128,
                                          batch_size=32)]
    r = quantize_hybrid(quantir.load(str(minilm_path)))
    assert [op.name for op in _hybrid_ops(r.module)].count("hybrid.fully_connected") == 36
    assert [f.elements for f in r.floats] == [768] and r.bytes_after < 0.26 * r.bytes_before
    assert check_module(r.module).ok
    fp32 = ort.InferenceSession(str(minilm_path))
    cos = []
    for f in ev:
        a, b = fp32.run(None, f)[0], next(iter(run(r.module, f).values()))
        cos.append((a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1))
    assert np.concatenate(cos).mean() >= 0.998


def test_the_verifier_says_what_does_not_fit():
    from quantir.errors import QuantirError, VerifyError
    from quantir.ir import Function
    from quantir.ir.builder import OpBuilder
    from quantir.types import FloatType, IntegerType, TensorType, UniformQuantizedPerAxisType

    f32 = FloatType("f32")
    fn = Function.create("main", [TensorType((4, 8), f32)], [])
    b = OpBuilder.at_end(fn)
    q = UniformQuantizedPerAxisType(storage_type=IntegerType(8), expressed_type=f32, scales=[0.1] * 3,
                                    zero_points=[0] * 3, quantized_dimension=0, storage_min=-127, storage_max=127)

    def weight(k):
        c = b.constant(np.ones((3, k), np.int8), IntegerType(8))
        return b.insert(quant.SCAST.build([c], [TensorType((3, k), q)])).result

    x = fn.arguments[0]
    with pytest.raises(QuantirError, match=r"must be \[C_out, K\]"):
        hybrid.HYBRID_FULLY_CONNECTED.build([x, weight(9)])
    ok = hybrid.HYBRID_FULLY_CONNECTED.build([x, weight(8)])
    assert ok.results[0].type == TensorType((4, 3), f32)
    ok.opdef.verify_op(ok)
    cases = [
        (hybrid.HYBRID_FULLY_CONNECTED.build([x, weight(8)], [TensorType((4, 4), f32)]), "result shape 4x4"),
        (hybrid.HYBRID_FULLY_CONNECTED.build([x, weight(8), b.constant(np.ones(4, np.float32))],
                                             [TensorType((4, 3), f32)]), "one f32 value per output channel"),
        (hybrid.HYBRID_FULLY_CONNECTED.build([x, weight(8)], activation="TANH"), "activation must be one of"),
    ]
    for op, message in cases:
        with pytest.raises(VerifyError, match=message):
            op.opdef.verify_op(op)


def clip_model(rng, bounds) -> onnx.ModelProto:
    """MatMul x [5, 64] by a constant [64, 32], then Clip(bounds)."""
    inits = {"w": (rng.standard_normal((64, 32)) * 0.3).astype(np.float32),
             "lo": np.float32(bounds[0]), "hi": np.float32(bounds[1])}
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="fc"), h.make_node("Clip", ["m", "lo", "hi"], ["y"])]
    return _model(nodes, [h.make_tensor_value_info("x", TP.FLOAT, [5, 64])],
                  [h.make_tensor_value_info("y", TP.FLOAT, [5, 32])], inits)


@pytest.mark.parametrize("bounds,activation", [((0.0, 6.0), "RELU6"), ((-1.0, 1.0), "RELU_N1_TO_1"),
                                               ((0.0, 5.0), None)])
def test_a_clip_after_the_layer_is_fused_when_litert_has_it(tmp_path, bounds, activation):
    rng = np.random.default_rng(25)
    model = clip_model(rng, bounds)
    module, _ = _load(model, tmp_path)
    r = quantize_hybrid(module)
    (op,) = _hybrid_ops(r.module)
    clips = [o for o in r.module.main.ops if o.name == "nn.clip"]
    assert (op.attr("activation"), len(clips)) == ((activation, 0) if activation else ("NONE", 1))
    x = (rng.standard_normal((5, 64)) * 2).astype(np.float32)
    got, want = run(r.module, {"x": x})["y"], _ort(model, {"x": x})["y"]
    assert got.min() >= bounds[0] and got.max() <= bounds[1]
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 0.02
