"""Every example of docs/mlir-quant-spec.md §1-§7: valid types print back canonically,
invalid ones fail with MLIR's message at MLIR's column (checked once against iree-opt)."""
from __future__ import annotations

import pytest

from quantir.errors import ParseError
from quantir.types import parse_type

VALID = [
    # §1 grammar, both spellings, whitespace
    ("!quant.uniform<i8:f32, 0.05:-3>", "!quant.uniform<i8:f32, 5.000000e-02:-3>"),
    ("!quant<uniform<i8:f32, 0.5>>", "!quant.uniform<i8:f32, 5.000000e-01>"),
    ("!quant< uniform< i8 : f32 , 0.5 : 3 > >", "!quant.uniform<i8:f32, 5.000000e-01:3>"),
    ("!quant.any<i8>", "!quant.any<i8>"),
    ("!quant.any<u8<1:255>:f16>", "!quant.any<u8<1:255>:f16>"),
    ("!quant.calibrated<f32<-1.0:1.0>>", "!quant.calibrated<f32<-1.000000e+00:1.000000e+00>>"),
    # §2 storage
    ("!quant.uniform<i1:f32, 0.5>", "!quant.uniform<i1:f32, 5.000000e-01>"),
    ("!quant.uniform<u1:f32, 0.5>", "!quant.uniform<u1:f32, 5.000000e-01>"),
    ("!quant.uniform<i32:f32, 0.5>", "!quant.uniform<i32:f32, 5.000000e-01>"),
    ("!quant.uniform<u32<0:4294967295>:f32, 0.5>", "!quant.uniform<u32:f32, 5.000000e-01>"),
    ("!quant.uniform<si8:f32, 0.5>", "!quant.uniform<si8:f32, 5.000000e-01>"),
    ("!quant.uniform<ui8:f32, 0.5>", "!quant.uniform<ui8:f32, 5.000000e-01>"),
    ("!quant.uniform<f8E4M3FN:f32, 0.5>", "!quant.uniform<f8E4M3FN:f32, 5.000000e-01>"),
    ("!quant.uniform<f8E5M2<-57344:57344>:f32, 0.5>", "!quant.uniform<f8E5M2:f32, 5.000000e-01>"),
    ("!quant.uniform<f4E2M1FN<-6:5>:f32, 0.5>", "!quant.uniform<f4E2M1FN<-6:5>:f32, 5.000000e-01>"),
    ("!quant.uniform<i8<-128:127>:f32, 1.0>", "!quant.uniform<i8:f32, 1.000000e+00>"),
    ("!quant.uniform<i8<-127:127>:f32, 1.0>", "!quant.uniform<i8<-127:127>:f32, 1.000000e+00>"),
    # §3 expressed
    ("!quant.uniform<i8:f80, 0.5>", "!quant.uniform<i8:f80, 5.000000e-01>"),
    ("!quant.uniform<i8:tf32, 0.5>", "!quant.uniform<i8:tf32, 5.000000e-01>"),
    ("!quant.uniform<i8:f8E4M3FN, 0.5>", "!quant.uniform<i8:f8E4M3FN, 5.000000e-01>"),
    # §4 scale literals and printing
    ("!quant.uniform<i8:f32, 2.>", "!quant.uniform<i8:f32, 2.000000e+00>"),
    ("!quant.uniform<i8:f32, 0x3FD0000000000000>", "!quant.uniform<i8:f32, 2.500000e-01>"),
    ("!quant.uniform<i8:f32, 0x7FF8000000000000>", "!quant.uniform<i8:f32, 0x7FF8000000000000>"),
    ("!quant.uniform<i8:f32, 0.123456789>", "!quant.uniform<i8:f32, 0.123456789>"),
    ("!quant.uniform<i8:f32, 0.0039215686274509803>", "!quant.uniform<i8:f32, 0.0039215686274509803>"),
    ("!quant.uniform<i8:f32, 123456.7>", "!quant.uniform<i8:f32, 123456.7>"),
    ("!quant.uniform<i8:f32, 1.0e38>", "!quant.uniform<i8:f32, 9.9999999999999997E+37>"),
    ("!quant.uniform<i8:f32, 5.9604644775390625E-8>", "!quant.uniform<i8:f32, 5.9604644775390625E-8>"),
    ("!quant.uniform<i8:f32, 12345678.0>", "!quant.uniform<i8:f32, 0x41678C29C0000000>"),
    ("!quant.uniform<i8:f16, 6.5504e4>", "!quant.uniform<i8:f16, 6.550400e+04>"),
    ("!quant.uniform<i8:f8E4M3FN, 1.953125e-3>", "!quant.uniform<i8:f8E4M3FN, 0.001953125>"),  # 7 digits
    # §5 zero point
    ("!quant.uniform<i8:f32, 1.0:200>", "!quant.uniform<i8:f32, 1.000000e+00:200>"),
    ("!quant.uniform<u8:f32, 1.0:-3>", "!quant.uniform<u8:f32, 1.000000e+00:-3>"),
    ("!quant.uniform<i8:f32, 1.0:0>", "!quant.uniform<i8:f32, 1.000000e+00>"),
    ("!quant.uniform<i8:f32, 1.0:0x10>", "!quant.uniform<i8:f32, 1.000000e+00:16>"),
    ("!quant.uniform<i8:f32, 1.0:-9223372036854775808>",
     "!quant.uniform<i8:f32, 1.000000e+00:-9223372036854775808>"),
    ("!quant.uniform<u8:f32:{0:2}, {{1.0:255, 2.0}}>",
     "!quant.uniform<u8:f32:{0:2}, {{1.000000e+00:-1, 2.000000e+00}}>"),
    ("!quant.uniform<i8:f32:{0:2}, {{1.0:300, 2.0}}>",
     "!quant.uniform<i8:f32:{0:2}, {{1.000000e+00:44, 2.000000e+00}}>"),
    # §6 per-axis
    ("!quant.uniform<u8:f32:1, {0.5:10, 0.25}>", "!quant.uniform<u8:f32:1, {5.000000e-01:10,2.500000e-01}>"),
    ("!quant.uniform<i8:f32:0, {1.0}>", "!quant.uniform<i8:f32:0, {1.000000e+00}>"),
    ("!quant.uniform<i8:f32:2147483647, {1.0}>", "!quant.uniform<i8:f32:2147483647, {1.000000e+00}>"),
    ("!quant.uniform<i8:f32:0, {{1.0, 2.0}, {3.0, 4.0}}>",
     "!quant.uniform<i8:f32:0, {1.000000e+00,2.000000e+00,3.000000e+00,4.000000e+00}>"),
    # §7 sub-channel
    ("!quant.uniform<i8:f32:{0:2,1:3}, {{1.0,2.0},{3.0:1,4.0}}>",
     "!quant.uniform<i8:f32:{0:2, 1:3}, {{1.000000e+00, 2.000000e+00}, {3.000000e+00:1, 4.000000e+00}}>"),
    ("!quant.uniform<i8:f32:{}, {1.0}>", "!quant.uniform<i8:f32:{}, {1.000000e+00}>"),
    ("!quant.uniform<i8:f32:{0:2,0:3}, {1.0}>", "!quant.uniform<i8:f32:{0:2, 0:3}, {1.000000e+00}>"),
    ("!quant.uniform<i8:f16:{0:2}, {{1.0, 0.1}}>", "!quant.uniform<i8:f16:{0:2}, {{1.000000e+00, 9.997550e-02}}>"),
    ("!quant.uniform<i8:bf16:{}, {0.1}>", "!quant.uniform<i8:bf16:{}, {1.000980e-01}>"),
    ("!quant.uniform<i8:f16:{0:1}, {0x7FF8000000000000}>", "!quant.uniform<i8:f16:{0:1}, {0x7E00}>"),
]

