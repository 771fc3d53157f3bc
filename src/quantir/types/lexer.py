"""A lexer for MLIR's textual syntax, shared by the type parser and the module parser.

It mirrors ``mlir/lib/AsmParser/Lexer.cpp`` closely enough that error positions and
messages match: numbers are lexed greedily (``1x2xf32`` lexes as ``1`` then the bare
identifier ``x2xf32``; shape parsers re-lex from inside a token with :meth:`Lexer.reset_to`).
"""
from __future__ import annotations

import bisect
import re
import sys
from dataclasses import dataclass
from enum import Enum, auto

from ..errors import Location, ParseError


class Tok(Enum):
    EOF = auto()
    ERROR = auto()
    BARE_ID = auto()        # foo, f32, x2xf32, quant.uniform (bare ids may contain '.' and '$')
    PERCENT_ID = auto()     # %0, %arg0
    CARET_ID = auto()       # ^bb0
    AT_ID = auto()          # @main, @"quoted"
    HASH_ID = auto()        # #map, #quant.foo
    BANG_ID = auto()        # !quant.uniform, !alias
    INTEGER = auto()        # 12, 0x1F (sign is a separate token)
    FLOAT = auto()          # 1.5, 2., 1.0e-3
    STRING = auto()         # "..."
    ARROW = auto()          # ->
    COLON = auto()
    COMMA = auto()
    EQUAL = auto()
    LPAREN = auto()
    RPAREN = auto()
    LBRACE = auto()
    RBRACE = auto()
    LSQUARE = auto()
    RSQUARE = auto()
    LESS = auto()
    GREATER = auto()
    QUESTION = auto()
    STAR = auto()
    PLUS = auto()
    MINUS = auto()
    ELLIPSIS = auto()
    FILE_METADATA_BEGIN = auto()  # {-#
    FILE_METADATA_END = auto()    # #-}


_PUNCT = {
    ":": Tok.COLON, ",": Tok.COMMA, "=": Tok.EQUAL, "(": Tok.LPAREN, ")": Tok.RPAREN,
    "}": Tok.RBRACE, "[": Tok.LSQUARE, "]": Tok.RSQUARE, "<": Tok.LESS, ">": Tok.GREATER,
    "?": Tok.QUESTION, "*": Tok.STAR, "+": Tok.PLUS,
}


# Python converts decimal strings of at most ``sys.get_int_max_str_digits()`` digits to int and
# back (4300 by default; the cap guards against quadratic conversions). Longer literals are
# refused when lexed, so no parser has to guard its ``int()``; a hex literal is held to as many
# bits as 4300 decimal digits hold, so that its value still prints in decimal.
MAX_INT_DIGITS = min(4300, sys.get_int_max_str_digits() or 4300)
MAX_INT_BITS = int(MAX_INT_DIGITS * 3.3219280948873626) - 1   # log2(10): 10**(digits-1) < 2**bits
_ASCII_DIGITS = frozenset("0123456789")
_ID_BODY = re.compile(r"[A-Za-z0-9_$.]*")


def literal_too_long(digits: int) -> str:
    return (f"integer literal of {digits} digits is too long: quantir reads integers of at most "
            f"{MAX_INT_DIGITS} decimal digits")


def _is_id_start(c: str) -> bool:
    return c.isascii() and (c.isalpha() or c == "_")


def _is_id_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c in "_$.")


@dataclass(frozen=True)
class Token:
    kind: Tok
    text: str
    pos: int  # offset of the first character in the source

    @property
    def end(self) -> int:
        return self.pos + len(self.text)

    def is_keyword(self, word: str) -> bool:
        return self.kind is Tok.BARE_ID and self.text == word


class Source:
    """Text with a file name; turns offsets into ``file:line:col`` locations."""

    def __init__(self, text: str, filename: str = "<input>", line_offset: int = 0):
        self.text = text
        self.filename = filename
        self.line_offset = line_offset  # for --split-input-file chunks
        self._line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def location(self, pos: int) -> Location:
        line = bisect.bisect_right(self._line_starts, pos) - 1
        return Location(self.filename, line + 1 + self.line_offset, pos - self._line_starts[line] + 1)

    def error(self, pos: int, message: str) -> ParseError:
        return ParseError(message, self.location(pos))


