"""Real English sentences from the help texts that ship with Python (``pydoc_data.topics``).

The text model (all-MiniLM-L6-v2) needs real text to calibrate on and to be evaluated on, and it
has to be on every machine without a download: CPython's ``pydoc_data.topics`` holds the prose of
the language reference (``help("if")``, ``help("assert")``...), about 460,000 characters of English.

How sentences are cut out of it (``sentences``):

1. each topic is split into paragraphs at blank lines;
2. paragraphs that are not prose are dropped: indented blocks (code examples, grammar rules),
   tables (``+---+`` and ``===`` rules, ``|`` cells), headings (a line underlined by ``***``, ``===``
   or ``---``), and lines made mostly of symbols;
3. a paragraph's lines are joined and split after ``.``, ``!`` or ``?`` followed by a capital,
   except after an abbreviation such as "e.g." or "i.e.";
4. a sentence is kept if it has 5 to 60 words, starts with a capital letter or a quote and ends
   with ``.``, ``!`` or ``?``, and at least 60% of its characters are letters or spaces;
5. duplicates are dropped (the first one stays), in topic-name order, so the list is the same on
   every run of the same Python.

``split(sentence)`` puts each sentence in ``"calibration"`` or ``"evaluation"`` by a SHA-256 of its
text, so the two sets are disjoint, stable, and independent of order: a sentence never moves when
another is added or removed. ``calibration_sentences()`` and ``evaluation_sentences()`` return them.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Literal

from quantir.datasets.errors import DatasetNotFoundError

__all__ = [
    "MIN_WORDS",
    "MAX_WORDS",
    "EVALUATION_SHARE",
    "paragraphs",
    "split_sentences",
    "is_prose_sentence",
    "sentences",
    "split",
    "calibration_sentences",
    "evaluation_sentences",
]

MIN_WORDS = 5
MAX_WORDS = 60
# Out of 256 hash buckets, how many go to evaluation: ~60% evaluation, ~40% calibration.
EVALUATION_SHARE = 154

Split = Literal["calibration", "evaluation"]

_RULE = re.compile(r"^\s*([*=\-~^+]{3,}|\+[-=+]+\+)\s*$")   # heading underlines, table borders
_TABLE_ROW = re.compile(r"^\s*[|+].*[|+]\s*$")
_SENTENCE_END = re.compile(r"[.!?][\"')]*(?P<space>\s+)(?=[\"'(]?[A-Z])")
# a period after these does not end a sentence
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "Mr.", "Dr.", "No.", "St.", "approx.", "resp.", "incl.")


def _is_code_or_table_line(line: str) -> bool:
    if line.startswith((" ", "\t")):
        return True   # the help texts indent every code block, grammar rule and quoted example
    if _RULE.match(line) or _TABLE_ROW.match(line):
        return True
    text = line.strip()
    letters = sum(c.isalpha() or c.isspace() for c in text)
    return bool(text) and letters < 0.5 * len(text)


def paragraphs(text: str) -> list[str]:
    """The prose paragraphs of one help text, each joined into one line. A paragraph with any code,
    table or symbol line is dropped whole (half a paragraph is rarely a clean sentence), and so is
    a heading: a single line followed by an underline rule."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        lines = [ln.rstrip() for ln in block.split("\n") if ln.strip()]
        if not lines or any(_is_code_or_table_line(ln) for ln in lines):
            continue
        out.append(" ".join(" ".join(ln.split()) for ln in lines))
    return out


def split_sentences(paragraph: str) -> list[str]:
    """``paragraph`` cut after sentence-ending punctuation (and any closing quote or bracket) that is
    followed by a capital letter, except after an abbreviation such as "e.g." or "i.e."."""
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(paragraph):
        head = paragraph[start:m.start("space")]
        if head.endswith(_ABBREVIATIONS):
            continue
        out.append(head.strip())
        start = m.end()
    out.append(paragraph[start:].strip())
    return [s for s in out if s]


def is_prose_sentence(s: str) -> bool:
    """A sentence worth embedding: 5-60 words, a capital or quote first, a full stop last, mostly letters."""
    words = s.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        return False
    if not (s[0].isupper() or s[0] in "\"'(") or s.rstrip("\"')")[-1:] not in (".", "!", "?"):
        return False
    letters = sum(c.isalpha() or c.isspace() for c in s)
    return letters >= 0.6 * len(s)


def _sentences_of(topics: Mapping[str, str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for name in sorted(topics):
        for paragraph in paragraphs(topics[name]):
            for s in split_sentences(paragraph):
                if is_prose_sentence(s) and s not in seen:
                    seen.add(s)
                    out.append(s)
    return out


def _topics() -> Mapping[str, str]:
    try:
        from pydoc_data.topics import topics
    except ImportError:   # some distributions split pydoc_data off the interpreter
        raise DatasetNotFoundError("module 'pydoc_data.topics' (Python's help texts) is not installed; install "
                                   "your distribution's full Python standard library (Debian: libpython3.11-stdlib)"
                                   ) from None
    return topics


@lru_cache(maxsize=1)
def sentences() -> tuple[str, ...]:
    """Every prose sentence of Python's help texts, deduplicated, in a fixed order."""
    return tuple(_sentences_of(_topics()))


def split(sentence: str) -> Split:
    """The set a sentence belongs to, from its SHA-256: fixed per sentence, whatever else is in the list."""
    bucket = hashlib.sha256(sentence.encode("utf-8")).digest()[0]
    return "evaluation" if bucket < EVALUATION_SHARE else "calibration"


def _of(which: Split, items: Iterable[str]) -> tuple[str, ...]:
    return tuple(s for s in items if split(s) == which)


def calibration_sentences() -> tuple[str, ...]:
    """The calibration half of ``sentences()`` (about 40%), disjoint from ``evaluation_sentences()``."""
    return _of("calibration", sentences())


def evaluation_sentences() -> tuple[str, ...]:
    """The held-out half of ``sentences()`` (about 60%): never used to calibrate."""
    return _of("evaluation", sentences())
