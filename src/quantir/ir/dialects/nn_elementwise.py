"""Elementwise ``nn`` ops, declared as tables: unary (same type), unary with parameters,
binary with numpy broadcasting, comparisons and logic (``i1`` results), variadic
reductions (``nn.sum``/``max``/``min``/``mean``), ``nn.where``, ``nn.cast``, ``nn.clip``,
``nn.dropout`` (inference only) and ``nn.identity``.

One shape rule serves each table; the kernels (runtime/kernels/elementwise.py) are tables too.
"""
from __future__ import annotations

import math

from ...errors import ShapeError
from ..opdef import Operand
from .nn_base import (FLOAT, I1, INT, STRING, TYPE, TENSOR, broadcast_shapes, check_choice, define, elt,
                      same_element_type, shape_of, tensor, variadic, variadic_results)


def _same_type(types, attrs):
    return [types[0]]


def _to_i1(types, attrs):
    return [tensor(shape_of(types[0]), I1)]


def _broadcast(types, attrs):
    et = same_element_type(types)
    return [tensor(broadcast_shapes(*(shape_of(t) for t in types)), et)]


def _broadcast_i1(types, attrs):
    same_element_type(types)
    return [tensor(broadcast_shapes(*(shape_of(t) for t in types)), I1)]


def _pow(types, attrs):  # ONNX Pow: the exponent may have another element type
    return [tensor(broadcast_shapes(shape_of(types[0]), shape_of(types[1])), elt(types[0]))]


def _prelu(types, attrs):  # the slope broadcasts to x (unidirectional)
    x, slope = types
    same_element_type(types)
    out = broadcast_shapes(shape_of(x), shape_of(slope))
    if out is not None and shape_of(x) is not None and len(out) != len(shape_of(x)):
        raise ShapeError(f"slope of rank {len(shape_of(slope))} does not broadcast to x of rank {len(shape_of(x))}")
    return [x]


def _where(types, attrs):
    cond, x, y = types
    if elt(cond) != I1:
        raise ShapeError(f"condition must be a tensor of i1, got '{cond}'")
    et = same_element_type((x, y), "x and y")
    return [tensor(broadcast_shapes(shape_of(cond), shape_of(x), shape_of(y)), et)]


def _cast(types, attrs):
    return [tensor(shape_of(types[0]), attrs["to"])]


def _gelu_check(types, attrs):
    check_choice(attrs["approximate"], ("none", "tanh"), "gelu approximate")
    return [types[0]]


def _dropout(types, attrs):
    return [types[0], tensor(shape_of(types[0]), I1)]


# name -> attributes; every op takes one tensor and returns the same type.
UNARY_OPS = {
    name: {} for name in (
        "relu", "sigmoid", "tanh", "erf", "exp", "log", "sqrt", "neg", "abs", "reciprocal", "floor",
        "ceil", "round", "sign", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
        "acosh", "atanh", "softplus", "softsign", "hard_swish", "mish", "identity", "not")
}
UNARY_OPS.update({
    "leaky_relu": {"alpha": FLOAT(0.01)},
    "elu": {"alpha": FLOAT(1.0)},
    "celu": {"alpha": FLOAT(1.0)},
    "selu": {"alpha": FLOAT(1.67326319217681884765625), "gamma": FLOAT(1.05070102214813232421875)},
    "thresholded_relu": {"alpha": FLOAT(1.0)},
    "hard_sigmoid": {"alpha": FLOAT(0.2), "beta": FLOAT(0.5)},
    "shrink": {"bias": FLOAT(0.0), "lambd": FLOAT(0.5)},
    "clip": {"min": FLOAT(-math.inf), "max": FLOAT(math.inf)},
})

UNARY = {name: define(name, ("x",), ("y",), attrs, _same_type, summary=f"ONNX {name}, elementwise.")
         for name, attrs in UNARY_OPS.items()}
UNARY["gelu"] = define("gelu", ("x",), ("y",), {"approximate": STRING("none")}, _gelu_check,
                       summary="GELU, exact (erf) or tanh approximation.")

IS_NAN = define("is_nan", ("x",), ("y",), {}, _to_i1)
IS_INF = define("is_inf", ("x",), ("y",), {"detect_negative": INT(1), "detect_positive": INT(1)}, _to_i1)
CAST = define("cast", ("input",), ("output",), {"to": TYPE(required=True), "saturate": INT(1)}, _cast,
              summary="Convert the element type (ONNX Cast; float to int truncates toward zero).")
DROPOUT = define("dropout", ("data",), ("output", variadic_results("mask")),
                 {"ratio": FLOAT(0.5), "seed": INT()}, _dropout,
                 summary="Inference-mode Dropout: the identity; the optional mask is all true.")

# Binary ops with multidirectional broadcasting. The result keeps the operands' element type.
BINARY = {name: define(name, ("a", "b"), ("c",), attrs, rule, summary=f"ONNX {name}, broadcasting.")
          for name, attrs, rule in (
              ("add", {}, _broadcast), ("sub", {}, _broadcast), ("mul", {}, _broadcast),
              ("div", {}, _broadcast), ("pow", {}, _pow), ("mod", {"fmod": INT(0)}, _broadcast))}
PRELU = define("prelu", ("x", "slope"), ("y",), {}, _prelu, summary="x if x >= 0 else slope * x.")

# Comparisons and logic: broadcasting, i1 result.
COMPARE = {name: define(name, ("a", "b"), ("c",), {}, _broadcast_i1, summary=f"ONNX {name}, i1 result.")
           for name in ("equal", "less", "less_or_equal", "greater", "greater_or_equal", "and", "or", "xor")}

# One or more operands, broadcast together.
VARIADIC = {name: define(name, (Operand("data_0", TENSOR), variadic("data")), ("result",), {}, _broadcast,
                         summary=f"ONNX {name.capitalize()} over all operands, broadcasting.")
            for name in ("sum", "max", "min", "mean")}

WHERE = define("where", ("condition", "x", "y"), ("output",), {}, _where,
               summary="condition ? x : y, broadcasting.")

RELU, IDENTITY, CLIP, NOT = UNARY["relu"], UNARY["identity"], UNARY["clip"], UNARY["not"]
ADD, SUB, MUL, DIV = BINARY["add"], BINARY["sub"], BINARY["mul"], BINARY["div"]