# (text, column, message): columns are 1-based within the text
INVALID = [
    # §1
    ("!quant.foo<i8>", 8, "unknown quantized type foo"),
    ("!quant.uniform<i8:f32, 0.5", 15, "unbalanced '<' character in pretty dialect name"),
    ("!quant.uniform<i8:f32:{0:2), 0.5>", 15, "unbalanced '{' character in pretty dialect name"),
    ("!quant.uniform<i8 f32, 1.0>", 18, "expected ':'"),
    ("!quant.uniform<i8:f32 1.0>", 22, "expected ','"),
    ("!quant.uniform<i8:f32, 1.0 2>", 27, "expected '>'"),
    ("!quant.uniform<i8:f32:0, 1.0>", 25, "expected '{'"),
    ("!quant.uniform<i8:f32, 1.0:>", 28, "expected integer value"),
    ("!quant.uniform<i8:f32, {1.0}>", 24, "expected floating point literal"),
    ("!quant.calibrated<f32<-1.0,1.0>>", 27, "expected ':'"),
    # §2
    ("!quant.uniform<i0:f32, 0.5>", 16, "illegal storage type size: 0"),
    ("!quant.uniform<u0:f32, 0.5>", 16, "illegal storage type size: 0"),
    ("!quant.uniform<i33:f32, 0.5>", 16, "illegal storage type size: 33"),
    ("!quant.uniform<u:f32, 0.5>", 16, "expected storage type width"),
    ("!quant.uniform<int8:f32, 0.5>", 16, "illegal storage type prefix"),
    ("!quant.uniform<f16:f32, 0.5>", 16, "illegal storage type prefix"),
    ("!quant.uniform<i8<-129:127>:f32, 0.5>", 19, "illegal storage type minimum: -129"),
    ("!quant.uniform<i8<-128:128>:f32, 0.5>", 24, "illegal storage type maximum: 128"),
    ("!quant.uniform<i8<-200:200>:f32, 0.5>", 19, "illegal storage type minimum: -200"),
    ("!quant.uniform<i8<5:5>:f32, 0.5>", 8, "illegal storage min and storage max: (5:5)"),
    ("!quant.uniform<i8<5:4>:f32, 0.5>", 8, "illegal storage min and storage max: (5:4)"),
    ("!quant.uniform<u8<-1:255>:f32, 0.5>", 19, "illegal storage type minimum: -1"),
    ("!quant.uniform<f8E5M2<-57345:57344>:f32, 0.5>", 23, "illegal storage type minimum: -57345"),
    # §3
    ("!quant.uniform<i8:i8, 0.5>", 19, "invalid kind of type specified"),
    ("!quant.any<i8:i8>", 15, "invalid kind of type specified"),
    ("!quant.calibrated<i8<-1.0:1.0>>", 19, "invalid kind of type specified"),
    ("!quant.calibrated<f32>", 22, "expected '<'"),
    ("!quant.calibrated<f32<1.0:1.0>>", 8, "illegal min and max: (1.000000e+00:1.000000e+00)"),
    ("!quant.calibrated<f32<1.0:-1.0>>", 8, "illegal min and max: (1.000000e+00:-1.000000e+00)"),
    # §4
    ("!quant.uniform<i8:f32, 2>", 24, "unexpected decimal integer literal for a floating point value"),
    ("!quant.uniform<i8:f32, 1e3>", 24, "unexpected decimal integer literal for a floating point value"),
    ("!quant.uniform<i8:f32, inf>", 24, "expected floating point literal"),
    ("!quant.uniform<i8:f32, nan>", 24, "expected floating point literal"),
    ("!quant.uniform<i8:f32, +0.5>", 24, "expected floating point literal"),
    ("!quant.uniform<i8:f32, .5>", 25, "expected three consecutive dots for an ellipsis"),
    ("!quant.uniform<i8:f32, 0x3F800000>", 34,
     "scale 5.263544e-315 out of expressed type range [1.401298e-45, 3.402823e+38]"),
    ("!quant.uniform<i8:f32, 0.0>", 27, "scale 0.000000e+00 out of expressed type range [1.401298e-45, 3.402823e+38]"),
    ("!quant.uniform<i8:f32, -0.5>", 28,
     "scale -5.000000e-01 out of expressed type range [1.401298e-45, 3.402823e+38]"),
    ("!quant.uniform<i8:f32, 1.0e400>", 31, "scale INF out of expressed type range [1.401298e-45, 3.402823e+38]"),
    ("!quant.uniform<i8:f16, 70000.0>", 31,
     "scale 7.000000e+04 out of expressed type range [5.960464e-08, 6.550400e+04]"),
    ("!quant.uniform<i8:f8E4M3FN, 0.001>", 34,
     "scale 1.000000e-03 out of expressed type range [1.953125e-03, 4.480000e+02]"),
    ("!quant.uniform<i8:f80, -1.0>", 28, "scale -1.000000e+00 out of expressed type range [0.000000e+00, INF]"),
    ("!quant.uniform<i8:f32, -0x7FF8000000000000>", 25, "hexadecimal float literal should not have a leading minus"),
    ("!quant.uniform<i8:f32, 0x17FF8000000000000>", 24, "hexadecimal float constant out of range for type"),
    # §5
    ("!quant.uniform<i8:f32, 1.0:9223372036854775808>", 28, "integer value too large"),
    ("!quant.uniform<i8:f32, 1.0:0xFFFFFFFFFFFFFFFF>", 28, "integer value too large"),
    ("!quant.uniform<i8:f32, 1.0:+3>", 28, "expected integer value"),
    # §6
    ("!quant.uniform<i8:f32:-1, {1.0}>", 8, "illegal quantized dimension: -1"),
    ("!quant.uniform<i8:f32:2147483648, {1.0}>", 23, "integer value too large"),
    ("!quant.uniform<i8:f32:0, {}>", 27, "expected floating point literal"),
    ("!quant.uniform<i8:f32:-1, {0.0}>", 31,
     "scale 0.000000e+00 out of expressed type range [1.401298e-45, 3.402823e+38]"),
    # §7
    ("!quant.uniform<i8:f32:0, {{1.0, 2.0}, 3.0}>", 42,
     "tensor literal is invalid; ranks are not consistent between elements"),
    ("!quant.uniform<i8:f32:{0:1}, {{1.0, 2.0}, {3.0}}>", 48,
     "tensor literal is invalid; ranks are not consistent between elements"),
    ("!quant.uniform<i8:f32:{0:0}, {1.0}>", 8, "illegal block size: 0"),
    ("!quant.uniform<i8:f32:{-1:2}, {1.0}>", 8, "illegal quantized dimension: -1"),
    ("!quant.uniform<i8:f32:{0:2 1:3}, {1.0}>", 27, "expected '}'"),
    ("!quant.uniform<i8:f32:{0}, {1.0}>", 25, "expected ':'"),
]


