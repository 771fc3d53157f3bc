"""Data movement by index: ``nn.concat``, ``nn.split``, ``nn.slice``, ``nn.gather``, ``nn.pad``,
``nn.resize``. Index arithmetic that both the type rule and the kernel need (``slice_bounds``,
``split_sizes``, ``pad_amounts``, ``resize_plan``) lives here, once."""
from __future__ import annotations

import math
from typing import Sequence

from ...errors import ShapeError, UnsupportedOpError
from ..opdef import Operand
from .nn_base import (FLOAT, FLOATS, INT, INTS, STRING, TENSOR, Dim, check_choice, define, elt, fmt_shape,
                      normalize_axes, normalize_axis, same_element_type, shape_of, tensor, variadic,
                      variadic_results)


def _concat(types, attrs):
    et = same_element_type(types, "concat operands")
    shapes = [shape_of(t) for t in types]
    if any(s is None for s in shapes):
        return [tensor(None, et)]
    rank = len(shapes[0])
    if any(len(s) != rank for s in shapes):
        raise ShapeError(f"concat operands must have one rank, got {', '.join(fmt_shape(s) for s in shapes)}")
    axis = normalize_axis(attrs["axis"], rank)
    out: list[Dim] = []
    for i in range(rank):
        dims = [s[i] for s in shapes]
        if i == axis:
            out.append(None if None in dims else sum(dims))
        else:
            known = {d for d in dims if d is not None}
            if len(known) > 1:
                raise ShapeError(f"concat along axis {axis}: operands differ in dim {i}: "
                                 f"{', '.join(fmt_shape(s) for s in shapes)}")
            out.append(known.pop() if known else None)
    return [tensor(tuple(out), et)]


MAX_SPLIT_OUTPUTS = 1 << 16


def split_sizes(dim: int, attrs) -> list[int]:
    """Chunk sizes along the split axis: explicit ``split``, or ``num_outputs`` chunks of
    ``ceil(dim / num_outputs)`` with a smaller last one (ONNX Split-18)."""
    sizes = attrs.get("split")
    if sizes:
        if sum(sizes) != dim:
            raise ShapeError(f"split sizes {tuple(sizes)} do not add up to the dim {dim}")
        return list(sizes)
    n = attrs["num_outputs"]
    # checked before the list is built: n comes from the file and may be 2**31
    if n < 1 or -(-dim // n) * (n - 1) >= dim:
        raise ShapeError(f"cannot split a dim of {dim} into {n} outputs (each chunk must be non-empty)")
    chunk = -(-dim // n)
    return [min(chunk, dim - i * chunk) for i in range(n)]


def _split(types, attrs):
    s = shape_of(types[0])
    n = len(attrs["split"]) if attrs.get("split") else attrs.get("num_outputs")
    if not n:
        raise ShapeError("split needs 'split' sizes or 'num_outputs'")
    if n < 1 or n > MAX_SPLIT_OUTPUTS:
        # a type per output: refuse a file-chosen count before building the list
        raise ShapeError(f"split into {n} outputs: expected 1 to {MAX_SPLIT_OUTPUTS} outputs")
    if s is None:
        return [types[0]] * n
    axis = normalize_axis(attrs["axis"], len(s))
    if s[axis] is None:
        sizes = attrs.get("split") or [None] * n
    else:
        sizes = split_sizes(s[axis], attrs)
    return [tensor(s[:axis] + (k,) + s[axis + 1:], elt(types[0])) for k in sizes]


def slice_bounds(shape: Sequence[Dim], attrs) -> dict[int, tuple[int, int, int]]:
    """Per sliced axis: ``(start, stop, step)`` clamped as ONNX Slice does. ``stop`` is -1
    for a reverse slice that runs through index 0 (python's ``None``)."""
    starts, ends = attrs["starts"], attrs["ends"]
    axes = attrs.get("axes") or tuple(range(len(starts)))
    steps = attrs.get("steps") or (1,) * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ShapeError(f"slice starts {starts}, ends {ends}, axes {axes} and steps {steps} differ in length")
    if any(s == 0 for s in steps):
        raise ShapeError("slice steps must not be 0")
    out = {}
    for a, start, end, step in zip(normalize_axes(axes, len(shape)), starts, ends, steps):
        dim = shape[a]
        if dim is None:
            out[a] = (start, end, step)
            continue
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, -1), dim - 1), min(max(end, -1), dim - 1)
        out[a] = (start, end, step)
    return out


def _slice(types, attrs):
    s = shape_of(types[0])
    if s is None:
        return [types[0]]
    out = list(s)
    for a, (start, end, step) in slice_bounds(s, attrs).items():
        out[a] = None if s[a] is None else max(0, math.ceil((end - start) / step))
    return [tensor(tuple(out), elt(types[0]))]


def _gather(types, attrs):
    data, indices = shape_of(types[0]), shape_of(types[1])
    if data is None or indices is None:
        return [tensor(None, elt(types[0]))]
    axis = normalize_axis(attrs["axis"], len(data))
    return [tensor(data[:axis] + indices + data[axis + 1:], elt(types[0]))]


def pad_amounts(rank: int, attrs) -> list[tuple[int, int]]:
    """``(before, after)`` per dim from ONNX's ``pads`` (all begins, then all ends) and ``axes``."""
    pads = attrs["pads"]
    axes = attrs.get("axes")
    axes = normalize_axes(axes, rank) if axes else tuple(range(rank))
    if len(pads) != 2 * len(axes):
        raise ShapeError(f"pads {tuple(pads)} must have {2 * len(axes)} values for axes {axes}")
    out = [(0, 0)] * rank
    for i, a in enumerate(axes):
        out[a] = (pads[i], pads[len(axes) + i])
    return out


