"""Compare quantir's type parser with iree-opt on type strings.

Each type is placed where a function result type goes, ``func.func private @f() -> (T)``,
and both sides are asked for the same thing: the printed form, or the first error with its
line, column and message. quantir parses the very same chunk text from the column where T
starts, so positions (also errors at the end of T) mean the same on both sides.
"""
from __future__ import annotations

from dataclasses import dataclass

from oracle_tools import chunk_start_lines, run_split

from quantir.errors import QuantirError
from quantir.types import FunctionType, TypeParser
from quantir.types.lexer import Lexer, Source, Tok

PREFIX = "func.func private @f() -> ("


@dataclass(frozen=True)
class Verdict:
    printed: str | None = None   # set when accepted
    line: int | None = None      # set when rejected
    col: int | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.printed is not None

    def __str__(self) -> str:
        return f"OK {self.printed}" if self.ok else f"ERR {self.line}:{self.col}: {self.message}"


NOT_COMPARABLE = Verdict(message="<the text goes beyond a result type list>")


def chunk_of(type_text: str) -> str:
    return PREFIX + type_text + ")"


def ours(type_text: str, first_line: int = 1) -> Verdict:
    """quantir's verdict on the chunk, emulating func.func's result-list parsing."""
    # like each --split-input-file chunk, the text ends with the newline before the marker
    src = Source(chunk_of(type_text) + "\n", "<stdin>", line_offset=first_line - 1)
    try:
        p = TypeParser(Lexer(src, start=len(PREFIX)))
        types = []
        if not p.consume_if(Tok.RPAREN):  # `-> ()` is an empty result list
            types.append(p.parse_type())
            while p.tok.kind is not Tok.LBRACE and p.consume_if(Tok.COMMA):
                types.append(p.parse_type())
            if p.tok.kind is Tok.LBRACE:  # a result attribute dict: not a type matter
                return NOT_COMPARABLE
            p.parse_token(Tok.RPAREN, "expected ')'")
        if p.tok.kind is not Tok.EOF:  # text after the signature: MLIR parses it as more IR
            return NOT_COMPARABLE
    except QuantirError as e:
        return Verdict(line=e.loc.line, col=e.loc.col, message=e.message)
    if len(types) == 1 and not isinstance(types[0], FunctionType):
        return Verdict(printed=str(types[0]))
    return Verdict(printed="(" + ", ".join(map(str, types)) + ")")


def oracle(type_texts: list[str]) -> list[Verdict]:
    out = []
    for r in run_split([chunk_of(t) for t in type_texts]):
        if r.error:
            out.append(Verdict(line=r.error.line, col=r.error.col, message=r.error.message))
            continue
        lines = [x for x in (r.output or "").splitlines() if "func.func private @f()" in x]
        if not lines:
            out.append(Verdict(printed="<no output>"))
        else:
            out.append(Verdict(printed=lines[0].split("-> ", 1)[1].strip() if "-> " in lines[0] else "()"))
    return out


def compare(type_texts: list[str]) -> tuple[list[tuple[str, Verdict, Verdict]], list[Verdict]]:
    """(mismatches as (text, ours, oracle), oracle verdicts) for a batch of types."""
    refs = oracle(type_texts)
    starts = chunk_start_lines([chunk_of(t) for t in type_texts])
    bad = []
    for t, start, ref in zip(type_texts, starts, refs):
        mine = ours(t, start)
        if mine != ref and mine is not NOT_COMPARABLE:
            bad.append((t, mine, ref))
    return bad, refs
