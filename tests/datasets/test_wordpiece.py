"""The pure-Python WordPiece tokenizer against the ``tokenizers`` package running the model's own
``tokenizer.json``: identical ids on every calibration and evaluation sentence and on hostile text."""
from __future__ import annotations

import numpy as np
import pytest

from quantir.datasets import sentences as S
from quantir.datasets.errors import DatasetFormatError, DatasetNotFoundError
from quantir.datasets.wordpiece import WordPiece, basic_tokenize, batches_by_length, normalize

HOSTILE = [
    "",
    "   \t\n  ",
    "Café naïve façade résumé Ångström Øresund ŒUVRE straße İstanbul ΣΊΣΥΦΟΣ",
    "北京欢迎你 and 東京 mixed with 한국어 and ひらがな カタカナ",
    "emoji 🙂👍🏽 ❤️ 👨‍👩‍👧 flags 🇫🇷 and ™ © ½ ∑ ∞",
    "control\x00chars\x01here\x7f and \u200b zero\u200dwidth \ufeff bom \ufffd replacement",
    "tabs\tand\r\nnewlines\u2028line\u2029para\u00a0nbsp\u3000ideo",
    "x" * 101 + " " + "y" * 100 + " " + "supercalifragilisticexpialidocious" * 3,
    "punctuation!!! ... ?!? $100+<=>^`|~ «quotes» „low“ — dash – en ‘single’ ¿qué? ¡sí!",
    "[CLS] special [SEP] tokens [MASK] in [PAD] text [UNK] and [cls] lower [SEP",
    "ＦＵＬＬＷＩＤＴＨ ｌｅｔｔｅｒｓ and ligatures ﬁ ﬂ and math 𝐀𝐁𝐂",
    "Ωmega ǅ ǈ ß ẞ ŉ ﬀ K Å ﬃ",
    "numbers 3.14159 1,000,000 0x1F 1e-10 42nd 2nd-hand",
    "अनुच्छेद हिन्दी العربية עברית ไทย",
    "\U0010ffff private \ue000 use \U000e0001 tags \u0378 unassigned \U0001fae8 \u00ad soft\u00adhyphen \x85 nel",
]


@pytest.fixture(scope="module")
def ours(minilm_tokenizer_files) -> WordPiece:
    return WordPiece.from_file(minilm_tokenizer_files["vocab.txt"])


@pytest.fixture(scope="module")
def reference(minilm_tokenizer_files):
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is in the [oracle] extra")
    tok = tokenizers.Tokenizer.from_file(str(minilm_tokenizer_files["tokenizer.json"]))
    tok.no_padding()
    tok.no_truncation()
    return tok


def test_every_calibration_and_evaluation_sentence_matches_the_reference(ours, reference):
    texts = S.calibration_sentences() + S.evaluation_sentences()
    assert len(texts) >= 800
    want = [e.ids for e in reference.encode_batch(list(texts))]
    got = [ours.encode(t, max_length=None) for t in texts]
    mismatches = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
    assert not mismatches, mismatches[:3]
    # the sentences really exercise WordPiece: some words split into ## pieces
    assert any(tok.startswith("##") for t in texts[:200] for tok in ours.tokenize(t))


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_text_matches_the_reference(ours, reference, text):
    assert ours.encode(text, max_length=None) == reference.encode(text).ids


def test_truncation_and_padding_match_the_reference(ours, reference, minilm_tokenizer_files):
    import tokenizers

    texts = [S.evaluation_sentences()[i] for i in (0, 1, 2)] + [" ".join(S.evaluation_sentences()[:20])]
    tok = tokenizers.Tokenizer.from_file(str(minilm_tokenizer_files["tokenizer.json"]))  # its own 128 / Fixed(128)
    want = tok.encode_batch(texts)
    got = ours(texts, max_length=128, pad_to=128)
    assert got["input_ids"].dtype == got["attention_mask"].dtype == got["token_type_ids"].dtype == np.int64
    np.testing.assert_array_equal(got["input_ids"], [e.ids for e in want])
    np.testing.assert_array_equal(got["attention_mask"], [e.attention_mask for e in want])
    np.testing.assert_array_equal(got["token_type_ids"], [e.type_ids for e in want])
    assert got["input_ids"][3, -1] == ours.vocab["[SEP]"]   # the long row was cut, its [SEP] kept


