"""Weight-only quantization (quantize.weight_only, quantir.quantize_weights, `quantir quantize --weights-only`).

Fast tests on a small ONNX model built here (a Gather table, MatMul, Gemm with transB, Conv, and a
MatMul too small to quantize); the MiniLM and EfficientNet-Lite0 acceptance checks are `slow`.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.cli.main import main as cli
from quantir.ir.dialects import quant
from quantir.quantize.weight_only import WeightOnlyConfig, WeightOnlyError, gptq, quantize_array
from quantir.runtime.kernels.qnn_ops import dequantize_sub_channel
from quantir.text import parse_module, print_module
from quantir.types.quant import UniformQuantizedPerAxisType, UniformQuantizedSubChannelType

ROOT = Path(__file__).resolve().parents[2]


def model_proto(seed: int = 0) -> onnx.ModelProto:
    """ids [N, 5] -> Gather(table [100, 64]); x [N, 64] -> MatMul [64, 96] -> Gemm(transB) [32, 96] ->
    MatMul [32, 4] (128 elements: stays float); img [N, 32, 6, 6] -> Conv [16, 32, 3, 3]."""
    rng = np.random.default_rng(seed)

    def w(name, *shape):
        a = (rng.standard_normal(shape) / np.sqrt(shape[-1] if len(shape) == 2 else 288)).astype(np.float32)
        a.ravel()[rng.integers(0, a.size, 3)] *= 8   # a few outliers, as trained weights have
        return numpy_helper.from_array(a, name)
    inits = [w("table", 100, 64), w("w1", 64, 96), w("w2", 32, 96), numpy_helper.from_array(
        rng.standard_normal(32).astype(np.float32), "b2"), w("small", 32, 4), w("w3", 16, 32, 3, 3)]
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"], name="embed"),
             helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Gemm", ["h", "w2", "b2"], ["g"], name="fc2", transB=1),
             helper.make_node("MatMul", ["g", "small"], ["out"], name="head"),
             helper.make_node("Conv", ["img", "w3"], ["conv"], name="conv", pads=[1, 1, 1, 1])]
    graph = helper.make_graph(
        nodes, "wo", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n", 5]),
                      helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64]),
                      helper.make_tensor_value_info("img", TensorProto.FLOAT, ["n", 32, 6, 6])],
        [helper.make_tensor_value_info("emb", TensorProto.FLOAT, ["n", 5, 64]),
         helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 4]),
         helper.make_tensor_value_info("conv", TensorProto.FLOAT, ["n", 16, 6, 6])], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def feeds(n: int = 3, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    return {"ids": rng.integers(0, 100, (n, 5)).astype(np.int64),
            "x": rng.standard_normal((n, 64)).astype(np.float32),
            "img": rng.standard_normal((n, 32, 6, 6)).astype(np.float32)}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("wo") / "model.onnx"
    onnx.save(model_proto(), p)
    return p


def _floats(path) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def _dequantized_weights(result) -> dict[str, np.ndarray]:
    """Each weight dcast's float result, computed from its type by the interpreter's kernels (the
    quant type's scales expanded over its blocks or channels)."""
    out = {}
    for op in result.module.main.ops:
        if op.opdef is quant.DCAST:
            stored = op.operands[0].op.operands[0].op.attributes["value"].array
            t = op.operands[0].type.element_type
            if isinstance(t, UniformQuantizedSubChannelType):
                out[op.results[0].name_hint] = dequantize_sub_channel(stored, t)
            else:
                shape = [1] * stored.ndim
                shape[t.quantized_dimension] = -1
                out[op.results[0].name_hint] = (t.scales_array().reshape(shape) *
                                                (stored - t.zero_points_array().reshape(shape))).astype(np.float32)
    return out


# -- what is quantized, and how well ---------------------------------------------------------------

@pytest.mark.parametrize("config", [WeightOnlyConfig(bits=8, rounding="rtn"),
                                    WeightOnlyConfig(bits=4, block_size=32, rounding="rtn"),
                                    WeightOnlyConfig(bits=4, block_size=32, symmetric=False, rounding="rtn")],
                         ids=["int8-channel", "int4-b32", "int4-b32-asym"])
def test_round_to_nearest_is_within_half_a_step(model_path, config):
    """Every dequantized weight element is within half its own scale of the float weight (no
    clipping under RTN), and the integers stay in the storage range of the type."""
    r = qr.quantize_weights(model_path, config)
    floats, deq = _floats(model_path), _dequantized_weights(r)
    assert set(deq) == {"table", "w1", "w2", "w3"}
    for op in r.module.main.ops:
        if op.opdef is not quant.DCAST:
            continue
        name, t = op.results[0].name_hint, op.operands[0].type.element_type
        stored = op.operands[0].op.operands[0].op.attributes["value"].array
        assert t.storage_min <= stored.min() and stored.max() <= t.storage_max
        if isinstance(t, UniformQuantizedSubChannelType):
            step = t.scales_array()
            for d, size in t.block_sizes:
                step = np.repeat(step, size, axis=d)
        else:
            shape = [1] * stored.ndim
            shape[t.quantized_dimension] = -1
            step = np.broadcast_to(t.scales_array().reshape(shape), stored.shape)
        assert np.all(np.abs(deq[name] - floats[name]) <= step / 2 * (1 + 1e-6) + 1e-12), name


def test_granularity_and_types(model_path):
    r = qr.quantize_weights(model_path, WeightOnlyConfig(bits=4, block_size=32))
    types = {op.results[0].name_hint: op.operands[0].type.element_type
             for op in r.module.main.ops if op.opdef is quant.DCAST}
    # MatMul [K, N]: blocks along K; Gemm transB [N, K]: along axis 1; Conv: input channels; table: rows
    assert types["w1"].block_sizes == ((0, 32), (1, 1)) and types["w1"].shape == (2, 96)
    assert types["w2"].block_sizes == ((0, 1), (1, 32)) and types["w2"].shape == (32, 3)
    assert types["w3"].block_sizes[1] == (1, 32) and types["w3"].shape == (16, 1, 3, 3)
    assert types["table"].block_sizes == ((0, 1), (1, 32))
    assert all(t.storage_width == 4 for t in types.values())
    r8 = qr.quantize_weights(model_path, WeightOnlyConfig(bits=8))
    t8 = {op.results[0].name_hint: op.operands[0].type.element_type
          for op in r8.module.main.ops if op.opdef is quant.DCAST}
    assert all(isinstance(t, UniformQuantizedPerAxisType) for t in t8.values())
    assert {n: t.quantized_dimension for n, t in t8.items()} == {"table": 0, "w1": 1, "w2": 0, "w3": 0}
    assert all((t.storage_min, t.storage_max) == (-127, 127) for t in t8.values())   # LiteRT's narrow range


def test_mse_search_is_never_worse_than_round_to_nearest(model_path):
    r = qr.quantize_weights(model_path, WeightOnlyConfig(bits=4, block_size=32))
    assert all(x.sqnr_db >= x.sqnr_rtn_db - 1e-9 for x in r.layers)
    assert any(x.sqnr_db > x.sqnr_rtn_db + 0.1 for x in r.layers)   # the outliers: clipping them pays


def test_gptq_lowers_the_output_error_on_held_out_inputs():
    """GPTQ minimizes ||X W - X Wq||, not ||W - Wq||: with correlated inputs and one large channel,
    its output error on other samples of the same distribution is below round-to-nearest's."""
    rng = np.random.default_rng(3)
    k, n = 128, 64
    mix = rng.standard_normal((k, k)) / np.sqrt(k)
    scale = np.ones(k)
    scale[5] = 20.0

    def sample(m):
        return (rng.standard_normal((m, k)) @ mix + 0.3 * rng.standard_normal((m, k))) * scale
    x_cal, x_test = sample(2048), sample(2048)
    w = rng.standard_normal((k, n)).astype(np.float32) / np.sqrt(k)
    cfg = WeightOnlyConfig(bits=4, block_size=32)
    h = x_cal.T @ x_cal / len(x_cal)
    q, s, z = gptq(w.astype(np.float64), h, cfg)
    w_gptq = (q - np.repeat(z, 32, axis=0)) * np.repeat(s.astype(np.float64), 32, axis=0)
    rtn = quantize_array(w, channel_axis=1, block_axis=0, config=WeightOnlyConfig(bits=4, block_size=32,
                                                                                  rounding="rtn"))
    w_rtn = (rtn.q - np.repeat(rtn.zero_points, 32, axis=0)) * np.repeat(rtn.scales.astype(np.float64), 32, axis=0)
    err_gptq = np.sum((x_test @ (w - w_gptq)) ** 2)
    err_rtn = np.sum((x_test @ (w - w_rtn)) ** 2)
    assert err_gptq < 0.7 * err_rtn, (err_gptq, err_rtn)
    assert q.min() >= -8 and q.max() <= 7


def test_calibration_uses_gptq_and_lowers_the_output_error(model_path):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((256, 64)).astype(np.float32)
    x[:, 3] *= 30   # an outlier input channel
    cal = {"ids": rng.integers(0, 100, (256, 5)).astype(np.int64), "x": x,
           "img": rng.standard_normal((256, 32, 6, 6)).astype(np.float32)}
    cfg = WeightOnlyConfig(bits=4, block_size=32)
    plain, tuned = qr.quantize_weights(model_path, cfg), qr.quantize_weights(model_path, cfg, cal)
    assert tuned.calibrated and not plain.calibrated
    w1 = _floats(model_path)["w1"]
    err = {k: np.sum((x @ (w1 - _dequantized_weights(r)["w1"])) ** 2) for k, r in (("plain", plain),
                                                                                    ("tuned", tuned))}
    assert err["tuned"] < 0.8 * err["plain"], err
    assert {x.name: x.rounding for x in tuned.layers} == {"table": "mse", "w1": "gptq", "w2": "gptq",
                                                          "w3": "mse, E[x^2]-weighted"}
    assert "w2 (fc2, gemm 32x96, block 32 along axis 1, gptq)" in tuned.summary()
    # GPTQ's integers and scales land in the weights' own layouts (the Gemm's B is transposed):
    # the interpreter is the float model on the dequantized weights, as ONNX Runtime runs it
    import onnxruntime as ort
    proto, deq, f = onnx.load(model_path), _dequantized_weights(tuned), feeds()
    for i, t in enumerate(proto.graph.initializer):
        if t.name in deq:
            proto.graph.initializer[i].CopyFrom(numpy_helper.from_array(deq[t.name], t.name))
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, f)
    got = qr.run(tuned.module, f)
    for name, w in zip(("emb", "out", "conv"), want):
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-5)


