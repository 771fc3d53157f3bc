"""Attribute syntax (``mlir/lib/AsmParser/AttributeParser.cpp``), with MLIR's messages and
error positions.

:class:`AttrParser` extends the type system's :class:`~quantir.types.TypeParser` (the shared
cursor, literal and error helpers) with attributes, aliases (``#a = ...``, ``!t = ...``) and
``loc(...)`` specifiers, which are skipped. ``dense_resource`` attributes are created without
their array; the module parser fills the arrays in from the ``{-# dialect_resources #-}``
section, which comes last in the file.
"""
from __future__ import annotations

from ..errors import ParseError
from ..ir.attributes import (ArrayAttr, Attribute, BoolAttr, DenseArrayAttr, DenseElementsAttr,
                             DenseResourceAttr, DictAttr, FloatAttr, IntegerAttr, StringAttr,
                             SymbolRefAttr, TypeAttr, UnitAttr)
from ..types import FloatType, IndexType, IntegerType, ShapedType, Type, TypeParser
from ..types.lexer import MAX_INT_BITS, MAX_INT_DIGITS, Tok, Token
from ..types.parser import add_followup
from .dense_literal import TensorLiteral
from .numbers import bits_to_float, float_to_bits, int_fits, round_float

__all__ = ["AttrParser", "LOCATION"]

_I64 = IntegerType(64)
_F64 = FloatType("f64")
_HEX = frozenset("0123456789abcdefABCDEF")
LOCATION = object()  # the value of an alias to a location: ``#loc = loc("a.py":1:2)``
MAX_DEPTH = 100       # nesting of attribute lists beyond this is refused, not a RecursionError


