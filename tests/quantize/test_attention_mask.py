"""Additive attention masks (quantize.attention_mask) and embedding lookups, end to end.

An attention block in the shape exporters write it: scores from a MatMul, a bias
``(1 - Cast(mask)) · finfo.min`` broadcast over heads, Softmax, then ``P · V``. Calibrated on
samples without padding (one sentence per sample, as users calibrate), the integer model must
still mask the padding of batched inputs: masked positions get (nearly) no weight, in quantir's
interpreter and in ONNX Runtime on the QDQ export."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.quantize import attention_mask as am
from quantir.runtime import run

N = helper.make_node
D, VOCAB = 16, 50
# The weights are drawn once, at import, from a generator of their own; every data helper below
# makes its own seeded generator, so no test's data depends on which tests ran before it.
_WEIGHTS = np.random.default_rng(0)
TABLE = (_WEIGHTS.normal(size=(VOCAB, D)) * 0.5).astype(np.float32)
WQ, WK, WV = ((_WEIGHTS.normal(size=(D, D)) / np.sqrt(D)).astype(np.float32) for _ in range(3))
LENGTHS = (10, 7, 4, 2)   # the real tokens of each row of _padded_batch


def _model(big=float(np.finfo(np.float32).min)):
    inits = {"table": TABLE, "wq": WQ, "wk": WK, "wv": WV, "one": np.float32(1.0), "big": np.float32(big),
             "axes": np.array([1], np.int64), "scale": np.float32(1 / np.sqrt(D))}
    nodes = [N("Gather", ["table", "ids"], ["x"], axis=0, name="embedding"),
             N("MatMul", ["x", "wq"], ["q"]), N("MatMul", ["x", "wk"], ["k"]), N("MatMul", ["x", "wv"], ["v"]),
             N("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), N("MatMul", ["q", "kt"], ["qk"]),
             N("Mul", ["qk", "scale"], ["scores"]),
             N("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT), N("Sub", ["one", "maskf"], ["inv"]),
             N("Unsqueeze", ["inv", "axes"], ["inv3"]), N("Mul", ["inv3", "big"], ["bias"], name="mask_bias"),
             N("Add", ["scores", "bias"], ["masked"], name="masked_add"),
             N("Softmax", ["masked"], ["p"], axis=-1), N("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(
        nodes, "attention", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", "S"]),
                             helper.make_tensor_value_info("mask", TensorProto.INT64, ["B", "S"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", D])],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 18)])
    m.ir_version = 9
    return m


def _calibration(n=48, seed=1):
    """One unpadded sequence per sample (3 to 11 tokens): the mask is all ones."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        s = int(rng.integers(3, 12))
        out.append({"ids": rng.integers(0, VOCAB, size=(1, s)).astype(np.int64), "mask": np.ones((1, s), np.int64)})
    return out


def _padded_batch(seed=2):
    """Four rows of 10 tokens with 10, 7, 4 and 2 real ones, right-padded."""
    ids = np.random.default_rng(seed).integers(0, VOCAB, size=(4, 10)).astype(np.int64)
    mask = np.ones((4, 10), np.int64)
    for row, length in enumerate(LENGTHS):
        mask[row, length:] = 0
    return {"ids": ids, "mask": mask}


def _float(model, feeds):
    return ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]


@pytest.fixture(scope="module")
def quantized():
    return qr.quantize(_model(), _calibration(), qr.Config(progress=False))


def test_the_mask_bias_is_bounded_and_reported(quantized):
    assert quantized.rewrites.hits["attention_mask"] == 1
    assert "attention_mask" in quantized.summary()


