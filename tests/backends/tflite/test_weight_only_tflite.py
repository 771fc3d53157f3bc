"""Weight-only models as .tflite (``WeightOnlyResult.save("m.tflite")``): int8 / int4 per-channel
constants + DEQUANTIZE + float ops, run by LiteRT's reference kernels (BUILTIN_REF) and compared
with quantir's interpreter on the same module; then the file imported back and run again.

Tolerance: |ours − LiteRT| <= 2e-5 + 2e-5·|LiteRT|. The dequantized weights are the same float32
numbers in both (s·(q − zp), one rounding); the products sum in another order (numpy pairwise,
LiteRT left to right), a few ulp of the partial sums. A Gather of a dequantized table is exact.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import quantir as qr  # noqa: E402
from quantir.backends.tflite.export_weight_only import pack_int4  # noqa: E402
from quantir.backends.tflite.model import Tensor  # noqa: E402
from quantir.backends.tflite.reader import read_model  # noqa: E402
from quantir.backends.tflite.schema import TensorType  # noqa: E402
from quantir.errors import UnsupportedOpError  # noqa: E402
from quantir.frontends.tflite import import_tflite  # noqa: E402
from quantir.quantize.weight_only import WeightOnlyConfig  # noqa: E402

pytest.importorskip("ai_edge_litert.interpreter")
from quantir.backends.tflite.litert import run_model  # noqa: E402

pytestmark = pytest.mark.oracle
ROOT = Path(__file__).resolve().parents[3]
MINILM = ROOT / ".cache/models/minilm_l6.onnx"
VOCAB = ROOT / ".cache/models/minilm_l6.vocab.txt"
EFFICIENTNET = ROOT / ".cache/models/efficientnet_lite0.onnx"
RTOL = ATOL = 2e-5


def _model(path: Path, seed: int = 0) -> Path:
    """ids [N, 5] -> Gather(table [100, 64]); x [N, 64] -> MatMul [64, 96] + bias -> Gemm(transB, bias) [32, 96];
    img [N, 8, 6, 6] -> Conv [16, 8, 3, 3] -> Relu -> depthwise Conv [16, 1, 3, 3]."""
    rng = np.random.default_rng(seed)

    def w(name, *shape):
        a = (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)
        a.ravel()[rng.integers(0, a.size, 3)] *= 6   # a few outliers, as trained weights have
        return numpy_helper.from_array(a, name)
    inits = [w("table", 100, 64), w("w1", 64, 96), w("w2", 32, 96),
             numpy_helper.from_array(rng.standard_normal(96).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b2"),
             w("w3", 16, 8, 3, 3), w("w4", 16, 1, 3, 3)]
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"], name="embed"),
             helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
             helper.make_node("Add", ["b1", "h0"], ["h"], name="fc1_bias"),
             helper.make_node("Gemm", ["h", "w2", "b2"], ["g"], name="fc2", transB=1),
             helper.make_node("Conv", ["img", "w3"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w4"], ["dw"], name="dw", group=16)]
    graph = helper.make_graph(
        nodes, "wo", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n", 5]),
                      helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64]),
                      helper.make_tensor_value_info("img", TensorProto.FLOAT, ["n", 8, 6, 6])],
        [helper.make_tensor_value_info("emb", TensorProto.FLOAT, ["n", 5, 64]),
         helper.make_tensor_value_info("g", TensorProto.FLOAT, ["n", 32]),
         helper.make_tensor_value_info("dw", TensorProto.FLOAT, ["n", 16, 4, 4])], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


def _feeds(n: int = 3, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    return {"ids": rng.integers(0, 100, (n, 5)).astype(np.int64),
            "x": rng.standard_normal((n, 64)).astype(np.float32),
            "img": rng.standard_normal((n, 8, 6, 6)).astype(np.float32)}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory) -> Path:
    return _model(tmp_path_factory.mktemp("wo_tflite") / "model.onnx")


def _litert(data: bytes, feeds: dict) -> list[np.ndarray]:
    sg = read_model(data).subgraphs[0]
    return run_model(data, [feeds[sg.tensors[i].name] for i in sg.inputs])


def _assert_close(ours: list[np.ndarray], theirs: list[np.ndarray]) -> None:
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("bits,symmetric", [(8, True), (8, False), (4, True), (4, False)])
def test_weight_only_tflite_runs_in_litert_and_imports_back(model_path, tmp_path, bits, symmetric):
    result = qr.quantize_weights(model_path, WeightOnlyConfig(bits=bits, symmetric=symmetric, min_elements=0))
    assert len(result.layers) == 5
    out = result.save(tmp_path / "m.tflite")
    data = out.read_bytes()
    model = read_model(data)
    sg = model.subgraphs[0]
    ops = [model.operator_codes[o.opcode_index].name for o in sg.operators]
    assert ops.count("DEQUANTIZE") == 5 and ops.count("FULLY_CONNECTED") == 2 and "BATCH_MATMUL" not in ops
    assert "ADD" not in ops   # the MatMul's bias Add and the Gemm's C are the FULLY_CONNECTEDs' biases
    assert {"GATHER", "CONV_2D", "DEPTHWISE_CONV_2D"} <= set(ops)
    storage = TensorType.INT8 if bits == 8 else TensorType.INT4
    weights = [sg.tensors[o.inputs[0]] for o in sg.operators
               if model.operator_codes[o.opcode_index].name == "DEQUANTIZE"]
    assert all(t.type is storage and t.quantization.per_axis for t in weights)
    # per output channel, in the layout of the reader: FC [N, K] axis 0, conv OHWI axis 0, depthwise 1HWC axis 3
    axes = {t.shape: t.quantization.quantized_dimension for t in weights}
    assert axes == {(100, 64): 0, (96, 64): 0, (32, 96): 0, (16, 3, 3, 8): 0, (1, 3, 3, 16): 3}
    assert any(any(z != 0 for z in t.quantization.zero_point) for t in weights) == (not symmetric)
    # no float copy of a weight in the file: the float32 constants are the biases
    assert all(t.type is not TensorType.FLOAT32 or len(model.buffers[t.buffer]) <= 4 * 96 for t in sg.tensors)

    feeds = _feeds()
    ours = list(qr.run(result.module, feeds).values())
    _assert_close(ours, _litert(data, feeds))
    back = list(qr.run(import_tflite(data).module, feeds).values())
    _assert_close(back, ours)


def test_int4_matmul_matches_litert_and_halves_the_int8_file(tmp_path):
    """A MatMul [256, 384] with int4 per-channel weights: LiteRT == the interpreter, and the file
    is smaller than the int8 one by half the weight's bytes (two values per byte)."""
    rng = np.random.default_rng(3)
    k, n = 256, 384
    w = numpy_helper.from_array((rng.standard_normal((k, n)) / 16).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7, n])], initializer=[w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "mm.onnx")
    feeds = {"x": rng.standard_normal((2, 7, k)).astype(np.float32)}
    sizes = {}
    for bits in (8, 4):
        result = qr.quantize_weights(tmp_path / "mm.onnx", WeightOnlyConfig(bits=bits))
        out = result.save(tmp_path / f"mm{bits}.tflite")
        sizes[bits] = out.stat().st_size
        _assert_close(list(qr.run(result.module, feeds).values()), _litert(out.read_bytes(), feeds))
    assert sizes[8] - sizes[4] >= k * n // 2 - 64, sizes


