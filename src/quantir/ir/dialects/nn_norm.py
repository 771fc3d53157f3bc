"""Normalizations and softmax: ``nn.batch_normalization`` (inference form),
``nn.layer_normalization``, ``nn.instance_normalization``, ``nn.lrn``, ``nn.softmax``,
``nn.log_softmax``, ``nn.hardmax``, ``nn.lp_normalization``."""
from __future__ import annotations

from ...errors import ShapeError, UnsupportedOpError
from .nn_base import (FLOAT, INT, define, elt, normalize_axis, opt, rank_of, require_float, shape_of, tensor,
                      variadic_results)


def _batch_norm(types, attrs):
    x = types[0]
    require_float(x, "batch_normalization input")
    if attrs["training_mode"]:
        raise UnsupportedOpError("batch_normalization with training_mode = 1 is not supported "
                                 "(quantir imports inference graphs)")
    xs = shape_of(x)
    if xs is not None:
        if len(xs) < 2:
            raise ShapeError(f"batch_normalization input must have rank >= 2, got {xs}")
        for name, t in zip(("scale", "b", "mean", "var"), types[1:]):
            s = shape_of(t)
            if s is not None and xs[1] is not None and s not in ((xs[1],), (None,)):
                raise ShapeError(f"{name} of shape {s} must be ({xs[1]},), the channel count of x {xs}")
    return [x]


def _layer_norm(types, attrs):
    x = types[0]
    require_float(x, "layer_normalization input")
    xs = shape_of(x)
    if xs is None:
        return [x, tensor(None, elt(x)), tensor(None, elt(x))]
    axis = normalize_axis(attrs["axis"], len(xs))
    if attrs["stash_type"] != 1:
        raise UnsupportedOpError(f"layer_normalization stash_type = {attrs['stash_type']} is not supported "
                                 "(only 1, float32)")
    stat = tensor((*xs[:axis], *(1,) * (len(xs) - axis)), elt(x))
    return [x, stat, stat]


def _instance_norm(types, attrs):
    require_float(types[0], "instance_normalization input")
    return [types[0]]


def _lrn(types, attrs):
    require_float(types[0], "lrn input")
    if rank_of(types[0]) < 3:
        raise ShapeError("lrn input must have rank >= 3 (N, C, spatial...)")
    if attrs["size"] < 1:
        raise ShapeError(f"lrn size must be >= 1, got {attrs['size']}")
    return [types[0]]


def _lp_norm(types, attrs):
    require_float(types[0], "lp_normalization input")
    if attrs["p"] not in (1, 2):
        raise UnsupportedOpError(f"lp_normalization p must be 1 or 2 (ONNX LpNormalization), got {attrs['p']}")
    s = shape_of(types[0])
    if s is not None:
        normalize_axis(attrs["axis"], len(s))
    return [types[0]]


def _softmax(types, attrs):
    s = shape_of(types[0])
    if s is not None:
        normalize_axis(attrs["axis"], len(s))
    return [types[0]]


BATCH_NORMALIZATION = define(
    "batch_normalization", ("x", "scale", "b", "input_mean", "input_var"), ("y",),
    {"epsilon": FLOAT(1e-5), "momentum": FLOAT(0.9), "training_mode": INT(0)}, _batch_norm,
    summary="(x - mean) / sqrt(var + epsilon) * scale + b over channel dim 1.")
LAYER_NORMALIZATION = define(
    "layer_normalization", ("x", "scale", opt("b")), ("y", variadic_results("stats")),
    {"axis": INT(-1), "epsilon": FLOAT(1e-5), "stash_type": INT(1)}, _layer_norm,
    summary="Normalize over dims [axis, rank); optional results: mean and inverse std dev.")
INSTANCE_NORMALIZATION = define(
    "instance_normalization", ("input", "scale", "b"), ("output",), {"epsilon": FLOAT(1e-5)}, _instance_norm,
    summary="Per (N, C) normalization over the spatial dims.")
LRN = define("lrn", ("x",), ("y",), {"alpha": FLOAT(1e-4), "beta": FLOAT(0.75), "bias": FLOAT(1.0),
                                     "size": INT(required=True)}, _lrn,
             summary="Local response normalization across channels.")
SOFTMAX = define("softmax", ("input",), ("output",), {"axis": INT(-1)}, _softmax)
LOG_SOFTMAX = define("log_softmax", ("input",), ("output",), {"axis": INT(-1)}, _softmax)
HARDMAX = define("hardmax", ("input",), ("output",), {"axis": INT(-1)}, _softmax)
LP_NORMALIZATION = define("lp_normalization", ("input",), ("output",), {"axis": INT(-1), "p": INT(2)}, _lp_norm,
                          summary="x divided by its L1 (p=1) or L2 (p=2) norm along axis.")
