"""Parser of MLIR type syntax: builtin types and ``!quant.*`` (via :mod:`.quant_parser`).

It follows ``mlir/lib/AsmParser/{Parser,TypeParser,DialectSymbolParser}.cpp`` so that
errors carry MLIR's message *and* position:

* ``parse_token``-style failures ("expected ','") use MLIR's ``emitWrongTokenError``: the
  error sits right after the previous token (spaces/tabs skipped back, and back over
  blank lines and comments), not at the offending token;
* other errors sit at the token they name, one character back at end of input;
* a dialect type body ``!quant.uniform<...>`` is first scanned for balanced
  ``<>[](){}`` (``unbalanced '<' character in pretty dialect name``), then parsed with the
  same lexer, and lexing resumes after the body (anything the dialect parser did not
  consume inside the body is ignored, as in MLIR);
* diagnostics MLIR emits *after* the first one (the note "add a trailing dot...",
  "calibrated values must be present") are kept on the exception as ``err.followups``, a
  list of ``(severity, Location, message)``.

Every failure raises :class:`~quantir.errors.ParseError`, including type verifier
failures met while parsing (MLIR reports both as parse errors).
"""
from __future__ import annotations

import re
import struct
from functools import lru_cache

from ..errors import ParseError, VerifyError
from .builtin import (
    FLOAT_TYPE_NAMES, MAX_INTEGER_WIDTH, ComplexType, FloatType, FunctionType, IndexType,
    IntegerType, MemRefType, NoneType, OpaqueType, TensorType, TupleType, Type, VectorType,
    _valid_memref_element, _valid_tensor_element,
)
from .lexer import Lexer, Source, Tok, Token

__all__ = ["TypeParser", "parse_type"]

_INT_TYPE = re.compile(r"(i|si|ui)([0-9]+)\Z")
_DIALECT_NAME = re.compile(r"[a-zA-Z_][a-zA-Z_0-9$]*\Z")
_FLOAT_NAMES = frozenset(FLOAT_TYPE_NAMES)
_TYPE_KEYWORDS = frozenset({"memref", "tensor", "complex", "tuple", "vector", "index", "none"}) | _FLOAT_NAMES
_CLOSERS = {">": "<", "]": "[", ")": "(", "}": "{"}
MAX_NESTING = 200  # deeper nesting raises a ParseError instead of exhausting Python's stack


@lru_cache(maxsize=4096)  # types are immutable; the same spellings recur a lot
def parse_type(text: str, filename: str = "<input>") -> Type:
    """Parse ``text`` as exactly one MLIR type (surrounding whitespace allowed).

    >>> str(parse_type("tensor<2x!quant.uniform<i8:f32, 0.5:-1>>"))
    'tensor<2x!quant.uniform<i8:f32, 5.000000e-01:-1>>'
    """
    p = TypeParser(Lexer(Source(text, filename)))
    t = p.parse_type()
    tok = p.tok
    if tok.kind is not Tok.EOF:
        raise p.error_at(tok.pos, f"found trailing characters: '{text[tok.pos:]}'")
    return t


def add_followup(err: ParseError, severity: str, loc, message: str) -> ParseError:
    """Record a further diagnostic MLIR prints after ``err`` (a note or another error)."""
    err.followups = [*getattr(err, "followups", []), (severity, loc, message)]  # type: ignore[attr-defined]
    return err


