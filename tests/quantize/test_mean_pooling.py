"""A sentence-embedding head end to end: the integer Cast of the mask (quantize/ops/cast.py) and the
masked mean pooling rewrite (quantize/ops/pooling.py).

The head as sentence-transformers export it: token embeddings from a lookup and a MatMul, the int64
mask Cast to float, ``sum(x · m, 1) / clamp(sum(m, 1), 1e-9)``. Checked against ONNX Runtime on the
original graph (the rewrite computes the same floats, an all-padding row included), against LiteRT's
reference kernels on the .tflite (every tensor), and on sequences longer than any calibrated one."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.runtime import run

N = helper.make_node
D, VOCAB = 16, 40
_WEIGHTS = np.random.default_rng(0)
TABLE = (_WEIGHTS.normal(size=(VOCAB, D)) * 0.5).astype(np.float32)
W = (_WEIGHTS.normal(size=(D, D)) / np.sqrt(D)).astype(np.float32)
BIAS = (0.3 + 0.1 * _WEIGHTS.normal(size=D)).astype(np.float32)   # a common direction, as real encoders have


def _model(eps=1e-9, mask_scale=1.0, normalize=False):
    inits = {"table": TABLE, "w": W, "b": BIAS, "axes1": np.array([1], np.int64), "axes2": np.array([-1], np.int64),
             "eps": np.float32(eps), "k": np.float32(mask_scale)}
    nodes = [N("Gather", ["table", "ids"], ["e"], axis=0), N("MatMul", ["e", "w"], ["h0"]),
             N("Add", ["h0", "b"], ["h"]),
             N("Cast", ["mask"], ["mf"], to=TensorProto.FLOAT), N("Mul", ["mf", "k"], ["mk"]),
             N("Unsqueeze", ["mk", "axes2"], ["mu"]), N("Mul", ["h", "mu"], ["hm"]),
             N("ReduceSum", ["hm", "axes1"], ["s"], keepdims=0), N("ReduceSum", ["mu", "axes1"], ["c"], keepdims=0),
             N("Clip", ["c", "eps"], ["cc"]), N("Div", ["s", "cc"], ["y" if not normalize else "pooled"])]
    if normalize:
        nodes += [N("LpNormalization", ["pooled"], ["y"], axis=-1, p=2)]
    graph = helper.make_graph(
        nodes, "head", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", "S"]),
                        helper.make_tensor_value_info("mask", TensorProto.INT64, ["B", "S"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", D])],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])
    m.ir_version = 9
    return m


def _calibration(n=48, seed=1, lo=3, hi=12):
    rng = np.random.default_rng(seed)
    return [{"ids": rng.integers(0, VOCAB, size=(1, s)).astype(np.int64), "mask": np.ones((1, s), np.int64)}
            for s in (int(rng.integers(lo, hi)) for _ in range(n))]


def _padded(lengths=(10, 7, 1, 0), width=12, seed=2):
    """Rows of ``lengths`` real tokens padded to ``width`` (a 0: a row of padding only)."""
    rng = np.random.default_rng(seed)
    mask = (np.arange(width)[None, :] < np.asarray(lengths)[:, None]).astype(np.int64)
    return {"ids": rng.integers(0, VOCAB, size=mask.shape).astype(np.int64), "mask": mask}


def _cosine(a, b):
    return np.sum(a * b, -1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


@pytest.fixture(scope="module")
def int8():
    return qr.quantize(_model(), _calibration(), qr.Config(progress=False, budget=None))


def test_the_head_becomes_integer_with_no_sum_or_div(int8):
    assert int8.rewritten().get("mean_pooling") == 1
    names = [op.name for op in int8.module.main.ops]
    assert "nn.div" not in names and "qnn.reduce_sum" not in names and "nn.reduce_sum" not in names
    assert names.count("qnn.batch_matmul") == 1 and "qnn.l2_normalization" in names
    assert int8.cast_counts() == (0, 1)   # integer from the inputs to the one dequantize of the output
    cast = next(op for op in int8.module.main.ops if op.name == "nn.cast")
    q = cast.results[0].type.element_type
    assert (q.scale, q.zero_point, q.storage_type.width) == (1.0, 0, 8)   # the mask's integers as they are
    assert int8.spec_report().ok and not int8.spec_report().unknown


def test_the_rewritten_float_graph_computes_what_onnx_runtime_computes(int8):
    """Padded rows, a one-token row and an all-padding row (0 in the original: 0 / clamp(0, eps))."""
    feeds = _padded()
    want = ort.InferenceSession(_model().SerializeToString()).run(None, feeds)[0]
    got = run(int8.float_function, feeds)["y"]
    assert np.all(want[3] == 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_padding_changes_nothing_and_a_padding_row_is_zero(int8):
    feeds = _padded()
    got = run(int8.module, feeds)["y"]
    for i, n in enumerate((10, 7, 1)):
        alone = run(int8.module, {k: v[i:i + 1, :n] for k, v in feeds.items()})["y"]
        np.testing.assert_array_equal(got[i:i + 1], alone)   # the padding has weight 0, exactly
    assert np.all(got[3] == 0)


def test_the_tflite_export_is_bit_exact_with_litert(int8, tmp_path):
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    rng = np.random.default_rng(5)
    mask = (np.arange(12)[None, :] < rng.integers(0, 13, size=(50, 1))).astype(np.int64)
    feeds = {"ids": rng.integers(0, VOCAB, size=(50, 12)).astype(np.int64), "mask": mask}
    report = verify_tflite(int8.save(tmp_path / "head.tflite"), feeds)
    assert report.samples == 50 and report.outputs and report.intermediates
    assert all(d.differing == 0 for d in [*report.outputs, *report.intermediates]), report


def test_sequences_far_longer_than_calibration_keep_their_direction(int8):
    """Calibrated on 3-11 tokens; at 96 and 192 tokens no tensor of the head saturates (the weights
    1/count shrink, the mean keeps the embeddings' range): the cosine with ONNX Runtime stays within
    the int8 error the calibration-length sequences show (measured 0.9996 there)."""
    session = ort.InferenceSession(_model().SerializeToString())
    rng = np.random.default_rng(7)
    short = {"ids": rng.integers(0, VOCAB, size=(16, 10)).astype(np.int64), "mask": np.ones((16, 10), np.int64)}
    base = _cosine(session.run(None, short)[0], run(int8.module, short)["y"]).min()
    for length in (96, 192):
        feeds = {"ids": rng.integers(0, VOCAB, size=(4, length)).astype(np.int64),
                 "mask": np.ones((4, length), np.int64)}
        assert _cosine(session.run(None, feeds)[0], run(int8.module, feeds)["y"]).min() >= base - 0.002


def test_onnx_runtime_runs_the_qdq_export_as_quantir_does(int8, tmp_path):
    feeds = _padded()
    session = ort.InferenceSession(str(int8.save(tmp_path / "head.onnx")))
    want = run(int8.module, feeds)["y"]
    dcast = next(op for op in int8.module.main.ops if op.name == "quant.dcast")
    scale = float(dcast.operands[0].type.element_type.scale)
    np.testing.assert_allclose(session.run(None, feeds)[0], want, atol=2 * scale)


@pytest.mark.parametrize("model, reason", [
    (lambda: _model(mask_scale=2.0), "not only 0 and 1"),
    (lambda: _model(eps=1.5), "not a guard against dividing by zero"),
])
def test_what_is_not_a_masked_mean_is_left_alone_with_its_reason(model, reason):
    r = qr.quantize(model(), _calibration(16), qr.Config(progress=False, budget=None))
    assert "mean_pooling" not in r.rewritten()
    why = [w for (rule, _), w in r.rewrites.refused.items() if rule == "mean_pooling"]
    assert any(reason in w for w in why), why


def test_an_integer_cast_whose_values_leave_int8_stays_float():
    """A cast input calibrated up to 300 would wrap in int8 (LiteRT's CAST is a static_cast)."""
    cal = [{"ids": np.full((1, 4), i, np.int64), "mask": np.full((1, 4), 300, np.int64)} for i in range(16)]
    r = qr.quantize(_model(), cal, qr.Config(progress=False, budget=None))
    assert any("would wrap" in line for line in r.summary().splitlines()), r.summary()