def test_batch_pads_to_the_longest_row(ours):
    out = ours(["A short one.", "A somewhat longer sentence than the first one."], max_length=None)
    ids, mask = out["input_ids"], out["attention_mask"]
    assert ids.shape == mask.shape and ids.shape[1] == mask[1].sum()
    assert mask[0].sum() < ids.shape[1] and (ids[0][mask[0] == 0] == ours.pad_id).all()
    assert ids[0, 0] == ours.vocab["[CLS]"] and ids[0, mask[0].sum() - 1] == ours.vocab["[SEP]"]


def test_wordpiece_is_greedy_longest_first():
    wp = WordPiece({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                                "un", "una", "##ff", "##ffable", "##able", "##a"])})
    assert wp.wordpiece("unaffable") == ["una", "##ffable"]
    assert wp.wordpiece("unffable") == ["un", "##ffable"]
    assert wp.wordpiece("unable") == ["[UNK]"]    # no backtracking: "una" is taken, then "##ble" has no entry
    assert wp.wordpiece("unx") == ["[UNK]"]       # a piece with no entry makes the whole word unknown
    assert wp.wordpiece("u" * 101) == ["[UNK]"]
    assert basic_tokenize(normalize("Héllo, WORLD!")) == ["hello", ",", "world", "!"]


def test_bad_vocab_files(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="make models"):
        WordPiece.from_file(tmp_path / "missing.txt")
    (tmp_path / "v.txt").write_text("a\nb\n")
    with pytest.raises(DatasetFormatError, match=r"\[PAD\]"):
        WordPiece.from_file(tmp_path / "v.txt")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(DatasetFormatError, match="UTF-8"):
        WordPiece.from_file(tmp_path / "bin.txt")


def test_batches_by_length_need_no_padding(ours):
    texts = S.calibration_sentences()[:60]
    batches = batches_by_length(ours, texts, batch_size=4)
    seen = sorted(i for idx, _ in batches for i in idx)
    assert seen == list(range(len(texts)))
    for idx, feeds in batches:
        assert len(idx) <= 4 and feeds["attention_mask"].all()   # one length per batch: nothing padded
        for row, i in zip(feeds["input_ids"], idx):
            assert row.tolist() == ours.encode(texts[i])


def test_minilm_data_files_are_calibration_data_quantir_accepts(ours, tmp_path, repo_root):
    # scripts/minilm_data.py's files, read back by `quantir quantize --data a.npz b.npz ...`'s own loader
    import importlib.util

    from quantir.quantize.data import InputSpec, as_dataset
    from quantir.types.builtin import TensorType, i64

    spec = importlib.util.spec_from_file_location("minilm_data", repo_root / "scripts" / "minilm_data.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    texts = S.calibration_sentences()[:40]
    paths = script.write_split(ours, texts, tmp_path / "calibration", 128)
    assert len(paths) > 1   # several token lengths: one file each
    inputs = [InputSpec(n, TensorType((None, None), i64)) for n in ("input_ids", "attention_mask", "token_type_ids")]
    batches = list(as_dataset([str(p) for p in paths], [i.name for i in inputs]).batches(inputs, batch_size=8))
    assert sum(b["input_ids"].shape[0] for b in batches) == len(texts)
    assert all(b["attention_mask"].all() and b["input_ids"].dtype == np.int64 for b in batches)   # unpadded
    rows = sorted(r.tolist() for b in batches for r in b["input_ids"])
    assert rows == sorted(ours.encode(t) for t in texts)
