"""The canonicalize pass through its API: folds, dead casts, constant uniquing, counts, fixed point.

Its text-level behaviour against mlir-opt is in tests/text/golden/canonicalize.mlir."""
from __future__ import annotations

from quantir.ir import FloatAttr, Function, IntegerAttr, Module, dialects, unregistered, verify
from quantir.passes import Canonicalize, CanonicalizeOptions, Pass, PassResult, canonicalize, run_passes
from quantir.text import parse_module, print_module
from quantir.types import TensorType, f32, i64, parse_type

T = TensorType((4,), f32)
Q1 = TensorType((4,), parse_type("!quant.uniform<i8:f32, 0.5>"))
Q2 = TensorType((4,), parse_type("!quant.uniform<i8:f32, 0.25>"))


def _chain(*types):
    """x -> qcast/dcast/... through ``types`` -> return."""
    fn = Function.create("f", [types[0]], [types[-1]])
    v = fn.arguments[0]
    for t in types[1:]:
        op = dialects.quant.QCAST if t in (Q1, Q2) and v.type == T else dialects.quant.DCAST
        v = fn.body.append(op.build([v], [t])).result
    fn.body.append(dialects.func.RETURN.build([v], []))
    return Module([fn])


def test_dcast_of_qcast():
    m = _chain(T, Q1, T)
    result = Canonicalize().run(m)
    assert result.modified and result
    assert result.stats == {"fold:quant.dcast": 1, "erase:quant.qcast": 1}
    assert [op.name for op in m.main.ops] == ["func.return"]
    assert m.main.outputs == [m.main.arguments[0]]
    verify(m)


def test_qcast_of_dcast_only_with_equal_types():
    same = _chain(Q1, T, Q1)
    assert canonicalize(same)
    assert [op.name for op in same.main.ops] == ["func.return"]
    other = _chain(Q1, T, Q2)
    assert not canonicalize(other)
    assert [op.name for op in other.main.ops] == ["quant.dcast", "quant.qcast", "func.return"]


def test_scast_pairs_and_unused_casts():
    m = parse_module("""
      func.func @f(%a: tensor<4xi8>, %b: tensor<4xf32>) -> tensor<4xi8> {
        %0 = quant.scast %a : tensor<4xi8> to tensor<4x!quant.uniform<i8:f32, 1.0>>
        %1 = quant.scast %0 : tensor<4x!quant.uniform<i8:f32, 1.0>> to tensor<4xi8>
        %2 = quant.qcast %b : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 1.0>>
        "test.keep"(%b) : (tensor<4xf32>) -> ()
        return %1 : tensor<4xi8>
      }""")
    result = Canonicalize().run(m)
    assert result.stats == {"fold:quant.scast": 1, "erase:quant.scast": 1, "erase:quant.qcast": 1}
    assert [op.name for op in m.main.ops] == ["test.keep", "func.return"]


def test_constants_are_uniqued_and_hoisted():
    fn = Function.create("f", [], [])
    src = fn.body.append(unregistered("test.src").build([], [f32]))
    a = fn.body.append(dialects.arith.CONSTANT.build([], [f32], value=FloatAttr(1.0, f32)))
    b = fn.body.append(dialects.arith.CONSTANT.build([], [f32], value=FloatAttr(1.0, f32)))
    fn.body.append(dialects.arith.CONSTANT.build([], [i64], value=IntegerAttr(3)))  # unused
    fn.body.append(unregistered("test.use").build([a.result, b.result, src.result], []))
    fn.body.append(dialects.func.RETURN.build([], []))
    result = Canonicalize().run(Module([fn]))
    assert result.stats == {"cse:arith.constant": 1, "erase:arith.constant": 1}
    assert [op.name for op in fn.ops] == ["arith.constant", "test.src", "test.use", "func.return"]
    assert fn.ops[2].operands[:2] == [a.result, a.result]


def test_fixed_point_and_no_change():
    m = _chain(T, Q1, T)
    canonicalize(m)
    text = print_module(m)
    assert Canonicalize().run(m) == PassResult(False, {})
    assert print_module(m) == text
    assert not canonicalize(parse_module("func.func private @d()"))


def test_pass_interface():
    p = Canonicalize(CanonicalizeOptions(max_iterations=1, cse_constants=False))
    assert isinstance(p, Pass) and p.name == "canonicalize" and p.options.max_iterations == 1
    results = run_passes(_chain(T, Q1, T), [p, Canonicalize()])
    assert [r.modified for r in results] == [True, False]