class AttrParser(TypeParser):
    def __init__(self, lexer):
        super().__init__(lexer)
        self.attr_aliases: dict[str, object] = {}
        self.type_aliases: dict[str, Type] = {}
        self.resource_uses: list[tuple[DenseResourceAttr, int]] = []
        self._attr_depth = 0
        self.location_alias_uses: list[tuple[str, int]] = []
        self.unsupported: ParseError | None = None
        self.start = lexer.pos  # a --split-input-file chunk is a buffer of its own for MLIR

    def wrong_token_error(self, message: str) -> ParseError:
        """``emitWrongTokenError``: after the previous token, skipping blanks, blank lines and
        comments backwards -- but never back past the start of the chunk being parsed."""
        t = self.tok
        loc = max(t.pos - 1 if t.kind is Tok.EOF else t.pos, self.start)
        base = self.start
        buf = self.text[base:loc]
        while True:
            buf = buf.rstrip(" \t")
            if not buf:
                return self.error_at(loc, message)
            if buf[-1] not in "\n\r":
                return self.error_at(base + len(buf), message)
            buf = buf[:-1]
            cut = max(buf.rfind("\n"), buf.rfind("\r"))
            prev_line = buf[cut:] if cut >= 0 else buf
            comment = prev_line.find("//")
            if comment >= 0:
                buf = buf[:len(buf) - (len(prev_line) - comment)]

    # -- small helpers --------------------------------------------------------------------------
    def defer(self, pos: int, message: str) -> None:
        """Something valid MLIR that quantir cannot hold: parsing goes on (so that a real syntax
        error further down is reported first, as MLIR would), and this error is raised at the end."""
        if self.unsupported is None:
            self.unsupported = self.error_at(pos, message)

    def note(self, err: ParseError, pos: int, message: str) -> ParseError:
        return add_followup(err, "note", self.source.location(pos), message)

    def string_value(self, tok: Token) -> str:
        """``Token::getStringValue`` with the lexer's escape check (``\\"``, ``\\\\``, ``\\n``,
        ``\\t``, ``\\XX``); undecodable bytes are kept as surrogates."""
        body = tok.text[1:-1] if tok.kind is Tok.STRING else tok.text[2:-1]
        if "\\" not in body:
            return body
        out = bytearray()
        i, n = 0, len(body)
        start = tok.pos + (1 if tok.kind is Tok.STRING else 2)
        while i < n:
            c = body[i]
            if c != "\\":
                out += c.encode("utf-8", "surrogateescape")
                i += 1
                continue
            nxt = body[i + 1:i + 2]
            if nxt and nxt in '"\\':
                out += nxt.encode()
                i += 2
            elif nxt == "n":
                out += b"\n"
                i += 2
            elif nxt == "t":
                out += b"\t"
                i += 2
            elif len(body[i + 1:i + 3]) == 2 and all(h in _HEX for h in body[i + 1:i + 3]):
                out.append(int(body[i + 1:i + 3], 16))
                i += 3
            else:
                raise self.error_at(start + i, "unknown escape in string literal")
        return out.decode("utf-8", "surrogateescape")

    def symbol_name(self, tok: Token) -> str:
        return self.string_value(tok) if tok.text.startswith('@"') else tok.text[1:]

    def keyword_or_string(self) -> str | None:
        """``parseOptionalKeywordOrString``: a bare identifier or a string, else None."""
        t = self.tok
        if t.kind is Tok.BARE_ID:
            self.consume()
            return t.text
        if t.kind is Tok.STRING:
            self.consume()
            return self.string_value(t)
        return None

    def comma_list_until(self, closer: Tok, spelling: str, element) -> None:
        """``parseCommaSeparatedListUntil(closer)``, the empty list allowed."""
        if self.consume_if(closer):
            return
        element()
        while self.consume_if(Tok.COMMA):
            element()
        self.parse_token(closer, f"expected ',' or '{spelling}'")

    # -- locations ------------------------------------------------------------------------------
    # Locations are parsed with MLIR's grammar and messages (LocationParser.cpp) and dropped:
    # quantir locates ops by their position in the text it read.
    def skip_trailing_location(self) -> None:
        """``loc(...)`` after an op, an argument or a result."""
        if self.tok.kind is Tok.BARE_ID and self.tok.text == "loc":
            self.consume()
            self.parse_token(Tok.LPAREN, "expected '(' in location")
            t = self.tok
            if t.kind is Tok.HASH_ID and "." not in t.text:
                self.consume()  # an alias, maybe defined further down
                self.location_alias_uses.append((t.text[1:], t.pos))
            else:
                self.parse_location_instance()
            self.parse_token(Tok.RPAREN, "expected ')' in location")

    def parse_location_instance(self) -> None:
        t = self.tok
        if t.kind is Tok.HASH_ID:
            self._extended_attr(allow_location=True)
            return
        if t.kind is Tok.STRING:
            self._name_or_file_line_col()
            return
        if t.kind is not Tok.BARE_ID:
            raise self.wrong_token_error("expected location instance")
        if t.text == "callsite":
            self.consume()
            self.parse_token(Tok.LPAREN, "expected '(' in callsite location")
            self.parse_location_instance()
            if not (self.tok.kind is Tok.BARE_ID and self.tok.text == "at"):
                raise self.wrong_token_error("expected 'at' in callsite location")
            self.consume()
            self.parse_location_instance()
            self.parse_token(Tok.RPAREN, "expected ')' in callsite location")
        elif t.text == "fused":
            self.consume()
            if self.consume_if(Tok.LESS):
                self.parse_attribute()
                self.parse_token(Tok.GREATER, "expected '>' after fused location metadata")
            self.parse_token(Tok.LSQUARE, "expected '[' in fused location")
            if not self.consume_if(Tok.RSQUARE):
                self.parse_location_instance()
                while self.consume_if(Tok.COMMA):
                    self.parse_location_instance()
                self.parse_token(Tok.RSQUARE, "expected ']' in fused location")
        elif t.text == "unknown":
            self.consume()
        else:
            raise self.wrong_token_error("expected location instance")

    def _name_or_file_line_col(self) -> None:
        self.consume()
        if self.consume_if(Tok.COLON):
            if self.tok.kind is not Tok.INTEGER:
                raise self.wrong_token_error("expected integer line number in FileLineColRange")
            self.consume()
            if not self.consume_if(Tok.COLON):
                return
            if self.tok.kind is not Tok.INTEGER:
                raise self.wrong_token_error("expected integer column number in FileLineColRange")
            self.consume()
            if not (self.tok.kind is Tok.BARE_ID and self.tok.text == "to"):
                return
            self.consume()
            self.consume_if(Tok.INTEGER)
            if not self.consume_if(Tok.COLON):
                raise self.wrong_token_error("expected either integer or `:` post `to` in FileLineColRange")
            if self.tok.kind is not Tok.INTEGER:
                raise self.wrong_token_error("expected integer column number in FileLineColRange")
            self.consume()
        elif self.consume_if(Tok.LPAREN):
            self.parse_location_instance()
            self.parse_token(Tok.RPAREN, "expected ')' after child location of NameLoc")

    # -- aliases --------------------------------------------------------------------------------
    def parse_alias_definition(self) -> None:
        t = self.tok
        name = t.text[1:]
        is_attr = t.kind is Tok.HASH_ID
        what = "attribute" if is_attr else "type"
        table = self.attr_aliases if is_attr else self.type_aliases
        if name in table:
            raise self.error_here(f"redefinition of {what} alias id '{name}'")
        if "." in name:
            raise self.error_here(f"{what} names with a '.' are reserved for dialect-defined names")
        self.consume()
        self.parse_token(Tok.EQUAL, f"expected '=' in {what} alias definition")
        if not is_attr:
            table[name] = self.parse_type()  # type: ignore[assignment]
        elif self.tok.kind is Tok.BARE_ID and self.tok.text == "loc":
            self.consume()
            self.parse_token(Tok.LPAREN, "expected '(' in inline location")
            self.parse_location_instance()
            self.parse_token(Tok.RPAREN, "expected ')' in inline location")
            table[name] = LOCATION
        else:
            table[name] = self.parse_attribute()

    def parse_extended_type(self) -> Type:
        t = self.tok
        name = t.text[1:]
        nxt_is_body = self.text.startswith("<", t.end)
        if "." not in name and not nxt_is_body and name in self.type_aliases:
            self.consume()
            return self.type_aliases[name]
        return super().parse_extended_type()

    # -- attributes -----------------------------------------------------------------------------
    def parse_optional_attr_dict(self) -> dict[str, Attribute]:
        return self.parse_attr_dict() if self.tok.kind is Tok.LBRACE else {}

    def parse_attr_dict(self) -> dict[str, Attribute]:
        """``{name = value, unit_name, "quoted name" = value}``: duplicates are an error."""
        out: dict[str, Attribute] = {}
        self.parse_token(Tok.LBRACE, "expected '{' in attribute dictionary")
        if self.consume_if(Tok.RBRACE):
            return out

        def element():
            t = self.tok
            if t.kind is Tok.STRING:
                name = self.string_value(t)
            elif t.kind is Tok.BARE_ID:
                name = t.text
            else:
                raise self.wrong_token_error("expected attribute name")
            if not name:
                raise self.error_here("expected valid attribute name")
            if name in out:
                raise self.error_here(f"duplicate key '{name}' in dictionary attribute")
            self.consume()
            out[name] = self.parse_attribute() if self.consume_if(Tok.EQUAL) else UnitAttr()

        element()
        while self.consume_if(Tok.COMMA):
            element()
        self.parse_token(Tok.RBRACE, "expected '}' in attribute dictionary")
        return out

    def parse_attribute(self, type: Type | None = None) -> Attribute:
        self._attr_depth += 1
        try:
            if self._attr_depth > MAX_DEPTH:
                raise self.error_here(f"attributes nested deeper than {MAX_DEPTH} levels are not supported")
            return self._parse_attribute(type)
        finally:
            self._attr_depth -= 1

    def _parse_attribute(self, type: Type | None) -> Attribute:
        t = self.tok
        k = t.kind
        if k is Tok.LSQUARE:
            self.consume()
            items: list[Attribute] = []
            self.comma_list_until(Tok.RSQUARE, "]", lambda: items.append(self.parse_attribute()))
            return ArrayAttr(tuple(items))
        if k is Tok.LBRACE:
            d = self.parse_attr_dict()
            return DictAttr(tuple(sorted(d.items(), key=lambda kv: kv[0].encode("utf-8", "surrogateescape"))))
        if k is Tok.FLOAT:
            return self._float_attr(type, False)
        if k is Tok.INTEGER:
            return self._int_attr(type, False)
        if k is Tok.MINUS:
            self.consume()
            if self.tok.kind is Tok.INTEGER:
                return self._int_attr(type, True)
            if self.tok.kind is Tok.FLOAT:
                return self._float_attr(type, True)
            raise self.wrong_token_error("expected constant integer or floating point value")
        if k is Tok.STRING:
            self.consume()
            value = self.string_value(t)
            if type is None and self.tok.kind is Tok.COLON:
                self.consume()
                self.defer(self.tok.pos, "quantir does not support typed string attributes")
                self.parse_type()
            return StringAttr(value)
        if k is Tok.AT_ID:
            return self._symbol_ref()
        if k is Tok.HASH_ID:
            return self._extended_attr()
        if k is Tok.BARE_ID:
            word = t.text
            if word in ("true", "false"):
                self.consume()
                return BoolAttr(word == "true")
            if word == "unit":
                self.consume()
                return UnitAttr()
            if word == "dense":
                return self.parse_dense(type)
            if word == "dense_resource":
                return self._dense_resource(type)
            if word == "array":
                return self._dense_array()
            if word == "loc":
                self.consume()
                self.parse_token(Tok.LPAREN, "expected '(' in inline location")
                self.parse_location_instance()
                self.parse_token(Tok.RPAREN, "expected ')' in inline location")
                raise self.error_at(t.pos, "quantir does not support location attributes")
            if word == "affine_map":
                return self._affine_map()
            if word in ("affine_set", "sparse", "strided", "distinct"):
                raise self.error_here(f"quantir does not support '{word}' attributes")
        if self.starts_type():
            return TypeAttr(self.parse_type())
        raise self.wrong_token_error("expected attribute value")

    def _affine_map(self) -> Attribute:
        """``affine_map<(d0, d1) -> (d0, d1 floordiv 4)>``; each result expression is kept as its
        tokens joined by spaces (what the quant lowering's maps print as)."""
        from ..ir.dialects.linalg import AffineMapAttr
        self.consume()
        self.parse_token(Tok.LESS, "expected '<' after 'affine_map'")
        self.parse_token(Tok.LPAREN, "expected '(' at start of dimensional identifiers list")
        dims = 0
        while self.tok.kind is not Tok.RPAREN:
            if self.tok.kind is not Tok.BARE_ID or self.tok.text != f"d{dims}":
                raise self.error_here("quantir reads affine maps with dimensions d0, d1, ... in order")
            self.consume()
            dims += 1
            if not self.consume_if(Tok.COMMA):
                break
        self.parse_token(Tok.RPAREN, "expected ')' at end of dimensional identifiers list")
        if self.tok.kind is Tok.LSQUARE:
            raise self.error_here("quantir does not support affine maps with symbols")
        self.parse_token(Tok.ARROW, "expected '->' or '['")
        self.parse_token(Tok.LPAREN, "expected '(' at start of affine map range")
        results: list[str] = []
        words: list[str] = []
        depth = 0
        while depth or self.tok.kind is not Tok.RPAREN:
            t = self.tok
            if t.kind is Tok.EOF:
                raise self.error_here("expected ')' at end of affine map range")
            if t.kind is Tok.COMMA and not depth:
                results.append(" ".join(words))
                words = []
            else:
                depth += (t.kind is Tok.LPAREN) - (t.kind is Tok.RPAREN)
                words.append(t.text)
            self.consume()
        if words:
            results.append(" ".join(words))
        self.parse_token(Tok.RPAREN, "expected ')' at end of affine map range")
        self.parse_token(Tok.GREATER, "expected '>' at end of affine map")
        return AffineMapAttr(dims, tuple(results))

    def _symbol_ref(self) -> SymbolRefAttr:
        t = self.consume()
        name = self.symbol_name(t)
        c = self.tok
        if c.kind is Tok.COLON and self.text.startswith("::", c.pos):
            self.consume()
            self.consume()
            if self.tok.kind is not Tok.AT_ID:
                raise self.error_here("expected nested symbol reference identifier")
            raise self.error_at(t.pos, "quantir does not support nested symbol references")
        return SymbolRefAttr(name)

    def _extended_attr(self, allow_location: bool = False) -> Attribute:
        t = self.consume()
        name = t.text[1:]
        has_body = self.tok.kind is Tok.LESS and self.tok.pos == t.end
        if "." in name or has_body:
            raise self.error_at(t.pos, f"quantir does not support dialect attribute '#{name}'")
        value = self.attr_aliases.get(name)
        if value is None:
            raise self.wrong_token_error(f"undefined symbol alias id '{name}'")
        if value is LOCATION:
            if allow_location:
                return value  # type: ignore[return-value]
            raise self.error_at(t.pos, "quantir does not support location attributes")
        return value  # type: ignore[return-value]

    # -- scalars --------------------------------------------------------------------------------
    def _float_attr(self, type: Type | None, negative: bool) -> FloatAttr:
        value = float(self.consume().text)
        if type is None:
            type = self.parse_type() if self.consume_if(Tok.COLON) else _F64
        if not isinstance(type, FloatType):
            raise self.error_here("floating point value not valid for specified type")
        return FloatAttr(round_float(-value if negative else value, type), type)

    def _int_attr(self, type: Type | None, negative: bool) -> Attribute:
        t = self.consume()
        if type is None:
            type = self.parse_type() if self.consume_if(Tok.COLON) else _I64
        if isinstance(type, FloatType):
            return FloatAttr(self.float_from_integer_token(t, negative, type), type)
        if not isinstance(type, (IntegerType, IndexType)):
            raise self.error_at(t.pos, "integer literal not valid for specified type")
        if negative and isinstance(type, IntegerType) and type.signedness == "unsigned":
            raise self.error_at(t.pos, "negative integer literal not valid for unsigned integer type")
        value = int_fits(magnitude(t.text), negative, type)
        if value is None:
            raise self.error_at(t.pos, "integer constant out of range for attribute")
        if isinstance(type, IntegerType) and type.width == 1 and type.signedness == "signless":
            return BoolAttr(bool(value))
        return IntegerAttr(value, type)

    def float_from_integer_token(self, t: Token, negative: bool, ft: FloatType) -> float:
        """``parseFloatFromIntegerLiteral``: a hex literal is the bit pattern of the float."""
        if not t.text.startswith("0x"):
            err = self.error_at(t.pos, "unexpected decimal integer literal for a floating point value")
            raise self.note(err, t.pos, "add a trailing dot to make the literal a float")
        if negative:
            raise self.error_at(t.pos, "hexadecimal float literal should not have a leading minus")
        bits = int(t.text, 16)
        if bits.bit_length() > ft.bitwidth:
            raise self.error_at(t.pos, "hexadecimal float constant out of range for type")
        return bits_to_float(bits, ft)

    def float_bits_from_token(self, t: Token, negative: bool, ft: FloatType) -> int:
        """``parseFloatFromLiteral`` for an element: the bit pattern in ``ft``."""
        if t.kind is Tok.FLOAT:
            value = float(t.text)
            return float_to_bits(-value if negative else value, ft)
        if t.kind is Tok.INTEGER:
            return float_to_bits(self.float_from_integer_token(t, negative, ft), ft)
        raise self.error_at(t.pos, "expected floating point literal")

    # -- array<...> -----------------------------------------------------------------------------
    def _dense_array(self) -> DenseArrayAttr:
        self.consume()
        self.parse_token(Tok.LESS, "expected '<' after 'array'")
        type_loc = self.tok.pos
        et = self.parse_type()
        if not isinstance(et, (IntegerType, FloatType)):
            raise self.error_at(type_loc, f"expected integer or float type, got: '{et}'")
        is_i1 = isinstance(et, IntegerType) and et.width == 1
        if not is_i1 and et.bitwidth % 8:
            raise self.error_at(type_loc, "element type bitwidth must be a multiple of 8")
        if self.consume_if(Tok.GREATER):
            return DenseArrayAttr(et, ())
        self.parse_token(Tok.COLON, "expected ':' after dense array type")
        values: list = []

        def element():
            start = self.tok.pos
            negative = self.consume_if(Tok.MINUS)
            t = self.tok
            if isinstance(et, FloatType):
                bits = self.float_bits_from_token(t, negative, et)
                self.consume()
                values.append(bits_to_float(bits, et))
                return
            if t.kind is Tok.BARE_ID and t.text in ("true", "false"):
                if not is_i1:
                    raise self.error_here("expected i1 type for 'true' or 'false' values")
                self.consume()
                values.append(t.text == "true")
                return
            if t.kind is not Tok.INTEGER:
                raise self.error_here("expected integer literal")
            self.consume()
            if is_i1:
                raise self.error_here("expected 'true' or 'false' values for i1 type")
            v = int_fits(magnitude(t.text), negative, et)
            if v is None:
                raise self.error_here("integer constant out of range")
            if v.bit_length() > MAX_INT_BITS:   # `-1` wrapped to a wide unsigned type: 2**20000 - 1
                raise self.error_at(start, f"integer value of {v.bit_length()} bits is too large: quantir "
                                           f"prints integers of at most {MAX_INT_DIGITS} decimal digits")
            values.append(v)

        element()
        while self.consume_if(Tok.COMMA):
            element()
        self.parse_token(Tok.GREATER, "expected '>' to close an array attribute")
        return DenseArrayAttr(et, tuple(values))

    # -- dense<...> -----------------------------------------------------------------------------
    def parse_dense(self, type: Type | None = None) -> DenseElementsAttr:
        loc = self.consume().pos
        self.parse_token(Tok.LESS, "expected '<' after 'dense'")
        literal = TensorLiteral(self)
        if not self.consume_if(Tok.GREATER):
            literal.parse()
            self.parse_token(Tok.GREATER, "expected '>'")
        if type is None:
            self.parse_token(Tok.COLON, "expected ':'")
            type = self.parse_type()
        if not isinstance(type, ShapedType):
            raise self.error_at(loc, "elements literal must be a shaped type")
        if not type.has_static_shape:
            raise self.error_at(loc, "elements literal type must have static shape")
        return DenseElementsAttr(literal.to_array(loc, type), type)  # type: ignore[arg-type]

    def _dense_resource(self, type: Type | None) -> DenseResourceAttr:
        loc = self.consume().pos
        self.parse_token(Tok.LESS, "expected '<' after 'dense_resource'")
        key = self.keyword_or_string()
        if key is None:
            raise self.error_here("expected identifier key for 'resource' entry")
        self.parse_token(Tok.GREATER, "expected '>'")
        type_loc = loc
        if type is None:
            type_loc = self.tok.pos
            self.parse_token(Tok.COLON, "expected ':'")
            type = self.parse_type()
        if not isinstance(type, ShapedType):
            raise self.error_at(type_loc, "`dense_resource` expected a shaped type")
        attr = DenseResourceAttr(key, type)  # type: ignore[arg-type]
        self.resource_uses.append((attr, loc))
        return attr


def magnitude(text: str) -> int:
    return int(text, 16) if text.startswith("0x") else int(text, 10)
