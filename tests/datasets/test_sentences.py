"""The English sentences of Python's help texts: real prose, deduplicated, stable, disjointly split."""
from __future__ import annotations

import re

from quantir.datasets import sentences as S


def test_enough_sentences_in_each_split_and_disjoint():
    cal, ev = S.calibration_sentences(), S.evaluation_sentences()
    assert len(cal) >= 300 and len(ev) >= 500
    assert not set(cal) & set(ev)
    assert set(cal) | set(ev) == set(S.sentences())
    assert len(set(S.sentences())) == len(S.sentences())   # deduplicated


def test_every_sentence_is_prose_of_5_to_60_words():
    for s in S.sentences():
        assert S.MIN_WORDS <= len(s.split()) <= S.MAX_WORDS, s
        assert s == " ".join(s.split()), s   # one line, single spaces: no code block survived
        assert s[0].isupper() or s[0] in "\"'(", s
        assert s.rstrip("\"')")[-1] in ".!?", s
        assert not re.search(r"[*=\-+|]{3,}", s), s   # no heading rules or table borders


def test_split_depends_on_the_sentence_alone():
    # the split is a function of the text: the same sentence lands in the same set in any list
    for s in S.sentences()[:50]:
        assert S.split(s) == S.split(str(s))
    assert [S.split(s) for s in S.sentences()] == [S.split(s) for s in S.sentences()]
    # a cached tuple, rebuilt identically from the topics
    assert tuple(S._sentences_of(S._topics())) == S.sentences()


def test_paragraphs_drop_code_tables_and_headings():
    text = ("The \"if\" statement\n******************\n\n"
            "The \"if\" statement is used for conditional execution. It selects one suite.\n\n"
            "   if_stmt ::= \"if\" expression \":\" suite\n\n"
            "+-----+-----+\n| a   | b   |\n+-----+-----+\n\n"
            "!=  <=  >=  ==\n\n"
            "Second paragraph\nwraps over two lines.\n")
    assert S.paragraphs(text) == [
        "The \"if\" statement is used for conditional execution. It selects one suite.",
        "Second paragraph wraps over two lines.",
    ]


def test_split_sentences_keeps_abbreviations_and_closing_quotes():
    got = S.split_sentences('Use a mapping (e.g. "dict") here. Then call "f()." And it (mostly) works? Yes.')
    assert got == ['Use a mapping (e.g. "dict") here.', 'Then call "f()."', "And it (mostly) works?", "Yes."]


def test_is_prose_sentence_bounds():
    assert S.is_prose_sentence("One two three four five.")
    assert not S.is_prose_sentence("One two three four.")          # 4 words
    assert not S.is_prose_sentence("word " * 60 + "end.")          # 61 words
    assert not S.is_prose_sentence("lower case start of this one.")
    assert not S.is_prose_sentence("No final stop in this sentence")
    assert not S.is_prose_sentence("A ==> (x, y) -> {z: 1} [2] <<= 3 >> 4.")
