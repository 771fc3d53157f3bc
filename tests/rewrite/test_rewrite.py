"""The pattern language and rewrite engine on small graphs."""
import numpy as np

from quantir.ir import Function, Module, OpDef, Operand, Trait, elements_attr, verify
from quantir.ir.dialects import arith, func
from quantir.rewrite import Pat, Rule, apply_rules, match
from quantir.types import TensorType, f32

T = TensorType((2, 2), f32)
_same = lambda types, attrs: [types[0]]  # noqa: E731
CONV = OpDef("t.conv", operands=(Operand("x"), Operand("w"), Operand("b", optional=True)),
             traits=frozenset({Trait.PURE}), infer=_same)
RELU = OpDef("t.relu", operands=(Operand("x"),), traits=frozenset({Trait.PURE}), infer=_same)
FUSED = OpDef("t.conv_relu", operands=(Operand("x"), Operand("w"), Operand("b", optional=True)),
              traits=frozenset({Trait.PURE}), infer=_same)


def const(fn, array):
    attr = elements_attr(np.asarray(array, np.float32))
    return fn.body.append(arith.CONSTANT.build([], [attr.type], value=attr)).result


def graph(with_bias=True, extra_use=False):
    fn = Function.create("main", [T], [T, T] if extra_use else [T])
    x = fn.arguments[0]
    w = const(fn, np.eye(2))
    operands = [x, w] + ([const(fn, [[1, 2], [3, 4]])] if with_bias else [])
    c = fn.body.append(CONV.build(operands)).result
    r = fn.body.append(RELU.build([c])).result
    fn.body.append(func.RETURN.build([r, c] if extra_use else [r], []))
    return fn


CONV_PAT = Pat.op(CONV, Pat.any("x"), Pat.const("w"), Pat.const("b").optional(), name="conv")
FUSE = Rule("fuse-conv-relu", Pat.op(RELU, CONV_PAT.one_use(), name="relu"),
            lambda rw, m: [rw.insert(FUSED.build(list(m["conv"].operands))).result])


def test_match_captures_values_ops_and_constants():
    fn = graph()
    relu = fn.body.ops[-2]
    m = match(Pat.op(RELU, CONV_PAT, name="relu"), relu.result)
    assert m is not None
    assert m["x"] is fn.arguments[0]
    assert m["conv"].opdef is CONV and m["relu"] is relu
    np.testing.assert_array_equal(m.consts["b"], [[1, 2], [3, 4]])


def test_optional_operand_matches_when_absent():
    fn = graph(with_bias=False)
    m = match(CONV_PAT, fn.body.ops[-3].result)
    assert m is not None and "b" not in m


def test_rule_rewrites_counts_hits_and_removes_dead_ops():
    fn = graph()
    stats = apply_rules(fn, [FUSE])
    assert stats.hits == {"fuse-conv-relu": 1}
    assert [op.name for op in fn.body.ops] == ["arith.constant", "arith.constant", "t.conv_relu", "func.return"]
    verify(Module([fn]))


def test_one_use_blocks_fusion_when_the_intermediate_is_also_an_output():
    fn = graph(extra_use=True)
    stats = apply_rules(fn, [FUSE])
    assert not stats.modified
    assert "t.conv" in [op.name for op in fn.body.ops]


def test_check_reports_the_reason_and_keeps_the_graph():
    fn = graph()
    refusing = Rule("never", FUSE.pattern, FUSE.rewrite, check=lambda m: "weights are not constant-foldable")
    stats = apply_rules(fn, [refusing])
    assert not stats.modified
    assert list(stats.refused.values()) == ["weights are not constant-foldable"]
    assert len(stats.refused) == 1  # once per (rule, op), not once per iteration


def test_alternatives_and_same_name_must_bind_same_value():
    fn = Function.create("main", [T, T], [T])
    a, b = fn.arguments
    s = fn.body.append(CONV.build([a, b])).result
    fn.body.append(func.RETURN.build([s], []))
    same = Pat.op(CONV, Pat.any("v"), Pat.any("v"))
    assert match(same, s) is None
    either = Pat.alt(Pat.op(RELU, Pat.any()), Pat.op(CONV, Pat.any("p"), Pat.any("q")), name="root")
    m = match(either, s)
    assert m is not None and m["p"] is a and m["root"] is s
