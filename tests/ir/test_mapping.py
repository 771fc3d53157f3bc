"""The IR rewriting toolkit: IRMapping, OpBuilder, function_like, clone_function / clone_module."""
from pathlib import Path

import numpy as np
import pytest

import quantir as qr
from quantir.errors import Location, VerifyError
from quantir.ir import Function, Module, StringAttr, elements_attr, verify
from quantir.ir.builder import OpBuilder, clone_function, clone_module, function_like
from quantir.ir.dialects import arith, func, nn, quant
from quantir.ir.mapping import IRMapping, describe_value
from quantir.text import parse_module, print_module
from quantir.types import IntegerType, TensorType, f32, parse_type

ROOT = Path(__file__).resolve().parents[2]
T4 = TensorType((4,), f32)
Q4 = TensorType((4,), parse_type("!quant.uniform<i8:f32, 0.5:-3>"))


def _relu_chain() -> Function:
    """main(x) = relu(relu(x)), with a location and labels, the inner result unnamed."""
    fn = Function.create("main", [T4], [T4], arg_attrs=[{"quantir.name": StringAttr("x")}])
    fn.arguments[0].name_hint = "x"
    a = fn.body.append(nn.RELU.build([fn.arguments[0]], [T4], loc=Location("m.onnx", 3, 1), label="Relu_0")).result
    b = fn.body.append(nn.RELU.build([a], [T4], label="Relu_1")).result
    b.name_hint = "y"
    fn.body.append(func.RETURN.build([b], []))
    return fn


def _provenance(fn: Function) -> list:
    """What print_module leaves out: each op's location and label, each value's name hint."""
    return [[a.name_hint for a in fn.arguments]] + \
        [(op.name, op.loc, op.label, [r.name_hint for r in op.results]) for op in fn.ops]


# -- IRMapping -------------------------------------------------------------------------------------

def test_mapping_maps_looks_up_and_rebinds():
    fn = _relu_chain()
    x, a = fn.arguments[0], fn.ops[0].result
    m: IRMapping = IRMapping()
    assert not m.contains(x) and x not in m and m.lookup_or_none(x) is None and len(m) == 0
    assert m.map(x, a) is a
    assert m.contains(x) and x in m and m.lookup(x) is a and m[x] is a and m.lookup_or_none(x) is a
    m.map(x, x)   # re-binding replaces
    assert m.lookup(x) is x and len(m) == 1 and list(m) == [x]


def test_mapping_map_all_pairs_values_and_refuses_unequal_lengths():
    fn = _relu_chain()
    x, a, y = fn.arguments[0], fn.ops[0].result, fn.ops[1].result
    m: IRMapping = IRMapping()
    m.map_all([x, a], [y, x])
    assert m[x] is y and m[a] is x
    with pytest.raises(ValueError, match=r"^cannot map 2 values to 1$"):
        m.map_all([x, a], [y])


def test_mapping_miss_names_the_value():
    fn = _relu_chain()
    m: IRMapping = IRMapping()
    with pytest.raises(VerifyError) as e:
        m.lookup(fn.arguments[0])
    assert str(e.value) == "value 'x' is used before it is defined"
    with pytest.raises(VerifyError) as e:
        m[fn.ops[0].result]   # unnamed: named by its producer
    assert str(e.value) == "value #0 of 'nn.relu' (node 'Relu_0') is used before it is defined"
    bare = Function.create("f", [T4, T4], [])
    assert describe_value(bare.arguments[1]) == "argument #1"


# -- OpBuilder -------------------------------------------------------------------------------------

def test_insert_takes_location_and_label_from_like_only_where_missing():
    src = _relu_chain()
    like = src.ops[0]
    fn = Function.create("g", [T4], [T4])
    b = OpBuilder.at_end(fn)
    bare = b.insert(nn.RELU.build([fn.arguments[0]], [T4]), like=like)
    own = b.insert(nn.RELU.build([bare.result], [T4], loc=Location("own", 1, 1), label="mine"), like=like)
    plain = b.insert(nn.RELU.build([own.result], [T4]))
    assert (bare.loc, bare.label) == (Location("m.onnx", 3, 1), "Relu_0")
    assert (own.loc, own.label) == (Location("own", 1, 1), "mine")
    assert (plain.loc, plain.label) == (None, None)
    assert fn.ops == [bare, own, plain] and all(op.block is fn.body for op in fn.ops)


def test_at_end_refuses_a_declaration():
    decl = Function("ext", Function.create("x", [T4], []).type)
    with pytest.raises(ValueError, match=r"^function 'ext' is a declaration: it has no body to build in$"):
        OpBuilder.at_end(decl)


def test_clone_reads_mapped_operands_and_maps_its_results():
    src = _relu_chain()
    fn = function_like(src)
    m: IRMapping = IRMapping()
    m.map_all(src.arguments, fn.arguments)
    b = OpBuilder.at_end(fn)
    first = b.clone(src.ops[0], m, label="fallback")
    second = b.clone(src.ops[1], m)
    assert first.operands == [fn.arguments[0]] and second.operands == [first.result]
    assert m[src.ops[0].result] is first.result and m[src.ops[1].result] is second.result
    assert (first.loc, first.label, first.result.name_hint) == (Location("m.onnx", 3, 1), "Relu_0", None)
    assert (second.label, second.result.name_hint) == ("Relu_1", "y")
    assert first.attributes is not src.ops[0].attributes
    # a label only fills in a missing one
    src.ops[0].label = None
    assert b.clone(src.ops[0], m, label="fallback").label == "fallback"