def _pad(types, attrs):
    s = shape_of(types[0])
    check_choice(attrs["mode"], ("constant", "reflect", "edge", "wrap"), "pad mode")
    if s is None:
        return [types[0]]
    out = []
    for d, (b, a) in zip(s, pad_amounts(len(s), attrs)):
        if d is not None and d + b + a < 0:
            raise ShapeError(f"pads ({b}, {a}) crop more than the dim {d}")
        out.append(None if d is None else d + b + a)
    return [tensor(tuple(out), elt(types[0]))]


RESIZE_MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                    "asymmetric", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def resize_plan(shape: Sequence[Dim], attrs) -> tuple[list[Dim], list[float | None]]:
    """Output sizes and per-dim scales of ONNX Resize (``scales`` or ``sizes`` with
    ``keep_aspect_ratio_policy``; only the dims in ``axes`` change)."""
    rank = len(shape)
    check_choice(attrs["mode"], RESIZE_MODES, "resize mode")
    check_choice(attrs["coordinate_transformation_mode"], COORDINATE_MODES, "resize coordinate_transformation_mode")
    check_choice(attrs["nearest_mode"], NEAREST_MODES, "resize nearest_mode")
    check_choice(attrs["keep_aspect_ratio_policy"], ("stretch", "not_larger", "not_smaller"),
                 "resize keep_aspect_ratio_policy")
    if attrs["antialias"]:
        raise UnsupportedOpError("resize with antialias = 1 is not supported")
    axes = normalize_axes(attrs["axes"], rank) if attrs.get("axes") else tuple(range(rank))
    scales, sizes = attrs.get("scales"), attrs.get("sizes")
    if bool(scales) == bool(sizes):
        raise ShapeError("resize needs exactly one of 'scales' and 'sizes'")
    out: list[Dim] = list(shape)
    dim_scales: list[float | None] = [1.0] * rank
    if scales:
        if len(scales) != len(axes):
            raise ShapeError(f"resize scales {tuple(scales)} must have {len(axes)} values")
        for a, sc in zip(axes, scales):
            if not (0 < sc < math.inf):     # also NaN: floor(dim * scale) must be a size
                raise ShapeError(f"resize scales must be positive and finite, got {tuple(scales)}")
            dim_scales[a] = sc
            out[a] = None if shape[a] is None else int(math.floor(shape[a] * sc))
        return out, dim_scales
    if len(sizes) != len(axes):
        raise ShapeError(f"resize sizes {tuple(sizes)} must have {len(axes)} values")
    policy = attrs["keep_aspect_ratio_policy"]
    if any(shape[a] is None for a in axes):
        for a, n in zip(axes, sizes):
            out[a], dim_scales[a] = (n, None) if policy == "stretch" else (None, None)
        return out, dim_scales
    ratios = [n / shape[a] for a, n in zip(axes, sizes)]
    if policy != "stretch":
        r = min(ratios) if policy == "not_larger" else max(ratios)
        ratios = [r] * len(axes)
    for a, r, n in zip(axes, ratios, sizes):
        dim_scales[a] = r
        out[a] = n if policy == "stretch" else int(math.floor(shape[a] * r + 0.5))
    return out, dim_scales


def _resize(types, attrs):
    s = shape_of(types[0])
    if s is None:
        return [types[0]]
    return [tensor(tuple(resize_plan(s, attrs)[0]), elt(types[0]))]


CONCAT = define("concat", (Operand("inputs_0", TENSOR), variadic("inputs")), ("concat_result",),
                {"axis": INT(required=True)}, _concat)
SPLIT = define("split", ("input",), (variadic_results("outputs"),),
               {"axis": INT(0), "split": INTS(), "num_outputs": INT()}, _split,
               summary="Split along ``axis`` into ``split`` sizes or ``num_outputs`` chunks.")
SLICE = define("slice", ("data",), ("output",),
               {"starts": INTS(required=True), "ends": INTS(required=True), "axes": INTS(), "steps": INTS()},
               _slice, summary="ONNX Slice with constant bounds.")
GATHER = define("gather", ("data", "indices"), ("output",), {"axis": INT(0)}, _gather,
                summary="Take entries along ``axis`` (negative indices count from the end).")
PAD = define("pad", ("data",), ("output",),
             {"pads": INTS(required=True), "constant_value": FLOAT(0.0), "mode": STRING("constant"),
              "axes": INTS()}, _pad,
             summary="ONNX Pad with constant pads (negative pads crop).")
RESIZE = define(
    "resize", ("x",), ("y",),
    {"roi": FLOATS(), "scales": FLOATS(), "sizes": INTS(), "antialias": INT(0), "axes": INTS(),
     "coordinate_transformation_mode": STRING("half_pixel"), "cubic_coeff_a": FLOAT(-0.75),
     "exclude_outside": INT(0), "extrapolation_value": FLOAT(0.0),
     "keep_aspect_ratio_policy": STRING("stretch"), "mode": STRING("nearest"),
     "nearest_mode": STRING("round_prefer_floor")}, _resize,
    summary="ONNX Resize (nearest, linear, cubic; separable along each resized dim).")
