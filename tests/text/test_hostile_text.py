"""Hostile IR text (issue 11, item 6): every input ends in a ParseError or VerifyError with its
``file:line:col``, never in a Python exception from ``int()``, the recursion limit or numpy."""
import re
from pathlib import Path

import pytest

from quantir.errors import ParseError, VerifyError
from quantir.text import parse_module, print_module
from quantir.types import parse_type

D = "9" * 5000                      # over Python's 4,300-digit int <-> str limit
H = "0x" + "F" * 5000

_TOO_LONG = "integer literal of 5000 digits is too long: quantir reads integers of at most 4300 decimal digits"
_HEX_TOO_LONG = "hexadecimal integer literal of 5000 digits is too long: quantir reads integers of at most 14283 bits"


def op_with(attr: str) -> str:
    return 'func.func @f() {\n  "test.op"() {v = %s} : () -> ()\n  return\n}\n' % attr


def at(text: str, needle: str) -> str:
    """``line:col`` of the first ``needle`` in ``text``."""
    i = text.index(needle)
    return f"{text.count(chr(10), 0, i) + 1}:{i - text.rfind(chr(10), 0, i)}"


def parse_error(text: str) -> str:
    with pytest.raises(ParseError) as info:
        parse_module(text, "hostile.mlir")
    return str(info.value)


@pytest.mark.parametrize("text", [
    (op_with(f"{D} : i64")),                       # an integer attribute
    (op_with(f"{D} : i20000")),                    # ... even of a type wide enough to hold it
    (op_with(D)),                                  # an untyped one
    (op_with(f"dense<{D}> : tensor<2xi32>")),      # a dense splat
    (op_with(f"dense<[1, {D}]> : tensor<2xi32>")),  # a dense element
    (op_with(f"array<i64: {D}>")),                 # a dense array element
    (f"func.func @f() -> tensor<{D}xf32>"),        # a dimension
    (f"func.func @f() -> vector<[{D}]xf32>"),      # a scalable dimension
    (f"func.func @f() -> !quant.uniform<i8:f32, 1.0:{D}>"),      # a zero point
    (f"func.func @f() -> !quant.uniform<i8:f32:{D}, {{1.0}}>"),  # a quantized dimension
    (f"func.func @f() -> !quant.uniform<i8<-{D}:1>:f32, 1.0>"),  # a storage bound
    ('func.func @f() {\n  %%0:%s = "test.op"() : () -> (i8)\n  return\n}' % D),  # a result count
])
def test_over_4300_digits_is_a_parse_error_at_the_literal(text):
    assert parse_error(text) == f"hostile.mlir:{at(text, D)}: error: {_TOO_LONG}"


def test_a_hex_integer_is_held_to_what_prints_in_decimal():
    assert parse_error(op_with(f"{H} : i20000")) == f"hostile.mlir:2:20: error: {_HEX_TOO_LONG}"
    assert parse_error(op_with(f"{H} : f32")) == f"hostile.mlir:2:20: error: {_HEX_TOO_LONG}"


def test_4300_digits_still_read_and_print():
    digits = "9" * 4300
    module = parse_module(op_with(f"{digits} : i16000"), "ok.mlir")
    assert f"v = {digits} : i16000" in print_module(module)


def test_a_negative_wrapped_to_a_huge_unsigned_value_is_refused():
    # -1 as ui20000 is 2**20000 - 1: over 6,000 decimal digits, which the printer could not write
    assert parse_error(op_with("array<ui20000: -1>")) == (
        "hostile.mlir:2:35: error: integer value of 20000 bits is too large: quantir prints integers of at "
        "most 4300 decimal digits")


@pytest.mark.parametrize("text, message", [
    (f"func.func @f() -> i{D}", "hostile.mlir:1:19: error: invalid integer width"),
    (f"func.func @f() -> !quant.any<u{D}>", "hostile.mlir:1:30: error: expected storage type width"),
    ('func.func @f() {\n  %%0:2 = "test.op"() : () -> (i8, i8)\n  "test.use"(%%0#%s) : (i8) -> ()\n  return\n}' % D,
     "hostile.mlir:3:16: error: invalid SSA value result number"),
])
def test_long_digit_runs_inside_names_are_parse_errors(text, message):
    assert parse_error(text) == message


def test_unicode_digits_are_not_numbers():
    # '²'.isdigit() is True in Python, but int('²') raises and MLIR's lexer rejects it
    assert parse_error("func.func @f() -> tensor<²xf32>") == "hostile.mlir:1:26: error: unexpected character"


def test_type_parser_refuses_huge_literals_with_a_location():
    with pytest.raises(ParseError, match=re.escape(f"<input>:1:8: error: {_TOO_LONG}")):
        parse_type(f"tensor<{D}xf32>")


N = 100_000


@pytest.mark.parametrize("text, message", [
    (op_with("[" * N + "]" * N), "attributes nested deeper than 100 levels are not supported"),
    (op_with("{a = " * N + "1" + "}" * N), "attributes nested deeper than 100 levels are not supported"),
    (op_with("dense<" + "[" * N + "1" + "]" * N + "> : tensor<1xi8>"),
     "tensor literals nested deeper than 100 levels are not supported"),
    (op_with("tensor<" * N + "f32" + ">" * N), "types nested deeper than 200 levels are not supported"),
    ("module {\n" * N + "}\n" * N, "input nested too deeply for quantir's parser"),
    (op_with("1").replace("()\n  return", "() loc(" + "fused[" * 3000 + '"a"' + "]" * 3000 + ")\n  return"),
     "input nested too deeply for quantir's parser"),
])
def test_deep_nesting_is_a_parse_error_not_a_recursion_error(text, message):
    assert parse_error(text).endswith(f"error: {message}")


