"""Elementwise kernels as tables: one numpy expression per op, wrapped by one generic kernel
per arity. Results keep the operand dtype (numpy 2 treats Python-float attributes as weak
scalars, so ``alpha * x`` stays float32)."""
from __future__ import annotations

import functools
import math

import numpy as np

from ...errors import ShapeError
from ...ir.dialects import nn
from ...ir.dialects.nn_base import element_dtype
from .special import erf


def _sigmoid(x):
    with np.errstate(over="ignore"):
        e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


def _softplus(x):
    return np.logaddexp(np.zeros((), x.dtype), x)


def _gelu(x, op):
    if op.attr("approximate") == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
        return (0.5 * x * (1 + np.tanh(inner))).astype(x.dtype)
    return (0.5 * x * (1 + erf(x / math.sqrt(2)))).astype(x.dtype)


def _clip(x, op):
    lo, hi = op.attr("min"), op.attr("max")
    if x.dtype.kind in "iub":
        info = np.iinfo(x.dtype) if x.dtype.kind != "b" else None
        if info is not None:
            lo = x.dtype.type(max(lo, info.min) if math.isfinite(lo) else info.min)
            hi = x.dtype.type(min(hi, info.max) if math.isfinite(hi) else info.max)
    else:
        lo, hi = x.dtype.type(lo), x.dtype.type(hi)
    out = np.maximum(x, lo, out=np.empty_like(x))
    return np.minimum(out, hi, out=out)


def _expm1_neg(x, alpha):  # alpha * (exp(x) - 1) for x < 0, without overflow warnings for x > 0
    return alpha * np.expm1(np.minimum(x, 0))


# x -> y, same dtype
UNARY = {
    "relu": lambda x: np.maximum(x, x.dtype.type(0)),
    "sigmoid": _sigmoid,
    "tanh": np.tanh, "erf": erf, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "neg": np.negative,
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "round": np.rint, "sign": np.sign,
    "reciprocal": lambda x: (1 / x).astype(x.dtype),
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "softplus": _softplus,
    "softsign": lambda x: x / (1 + np.abs(x)),
    "hard_swish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1).astype(x.dtype),
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "identity": lambda x: x,
    "not": np.logical_not,
}

# (x, op) -> y, attributes read from the op
UNARY_WITH_ATTRS = {
    "leaky_relu": lambda x, op: np.where(x < 0, op.attr("alpha") * x, x),
    "elu": lambda x, op: np.where(x < 0, _expm1_neg(x, op.attr("alpha")), x),
    "celu": lambda x, op: np.maximum(x, 0) + _expm1_neg(x / op.attr("alpha"), op.attr("alpha")),
    "selu": lambda x, op: op.attr("gamma") * np.where(x > 0, x, _expm1_neg(x, op.attr("alpha"))),
    "thresholded_relu": lambda x, op: np.where(x > op.attr("alpha"), x, x.dtype.type(0)),
    "hard_sigmoid": lambda x, op: np.clip(op.attr("alpha") * x + op.attr("beta"), 0, 1).astype(x.dtype),
    "shrink": lambda x, op: np.where(x < -op.attr("lambd"), x + op.attr("bias"),
                                     np.where(x > op.attr("lambd"), x - op.attr("bias"), 0)).astype(x.dtype),
    "clip": _clip,
    "gelu": _gelu,
}


def _int_div(a, b):
    """ONNX integer Div truncates toward zero (C semantics), unlike numpy's floor division."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.floor_divide(a, b)
        if a.dtype.kind == "i":
            q = np.where((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)), q + 1, q)
    return q.astype(np.result_type(a, b))


def _div(a, b, op):
    return _int_div(a, b) if a.dtype.kind in "iu" else np.divide(a, b)


def _pow(a, b, op):
    if a.dtype == b.dtype:
        return np.power(a, b)
    return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)


def _mod(a, b, op):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b) if op.attr("fmod") else np.mod(a, b)


BINARY = {
    "add": lambda a, b, op: np.add(a, b), "sub": lambda a, b, op: np.subtract(a, b),
    "mul": lambda a, b, op: np.multiply(a, b), "div": _div, "pow": _pow, "mod": _mod,
    "equal": lambda a, b, op: np.equal(a, b), "less": lambda a, b, op: np.less(a, b),
    "less_or_equal": lambda a, b, op: np.less_equal(a, b), "greater": lambda a, b, op: np.greater(a, b),
    "greater_or_equal": lambda a, b, op: np.greater_equal(a, b),
    "and": lambda a, b, op: np.logical_and(a, b), "or": lambda a, b, op: np.logical_or(a, b),
    "xor": lambda a, b, op: np.logical_xor(a, b),
}

VARIADIC = {"sum": np.add, "max": np.maximum, "min": np.minimum, "mean": np.add}


def _unary(fn):
    return lambda op, x: np.asarray(fn(x))


def _unary_attrs(fn):
    return lambda op, x: np.asarray(fn(x, op))


def _broadcast(op, *xs) -> None:
    """Shapes known only at run time (dynamic dims) are checked here: numpy's error is untyped."""
    try:
        np.broadcast_shapes(*(x.shape for x in xs))
    except ValueError:
        raise ShapeError(f"{op.name}: operand shapes {', '.join(str(list(x.shape)) for x in xs)} do not "
                         f"broadcast") from None


def _binary(fn):
    def kernel(op, a, b):
        _broadcast(op, a, b)
        return np.asarray(fn(a, b, op))
    return kernel


def _variadic(name, fn):
    def kernel(op, *xs):
        _broadcast(op, *xs)
        out = functools.reduce(fn, xs)
        if name == "mean":
            out = out / len(xs)
        return np.asarray(out).astype(xs[0].dtype, copy=False)
    return kernel


def _is_inf(op, x):
    neg, pos = op.attr("detect_negative"), op.attr("detect_positive")
    return np.isinf(x) & (((x < 0) & bool(neg)) | ((x > 0) & bool(pos)))


def _cast(op, x):
    dtype = element_dtype(op.attr("to"))
    if dtype.kind in "iu" and x.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(dtype)
    return x.astype(dtype)


def _dropout(op, x):
    if len(op.results) == 1:
        return x
    return x, np.ones(x.shape, dtype=np.bool_)


def _prelu(op, x, slope):
    return np.where(x < 0, x * slope, x).astype(x.dtype)


KERNELS = {
    **{nn.UNARY[name]: _unary(fn) for name, fn in UNARY.items()},
    **{nn.UNARY[name]: _unary_attrs(fn) for name, fn in UNARY_WITH_ATTRS.items()},
    **{(nn.BINARY.get(name) or nn.COMPARE[name]): _binary(fn) for name, fn in BINARY.items()},
    **{nn.VARIADIC[name]: _variadic(name, fn) for name, fn in VARIADIC.items()},
    nn.PRELU: _prelu,
    nn.IS_NAN: lambda op, x: np.isnan(x),
    nn.IS_INF: _is_inf,
    nn.WHERE: lambda op, c, x, y: np.where(c, x, y),
    nn.CAST: _cast,
    nn.DROPOUT: _dropout,
}

# Ops whose every result element depends only on the same element of each operand: on splat
# operands their result is a splat, computed once on one element (constant folding keeps it lazy).
SPLAT_ELEMENTWISE = frozenset(opdef for opdef in KERNELS if opdef is not nn.DROPOUT)