def test_clone_with_replaced_operands_types_and_attributes():
    src = Function.create("main", [T4], [Q4])
    q = src.body.append(quant.QCAST.build([src.arguments[0]], [Q4], label="q")).result
    q.name_hint = "xq"
    fn = Function.create("main", [T4], [Q4])
    b = OpBuilder.at_end(fn)
    m: IRMapping = IRMapping()   # the argument is deliberately unmapped: operands are given
    other = TensorType((4,), parse_type("!quant.uniform<i8:f32, 0.5:-1>"))
    new = b.clone(q.op, m, operands=[fn.arguments[0]], result_types=[other], attributes={"k": StringAttr("v")})
    assert new.operands == [fn.arguments[0]] and new.result.type == other
    assert new.attributes == {"k": StringAttr("v")} and q.op.attributes == {}
    assert m[q] is new.result and new.result.name_hint == "xq" and new.label == "q"


def test_constant_of_an_array_or_of_an_attribute():
    fn = Function.create("main", [], [])
    b = OpBuilder.at_end(fn)
    ints = np.array([1, -2, 3], np.int8)
    c = b.constant(ints, name="w")
    assert c.op.opdef is arith.CONSTANT and c.type == TensorType((3,), IntegerType(8)) and c.name_hint == "w"
    assert c.op.attributes["value"].array is ints   # held by reference
    u = b.constant(ints.astype(np.uint8), IntegerType(8))
    assert u.type == TensorType((3,), IntegerType(8)) and u.name_hint is None
    attr = elements_attr(np.zeros(4, np.float32))
    assert b.constant(attr).op.attributes["value"] is attr
    with pytest.raises(ValueError, match="^element_type applies to an array, not to a ready attribute$"):
        b.constant(attr, f32)
    assert [op.opdef for op in fn.ops] == [arith.CONSTANT] * 3


# -- functions ------------------------------------------------------------------------------------

def test_function_like_copies_the_signature_and_attributes_not_the_body():
    src = _relu_chain()
    src.visibility = "private"
    src.attributes["quantir.source"] = StringAttr("test")
    src.res_attrs[0]["quantir.name"] = StringAttr("y")
    src.loc = Location("m.onnx", 1, 1)
    fn = function_like(src)
    assert (fn.name, fn.type, fn.visibility, fn.loc) == ("main", src.type, "private", src.loc)
    assert fn.arg_attrs == src.arg_attrs and fn.res_attrs == src.res_attrs and fn.attributes == src.attributes
    assert fn.arg_attrs[0] is not src.arg_attrs[0] and fn.attributes is not src.attributes
    assert [a.type for a in fn.arguments] == [T4] and fn.arguments[0].name_hint == "x" and fn.ops == []
    assert function_like(src, name="other").name == "other"


def _load(rel: str) -> Module:
    return parse_module((ROOT / rel).read_text())


@pytest.mark.parametrize("source", ["tests/text/golden/functions.mlir", "tests/quantize/golden/conv_relu.lower.mlir",
                                    "models/fashion_mnist_cnn.onnx"])
def test_clone_module_prints_the_same_and_keeps_provenance(source):
    module = qr.load(ROOT / source) if source.endswith(".onnx") else _load(source)
    copy = clone_module(module)
    assert print_module(copy) == print_module(module)
    assert (copy.name, copy.attributes) == (module.name, module.attributes)
    for a, b in zip(module.functions, copy.functions):
        assert a is not b and (a.is_declaration, a.visibility) == (b.is_declaration, b.visibility)
        assert _provenance(a) == _provenance(b)
    verify(copy)


def _uses(fn: Function) -> dict:
    return {v: list(v.uses) for v in [*fn.arguments, *(r for op in fn.ops for r in op.results)]}


def test_clone_function_is_independent_of_its_source():
    module = qr.load(ROOT / "models/fashion_mnist_cnn.onnx")
    src = module.main
    before = print_module(module)
    provenance = _provenance(src)
    uses = _uses(src)
    copy = clone_function(src)
    assert not ({id(op) for op in copy.ops} & {id(op) for op in src.ops})
    assert _uses(src) == uses   # no op of the copy reads a value of the source
    # rewrite the copy: rename, relabel, change attributes, signature attributes, and erase an op
    copy.name = "renamed"
    copy.arg_attrs[0]["quantir.name"] = StringAttr("other")
    copy.attributes["x.flag"] = StringAttr("on")
    for op in copy.ops:
        op.label = "changed"
        op.attributes.clear()
        for r in op.results:
            r.name_hint = "changed"
    clip = next(op for op in copy.ops if op.opdef is nn.CLIP)
    clip.result.replace_all_uses_with(clip.operands[0])
    copy.body.erase(clip)
    assert print_module(module) == before and _provenance(src) == provenance
    assert _uses(src) == uses
    verify(module)


def test_clone_function_keeps_a_declaration_a_declaration():
    module = _load("tests/text/golden/functions.mlir")
    decl = module.lookup("helper")
    copy = clone_function(decl, name="helper2")
    assert copy.is_declaration and copy.name == "helper2" and copy.type == decl.type
    assert copy.arg_attrs == decl.arg_attrs and copy.arg_attrs[0] is not decl.arg_attrs[0]
    assert copy.visibility == "private"
