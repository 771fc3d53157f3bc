"""The repository documents itself: every ``docs/`` reference in the code resolves.

Source comments cite the project's notes as ``docs/numerics.md §2.14`` or
``(docs/mlir-quant-spec.md §1-§7)``. This test reads every such citation in ``src/``, the
README and ``docs/`` itself and checks that the file exists under ``docs/`` and that each cited
section number is a Markdown heading of that file (``### 2.14 HARD_SWISH ...``). A bare
``numerics.md §3.3`` counts too when ``numerics.md`` is one of the docs. Nothing in ``src/`` or
``docs/`` may point at reference material outside the repository.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FORBIDDEN = ("shared/docs", "../shared", "/work/shared")

_SECTION = r"§\d+(?:\.\d+)*"
# A file name, then the section references that follow it directly: "§4.5, §4.6", "§2-§3", "§1 and §8".
CITATION = re.compile(
    r"(?<![\w./-])(?P<docs>docs/)?(?P<file>[A-Za-z0-9_-]+\.md)"
    rf"(?P<sections>(?:[\s,;]*(?:and\s+)?{_SECTION}(?:\s*[-–]\s*{_SECTION})?)*)")
SECTION_REF = re.compile(rf"(?P<first>{_SECTION})(?:\s*[-–]\s*(?P<last>{_SECTION}))?")
DOC_NAMES = ("design", "numerics", "mlir-quant-spec", "adding-an-op")
NAMED_SECTION = re.compile(rf"(?<![\w/.-])(?P<name>{'|'.join(DOC_NAMES)})(?:\.md)?[ \t]*\Z")
HEADING = re.compile(r"^#{1,6}\s+§?(?P<number>\d+(?:\.\d+)*)\.?(?:\s|$)", re.MULTILINE)


@dataclass(frozen=True)
class Citation:
    where: str          # "src/quantir/numerics/fixedpoint.py:4"
    file: str           # "numerics.md"
    explicit: bool      # written as docs/<file>
    sections: tuple[str, ...]


def _expand(first: str, last: str | None) -> list[str]:
    """``§2-§3`` cites 2 and 3 (and whatever lies between, for whole-number ranges)."""
    a, b = first.lstrip("§"), (last or first).lstrip("§")
    if "." not in a and "." not in b and int(a) <= int(b):
        return [str(n) for n in range(int(a), int(b) + 1)]
    return [a] if a == b else [a, b]


def citations_in(text: str, where: str) -> list[Citation]:
    """Every ``[docs/]NAME.md [§N[.M] ...]`` citation in ``text``; ``where`` is its file name."""
    found = []
    for m in CITATION.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        sections: list[str] = []
        for ref in SECTION_REF.finditer(m.group("sections")):
            sections += _expand(ref.group("first"), ref.group("last"))
        found.append(Citation(f"{where}:{line}", m.group("file"), bool(m.group("docs")), tuple(sections)))
    return found


def headings_of(markdown: str) -> set[str]:
    """The section numbers that are headings of a Markdown text (``## 2. Kernels`` -> "2")."""
    return {m.group("number") for m in HEADING.finditer(markdown)}


def problems(citations: list[Citation], docs: dict[str, str]) -> list[str]:
    """What does not resolve: a missing docs file, or a section that is not one of its headings.

    ``docs`` maps a file name under docs/ to its text. A bare ``NAME.md`` that is not one of the
    docs (an upstream file, say) is not ours to check.
    """
    out = []
    for c in citations:
        if c.file not in docs:
            if c.explicit:
                out.append(f"{c.where}: docs/{c.file} does not exist")
            continue
        missing = [s for s in c.sections if s not in headings_of(docs[c.file])]
        if missing:
            out.append(f"{c.where}: {c.file} has no heading for " + ", ".join("§" + s for s in missing))
    return out


def _sources() -> list[Path]:
    """Where citations are read: the package, the tests (their golden files too), the READMEs, docs."""
    tests = [p for p in sorted((ROOT / "tests").rglob("*")) if p.suffix in (".py", ".mlir")
             and p.resolve() != Path(__file__).resolve()]   # this file cites bad sections on purpose
    return sorted((ROOT / "src").rglob("*.py")) + tests + [ROOT / "README.md"] + sorted(DOCS.glob("*.md"))


def _docs() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in DOCS.glob("*.md")}


def bare_sections(text: str, where: str) -> list[Citation]:
    """A module that cites exactly one docs file refers to it by bare ``§N.M`` too ("see §2.14"):
    every section number in the text, as a citation of that file."""
    files = {c.file for c in citations_in(text, where) if c.explicit}
    if len(files) != 1:
        return []
    (cited,) = files
    out = []
    for m in SECTION_REF.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        # "numerics §3.1" in a module that cites docs/design.md names its own file
        named = NAMED_SECTION.search(text, max(0, m.start() - 40), m.start())
        file = f"{named.group('name')}.md" if named else cited
        out.append(Citation(f"{where}:{line}", file, True, tuple(_expand(m.group("first"), m.group("last")))))
    return out


