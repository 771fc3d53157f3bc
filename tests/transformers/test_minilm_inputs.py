"""all-MiniLM-L6-v2, integer, on the inputs users get wrong (issue 15, done-when "Bad input"):
sequences longer than every calibration sentence, all-padding rows beside normal ones, a batch whose
mask is all zeros, and token ids outside the vocabulary. Each must give a sound result or a typed
error, in quantir's interpreter and in ONNX Runtime on the QDQ export.

One quantization for the module: 32 calibration sentences of at most 24 tokens, ``budget=None``
and ``activations="int16"``. The default budget search takes 50-120 s here on these sentences (too
slow for a unit test) and promotes 152 of 196 tensor classes to int16 anyway; with ``budget=None``
alone the model is all int8, at cosine ~0.72 of fp32 on ordinary sentences, where no comparison
with fp32 could tell a bad-input failure from the ordinary error. All int16 is the budget's limit
(cosine 0.998 on ordinary sentences) and takes a few seconds. Measured once with the default Config
(165 s, before mean pooling weighed the tokens first): cosine 0.996 on ordinary sentences, the same
exact zeros and errors as here."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import quantir as qr
from quantir.errors import ShapeError
from quantir.runtime import run

VOCAB = 30522          # rows of the word embedding table
POSITIONS = 512        # rows of the position embedding table
RUNTIMES = ("quantir", "onnxruntime")


def _cosine(a, b):
    return np.sum(a * b, -1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


@pytest.fixture(scope="module")
def tok(minilm_tokenizer_files):
    from quantir.datasets.wordpiece import WordPiece
    return WordPiece.from_file(minilm_tokenizer_files["vocab.txt"])


@pytest.fixture(scope="module")
def quantized(minilm_path, tok):
    from quantir.datasets import sentences
    from quantir.datasets.wordpiece import batches_by_length
    short = [s for s in sentences.calibration_sentences() if len(tok.encode(s)) <= 24][:32]
    calibration = [f for _, f in batches_by_length(tok, short, max_length=24, batch_size=16)]
    return qr.quantize(minilm_path, calibration, qr.Config(progress=False, budget=None, activations="int16"))


@pytest.fixture(scope="module")
def fp32(minilm_path):
    return ort.InferenceSession(str(minilm_path), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def runtimes(quantized, tmp_path_factory):
    """Each runtime as ``feeds -> sentence embeddings``."""
    path = quantized.save(tmp_path_factory.mktemp("minilm") / "minilm_int16.onnx")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return {"quantir": lambda f: run(quantized.module, f)["sentence_embedding"],
            "onnxruntime": lambda f: session.run(None, f)[0]}


@pytest.fixture(scope="module")
def sentences_of(tok):
    from quantir.datasets import sentences
    evaluation = list(sentences.evaluation_sentences())

    def make(rows: int, max_length: int):
        """``rows`` runs of 40 held-out sentences each, cut at ``max_length`` tokens."""
        return tok([" ".join(evaluation[40 * i:40 * (i + 1)]) for i in range(rows)], max_length=max_length)
    return make


# -- longer than calibration ----------------------------------------------------------------------

def _last_hidden_state(module, model_path):
    """The ONNX name of the encoder's last hidden state (what mean pooling's masking Mul reads), and
    the integer module's value of it: the result of the last op lowered from the node that makes it."""
    graph = onnx.load(str(model_path)).graph
    made_by = {o: n for n in graph.node for o in n.output}
    mul = next(made_by[n.input[0]] for n in graph.node if n.op_type == "ReduceSum" and n.input[0] in made_by
               and made_by[n.input[0]].op_type == "Mul")
    node = made_by[mul.input[0]]
    last = [op for op in module.main.ops if op.label and op.label.split("/")[0] == node.name][-1]
    return mul.input[0], last.results[0]


@pytest.fixture(scope="module")
def hidden(quantized, minilm_path):
    """The last hidden state's ONNX name, its integer value, and fp32 ONNX Runtime that outputs it."""
    name, value = _last_hidden_state(quantized.module, minilm_path)
    model = onnx.load(str(minilm_path))
    model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    return name, value, ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("length", [128, 256])
def test_the_encoder_stays_sound_on_sequences_longer_than_calibration(quantized, hidden, sentences_of, length):
    """The token states that reach mean pooling, from quantir's integers, pooled in float: as near
    fp32 on 128 and 256 tokens (5-10x the calibration lengths; the position table has 512 rows) as
    the issue asks of ordinary sentences, 0.99 (measured 0.9986/0.9993 and 0.9971/0.9982; single
    tokens dip to 0.97 and 0.95, against 0.998 at 24 tokens)."""
    feeds = sentences_of(2, length)
    assert feeds["input_ids"].shape == (2, length)
    name, value, session = hidden
    want = session.run([name], feeds)[0]
    q = value.type.element_type
    stored = run(quantized.module, feeds, intermediates=[value.name_hint])[value.name_hint]
    states = (stored.astype(np.float64) - q.zero_point) * q.scale
    assert _cosine(want.mean(1), states.mean(1)).min() >= 0.99   # every mask entry is 1: a plain mean


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("length", [128, 256])
def test_sentence_embeddings_stay_sound_on_sequences_longer_than_calibration(fp32, runtimes, sentences_of,
                                                                           runtime, length):
    """The issue's bar for ordinary sentences, 0.99: measured 0.9975/0.9981 at 128 tokens and
    0.9954/0.9971 at 256 in quantir (ONNX Runtime within 5e-4), 5-10x the calibrated length. Mean
    pooling weighs the tokens by 1/count before summing (quantize/ops/pooling.py), so no range in
    it grows with the length; with a masked sum and a count calibrated on <= 24 tokens both
    saturated (0.950/0.914 at 256)."""
    feeds = sentences_of(2, length)
    got = runtimes[runtime](feeds)
    assert np.all(np.isfinite(got))
    assert _cosine(fp32.run(None, feeds)[0], got).min() >= 0.99