def test_summary_lists_layers_left_float_and_sizes(model_path):
    r = qr.quantize_weights(model_path, WeightOnlyConfig(bits=4, block_size=32))
    s = r.summary()
    assert "SQNR dB" in s and "w1 (fc1, matmul 64x96, block 32 along axis 0)" in s
    assert [x.name for x in r.left_float] == ["small"]
    assert "128 elements, under min_elements 1024" in r.left_float[0].reason
    assert r.bytes_after < 0.2 * r.bytes_before and "MB float ->" in s
    d = r.summary_dict()
    assert d["bytes_before"] == r.bytes_before and len(d["quantized"]) == 4


def test_the_ir_prints_parses_and_runs_the_same(model_path):
    r = qr.quantize_weights(model_path, WeightOnlyConfig(bits=4, block_size=32, symmetric=False))
    text = print_module(r.module)
    assert "!quant.uniform<i4:f32:{0:32, 1:1}" in text
    again = parse_module(text)
    assert print_module(again) == text
    f = feeds()
    a, b = qr.run(r.module, f), qr.run(again, f)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    # and what it computes is the float model with the dequantized weights, as ONNX Runtime runs it
    import onnxruntime as ort
    proto, deq = onnx.load(model_path), _dequantized_weights(r)
    for i, t in enumerate(proto.graph.initializer):
        if t.name in deq:
            proto.graph.initializer[i].CopyFrom(numpy_helper.from_array(deq[t.name], t.name))
    ref = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, f)
    for name, want in zip(("emb", "out", "conv"), ref):
        np.testing.assert_allclose(a[name], want, rtol=1e-5, atol=1e-5)
    assert not np.allclose(a["out"], qr.run(qr.load(model_path), f)["out"], rtol=1e-3)   # and not the float one


