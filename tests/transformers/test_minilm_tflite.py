"""all-MiniLM-L6-v2 as a fully integer .tflite (issue 15): token ids and the mask stay int64 inputs,
everything from the embedding tables to the L2-normalized sentence embedding is integer, and the
file runs in LiteRT with a dynamic batch and sequence length. Its every tensor (outputs and
intermediates) equals LiteRT's BUILTIN_REF on 50 held-out sentences in padded batches, and
`quantir check` passes on it — for the int8 model, and (make bench: ~60 s) for int16 activations.

The default Config (mixed precision against a budget) takes a minute or more; bench/transformers.py
checks that model the same way and reports its cosine in LiteRT."""
from __future__ import annotations


import pytest

import quantir as qr

pytest.importorskip("ai_edge_litert.interpreter")


@pytest.fixture(scope="module")
def data(minilm_tokenizer_files):
    from quantir.datasets import sentences
    from quantir.datasets.wordpiece import WordPiece, batches_by_length
    tok = WordPiece.from_file(minilm_tokenizer_files["vocab.txt"])
    calibration = [f for _, f in batches_by_length(tok, list(sentences.calibration_sentences()[:48]),
                                                   max_length=64, batch_size=16)]
    evaluation = tok(list(sentences.evaluation_sentences()[:50]), max_length=64)   # one padded batch of 50
    return calibration, evaluation


@pytest.mark.parametrize("activations", ["int8", pytest.param("int16", marks=pytest.mark.slow)])
def test_minilm_tflite_is_bit_exact_with_litert_and_passes_the_spec_check(minilm_path, data, activations, tmp_path):
    from quantir.cli.main import main
    from quantir.verify import verify_tflite
    calibration, evaluation = data
    r = qr.quantize(minilm_path, calibration, qr.Config(progress=False, budget=None, activations=activations))
    assert r.cast_counts() == (0, 1), r.summary()   # integer from the int64 inputs to the one output dequantize
    path = r.save(tmp_path / f"minilm_{activations}.tflite")
    report = verify_tflite(path, evaluation, batch=25)
    assert report.samples == 50 and len(report.intermediates) > 300
    assert all(t.differing == 0 for t in report.outputs + report.intermediates), \
        [t for t in report.outputs + report.intermediates if t.differing][:5]
    assert main(["check", str(path)]) == 0
