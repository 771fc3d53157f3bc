"""The parser's API: what it builds, where its errors point, what it refuses."""
from __future__ import annotations

import numpy as np
import pytest

from quantir.errors import Location, ParseError, VerifyError
from quantir.ir import (BoolAttr, DenseElementsAttr, DenseResourceAttr, FloatAttr, IntegerAttr, StringAttr,
                        dialects)
from quantir.text import parse_module, parse_source, print_module
from quantir.text.diagnostics import split_input
from quantir.types import TensorType, bf16, f16, f32, i1, i8, i32, i64
from quantir.types.lexer import Source


def test_builds_the_ir():
    m = parse_module("""
      func.func @main(%x: tensor<4xf32> {quantir.name = "in"}) -> tensor<4xf32> {
        %c = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
        %y = "test.add"(%x, %c) {fused} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
        return %y : tensor<4xf32>
      }""")
    fn = m.main
    assert [op.name for op in fn.ops] == ["arith.constant", "test.add", "func.return"]
    const, add, ret = fn.ops
    assert const.opdef is dialects.arith.CONSTANT
    value = const.attributes["value"]
    assert isinstance(value, DenseElementsAttr) and value.array.dtype == np.float32
    assert value.array.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert not add.opdef.registered and add.operands == [fn.arguments[0], const.result]
    assert ret.operands == [add.result] and fn.arg_attrs == [{"quantir.name": StringAttr("in")}]
    assert const.loc == Location("<input>", 3, 14)


def test_scalar_attributes():
    m = parse_module('func.func private @f() attributes {a = 1, b = true, c = 0 : i1, d = 0.1 : f32, e = 255 : i8}')
    a = m.functions[0].attributes
    assert a["a"] == IntegerAttr(1, i64)
    assert a["b"] == BoolAttr(True) and a["c"] == BoolAttr(False)
    assert a["d"] == FloatAttr(float(np.float32(0.1)), f32)
    assert a["e"] == IntegerAttr(-1, i8)


def test_implicit_and_named_modules():
    assert parse_module("func.func private @f()").name is None
    m = parse_module('module @net attributes {x.y = 1 : i32} {\n  func.func private @f()\n}')
    assert m.name == "net" and m.attributes == {"x.y": IntegerAttr(1, i32)}
    g = parse_module('"builtin.module"() <{sym_name = "g"}> ({\n^bb0:\n}) : () -> ()')
    assert g.name == "g" and g.functions == []


def test_forward_reference_resolves_then_fails_dominance():
    text = 'func.func @f() {\n  "t.use"(%v) : (f32) -> ()\n  %v = "t.def"() : () -> f32\n  return\n}'
    m = parse_module(text, verify=False)
    use, define, _ = m.main.ops
    assert use.operands[0] is define.result
    with pytest.raises(VerifyError) as e:
        parse_module(text, "fwd.mlir")
    assert str(e.value) == "fwd.mlir:2:3: error: operand #0 does not dominate this use"


def test_verifier_errors_point_at_the_op_name():
    text = ("func.func @f(%a: tensor<4xf32>) {\n"
            "  %0 = quant.qcast %a : tensor<4xf32> to tensor<4x!quant.uniform<i8:f16, 1.0>>\n"
            "  return\n}")
    with pytest.raises(VerifyError) as e:
        parse_module(text, "q.mlir")
    assert str(e.value) == "q.mlir:2:8: error: expressed type in quantized type expected to match float type"
    assert parse_module(text, verify=False).main.ops[0].name == "quant.qcast"


@pytest.mark.parametrize("text, where, message", [
    ('func.func @f() {\n  "t.a"(%x) : (f32) -> ()\n  return\n}', (2, 9), "use of undeclared SSA value name"),
    ("func.func @f(%a: f32) {\n  %0 = quant.qcast %a f32\n  return\n}", (2, 22), "expected ':'"),
    ("func.func @f() {\n  %0 = \"t.a\"() : () -> ()\n  return\n}", (2, 3), "cannot name an operation with no results"),
    ('func.func private @f() attributes {x = dense<[1, 2]> : tensor<3xi8>}', (1, 40),
     "inferred shape of elements literal ([2]) does not match type ([3])"),
    ("func.func @f() {\n  %0 = nn.relu\n  return\n}", (2, 8), "Dialect `nn' not found for custom op 'nn.relu' "),
    ('"t.a"() : () -> ()', (1, 1),
     "quantir supports only 'func.func' and 'module' operations at the top level, not 't.a'"),
    ("func.func @f() {\n  ^bb0:\n  return\n^bb1:\n  return\n}", (4, 1),
     "quantir supports function bodies of one block"),
    ('func.func private @f() attributes {x = #foo.bar<1>}', (1, 40),
     "quantir does not support dialect attribute '#foo.bar'"),
])
def test_parse_errors(text, where, message):
    with pytest.raises(ParseError) as e:
        parse_module(text, "e.mlir")
    assert (e.value.loc.line, e.value.loc.col) == where
    assert e.value.message == message