class Lexer:
    """Produces one token at a time; ``peek``/``next`` with one token of look-ahead."""

    def __init__(self, source: Source, start: int = 0, end: int | None = None):
        self.source = source
        self.text = source.text
        self.limit = len(self.text) if end is None else end
        self.pos = start
        self._peeked: Token | None = None

    # -- public cursor API ---------------------------------------------------------------
    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._lex()
        return self._peeked

    def next(self) -> Token:
        tok = self.peek()
        self._peeked = None
        return tok

    def glued(self, c: str) -> bool:
        """``c`` is the very next character (no trivia before it) and no token was looked at yet."""
        return self._peeked is None and self.pos < self.limit and self.text[self.pos] == c

    def reset_to(self, pos: int) -> None:
        """Continue lexing from ``pos`` (used to split ``x``-joined shape tokens)."""
        self.pos = pos
        self._peeked = None

    def error(self, message: str, tok: Token | None = None) -> ParseError:
        return self.source.error((tok or self.peek()).pos, message)

    # -- the lexer proper -----------------------------------------------------------------
    def _skip_trivia(self) -> None:
        t, n = self.text, self.limit
        while self.pos < n:
            c = t[self.pos]
            if c in " \t\r\n":
                self.pos += 1
            elif t.startswith("//", self.pos):
                nl = t.find("\n", self.pos)
                self.pos = n if nl < 0 or nl > n else nl + 1
            else:
                break

    def _tok(self, kind: Tok, start: int) -> Token:
        return Token(kind, self.text[start:self.pos], start)

    def _lex(self) -> Token:
        self._skip_trivia()
        t, start = self.text, self.pos
        if start >= self.limit:
            return Token(Tok.EOF, "", self.limit)
        c = t[start]
        if _is_id_start(c):   # a regex, not a loop: shapes re-lex `x4x4x...xf32` once per dimension
            self.pos = _ID_BODY.match(t, start + 1, self.limit).end()
            return self._tok(Tok.BARE_ID, start)
        if c in _ASCII_DIGITS:   # not str.isdigit(): '²' is a digit to Python, not to int() or MLIR
            return self._lex_number(start)
        if c == '"':
            return self._lex_string(start)
        if c in "%^@#!":
            return self._lex_prefixed(start, c)
        if t.startswith("->", start):
            self.pos += 2
            return self._tok(Tok.ARROW, start)
        if t.startswith("{-#", start):
            self.pos += 3
            return self._tok(Tok.FILE_METADATA_BEGIN, start)
        if t.startswith("...", start):
            self.pos += 3
            return self._tok(Tok.ELLIPSIS, start)
        if c == "{":
            self.pos += 1
            return self._tok(Tok.LBRACE, start)
        if c == "-":
            self.pos += 1
            return self._tok(Tok.MINUS, start)
        if c in _PUNCT:
            self.pos += 1
            return self._tok(_PUNCT[c], start)
        if c == ".":  # MLIR's lexEllipsis: a lone '.' (as in `.5`) errs after the dot
            raise self.source.error(start + 1, "expected three consecutive dots for an ellipsis")
        raise self.source.error(start, "unexpected character")

    def _lex_number(self, start: int) -> Token:
        t, n = self.text, self.limit
        if t.startswith("0x", start) and start + 2 < n and t[start + 2] in "0123456789abcdefABCDEF":
            self.pos = start + 2
            while self.pos < n and t[self.pos] in "0123456789abcdefABCDEF":
                self.pos += 1
            tok = self._tok(Tok.INTEGER, start)
            bits = 4 * len(tok.text[2:].lstrip("0"))
            if bits > MAX_INT_BITS:
                raise self.source.error(start, f"hexadecimal integer literal of {len(tok.text) - 2} digits is too "
                                               f"long: quantir reads integers of at most {MAX_INT_BITS} bits")
            return tok
        digits = _ASCII_DIGITS
        while self.pos < n and t[self.pos] in digits:
            self.pos += 1
        if self.pos >= n or t[self.pos] != ".":
            if self.pos - start > MAX_INT_DIGITS:
                raise self.source.error(start, literal_too_long(self.pos - start))
            return self._tok(Tok.INTEGER, start)
        self.pos += 1
        while self.pos < n and t[self.pos] in digits:
            self.pos += 1
        if self.pos < n and t[self.pos] in "eE":
            j = self.pos + 1
            if j < n and t[j] in "+-":
                j += 1
            if j < n and t[j] in digits:
                while j < n and t[j] in digits:
                    j += 1
                self.pos = j
        return self._tok(Tok.FLOAT, start)

    def _lex_string(self, start: int) -> Token:
        t, n = self.text, self.limit
        self.pos = start + 1
        while self.pos < n:
            c = t[self.pos]
            if c == '"':
                self.pos += 1
                return self._tok(Tok.STRING, start)
            if c == "\n":
                break
            self.pos += 2 if c == "\\" else 1
        raise self.source.error(min(self.pos, n), "expected '\"' in string literal")  # MLIR: at the newline/EOF

    def _lex_prefixed(self, start: int, c: str) -> Token:
        t, n = self.text, self.limit
        kind = {"%": Tok.PERCENT_ID, "^": Tok.CARET_ID, "@": Tok.AT_ID,
                "#": Tok.HASH_ID, "!": Tok.BANG_ID}[c]
        if c == "#" and t.startswith("#-}", start):
            self.pos = start + 3
            return self._tok(Tok.FILE_METADATA_END, start)
        self.pos = start + 1
        if c == "@" and self.pos < n and t[self.pos] == '"':
            self._lex_string(self.pos)
            return self._tok(Tok.AT_ID, start)
        # %0, %arg0, %foo#1 (suffix ids may start with a digit; then, as in MLIR, they
        # are digits only: `!2quant` is `!2` followed by `quant`)
        if self.pos < n and "0" <= t[self.pos] <= "9":
            while self.pos < n and "0" <= t[self.pos] <= "9":
                self.pos += 1
            return self._tok(kind, start)
        if self.pos < n and (_is_id_char(t[self.pos]) or t[self.pos] in "-"):
            while self.pos < n and (_is_id_char(t[self.pos]) or t[self.pos] == "-"):
                self.pos += 1
            return self._tok(kind, start)
        names = {"%": "invalid SSA name", "^": "invalid block name", "@": "invalid symbol reference",
                 "#": "invalid attribute name", "!": "invalid type identifier"}
        raise self.source.error(start, names[c])