# -- padding rows and zero masks ---------------------------------------------------------------------

@pytest.mark.parametrize("runtime", RUNTIMES)
def test_all_padding_rows_leave_the_other_rows_alone_and_embed_to_zero(fp32, runtimes, tok, runtime):
    from quantir.datasets import sentences
    feeds = tok(list(sentences.evaluation_sentences()[:3]), max_length=24)
    # rows 1 and 3 all padding ([PAD] ids, mask 0) between and after the sentences
    padded = {k: np.zeros((5, v.shape[1]), v.dtype) for k, v in feeds.items()}
    for k, v in feeds.items():
        padded[k][[0, 2, 4]] = v
    got, alone = runtimes[runtime](padded), runtimes[runtime](feeds)
    # no op mixes batch rows: the sentences' embeddings are those of the batch without the padding
    # rows, to the bit in quantir's integers, within float rounding in ONNX Runtime
    assert np.abs(got[[0, 2, 4]] - alone).max() <= (0 if runtime == "quantir" else 1e-6)
    # fp32's mean of nothing: sum 0 over a count clipped to 1e-9 is 0, and the L2 normalization
    # divides 0 by a norm clipped to 1e-12: exactly zero. Zero is exact in every integer format.
    want = fp32.run(None, padded)[0]
    assert np.all(want[[1, 3]] == 0)
    assert np.all(np.isfinite(got)) and np.all(got[[1, 3]] == 0)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_batch_whose_mask_is_all_zeros_embeds_to_zero_as_fp32_does(fp32, runtimes, tok, runtime):
    from quantir.datasets import sentences
    feeds = tok(list(sentences.evaluation_sentences()[:3]), max_length=24)
    feeds["attention_mask"][:] = 0          # real tokens, none of them attended
    assert np.all(fp32.run(None, feeds)[0] == 0)
    got = runtimes[runtime](feeds)
    assert np.all(np.isfinite(got)) and np.all(got == 0)


# -- indices outside the tables ----------------------------------------------------------------------

@pytest.mark.parametrize("feed, bad, node", [("input_ids", VOCAB, "node_embedding"),
                                             ("input_ids", 10 ** 9, "node_embedding"),
                                             ("input_ids", -1, "node_embedding"),
                                             ("input_ids", -VOCAB - 1, "node_embedding"),
                                             ("token_type_ids", 2, "node_embedding_1")])
def test_an_index_outside_its_table_is_a_typed_error(quantized, runtimes, tok, feed, bad, node):
    from quantir.datasets import sentences
    feeds = tok(list(sentences.evaluation_sentences()[:2]), max_length=24)
    feeds[feed][1, 3] = bad
    table = "word" if feed == "input_ids" else "token_type"
    rows = VOCAB if feed == "input_ids" else 2
    with pytest.raises(ShapeError, match=rf"^'nn.gather' \(node '{node}'\): index {bad} at \[1, 3\] of indices "
                                         rf"'{feed}' is out of range for axis 0 of size {rows} of "
                                         rf"'embeddings.{table}_embeddings.weight__q\d+' \(valid: 0 to {rows - 1}\)"):
        runtimes["quantir"](feeds)
    # ONNX Runtime follows ONNX's Gather: an index in [-rows, rows) is valid, negative ones count
    # from the end (so -1 reads the table's last row, with no error), the rest are refused
    if -rows <= bad < 0:
        wrapped = {k: v.copy() for k, v in feeds.items()}
        wrapped[feed][1, 3] = rows + bad
        assert np.array_equal(runtimes["onnxruntime"](feeds), runtimes["onnxruntime"](wrapped))
    else:
        with pytest.raises(Exception, match="out of data bounds"):
            runtimes["onnxruntime"](feeds)


def test_a_sequence_past_the_position_table_is_a_typed_error(runtimes, tok):
    from quantir.datasets import sentences
    text = " ".join(sentences.evaluation_sentences()[:80])
    feeds = tok([text], max_length=POSITIONS + 1)
    assert feeds["input_ids"].shape == (1, POSITIONS + 1)
    with pytest.raises(ShapeError, match=rf"^'nn.gather' \(node 'node_embedding_2'\): index {POSITIONS} at "
                                         rf"\[0, {POSITIONS}\] .* size {POSITIONS} of "
                                         r"'embeddings.position_embeddings.weight__q\d+'"):
        runtimes["quantir"](feeds)
    with pytest.raises(Exception, match="out of data bounds"):
        runtimes["onnxruntime"](feeds)