def test_nul_bytes_and_long_tokens():
    assert parse_error(op_with("1") + "\x00") == "hostile.mlir:5:1: error: unexpected character"
    module = parse_module(op_with('"a\x00b"'), "nul.mlir")         # a NUL inside a string is data
    assert 'v = "a\\00b"' in print_module(module)
    long_name = "t." + "a" * 1_000_000
    assert long_name in print_module(parse_module(op_with("1").replace("test.op", long_name), "long.mlir"))


# -- qnn ops: the fixed-point attributes come in pairs ------------------------------------------------

CONV = ('func.func @main(%arg0: tensor<1x3x5x5x!quant.uniform<i8:f32, 2.000000e-02:-5>>, '
        '%arg1: tensor<2x3x3x3x!quant.uniform<i8<-127:127>:f32:0, {3.000000e-03,4.000000e-03}>>) '
        '-> tensor<1x2x3x3x!quant.uniform<i8:f32, 5.000000e-02:3>> {\n'
        '  %0 = "qnn.conv"(%arg0, %arg1) {FIXED, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : '
        '(tensor<1x3x5x5x!quant.uniform<i8:f32, 2.000000e-02:-5>>, '
        'tensor<2x3x3x3x!quant.uniform<i8<-127:127>:f32:0, {3.000000e-03,4.000000e-03}>>) '
        '-> tensor<1x2x3x3x!quant.uniform<i8:f32, 5.000000e-02:3>>\n'
        '  return %0 : tensor<1x2x3x3x!quant.uniform<i8:f32, 5.000000e-02:3>>\n}\n')
GOOD_M, GOOD_S = "multiplier = array<i64: 1319413916, 1759218622>", "shift = array<i64: -9, -9>"


def conv_with(fixed: str) -> str:
    return CONV.replace("FIXED", fixed)


def test_conv_with_matching_pairs_parses():
    parse_module(conv_with(f"{GOOD_M}, {GOOD_S}"), "conv.mlir")
    parse_module(conv_with("dilations = array<i64: 1, 1>"), "conv.mlir")   # neither: derived from the types


@pytest.mark.parametrize("fixed, message", [
    (GOOD_M, "has 'multiplier' but no 'shift': give both fixed-point attributes or neither"),
    (GOOD_S, "has 'shift' but no 'multiplier': give both fixed-point attributes or neither"),
    (f"{GOOD_M}, shift = array<i64: -9>", "has 2 multipliers but 1 shifts: they come in pairs"),
    ("multiplier = array<i64: 1319413916>, shift = array<i64: -9>",
     "has 1 multiplier/shift pairs, expected 2 (one per output channel of the weight's quantization)"),
])
def test_conv_fixed_point_attributes_must_pair_up(fixed, message):
    with pytest.raises(VerifyError) as info:
        parse_module(conv_with(fixed), "conv.mlir")
    assert str(info.value) == f"conv.mlir:2:8: error: 'qnn.conv' op {message}"


def test_opt_reports_the_unpaired_attribute_on_one_line(tmp_path: Path, capsys):
    from quantir.cli.main import main
    path = tmp_path / "conv.mlir"
    path.write_text(conv_with(GOOD_M))
    assert main(["opt", str(path)]) == 1
    first = capsys.readouterr().err.splitlines()[0]
    assert first == (f"{path}:2:8: error: 'qnn.conv' op has 'multiplier' but no 'shift': give both fixed-point "
                     "attributes or neither")


def test_a_lone_surrogate_is_refused_but_escaped_bytes_are_data():
    # parse_module takes str: U+DC80..U+DCFF are bytes kept by surrogateescape, any other surrogate is no text
    assert parse_error(op_with('"a\ud800"')) == (
        "hostile.mlir:2:22: error: unexpected character U+D800: a lone surrogate is not text (bytes that are not "
        "UTF-8 read with surrogateescape are U+DC80..U+DCFF)")
    assert 'v = "a\\FF"' in print_module(parse_module(op_with('"a\udcff"'), "bytes.mlir"))


def test_a_5000_digit_expected_error_offset_is_just_unmatched(tmp_path, capsys):
    from quantir.cli.main import main
    path = tmp_path / "vd.mlir"
    path.write_text(f"// expected-error @+{D} {{{{x}}}}\nfunc.func private @f()\n")
    assert main(["opt", "--verify-diagnostics", str(path)]) == 1
    assert capsys.readouterr().err.splitlines()[0] == f'{path}:1:4: error: expected error "x" was not produced'


def test_a_rank_of_50000_parses_in_linear_time():
    # `4x4x...` re-lexed the rest of the shape once per dimension: 10,000 dims took 10 s, 50,000 took 250 s
    import time
    shape = "x".join(["4"] * 50_000)
    start = time.perf_counter()
    t = parse_type(f"tensor<{shape}x?xf32>")
    assert time.perf_counter() - start < 5
    assert t.shape == (4,) * 50_000 + (None,)
    assert parse_error(f"func.func @f(%a: tensor<{shape}x>)").endswith("error: expected non-function type")