def test_padding_stays_masked_in_the_interpreter_and_in_onnx_runtime(quantized, tmp_path):
    """Each check compares the integer model with itself on inputs that differ only in their padding,
    so it holds whatever the int8 error against float (which the ranges of 48 calibration sequences
    set: a short row averages few value vectors and can reach past them, as rows 2 and 3 do here)."""
    feeds = _padded_batch()
    ids, mask = feeds["ids"], feeds["mask"]
    dcast = quantized.module.main.ops[-1].operands[0].owner   # the return reads y's dequantization
    step = dcast.operands[0].type.element_type.scale           # one int8 step of y
    session = ort.InferenceSession(str(quantized.save(tmp_path / "q.onnx")))
    for execute in (lambda f: run(quantized.module, f)["y"], lambda f: session.run(None, f)[0]):
        got = execute(feeds)
        for row, length in enumerate(LENGTHS):
            # a row's real tokens give what the row gives run alone, without padding: a masked key
            # with any weight would move them (up to one step: ONNX Runtime rounds in float)
            alone = execute({"ids": ids[row:row + 1, :length], "mask": np.ones((1, length), np.int64)})
            assert np.abs(got[row, :length] - alone[0]).max() <= step, row
            # a padding token's own output (a query no consumer reads) is the same beside one masked
            # key as beside all of them (the block has no positions: only the keys' tokens matter)
            for j in range(length, ids.shape[1]):
                one = execute({"ids": np.append(ids[row, :length], ids[row, j])[None],
                               "mask": np.append(np.ones(length, np.int64), 0)[None]})
                assert np.abs(got[row, j] - one[0, length]).max() <= step, (row, j)
    # the checks can tell a lost mask apart: dropping the mask moves the float output of the padded
    # rows' real tokens by many steps of y
    want, unmasked = _float(_model(), feeds), _float(_model(big=0.0), feeds)
    real = mask.astype(bool)
    assert np.abs(unmasked - want)[1:][real[1:]].max() > 20 * step


def test_the_masked_scores_keep_a_fine_scale(quantized):
    """The Add's scale comes from the attended scores, not from the -3.4e38 of the bias."""
    add = next(op for op in quantized.module.main.ops if op.label == "masked_add")
    assert add.results[0].type.element_type.scale < 0.5
    bias = add.operands[1].type.element_type
    assert bias.scale * 255 > am.SATURATION   # the bias reaches below the span: masked positions saturate


def test_mask_values_are_enumerated_from_zero_and_one():
    from quantir import load
    fn = load(_model()).main
    bias = next(op for op in fn.ops if op.label == "mask_bias").results[0]
    inv = bias.owner.operands[0]
    assert am.mask_range(inv) == (0.0, 1.0)
    lo, hi = am.mask_range(bias)
    assert lo == pytest.approx(float(np.finfo(np.float32).min)) and hi == 0.0
    scores = next(op for op in fn.ops if op.label == "masked_add").operands[0]
    assert am.input_derived(bias) and not am.input_derived(scores)   # the embedding lookup makes activations


def test_an_add_that_is_not_read_by_softmax_is_not_a_masked_add():
    from quantir import load
    m = _model()
    m.graph.node[-2].op_type = "Relu"   # Softmax -> Relu
    del m.graph.node[-2].attribute[:]
    fn = load(m).main
    assert not any(am.is_masked_add(op) for op in fn.ops)


def test_the_embedding_lookup_is_an_int8_table_covering_every_row(quantized):
    gather = next(op for op in quantized.module.main.ops if op.label == "embedding")
    q = gather.results[0].type.element_type
    lo, hi = (np.iinfo(np.int8).min - q.zero_point) * q.scale, (np.iinfo(np.int8).max - q.zero_point) * q.scale
    assert lo <= TABLE.min() + q.scale and hi >= TABLE.max() - q.scale
    assert quantized.quantized_ops()["gather"] == 1


@pytest.mark.parametrize("bad", [VOCAB, 10 ** 9, -1])
def test_a_token_id_past_the_table_is_an_error_not_a_value(quantized, bad):
    """Past the table, or negative: LiteRT's GATHER refuses both, so the integer model does too
    (the float model counts -1 from the end, as ONNX does)."""
    from quantir.errors import ShapeError
    feeds = _padded_batch()
    feeds["ids"][2, 1] = bad
    with pytest.raises(ShapeError, match=rf"^'nn.gather' \(node 'embedding'\): index {bad} at \[2, 1\] of "
                                         rf"indices 'ids' is out of range for axis 0 of size {VOCAB} "):
        run(quantized.module, feeds)