def test_int4_packing_is_low_nibble_first():
    q = np.array([[1, -2, 3], [-8, 7, 0]], np.int8)
    assert pack_int4(q) == bytes([0xE1, 0x83, 0x07])
    assert pack_int4(np.array([1, -1, 5], np.int8)) == bytes([0xF1, 0x05])   # an odd count: a zero padding nibble
    from quantir.backends.tflite.model import Model, SubGraph
    t = Tensor("w", (2, 3), TensorType.INT4, buffer=1)
    model = Model((), (SubGraph((t,), (), (), ()),), (b"", pack_int4(q)))
    np.testing.assert_array_equal(model.tensor_data(t), q)


def test_blockwise_weights_are_refused_for_tflite(model_path, tmp_path):
    result = qr.quantize_weights(model_path, WeightOnlyConfig(bits=4, block_size=32))
    out = tmp_path / "m.tflite"
    with pytest.raises(UnsupportedOpError, match=r"weight '\w+' is quantized block-wise \(blocks of 32 along axis "
                                                 r"\d\).*block_size=None"):
        result.save(out)
    assert not out.exists()


def test_gemm_alpha_with_a_quantized_b_is_refused(tmp_path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], alpha=0.5)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])], initializer=[w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "g.onnx")
    result = qr.quantize_weights(tmp_path / "g.onnx", WeightOnlyConfig(bits=8))
    with pytest.raises(UnsupportedOpError, match="alpha 0.5 with a quantized B"):
        result.save(tmp_path / "g.tflite")