@pytest.mark.parametrize("text,expected", VALID)
def test_valid_prints_canonically(text, expected):
    t = parse_type(text)
    assert str(t) == expected
    if "0x7E00" not in expected:  # f16 bits do not read back as a double's bits (as in MLIR)
        assert str(parse_type(expected)) == expected  # canonical text is a fixed point


@pytest.mark.parametrize("text,col,message", INVALID)
def test_invalid_reports_message_and_position(text, col, message):
    with pytest.raises(ParseError) as info:
        parse_type(text, "t.mlir")
    err = info.value
    assert err.message == message
    assert (err.loc.line, err.loc.col) == (1, col)
    assert str(err) == f"t.mlir:1:{col}: error: {message}"


def test_followup_diagnostics():
    with pytest.raises(ParseError) as info:
        parse_type("!quant.uniform<i8:f32, 2>")
    assert [(s, m) for s, _, m in info.value.followups] == [
        ("note", "add a trailing dot to make the literal a float")]
    with pytest.raises(ParseError) as info:
        parse_type("!quant.calibrated<f32<-1.0,1.0>>")
    assert info.value.message == "expected ':'"
    assert [(s, loc.col, m) for s, loc, m in info.value.followups] == [
        ("error", 19, "calibrated values must be present")]
    with pytest.raises(ParseError) as info:
        parse_type("!quant.calibrated<i8<-1.0:1.0>>")
    assert [m for _, _, m in info.value.followups] == ["expecting float expressed type"]


def test_scale_nan_is_accepted_and_prints_as_hex():
    t = parse_type("!quant.uniform<i8:f32:0, {0x7FF8000000000000:3, 1.0}>")
    assert str(t) == "!quant.uniform<i8:f32:0, {0x7FF8000000000000:3,1.000000e+00}>"
    assert t == parse_type(str(t))  # NaN compares by bits
