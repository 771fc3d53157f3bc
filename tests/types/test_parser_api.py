"""TypeParser on a shared lexer, as the module parser uses it."""
from __future__ import annotations

import pytest

from quantir.errors import ParseError
from quantir.types import FunctionType, OpaqueType, TensorType, TypeParser, f32, i8, parse_type
from quantir.types.lexer import Lexer, Source, Tok


def parser_for(text: str, start: int = 0) -> TypeParser:
    return TypeParser(Lexer(Source(text, "m.mlir"), start))


def test_consumes_exactly_one_type_and_leaves_the_lexer_after_it():
    p = parser_for("(tensor<4xf32>, i8) -> tensor<4x!quant.uniform<i8:f32, 0.5>> {attr}")
    t = p.parse_type()
    assert isinstance(t, FunctionType) and t.inputs == (TensorType((4,), f32), i8)
    assert p.lex.peek().kind is Tok.FILE_METADATA_BEGIN or p.lex.peek().kind is Tok.LBRACE


def test_type_after_dense_literal_colon():
    text = "dense<[1, 2]> : tensor<2xi8>\n%1 = foo"
    p = parser_for(text, text.index("tensor"))
    assert p.parse_type() == TensorType((2,), i8)
    assert p.lex.peek().kind is Tok.PERCENT_ID


def test_dialect_body_resumes_after_the_closing_angle():
    p = parser_for("!quant.uniform<i8:f32, 0.5>, f32")
    p.parse_type()
    assert p.consume_if(Tok.COMMA) and p.parse_type() == f32


def test_errors_in_a_multiline_source_point_at_the_right_line():
    text = "func.func @f(%a: tensor<4x\n   !quant.uniform<i8:f32, 0.0>>)"
    p = parser_for(text, text.index("tensor"))
    with pytest.raises(ParseError) as info:
        p.parse_type()
    assert (info.value.loc.line, info.value.loc.col) == (2, 30)
    assert str(info.value).startswith("m.mlir:2:30: error: scale 0.000000e+00 out of expressed type range")


def test_missing_token_is_reported_at_the_end_of_the_previous_line():
    with pytest.raises(ParseError) as info:
        parse_type("!quant.uniform<i8:f32 // storage and expressed\n\n   0.5>")
    assert info.value.message == "expected ','" and (info.value.loc.line, info.value.loc.col) == (1, 22)


def test_literal_helpers():
    p = parser_for("-0x10 true 2. 0x3FF0000000000000 -1.5")
    assert p.parse_integer() == -16 and p.parse_integer() == -1
    assert p.parse_float() == 2.0 and p.parse_float() == 1.0 and p.parse_float() == -1.5


def test_opaque_dialect_types_are_kept_as_text():
    assert parse_type("!foo.bar<1, {a}>") == OpaqueType("foo", "bar<1, {a}>")
    assert str(parse_type('!foo<"x y">')) == '!foo<"x y">'


def test_deep_nesting_is_a_parse_error_not_a_crash():
    with pytest.raises(ParseError, match="nested deeper"):
        parse_type("(" * 5000 + "i8")
    with pytest.raises(ParseError, match="nested deeper"):
        parse_type("!quant.uniform<i8:f32:{}, " + "{" * 300 + "1.0" + "}" * 300 + ">")
    with pytest.raises(ParseError, match="nested deeper"):
        parse_type("tensor<" * 400 + "f32" + ">" * 400)


def test_trailing_characters():
    with pytest.raises(ParseError, match="found trailing characters: 'i8'"):
        parse_type("f32 i8")
