"""Reductions: ``nn.reduce_*`` (ONNX Reduce ops, axes as an attribute) and ``nn.arg_max``/``arg_min``."""
from __future__ import annotations

from .nn_base import I64, INT, INTS, define, elt, normalize_axes, normalize_axis, shape_of, tensor


def reduced_axes(rank: int, attrs) -> tuple[int, ...]:
    """The axes a reduce op reduces: all when none are given, none with ``noop_with_empty_axes``."""
    axes = attrs.get("axes")
    if not axes:
        return () if attrs.get("noop_with_empty_axes") else tuple(range(rank))
    return normalize_axes(axes, rank)


def _reduce(types, attrs):
    x = types[0]
    s = shape_of(x)
    if s is None:
        return [x]
    axes = reduced_axes(len(s), attrs)
    if attrs["keepdims"]:
        out = tuple(1 if i in axes else d for i, d in enumerate(s))
    else:
        out = tuple(d for i, d in enumerate(s) if i not in axes)
    return [tensor(out, elt(x))]


def _arg(types, attrs):
    s = shape_of(types[0])
    if s is None:
        return [tensor(None, I64)]
    axis = normalize_axis(attrs["axis"], len(s))
    out = tuple(1 if i == axis else d for i, d in enumerate(s)) if attrs["keepdims"] else s[:axis] + s[axis + 1:]
    return [tensor(out, I64)]


_ATTRS = {"axes": INTS(), "keepdims": INT(1), "noop_with_empty_axes": INT(0)}
REDUCE_KINDS = ("mean", "sum", "max", "min", "prod", "l1", "l2", "sum_square", "log_sum", "log_sum_exp")
REDUCE = {kind: define(f"reduce_{kind}", ("data",), ("reduced",), _ATTRS, _reduce,
                       summary=f"ONNX Reduce{kind} over ``axes`` (all when empty).")
          for kind in REDUCE_KINDS}
REDUCE_MEAN = REDUCE["mean"]
ARG_MAX = define("arg_max", ("data",), ("reduced",), {"axis": INT(0), "keepdims": INT(1),
                                                      "select_last_index": INT(0)}, _arg)
ARG_MIN = define("arg_min", ("data",), ("reduced",), {"axis": INT(0), "keepdims": INT(1),
                                                      "select_last_index": INT(0)}, _arg)