def test_a_mask_of_zeros_and_longer_sequences_give_sound_results(quantized):
    """All-padding rows attend uniformly in float (every score is -3.4e38 + s) and in integers
    (every masked score saturates at the same floor); sequences longer than any calibration one
    run (the calibration ones were 3-11 tokens)."""
    def cosine(a, b):
        return np.sum(a * b, -1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)

    feeds = _padded_batch()
    feeds["mask"][1] = 0                                   # one row all padding
    want, got = _float(_model(), feeds)[1], run(quantized.module, feeds)["y"][1]
    assert np.all(np.isfinite(got))
    # uniform weights: every token of the row reads the same mix of the values, to the bit
    assert np.all(got == got[0])
    # ... the mean of the row's values: the weights are 26/256 (1/10 rounded to the softmax's step)
    # where float has 1/10, a common factor a cosine ignores, so only the int8 rounding of the
    # values and the output is left (measured >= 0.9985 over 36 calibration/batch seeds)
    assert cosine(want, got).min() > 0.99, cosine(want, got).min()
    # 40 tokens, 4x the longest calibration sequence: weights near 1/40 on the softmax's 1/256 steps
    # round coarser (measured >= 0.988 over the same seeds), still near float
    rng = np.random.default_rng(3)
    long = {"ids": rng.integers(0, VOCAB, size=(2, 40)).astype(np.int64), "mask": np.ones((2, 40), np.int64)}
    want, got = _float(_model(), long), run(quantized.module, long)["y"]
    assert np.all(np.isfinite(got)) and cosine(want, got).min() > 0.98, cosine(want, got).min()


def _select_model(form: str):
    """The same block with the mask written as exporters write it: ``masked_fill`` of the scores
    (Where(Not(mask), -inf, scores)), ``where`` (Where(mask, scores, finfo.min)), or Hugging Face's
    bias (Where(Cast(1 - mask, bool), finfo.min, 1 - mask) added to the scores)."""
    m = _model()
    g = m.graph
    keep = [n for n in g.node if n.name not in ("mask_bias", "masked_add")]
    extra = [numpy_helper.from_array(np.float32(-np.inf), "ninf")]
    if form == "masked_fill":
        tail = [N("Cast", ["mask"], ["mb"], to=TensorProto.BOOL), N("Unsqueeze", ["mb", "axes"], ["mb3"]),
                N("Not", ["mb3"], ["pad"]), N("Where", ["pad", "ninf", "scores"], ["masked"], name="masked_add")]
    elif form == "where":
        tail = [N("Cast", ["mask"], ["mb"], to=TensorProto.BOOL), N("Unsqueeze", ["mb", "axes"], ["mb3"]),
                N("Where", ["mb3", "scores", "big"], ["masked"], name="masked_add")]
    else:
        tail = [N("Cast", ["inv3"], ["pad"], to=TensorProto.BOOL),
                N("Where", ["pad", "big", "inv3"], ["bias"], name="mask_bias"),
                N("Add", ["scores", "bias"], ["masked"], name="masked_add")]
    softmax = [n for n in keep if n.op_type == "Softmax"][0]
    at = keep.index(softmax)
    del g.node[:]
    g.node.extend(keep[:at] + tail + keep[at:])
    g.initializer.extend(extra)
    return m


@pytest.mark.parametrize("form, rule", [("masked_fill", "attention_mask_select"), ("where", "attention_mask_select"),
                                        ("hf_bias", "attention_mask")])
def test_masks_written_with_where_are_handled_too(form, rule):
    model = _select_model(form)
    feeds = _padded_batch()
    want = _float(model, feeds)
    r = qr.quantize(model, _calibration(), qr.Config(progress=False))
    assert r.rewrites.hits[rule] == 1
    got = run(r.module, feeds)["y"]
    unmasked = _float(_model(big=0.0), feeds)
    # on the real tokens, the integer output is far closer to the masked float output than the
    # unmasked one is (int8 on a toy block calibrated on 48 random sequences: a few % error)
    real = feeds["mask"].astype(bool)
    err = np.abs(got - want)[real].mean()
    assert err < 0.25 * np.abs(unmasked - want)[real].mean(), err