@pytest.mark.skipif(not EFFICIENTNET.is_file(), reason="EfficientNet-Lite0 not downloaded (make real-models)")
def test_efficientnet_int8_weight_only_tflite_top1_on_every_photo(tmp_path):
    """int8 per-channel weight-only EfficientNet-Lite0 in LiteRT: top-1 equal to fp32 (ONNX Runtime)
    on every real photo, and the logits within float rounding of quantir's interpreter."""
    import onnxruntime as ort
    photos = pytest.importorskip("quantir.datasets.photos")
    pytest.importorskip("skimage")
    x, names = photos.load_efficientnet_batch()
    result = qr.quantize_weights(EFFICIENTNET, WeightOnlyConfig(bits=8))
    out = result.save(tmp_path / "eff.int8.tflite")
    assert out.stat().st_size <= 0.3 * EFFICIENTNET.stat().st_size
    f32 = ort.InferenceSession(str(EFFICIENTNET), providers=["CPUExecutionProvider"])
    name = f32.get_inputs()[0].name
    ref = f32.run(None, {name: x})[0]
    (lite,) = run_model(out.read_bytes(), [x])
    assert len(names) >= 5 and np.array_equal(lite.argmax(1), ref.argmax(1))
    (ours,) = qr.run(result.module, {name: x}).values()
    # 16 convolutions deep: the sum-order differences grow to a few ulp of the largest logit
    np.testing.assert_allclose(lite, ours, rtol=0, atol=5e-6 * float(np.abs(ours).max()))


@pytest.mark.slow
@pytest.mark.skipif(not MINILM.is_file(), reason="MiniLM not downloaded (make models)")
def test_minilm_int4_per_channel_tflite_runs_in_litert(tmp_path):
    """all-MiniLM-L6-v2 int4 per-channel (LiteRT has no block form here) in LiteRT: equal to the
    interpreter within float rounding, <= 0.15x the fp32 file. Cosine vs fp32 on 64 evaluation
    sentences is a regression floor, not the issue's bar (that is int4 block 32, ONNX): measured
    0.940 mean on all 713 sentences (int8 per channel: 0.9996)."""
    import onnxruntime as ort
    from quantir.datasets import sentences as S
    from quantir.datasets.wordpiece import WordPiece, batches_by_length
    tok = WordPiece.from_file(VOCAB)
    result = qr.quantize_weights(MINILM, WeightOnlyConfig(bits=4))
    out = result.save(tmp_path / "minilm.int4.tflite")
    assert out.stat().st_size <= 0.15 * MINILM.stat().st_size
    data = out.read_bytes()
    f32 = ort.InferenceSession(str(MINILM), providers=["CPUExecutionProvider"])
    cos = []
    for i, (_, batch) in enumerate(batches_by_length(tok, list(S.evaluation_sentences()[:64]), max_length=128,
                                                     batch_size=32)):
        (lite,) = _litert(data, batch)
        if i == 0:
            (ours,) = qr.run(result.module, batch).values()
            np.testing.assert_allclose(lite, ours, rtol=RTOL, atol=ATOL)
        ref = f32.run(None, batch)[0]
        cos.append(np.sum(ref * lite, 1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(lite, axis=1)))
    cos = np.concatenate(cos)
    print(f"MiniLM int4 per-channel .tflite, LiteRT vs fp32: cosine mean {cos.mean():.4f} min {cos.min():.4f}")
    assert len(cos) == 64 and cos.mean() >= 0.9, cos.mean()
