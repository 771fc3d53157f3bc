"""The printer through the IR API: exact text, SSA naming, elements policies, fallbacks."""
from __future__ import annotations

import time

import numpy as np
import pytest

from quantir.ir import (DenseElementsAttr, DenseResourceAttr, FloatAttr, Function, IntegerAttr, Module,
                        StringAttr, UnitAttr, dialects, elements_attr, unregistered)
from quantir.text import parse_module, print_function, print_module, print_op
from quantir.types import FunctionType, TensorType, bf16, f32, i8, i64, parse_type

T = TensorType((4,), f32)
Q = TensorType((4,), parse_type("!quant.uniform<i8:f32, 0.05:-3>"))


def _qdq_module():
    fn = Function.create("main", [T], [T], arg_attrs=[{"quantir.name": StringAttr("x")}])
    q = fn.body.append(dialects.quant.QCAST.build([fn.arguments[0]], [Q])).result
    d = fn.body.append(dialects.quant.DCAST.build([q], [T])).result
    fn.body.append(dialects.func.RETURN.build([d], []))
    return Module([fn])


def test_custom_forms_exactly():
    assert print_module(_qdq_module()) == (
        'module {\n'
        '  func.func @main(%arg0: tensor<4xf32> {quantir.name = "x"}) -> tensor<4xf32> {\n'
        '    %0 = quant.qcast %arg0 : tensor<4xf32> to tensor<4x!quant.uniform<i8:f32, 5.000000e-02:-3>>\n'
        '    %1 = quant.dcast %0 : tensor<4x!quant.uniform<i8:f32, 5.000000e-02:-3>> to tensor<4xf32>\n'
        '    return %1 : tensor<4xf32>\n'
        '  }\n'
        '}\n')


def test_print_op_uses_the_functions_names():
    fn = _qdq_module().main
    assert print_op(fn.ops[1]) == ("%1 = quant.dcast %0 : tensor<4x!quant.uniform<i8:f32, 5.000000e-02:-3>> "
                                   "to tensor<4xf32>")
    assert print_op(fn.ops[1], generic=True) == ('%1 = "quant.dcast"(%0) : (tensor<4x!quant.uniform<i8:f32, '
                                                 '5.000000e-02:-3>>) -> tensor<4xf32>')
    assert print_op(fn.ops[2]) == "return %1 : tensor<4xf32>"
    assert print_function(fn).startswith("func.func @main(")


def test_detached_op_and_unknown_values():
    op = dialects.quant.QCAST.build([_qdq_module().main.arguments[0]], [Q])
    assert print_op(op) == "%0 = quant.qcast <<UNKNOWN SSA VALUE>> : tensor<4xf32> to " + str(Q)


def test_malformed_custom_op_falls_back_to_generic():
    fn = Function.create("f", [T, T], [])
    op = fn.body.append(dialects.quant.QCAST.build(fn.arguments, [Q]))  # two operands: not a valid qcast
    fn.body.append(dialects.func.RETURN.build([], []))
    assert print_op(op) == '%0 = "quant.qcast"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> ' + str(Q)


def test_multi_result_and_constant_names():
    fn = Function.create("f", [], [])
    c1 = fn.body.append(dialects.arith.CONSTANT.build([], [i64], value=IntegerAttr(7)))
    c2 = fn.body.append(dialects.arith.CONSTANT.build([], [f32], value=FloatAttr(0.5, f32)))
    c3 = fn.body.append(dialects.arith.CONSTANT.build([], [i64], value=IntegerAttr(7)))
    split = fn.body.append(unregistered("test.split").build([c2.result], [f32, f32]))
    fn.body.append(unregistered("test.use").build([split.results[1], c1.result, c3.result], []))
    fn.body.append(dialects.func.RETURN.build([], []))
    text = print_module(Module([fn]))
    assert "%c7_i64 = arith.constant 7 : i64" in text
    assert "%cst = arith.constant 5.000000e-01 : f32" in text
    assert "%c7_i64_0 = arith.constant 7 : i64" in text
    assert '%0:2 = "test.split"(%cst) : (f32) -> (f32, f32)' in text
    assert '"test.use"(%0#1, %c7_i64, %c7_i64_0) : (f32, i64, i64) -> ()' in text