# -- refusals --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"bits": 3}, "bits must be 4 or 8"), ({"bits": 16}, "bits must be 4 or 8"),
    ({"block_size": 16}, "block size must be an integer in 32..256"), ({"block_size": 512}, "32..256"),
    ({"ops": ("lstm",)}, "unknown weight-only ops"), ({"rounding": "adaround"}, "rounding must be"),
    ({"min_elements": -1}, "min_elements must be")])
def test_bad_configs_are_refused(kwargs, message):
    with pytest.raises(WeightOnlyError, match=message):
        WeightOnlyConfig(**kwargs)


def test_a_model_with_no_weight_large_enough(model_path):
    with pytest.raises(WeightOnlyError, match=r"no weight to quantize .*under min_elements 100000"):
        qr.quantize_weights(model_path, WeightOnlyConfig(min_elements=100_000))


def test_a_block_that_does_not_divide_leaves_the_weight_float(model_path):
    """Refused, not padded: block 48 divides only the Gemm's K (96); the table's rows (64), w1's K (64)
    and the conv's input channels (32) stay float with the reason. Nothing left to quantize: an error."""
    r = qr.quantize_weights(model_path, WeightOnlyConfig(bits=4, block_size=48))
    assert [x.name for x in r.layers] == ["w2"]
    reasons = {x.name: x.reason for x in r.left_float}
    assert "block size 48 does not divide dimension 0 (64)" in reasons["w1"]
    assert "blocks are whole, the weight is not padded" in reasons["table"]
    with pytest.raises(WeightOnlyError, match="does not divide"):
        qr.quantize_weights(model_path, WeightOnlyConfig(bits=4, block_size=40, ops=("matmul", "conv")))