class TypeParser:
    """Consumes one type at a time from an existing :class:`Lexer`.

    ``parse_type`` leaves the lexer on the first token after the type, so the module
    parser can hand it the same lexer for op signatures and ``dense<...> : tensor<...>``.
    The literal helpers (``parse_integer``, ``parse_float``) and the error helpers follow
    MLIR's ``AsmParser`` and are meant to be shared.
    """

    def __init__(self, lexer: Lexer):
        self.lex = lexer
        self.source = lexer.source
        self.text = lexer.text
        self._depth = 0

    # -- tokens ---------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        """The current (not yet consumed) token."""
        return self.lex.peek()

    def consume(self) -> Token:
        """Consume the current token; like MLIR, lex the next one at once."""
        t = self.lex.next()
        self.lex.peek()
        return t

    def consume_if(self, kind: Tok) -> bool:
        if self.tok.kind is kind:
            self.consume()
            return True
        return False

    def reset_to(self, pos: int) -> None:
        """Continue from ``pos`` (MLIR's ``resetToken``)."""
        self.lex.reset_to(pos)
        self.lex.peek()

    def parse_token(self, kind: Tok, message: str) -> Token:
        if self.tok.kind is kind:
            return self.consume()
        raise self.wrong_token_error(message)

    def is_keyword(self) -> bool:
        return self.tok.kind is Tok.BARE_ID

    def parse_keyword(self) -> str:
        """``parseKeyword(StringRef*)``: any bare identifier."""
        t = self.tok
        if t.kind is not Tok.BARE_ID:
            raise self.error_at(t.pos, "expected valid keyword")
        self.consume()
        return t.text

    # -- errors ---------------------------------------------------------------------------
    def error_at(self, pos: int, message: str) -> ParseError:
        return self.source.error(max(pos, 0), message)

    def error_here(self, message: str) -> ParseError:
        """``Parser::emitError(msg)``: at the current token, one char back at end of input."""
        t = self.tok
        return self.error_at(t.pos - 1 if t.kind is Tok.EOF else t.pos, message)

    def wrong_token_error(self, message: str) -> ParseError:
        """``Parser::emitWrongTokenError``: report where the expected token should have been."""
        t = self.tok
        loc = t.pos - 1 if t.kind is Tok.EOF else t.pos
        loc = max(loc, 0)
        buf = self.text[:loc]
        while True:
            buf = buf.rstrip(" \t")
            if not buf:
                return self.error_at(loc, message)
            if buf[-1] not in "\n\r":
                return self.error_at(len(buf), message)
            buf = buf[:-1]
            cut = max(buf.rfind("\n"), buf.rfind("\r"))
            prev_line = buf[cut:] if cut >= 0 else buf
            comment = prev_line.find("//")
            if comment >= 0:
                buf = buf[:len(buf) - (len(prev_line) - comment)]

    # -- literals -------------------------------------------------------------------------
    def parse_optional_integer(self, bits: int = 64) -> int | None:
        """An optionally negative integer literal (decimal or hex) that fits a signed
        ``bits``-bit integer; ``true``/``false`` read as -1/0 as MLIR's sign extension of an
        ``i1`` makes them. None (nothing consumed) if the token cannot start one."""
        t = self.tok
        if t.kind is Tok.BARE_ID and t.text in ("true", "false"):
            self.consume()
            return -1 if t.text == "true" else 0
        if t.kind not in (Tok.INTEGER, Tok.MINUS):
            return None
        negative = self.consume_if(Tok.MINUS)
        cur = self.tok
        self.parse_token(Tok.INTEGER, "expected integer value")
        value = int(cur.text, 16 if cur.text[1:2] == "x" else 10)
        if negative:
            value = -value
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise self.error_at(t.pos, "integer value too large")
        return value

    def parse_integer(self, bits: int = 64) -> int:
        loc = self.tok.pos
        value = self.parse_optional_integer(bits)
        if value is None:
            raise self.error_at(loc, "expected integer value")
        return value

    def parse_float(self) -> float:
        """``AsmParser::parseFloat(double&)``: ``-``? then a float literal, or a hex integer
        read as the bit pattern of an IEEE double."""
        negative = self.consume_if(Tok.MINUS)
        t = self.tok
        if t.kind is Tok.FLOAT:
            self.consume()
            value = float(t.text)
            return -value if negative else value
        if t.kind is Tok.INTEGER:
            if t.text[1:2] != "x":
                err = self.error_at(t.pos, "unexpected decimal integer literal for a floating point value")
                raise add_followup(err, "note", err.loc, "add a trailing dot to make the literal a float")
            if negative:
                raise self.error_at(t.pos, "hexadecimal float literal should not have a leading minus")
            bits = int(t.text, 16)
            if bits.bit_length() > 64:
                raise self.error_at(t.pos, "hexadecimal float constant out of range for type")
            self.consume()
            return struct.unpack("<d", struct.pack("<Q", bits))[0]
        raise self.error_at(t.pos, "expected floating point literal")

    # -- types ----------------------------------------------------------------------------
    def starts_type(self) -> bool:
        t = self.tok
        if t.kind in (Tok.LPAREN, Tok.BANG_ID):
            return True
        return t.kind is Tok.BARE_ID and (t.text in _TYPE_KEYWORDS or _INT_TYPE.match(t.text) is not None)

    def parse_optional_type(self) -> Type | None:
        return self.parse_type() if self.starts_type() else None

    def parse_type(self) -> Type:
        """``type ::= function-type | non-function-type``."""
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise self.error_here(f"types nested deeper than {MAX_NESTING} levels are not supported")
            if self.tok.kind is Tok.LPAREN:
                return self.parse_function_type()
            return self.parse_non_function_type()
        finally:
            self._depth -= 1

    def parse_non_function_type(self) -> Type:
        t = self.tok
        if t.kind is Tok.BANG_ID:
            return self.parse_extended_type()
        if t.kind is not Tok.BARE_ID:
            raise self.wrong_token_error("expected non-function type")
        word = t.text
        if word in _FLOAT_NAMES:
            self.consume()
            return FloatType(word)
        m = _INT_TYPE.match(word)
        if m:
            width = int(m.group(2)) if len(m.group(2)) <= 10 else 1 << 32   # no int() of a 5000-digit width
            if width > 0xFFFFFFFF:
                raise self.error_here("invalid integer width")
            if width > MAX_INTEGER_WIDTH:
                raise self.error_at(t.pos, f"integer bitwidth is limited to {MAX_INTEGER_WIDTH} bits")
            self.consume()
            return IntegerType(width, {"i": "signless", "si": "signed", "ui": "unsigned"}[m.group(1)])
        parse = {
            "tensor": self.parse_tensor_type, "vector": self.parse_vector_type,
            "memref": self.parse_memref_type, "complex": self.parse_complex_type,
            "tuple": self.parse_tuple_type,
        }.get(word)
        if parse:
            return parse()
        if word == "index":
            self.consume()
            return IndexType()
        if word == "none":
            self.consume()
            return NoneType()
        raise self.wrong_token_error("expected non-function type")

    def parse_function_type(self) -> FunctionType:
        inputs = self.parse_type_list_parens()
        self.parse_token(Tok.ARROW, "expected '->' in function type")
        return FunctionType(inputs, self.parse_function_result_types())

    def parse_type_list_parens(self) -> tuple[Type, ...]:
        self.parse_token(Tok.LPAREN, "expected '('")
        if self.consume_if(Tok.RPAREN):
            return ()
        types = self.parse_type_list_no_parens()
        self.parse_token(Tok.RPAREN, "expected ')'")
        return types

    def parse_type_list_no_parens(self) -> tuple[Type, ...]:
        types = [self.parse_type()]
        while self.consume_if(Tok.COMMA):
            types.append(self.parse_type())
        return tuple(types)

    def parse_function_result_types(self) -> tuple[Type, ...]:
        if self.tok.kind is Tok.LPAREN:
            return self.parse_type_list_parens()
        return (self.parse_non_function_type(),)

    # shaped types
    def parse_tensor_type(self) -> TensorType:
        self.consume()
        self.parse_token(Tok.LESS, "expected '<' in tensor type")
        if self.consume_if(Tok.STAR):
            shape = None
            self.parse_x_in_dimension_list()
        else:
            shape = tuple(self.parse_dimension_list_ranked())
        elem_loc = self.tok.pos
        elem = self.parse_type()
        if self.tok.kind is Tok.COMMA:
            raise self.error_here("tensor encoding attributes are not supported by quantir")
        self.parse_token(Tok.GREATER, "expected '>' in tensor type")
        if not _valid_tensor_element(elem):
            raise self.error_at(elem_loc, "invalid tensor element type")
        return TensorType(shape, elem)

    def parse_vector_type(self) -> VectorType:
        loc = self.consume().pos
        self.parse_token(Tok.LESS, "expected '<' in vector type")
        dims, scalable = [], []
        while self.tok.kind in (Tok.INTEGER, Tok.LSQUARE):
            is_scalable = self.consume_if(Tok.LSQUARE)
            dims.append(self.parse_integer_in_dimension_list())
            if is_scalable and not self.consume_if(Tok.RSQUARE):
                raise self.wrong_token_error("missing ']' closing scalable dimension")
            scalable.append(is_scalable)
            self.parse_x_in_dimension_list()
        elem = self.parse_type()
        self.parse_token(Tok.GREATER, "expected '>' in vector type")
        try:
            return VectorType(tuple(dims), elem, tuple(scalable))
        except VerifyError as e:
            raise self.error_at(loc, e.message) from None

    def parse_memref_type(self) -> MemRefType:
        self.consume()
        self.parse_token(Tok.LESS, "expected '<' in memref type")
        if self.consume_if(Tok.STAR):
            shape = None
            self.parse_x_in_dimension_list()
        else:
            shape = tuple(self.parse_dimension_list_ranked())
        elem_loc = self.tok.pos
        elem = self.parse_type()
        if not _valid_memref_element(elem):
            raise self.error_at(elem_loc, "invalid memref element type")
        space = None
        if not self.consume_if(Tok.GREATER):
            self.parse_token(Tok.COMMA, "expected ',' or '>' in memref type")
            if self.tok.kind is not Tok.INTEGER:
                raise self.error_here("quantir supports memref types with an integer memory space only")
            space = self.parse_integer(64)
            self.parse_token(Tok.GREATER, "expected ',' or '>'")
        return MemRefType(shape, elem, space)

    def parse_complex_type(self) -> ComplexType:
        self.consume()
        self.parse_token(Tok.LESS, "expected '<' in complex type")
        loc = self.tok.pos
        elem = self.parse_type()
        self.parse_token(Tok.GREATER, "expected '>' in complex type")
        if not isinstance(elem, (IntegerType, FloatType)):
            raise self.error_at(loc, "invalid element type for complex")
        return ComplexType(elem)

    def parse_tuple_type(self) -> TupleType:
        self.consume()
        self.parse_token(Tok.LESS, "expected '<' in tuple type")
        if self.consume_if(Tok.GREATER):
            return TupleType(())
        types = self.parse_type_list_no_parens()
        self.parse_token(Tok.GREATER, "expected '>' in tuple type")
        return TupleType(types)

    def parse_dimension_list_ranked(self, allow_dynamic: bool = True,
                                    with_trailing_x: bool = True) -> list[int | None]:
        """``dimension-list ::= (dimension 'x')*`` (or ``dimension ('x' dimension)*``
        without the trailing ``x``); ``?`` gives None."""
        dims: list[int | None] = []

        def parse_dim():
            t = self.tok
            if t.kind is Tok.QUESTION:
                if not allow_dynamic:
                    raise self.error_at(t.pos, "expected static shape")
                self.lex.next()   # the next token is lexed lazily: see parse_x_in_dimension_list
                dims.append(None)
            else:
                dims.append(self.parse_integer_in_dimension_list())

        if with_trailing_x:
            while self.tok.kind in (Tok.INTEGER, Tok.QUESTION):
                parse_dim()
                self.parse_x_in_dimension_list()
            return dims
        if self.tok.kind in (Tok.INTEGER, Tok.QUESTION):
            parse_dim()
            while self._glued_x() or (self.tok.kind is Tok.BARE_ID and self.tok.text[0] == "x"):
                self.parse_x_in_dimension_list()
                parse_dim()
        return dims

    def parse_integer_in_dimension_list(self) -> int:
        t = self.tok
        if t.kind is Tok.INTEGER and t.text[1:2] == "x":  # `0x10xf32` is 0, x, 10, ...: hex is not allowed in shapes
            self.reset_to(t.pos + 1)
            return 0
        if t.kind is not Tok.INTEGER:
            raise self.error_here("invalid dimension")
        value = int(t.text)
        if value >= 1 << 63:
            raise self.error_here("invalid dimension")
        self.lex.next()   # the next token is lexed lazily: see parse_x_in_dimension_list
        return value

    def _glued_x(self) -> bool:
        """An ``x`` right after the dimension just read, not yet lexed."""
        return self.lex.glued("x")

    def parse_x_in_dimension_list(self) -> None:
        """Consume an ``x``, also the one glued to the element type as in ``xf32``.

        An ``x`` glued to the dimension before it is stepped over without lexing the token it
        starts: in ``4x4x...x4xf32`` that token is the whole rest of the shape, and lexing it once
        per dimension made parsing quadratic in the rank (10,000 dims took 10 s)."""
        if self._glued_x():
            self.reset_to(self.lex.pos + 1)
            return
        t = self.tok
        if t.kind is not Tok.BARE_ID or t.text[0] != "x":
            raise self.wrong_token_error("expected 'x' in dimension list")
        if len(t.text) > 1:
            self.reset_to(t.pos + 1)
        else:
            self.consume()

    # dialect types
    def parse_extended_type(self) -> Type:
        """``!dialect.name<body>`` / ``!dialect<body>``; ``quant`` is parsed, others kept opaque."""
        ident_tok = self.consume()
        ident = ident_tok.text[1:]
        dialect, _, symbol = ident.partition(".")
        is_pretty = bool(symbol) or ident.endswith(".")
        nxt = self.tok
        has_trailing_data = nxt.kind is Tok.LESS and nxt.pos == ident_tok.end
        if not has_trailing_data and not is_pretty:
            raise self.wrong_token_error(f"undefined symbol alias id '{ident}'")
        if not is_pretty:
            data_start = nxt.pos + 1
            data_end = self._scan_dialect_symbol_body() - 1
        else:
            data_start = ident_tok.pos + 1 + len(dialect) + 1
            data_end = self._scan_dialect_symbol_body() if has_trailing_data else ident_tok.end
        if dialect != "quant":
            if not _DIALECT_NAME.match(dialect):  # OpaqueType::verify
                loc = data_start if is_pretty else ident_tok.pos
                raise self.error_at(loc, f"invalid dialect namespace '\"{dialect}\"'")
            return OpaqueType(dialect, self.text[data_start:data_end])
        from .quant_parser import parse_quant_type  # the dialect parser builds on this one

        resume = self.tok.pos
        self.reset_to(data_start)
        t = parse_quant_type(self)
        self.reset_to(resume)
        return t

    def _scan_dialect_symbol_body(self) -> int:
        """Skip the balanced ``<...>`` at the current token; return the offset after it."""
        text, limit = self.text, self.lex.limit
        err_pos = self.tok.pos
        i = self.tok.pos
        stack: list[str] = []
        while True:
            c = text[i] if i < limit else "\0"
            i += 1
            if c == "\0":
                if stack:
                    raise self.error_at(err_pos, f"unbalanced '{stack[-1]}' character in pretty dialect name")
                raise self.error_at(err_pos, "unexpected nul or EOF in pretty dialect name")
            if c in "<[({":
                stack.append(c)
                continue
            if c == "-":
                if i < limit and text[i] == ">":  # `->` is one token
                    i += 1
                continue
            if c in _CLOSERS:
                if stack[-1] != _CLOSERS[c]:
                    raise self.error_at(err_pos, f"unbalanced '{stack[-1]}' character in pretty dialect name")
                stack.pop()
                if not stack:
                    break
            elif c == '"':
                string_tok = Lexer(self.source, i - 1, limit).next()
                err_pos, i = string_tok.pos, string_tok.end
        self.reset_to(i)
        return i
