"""all-MiniLM-L6-v2 as LiteRT's dynamic-range model (issue 16): `quantir quantize --dynamic -o
m.tflite`, no calibration data. The two embedding tables and the 36 linear layers store int8
weights (per channel, [-127, 127]) and quantize their float inputs per row at run time; the rest
stays float32. In LiteRT (BUILTIN_REF) the sentence embeddings keep cosine >= 0.995 against ONNX
Runtime's fp32 model, every hybrid op is bit-exact with quantir's kernel on LiteRT's own inputs,
and `quantir check` passes."""
from __future__ import annotations

import numpy as np
import pytest

from ..cli.test_run_show import quantir
from quantir.verify import verify_tflite

pytest.importorskip("ai_edge_litert.interpreter")
ort = pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def written(minilm_path, minilm_tokenizer_files, tmp_path_factory):
    from quantir.datasets import sentences
    from quantir.datasets.wordpiece import WordPiece
    d = tmp_path_factory.mktemp("minilm_dynamic")
    r = quantir("quantize", minilm_path, "--dynamic", "-o", d / "m.tflite")
    assert r.returncode == 0, r.stderr
    tok = WordPiece.from_file(minilm_tokenizer_files["vocab.txt"])
    feeds = tok(list(sentences.evaluation_sentences()[:64]), max_length=64)
    np.savez(d / "feeds.npz", **{k: v[:16] for k, v in feeds.items()})   # verify runs every op twice: 16 suffice
    return d, feeds, r.stdout


def test_summary_names_what_became_int8_and_what_stayed_float(written):
    _, _, out = written
    assert "38 weights int8 per channel" in out and "embedding_lookup" in out and "float:" in out
    assert "->" in out and "bytes" in out    # the constants' size before and after


def test_litert_cosine_and_size(written, minilm_path):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    d, feeds, _ = written
    assert (d / "m.tflite").stat().st_size <= 0.3 * minilm_path.stat().st_size
    ref = ort.InferenceSession(str(minilm_path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    it = Interpreter(model_path=str(d / "m.tflite"), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    for t in it.get_input_details():
        it.resize_tensor_input(t["index"], feeds[t["name"]].shape)
    it.allocate_tensors()
    for t in it.get_input_details():
        it.set_tensor(t["index"], feeds[t["name"]].astype(t["dtype"]))
    it.invoke()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    cos = np.sum(ref * got, 1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(got, axis=1)
    assert cos.mean() >= 0.995 and cos.min() >= 0.99, (cos.mean(), cos.min())


def test_every_hybrid_op_is_bit_exact_and_the_file_passes_check(written):
    d, _, _ = written
    report = verify_tflite(d / "m.tflite", d / "feeds.npz", batch=16, isolated=True)
    hybrid = [x for x in report.ops if x.op.startswith("hybrid.")]
    assert len(hybrid) == 38 and all(x.output.equal for x in hybrid), [x for x in hybrid if not x.output.equal]
    assert report.ops_ok, [x for x in report.ops if not x.ok][:5]
    r = quantir("check", d / "m.tflite")
    assert r.returncode == 0 and ", 0 violations" in r.stdout, r.stdout + r.stderr