def test_notes_follow_the_error():
    with pytest.raises(ParseError) as e:
        parse_module("func.func @f(%a: f32) {\n  %a = \"t.a\"() : () -> f32\n  return\n}")
    assert e.value.message == "redefinition of SSA value '%a'"
    assert e.value.followups == [("note", Location("<input>", 1, 14), "previously defined here")]


def test_resources_decode_by_element_type():
    m = parse_module("""
      func.func @f() -> (tensor<2xi1>, tensor<2xbf16>, tensor<2xf16>) {
        %0 = arith.constant dense_resource<b> : tensor<2xi1>
        %1 = arith.constant dense_resource<h> : tensor<2xbf16>
        %2 = arith.constant dense_resource<f> : tensor<2xf16>
        return %0, %1, %2 : tensor<2xi1>, tensor<2xbf16>, tensor<2xf16>
      }
      {-#
        dialect_resources: {
          builtin: {
            b: "0x010000000100",
            h: "0x10000000803F00C0",
            f: "0x02000000003C0040"
          }
        }
      #-}""")
    arrays = [op.attributes["value"].array for op in m.main.ops[:3]]
    assert arrays[0].tolist() == [True, False]
    assert arrays[1].dtype == np.uint16 and arrays[1].tolist() == [0x3F80, 0xC000]
    assert arrays[2].tolist() == [1.0, 2.0]


def test_resource_size_mismatch_and_missing_blob():
    with pytest.raises(ParseError, match="blob 'k' has 4 bytes, but type 'tensor<4xf32>' needs 16"):
        parse_module('func.func private @f() attributes {x = dense_resource<k> : tensor<4xf32>}\n'
                     '{-#\n  dialect_resources: {\n    builtin: {\n      k: "0x0400000001000000"\n    }\n  }\n#-}')
    m = parse_module("func.func private @f() attributes {x = dense_resource<missing> : tensor<4xf32>}")
    attr = m.functions[0].attributes["x"]
    assert isinstance(attr, DenseResourceAttr) and attr.array is None
    assert "dense_resource<missing> : tensor<4xf32>" in print_module(m)


def test_huge_splat_is_a_view():
    m = parse_module("func.func private @f() attributes {x = dense<1.0> : tensor<100000x100000xf32>}")
    array = m.functions[0].attributes["x"].array
    assert array.shape == (100000, 100000) and array.strides == (0, 0)


def test_split_chunks_are_located_in_the_whole_file():
    text = "func.func private @a()\n// -----\nfunc.func @b() {\n  %0 = quant.qcast %x : f32\n}\n"
    (s0, e0), (s1, e1) = split_input(text)
    source = Source(text, "s.mlir")
    assert parse_source(source, start=s0, end=e0).functions[0].name == "a"
    with pytest.raises(ParseError) as e:
        parse_source(source, start=s1, end=e1)
    assert str(e.value) == "s.mlir:5:1: error: custom op 'quant.qcast' expected 'to'"


def test_types_and_aliases():
    m = parse_module("!q = !quant.uniform<i8:f32, 0.5>\n#k = 3 : i32\n"
                     "func.func @f(%x: tensor<2x!q>) attributes {k = #k} {\n  return\n}")
    assert str(m.main.type.inputs[0]) == "tensor<2x!quant.uniform<i8:f32, 5.000000e-01>>"
    assert m.main.attributes["k"] == IntegerAttr(3, i32)
    assert str(parse_module("func.func private @f(tensor<2xbf16>, f16, i1)").functions[0].type) == \
        f"({TensorType((2,), bf16)}, {f16}, {i1}) -> ()"


def test_large_blobs_parse_fast_and_without_lists():
    import time

    from quantir.ir import Function, Module, dialects, elements_attr
    array = np.random.default_rng(1).standard_normal(2_000_000).astype(np.float32)
    fn = Function.create("f", [], [])
    fn.body.append(dialects.arith.CONSTANT.build([], [TensorType(array.shape, f32)], value=elements_attr(array)))
    fn.body.append(dialects.func.RETURN.build([], []))
    text = print_module(Module([fn]))
    start = time.perf_counter()
    parsed = parse_module(text).main.ops[0].attributes["value"].array
    assert time.perf_counter() - start < 3.0
    assert parsed.flags.writeable and np.array_equal(parsed, array)


def test_unterminated_string_positions():
    with pytest.raises(ParseError) as e:
        parse_module('func.func private @f() attributes {x = "abc\n}')
    assert (e.value.loc.line, e.value.loc.col, e.value.message) == (1, 44, "expected '\"' in string literal")
    with pytest.raises(ParseError) as e:
        parse_module('func.func private @f() attributes {x = "ab\\')
    assert (e.value.loc.col, e.value.message) == (43, "unknown escape in string literal")