def _constant_module(array, element_type=None):
    if element_type is None:
        attr = elements_attr(array)
    else:
        attr = DenseElementsAttr(array, TensorType(array.shape, element_type))
    fn = Function.create("f", [], [attr.type])
    c = fn.body.append(dialects.arith.CONSTANT.build([], [attr.type], value=attr))
    fn.body.append(dialects.func.RETURN.build([c.result], []))
    return Module([fn])


def test_large_elements_policies():
    m = _constant_module(np.arange(20, dtype=np.int8))
    resource = print_module(m)  # default: blobs above 16 elements
    assert "dense_resource<elements> : tensor<20xi8>" in resource
    assert 'elements: "0x01000000000102030405060708090A0B0C0D0E0F10111213"' in resource
    assert "dense_resource<__elided__> : tensor<20xi8>" in print_module(m, large_elements="elide")
    assert "{-#" not in print_module(m, large_elements="elide")
    assert "dense<[0, 1, 2," in print_module(m, large_elements="inline")
    assert "dense<[0, 1, 2," in print_module(m, threshold=20)
    splat = _constant_module(np.full((64,), 3.0, np.float32))
    assert "dense<3.000000e+00> : tensor<64xf32>" in print_module(splat)  # splats stay inline


def test_resource_round_trip_keeps_bytes_and_arrays():
    array = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    text = print_module(_constant_module(array))
    m = parse_module(text)
    attr = m.main.ops[0].attributes["value"]
    assert isinstance(attr, DenseResourceAttr) and attr.key == "elements"
    assert attr.array.dtype == np.float32 and np.array_equal(attr.array, array)
    assert print_module(m) == text


def test_two_arrays_never_share_a_key():
    a, b = np.zeros(20, np.int8), np.ones(20, np.int8)
    fn = Function.create("f", [], [])
    for arr in (a, b, a):
        fn.body.append(dialects.arith.CONSTANT.build([], [TensorType((20,), i8)],
                                                     value=DenseResourceAttr("w", TensorType((20,), i8), arr)))
    fn.body.append(dialects.func.RETURN.build([], []))
    text = print_module(Module([fn]))
    assert text.count("dense_resource<w>") == 2 and text.count("dense_resource<w_1>") == 1
    assert "      w: " in text and "      w_1: " in text


def test_bf16_elements_are_bit_patterns():
    bits = np.array([0x3F80, 0xC000], dtype=np.uint16)  # 1.0, -2.0
    text = print_module(_constant_module(bits, bf16), large_elements="inline")
    assert "dense<[1.000000e+00, -2.000000e+00]> : tensor<2xbf16>" in text


def test_arrays_are_not_listed_when_printed_as_blobs():
    big = np.random.default_rng(0).standard_normal(2_000_000).astype(np.float32)
    start = time.perf_counter()
    text = print_module(_constant_module(big))
    assert time.perf_counter() - start < 2.0
    assert len(text) > 16_000_000


def test_generic_module_forms():
    assert print_module(Module([]), generic=True) == '"builtin.module"() ({\n^bb0:\n}) : () -> ()\n'
    assert print_module(Module([], name="m")) == "module @m {\n}\n"
    decl = Function("d", FunctionType((f32,), ()), visibility="private", arg_attrs=[{"a.b": UnitAttr()}])
    assert print_module(Module([decl])) == "module {\n  func.func private @d(f32 {a.b})\n}\n"


def test_bad_option():
    with pytest.raises(ValueError):
        print_module(Module([]), large_elements="zip")
