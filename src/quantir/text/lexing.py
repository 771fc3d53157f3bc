"""The shared MLIR lexer, sped up for module-sized inputs.

A printed model is mostly one or two huge ``"0x..."`` resource strings: the shared
:class:`~quantir.types.lexer.Lexer` scans strings a character at a time and
:class:`~quantir.types.lexer.Source` indexes lines the same way, which takes minutes on a
40 MB file. These subclasses do the same work with C-level string searches; tokens, positions
and error messages are MLIR's (this lexer also checks string escapes, as MLIR's does).
"""
from __future__ import annotations

import re

from ..errors import Location
from ..types.lexer import Lexer, Source, Tok, Token

__all__ = ["FastSource", "FastLexer"]

# the body of a string literal, as MLIR's lexString: no quote, newline, \v or \f, and the
# escapes \" \\ \n \t \XX
_AT_BODY = re.compile(r"[A-Za-z0-9_$.]*")
_STRING_BODY = re.compile(r'[^"\\\n\v\f]*(?:\\(?:["\\nt]|[0-9a-fA-F]{2})[^"\\\n\v\f]*)*')


class FastSource(Source):
    def __init__(self, text: str, filename: str = "<input>", line_offset: int = 0):
        self.text = text
        self.filename = filename
        self.line_offset = line_offset
        starts = [0]
        find = text.find
        i = find("\n")
        while i >= 0:
            starts.append(i + 1)
            i = find("\n", i + 1)
        self._line_starts = starts

    def location(self, pos: int) -> Location:
        """Like MLIR's, columns count bytes of UTF-8 (``é`` is two columns)."""
        loc = super().location(pos)
        start = pos - (loc.col - 1)
        head = self.text[start:pos]
        if head.isascii():
            return loc
        return Location(loc.file, loc.line, len(head.encode("utf-8", "surrogateescape")) + 1)


class FastLexer(Lexer):
    def _lex(self) -> Token:
        self._skip_trivia()
        start = self.pos
        if start < self.limit and self.text[start] == "@":
            return self._lex_at_identifier(start)
        if start < self.limit and self.text[start] == "/":  # a lone '/': MLIR's lexer yields an
            self.pos += 1                                   # error token and the parser reports
            return self._tok(Tok.ERROR, start)              # what it expected there
        return super()._lex()

    def _lex_at_identifier(self, start: int) -> Token:
        """``@name`` (letters, digits, ``_$.``; starting with a letter or ``_``) or ``@"..."``."""
        t, n = self.text, self.limit
        if start + 1 < n and t[start + 1] == '"':
            self._lex_string(start + 1)
            return self._tok(Tok.AT_ID, start)
        c = t[start + 1] if start + 1 < n else ""
        if not (c.isascii() and (c.isalpha() or c == "_")):
            raise self.source.error(min(start + 1, n), "@ identifier expected to start with letter or '_'")
        m = _AT_BODY.match(t, start + 1, n)
        self.pos = m.end()
        return self._tok(Tok.AT_ID, start)

    def _lex_string(self, start: int) -> Token:
        m = _STRING_BODY.match(self.text, start + 1, self.limit)
        end = m.end()
        if end < self.limit and self.text[end] == '"':
            self.pos = end + 1
            return self._tok(Tok.STRING, start)
        if end < self.limit and self.text[end] == "\\":
            raise self.source.error(end, "unknown escape in string literal")
        # unterminated: MLIR reports at the line break, or at the end of the input
        at = end if end < self.limit else self.limit
        raise self.source.error(at, "expected '\"' in string literal")