# -- the CLI ---------------------------------------------------------------------------------------

def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_cli_weights_only_without_data(model_path, tmp_path, capsys):
    before = _digest(model_path)
    out = tmp_path / "m.int4.onnx"
    assert cli(["quantize", str(model_path), "--weights-only", "int4", "--block", "32", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "SQNR dB" in text and "left float:" in text and "small (head, matmul, 128 elements)" in text
    assert "file size:" in text and out.is_file()
    assert _digest(model_path) == before   # the input model is never modified
    assert cli(["check", str(out)]) == 0
    assert "4 ops checked, 0 violations" in capsys.readouterr().out


def test_cli_needs_data_outside_weight_only_mode(model_path, tmp_path, capsys):
    assert cli(["quantize", str(model_path), "-o", str(tmp_path / "q.onnx")]) == 1
    assert "needs calibration data: --data CALIB.npz (or --weights-only" in capsys.readouterr().err
    assert cli(["quantize", str(model_path), "--block", "32", "-o", str(tmp_path / "q.onnx")]) == 1
    assert "apply to --weights-only" in capsys.readouterr().err
    assert cli(["quantize", str(model_path), "--weights-only", "int4", "-o", str(tmp_path / "q.pb")]) == 1
    assert "written as .onnx, .mlir or .tflite" in capsys.readouterr().err
    # LiteRT's reference kernels cannot run block-wise weights: a .tflite takes per-channel ones only
    assert cli(["quantize", str(model_path), "--weights-only", "int4", "--block", "32", "-o",
                str(tmp_path / "q.tflite")]) == 1
    assert "block_size=None" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_cli_writes_a_per_channel_weight_only_tflite(model_path, tmp_path, capsys):
    pytest.importorskip("ai_edge_litert.interpreter")
    out = tmp_path / "q.tflite"
    assert cli(["quantize", str(model_path), "--weights-only", "int4", "-o", str(out)]) == 0
    assert "file size:" in capsys.readouterr().out
    from quantir.backends.tflite.reader import load_model
    model = load_model(out)
    ops = {model.operator_codes[op.opcode_index].name for op in model.subgraphs[0].operators}
    assert "DEQUANTIZE" in ops


def test_cli_refuses_to_overwrite_its_input(model_path, capsys):
    before = _digest(model_path)
    assert cli(["quantize", str(model_path), "--weights-only", "int8", "-o", str(model_path)]) == 1
    assert _digest(model_path) == before
    capsys.readouterr()


def test_a_failed_save_leaves_the_old_file(model_path, tmp_path, monkeypatch):
    """Outputs are written atomically: an export that fails leaves the previous file whole, and
    no temporary file behind."""
    out = tmp_path / "m.onnx"
    out.write_bytes(b"previous")
    r = qr.quantize_weights(model_path, WeightOnlyConfig(bits=4, block_size=32))
    import quantir.backends.onnx.weight_only as backend

    def broken(*a, **k):
        raise RuntimeError("export failed half way")
    monkeypatch.setattr(backend, "to_onnx_weight_only", broken)
    with pytest.raises(RuntimeError):
        r.save(out)
    assert out.read_bytes() == b"previous" and os.listdir(tmp_path) == ["m.onnx"]
    monkeypatch.undo()
    r.save(out)
    assert onnx.load(out).graph.node


# -- acceptance (slow) -----------------------------------------------------------------------------

MINILM = ROOT / ".cache/models/minilm_l6.onnx"
VOCAB = ROOT / ".cache/models/minilm_l6.vocab.txt"
EFFICIENTNET = ROOT / ".cache/models/efficientnet_lite0.onnx"


@pytest.mark.slow
@pytest.mark.skipif(not MINILM.is_file(), reason="MiniLM not downloaded (make models)")
def test_minilm_int4_block32_cosine_size_and_onnxruntime(tmp_path):
    """int4 block 32 with GPTQ on 256 calibration sentences: mean sentence-embedding cosine >= 0.99
    against fp32 on every evaluation sentence, in ONNX Runtime, at <= 0.2x the fp32 file."""
    import onnxruntime as ort
    from quantir.datasets import sentences as S
    from quantir.datasets.wordpiece import WordPiece, batches_by_length
    tok = WordPiece.from_file(VOCAB)
    calib = [f for _, f in batches_by_length(tok, list(S.calibration_sentences()[:256]), max_length=128,
                                             batch_size=32)]
    r = qr.quantize_weights(MINILM, WeightOnlyConfig(bits=4, block_size=32), calib)
    out = tmp_path / "minilm.int4.onnx"
    r.save(out)
    assert out.stat().st_size <= 0.2 * MINILM.stat().st_size
    texts = S.evaluation_sentences()
    f32, q4 = (ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]) for p in (MINILM, out))
    cos = []
    for _, batch in batches_by_length(tok, list(texts), max_length=128, batch_size=32):
        a, b = f32.run(None, batch)[0], q4.run(None, batch)[0]
        cos.append(np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)))
    cos = np.concatenate(cos)
    assert len(cos) == len(texts) and cos.mean() >= 0.99, cos.mean()
    assert cli(["check", str(out)]) == 0


@pytest.mark.slow
@pytest.mark.skipif(not EFFICIENTNET.is_file(), reason="EfficientNet-Lite0 not downloaded (make real-models)")
def test_efficientnet_int8_weight_only_top1_on_every_photo(tmp_path):
    import onnxruntime as ort
    photos = pytest.importorskip("quantir.datasets.photos")
    pytest.importorskip("skimage")
    x, names = photos.load_efficientnet_batch()
    r = qr.quantize_weights(EFFICIENTNET, WeightOnlyConfig(bits=8))
    out = tmp_path / "eff.int8.onnx"
    r.save(out)
    f32, q8 = (ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]) for p in (EFFICIENTNET, out))
    name = f32.get_inputs()[0].name
    ref, got = f32.run(None, {name: x})[0], q8.run(None, {name: x})[0]
    assert len(names) >= 5 and np.array_equal(ref.argmax(1), got.argmax(1))
    interp = next(iter(qr.run(r.module, {name: x}).values()))
    assert np.array_equal(interp.argmax(1), ref.argmax(1))
