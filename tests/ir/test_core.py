"""IR core semantics: use lists, erasure, verification messages, attribute conversion."""
import numpy as np
import pytest

from quantir.errors import VerifyError
from quantir.ir import (AttrKind, AttrSpec, Function, Module, OpDef, Operand, Result, Trait, TypeConstraint,
                        elements_attr, verify)
from quantir.ir.dialects import arith, func, quant
from quantir.types import TensorType, f32, i8, parse_type

T4 = TensorType((4,), f32)
ADD = OpDef("test.add", operands=(Operand("lhs"), Operand("rhs")), traits=frozenset({Trait.PURE}),
            infer=lambda types, attrs: [types[0]])
SCALE = OpDef("test.scale", operands=(Operand("x"),),
              attributes={"factor": AttrSpec(AttrKind.FLOAT, required=True),
                          "axes": AttrSpec(AttrKind.INTS, default=())},
              infer=lambda types, attrs: [types[0]])
FLOAT_ONLY = OpDef("test.f", operands=(Operand("x", TypeConstraint("tensor of f32", lambda t: t == T4)),),
                   results=(Result("y"),))


def _fn():
    fn = Function.create("main", [T4, T4], [T4])
    return fn, fn.arguments


def test_use_lists_follow_replacement_and_erasure():
    fn, (a, b) = _fn()
    s = fn.body.append(ADD.build([a, b])).result
    t = fn.body.append(ADD.build([s, s])).result
    fn.body.append(func.RETURN.build([t], []))
    assert [(op.name, i) for op, i in s.uses] == [("test.add", 0), ("test.add", 1)]
    s.replace_all_uses_with(a)
    assert s.uses == [] and len(a.uses) == 3
    fn.body.erase(s.op)
    assert len(a.uses) == 2 and len(b.uses) == 0
    verify(Module([fn]))


def test_erase_refuses_op_with_uses():
    fn, (a, b) = _fn()
    s = fn.body.append(ADD.build([a, b])).result
    fn.body.append(func.RETURN.build([s], []))
    with pytest.raises(ValueError, match="still has uses"):
        fn.body.erase(s.op)


def test_attributes_convert_by_kind_and_defaults_apply():
    fn, (a, _) = _fn()
    op = SCALE.build([a], factor=0.1, axes=[1, 2])
    assert op.attr("factor") == float(np.float32(0.1))
    assert op.attr("axes") == (1, 2)
    assert SCALE.build([a], factor=2).attr("axes") == ()


def test_missing_required_attribute_is_reported():
    fn, (a, _) = _fn()
    op = SCALE.build([a], [T4])
    with pytest.raises(VerifyError, match="'test.scale' op requires attribute 'factor'"):
        op.verify()


def test_operand_constraint_message_matches_mlir():
    fn, (a, _) = _fn()
    bad = fn.body.append(FLOAT_ONLY.build([fn.body.append(quant.QCAST.build(
        [a], [TensorType((4,), parse_type("!quant.uniform<i8:f32, 1.0>"))])).result], [T4]))
    with pytest.raises(VerifyError, match=r"'test.f' op operand #0 must be tensor of f32, but got"):
        bad.verify()


def test_return_type_mismatch_is_a_verify_error():
    fn = Function.create("f", [T4], [TensorType((3,), f32)])
    fn.body.append(func.RETURN.build([fn.arguments[0]], []))
    with pytest.raises(VerifyError, match=r"type of return operand 0 \('tensor<4xf32>'\) doesn't match"):
        verify(Module([fn]))


def test_use_before_definition_fails_dominance():
    fn, (a, b) = _fn()
    first = ADD.build([a, b])
    second = ADD.build([a, b])
    fn.body.append(first)
    fn.body.append(second)
    first.set_operand(0, second.result)
    fn.body.append(func.RETURN.build([first.result], []))
    with pytest.raises(VerifyError, match="operand #0 does not dominate this use"):
        verify(Module([fn]))


def test_constant_holds_array_by_reference():
    w = np.arange(6, dtype=np.int8).reshape(2, 3)
    attr = elements_attr(w)
    op = arith.CONSTANT.build([], [attr.type], value=attr)
    assert op.attr("value").array is w  # the attribute wraps the caller's array, no copy
    assert attr.type == TensorType((2, 3), i8)
    op.verify()


def test_module_main_resolution():
    fn, _ = _fn()
    m = Module([fn])
    assert m.main is fn
    with pytest.raises(VerifyError, match="redefinition of symbol named 'main'"):
        m.add(Function.create("main", [], []))