def _all_citations() -> list[Citation]:
    out = []
    for path in _sources():
        text, where = path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
        out += citations_in(text, where)
        if path.suffix == ".py":
            out += bare_sections(text, where)
    return list(dict.fromkeys(out))   # "docs/numerics.md §2.4" is read both ways: once is enough


# -- the repository ---------------------------------------------------------------------------

def test_every_docs_path_cited_in_src_exists():
    cited = {c.file for c in _all_citations() if c.explicit}
    assert {"design.md", "numerics.md", "mlir-quant-spec.md"} <= cited   # the scanner sees them
    missing = sorted(f for f in cited if not (DOCS / f).is_file())
    assert missing == []


def test_every_cited_section_is_a_heading():
    citations = _all_citations()
    assert sum(len(c.sections) for c in citations if c.file == "numerics.md") >= 40
    assert problems(citations, _docs()) == []


def test_nothing_points_outside_the_repository():
    offenders = [f"{p.relative_to(ROOT)}: {needle}"
                 for p in sorted((ROOT / "src").rglob("*.py")) + sorted(DOCS.rglob("*.md"))
                 for needle in FORBIDDEN if needle in p.read_text(encoding="utf-8")]
    assert offenders == []


def test_docs_index_lists_every_document():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    unlisted = [p.name for p in DOCS.glob("*.md") if p.name != "README.md" and f"({p.name})" not in index]
    assert unlisted == []


# -- the checker itself, on synthetic text ----------------------------------------------------

_DOC = "# Title\n## 0. Intro\n## 2. Kernels\n### 2.14 HARD_SWISH (int8)\n## 3. Parameters\n"


@pytest.mark.parametrize("text, expected", [
    ("see docs/numerics.md §2.14.", ("2.14",)),
    ("(docs/numerics.md §4.5, §4.6). ONNX", ("4.5", "4.6")),
    ("checks (docs/numerics.md §2-§3). One", ("2", "3")),
    ("types (docs/mlir-quant-spec.md §1-§3), as", ("1", "2", "3")),
    ("(docs/numerics.md §3.1 step 2)", ("3.1",)),
    ("(docs/mlir-quant-spec.md §8,\n``verifyPerAxisQuantization``", ("8",)),
    ("The contract is docs/numerics.md: bit-exact §9", ()),
])
def test_citation_parsing(text, expected):
    (c,) = citations_in(text, "x.py")
    assert c.explicit and c.sections == expected


def test_bare_names_and_upstream_paths():
    cs = citations_in("numerics.md §3.3 and ``tflite/g3doc/performance/quantization_spec.md``", "x.py")
    assert [(c.file, c.explicit, c.sections) for c in cs] == [("numerics.md", False, ("3.3",))]


def test_bare_sections_follow_the_one_cited_file():
    text = '"""ADD (docs/numerics.md §2.4)."""\n# rounds as in §1.4, see also §2.8-§2.9\n'
    cs = bare_sections(text, "k.py")
    assert [(c.where, c.file, c.sections) for c in cs] == [
        ("k.py:1", "numerics.md", ("2.4",)), ("k.py:2", "numerics.md", ("1.4",)),
        ("k.py:2", "numerics.md", ("2.8", "2.9"))]
    assert problems(cs, {"numerics.md": _DOC + "### 2.4 ADD / SUB\n"}) == [
        "k.py:2: numerics.md has no heading for §1.4", "k.py:2: numerics.md has no heading for §2.8, §2.9"]
    two = "docs/numerics.md §2 and docs/design.md; §7"   # two files cited: a bare § is ambiguous
    assert bare_sections(two, "k.py") == []
    named = bare_sections("(the callback of docs/design.md) ... (numerics §3.1)", "k.py")
    assert [(c.file, c.sections) for c in named] == [("numerics.md", ("3.1",))]


def test_headings():
    assert headings_of(_DOC) == {"0", "2", "2.14", "3"}
    assert headings_of("#### §1.7 Multipliers\n##2.1 not a heading\n    ## 4 indented code\n") == {"1.7"}


def test_a_bad_citation_fails():
    docs = {"numerics.md": _DOC}
    good = citations_in("(docs/numerics.md §2.14) and (docs/numerics.md §0, §2-§3)", "k.py")
    assert problems(good, docs) == []
    bad = citations_in("line\n(docs/numerics.md §2.15, §2.14)\n(docs/design.md)\nnumerics.md §1.7", "k.py")
    assert problems(bad, docs) == [
        "k.py:2: numerics.md has no heading for §2.15",
        "k.py:3: docs/design.md does not exist",
        "k.py:4: numerics.md has no heading for §1.7",
    ]
    # a range needs every whole section in it
    assert problems(citations_in("docs/numerics.md §0-§2", "k.py"), docs) == [
        "k.py:1: numerics.md has no heading for §1"]
