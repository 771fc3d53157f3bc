"""Shape manipulation: ``nn.reshape`` (and ``nn.dynamic_reshape``, its target a run-time tensor),
``flatten``, ``transpose``, ``squeeze``, ``unsqueeze``,
``expand``, ``tile``, ``depth_to_space``, ``space_to_depth``, and the shape-computing ops
``nn.shape``, ``nn.size``, ``nn.constant_of_shape``, ``nn.range`` that exporters leave in
graphs (the constant-folding pass evaluates them away when their inputs are known)."""
from __future__ import annotations

from ...errors import ShapeError
from ...types import IntegerType
from ..opdef import numpy_to_element_type
from .nn_base import (F32, I64, INT, INTS, STRING, ELEMENTS, broadcast_shapes, check_choice, define, elt,
                      fmt_shape, normalize_axes, prod, rank_of, shape_of, tensor)


def reshape_shape(src, target, allowzero: int):
    """ONNX Reshape: ``0`` copies the input dim (unless ``allowzero``), one ``-1`` is inferred."""
    out = []
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if src is None or i >= len(src):
                if src is None:
                    out.append(None)
                    continue
                raise ShapeError(f"shape {tuple(target)} copies dim {i} (0) from an input of rank {len(src)}")
            out.append(src[i])
        elif d < -1:
            raise ShapeError(f"shape {tuple(target)} has a negative dim {d}")
        else:
            out.append(d)
    if sum(1 for d in target if d == -1) > 1:
        raise ShapeError(f"shape {tuple(target)} has more than one -1")
    total = prod(src) if src is not None else None
    if -1 in target:
        i = list(target).index(-1)
        # Copied dims (0) cancel out, so a dynamic batch that is copied does not hide the -1.
        copied = {j for j, d in enumerate(target) if d == 0 and not allowzero}
        total = prod(d for j, d in enumerate(src) if j not in copied) if src is not None else None
        rest = prod(d for j, d in enumerate(out) if j != i and j not in copied)
        if total is None or rest is None:
            out[i] = None
        elif rest == 0 or total % rest:
            raise ShapeError(f"cannot reshape {fmt_shape(src)} ({total} elements) to {tuple(target)}")
        else:
            out[i] = total // rest
    known, total = prod(out), (prod(src) if src is not None else None)
    if total is not None and known is not None and total != known:
        raise ShapeError(f"cannot reshape {fmt_shape(src)} ({total} elements) to {tuple(target)} "
                         f"({known} elements)")
    return tuple(out)


def _reshape(types, attrs):
    return [tensor(reshape_shape(shape_of(types[0]), attrs["shape"], attrs["allowzero"]), elt(types[0]))]


def _dynamic_reshape(types, attrs):
    """The rank is the shape operand's length; ``dims`` holds the result dims the importer
    proved (``-1``: known only at run time)."""
    s = shape_of(types[1])
    et = elt(types[1])
    if s is None or len(s) != 1 or s[0] is None or not isinstance(et, IntegerType):
        raise ShapeError(f"dynamic_reshape needs its shape as a 1-D integer tensor of static length (the result's "
                         f"rank), got '{types[1]}'")
    dims = tuple(attrs["dims"])
    if len(dims) != s[0] or any(d < -1 for d in dims):
        raise ShapeError(f"dynamic_reshape dims {dims} must be {s[0]} sizes >= 0 or -1 (unknown)")
    out = tuple(None if d == -1 else d for d in dims)
    src = shape_of(types[0])
    if src is not None and None not in out and prod(src) is not None and prod(src) != prod(out):
        raise ShapeError(f"cannot reshape {fmt_shape(src)} ({prod(src)} elements) to {fmt_shape(out)} "
                         f"({prod(out)} elements)")
    return [tensor(out, elt(types[0]))]


def _flatten(types, attrs):
    s = shape_of(types[0])
    if s is None:
        return [tensor((None, None), elt(types[0]))]
    axis = attrs["axis"]
    if not -len(s) <= axis <= len(s):
        raise ShapeError(f"flatten axis {axis} is out of range for rank {len(s)}")
    axis = axis + len(s) if axis < 0 else axis
    return [tensor((prod(s[:axis]), prod(s[axis:])), elt(types[0]))]


def _transpose(types, attrs):
    s = shape_of(types[0])
    if s is None:
        return [types[0]]
    perm = attrs.get("perm") or tuple(reversed(range(len(s))))
    if sorted(normalize_axes(perm, len(s), "perm")) != list(range(len(s))) or len(perm) != len(s):
        raise ShapeError(f"perm {tuple(perm)} is not a permutation of {len(s)} axes")
    perm = normalize_axes(perm, len(s), "perm")
    return [tensor(tuple(s[p] for p in perm), elt(types[0]))]


def _squeeze(types, attrs):
    s = shape_of(types[0])
    if s is None:
        return [types[0]]
    axes = attrs.get("axes")
    if axes is None:
        if None in s:
            raise ShapeError(f"squeeze without axes needs a static shape, got {fmt_shape(s)}")
        axes = tuple(i for i, d in enumerate(s) if d == 1)
    axes = normalize_axes(axes, len(s))
    for a in axes:
        if s[a] not in (1, None):
            raise ShapeError(f"cannot squeeze dim {a} of size {s[a]} in {fmt_shape(s)}")
    return [tensor(tuple(d for i, d in enumerate(s) if i not in axes), elt(types[0]))]


def _unsqueeze(types, attrs):
    s = shape_of(types[0])
    if s is None:
        return [types[0]]
    rank = len(s) + len(attrs["axes"])
    axes = normalize_axes(attrs["axes"], rank)
    it = iter(s)
    return [tensor(tuple(1 if i in axes else next(it) for i in range(rank)), elt(types[0]))]


def _expand(types, attrs):
    return [tensor(broadcast_shapes(shape_of(types[0]), tuple(attrs["shape"])), elt(types[0]))]


def _tile(types, attrs):
    s = shape_of(types[0])
    if s is None:
        return [types[0]]
    reps = attrs["repeats"]
    if len(reps) != len(s) or any(r < 0 for r in reps):
        raise ShapeError(f"repeats {tuple(reps)} must be {len(s)} non-negative values")
    return [tensor(tuple(None if d is None else d * r for d, r in zip(s, reps)), elt(types[0]))]


def _depth_to_space(types, attrs):
    n, c, h, w = _nchw(types[0], "depth_to_space")
    b = attrs["blocksize"]
    check_choice(attrs["mode"], ("DCR", "CRD"), "depth_to_space mode")
    if c is not None and c % (b * b):
        raise ShapeError(f"depth_to_space: {c} channels are not divisible by blocksize^2 = {b * b}")
    return [tensor((n, None if c is None else c // (b * b), _mul(h, b), _mul(w, b)), elt(types[0]))]


def _space_to_depth(types, attrs):
    n, c, h, w = _nchw(types[0], "space_to_depth")
    b = attrs["blocksize"]
    check_choice(attrs["mode"], ("DCR", "CRD"), "space_to_depth mode")
    for d in (h, w):
        if d is not None and d % b:
            raise ShapeError(f"space_to_depth: spatial dim {d} is not divisible by blocksize {b}")
    return [tensor((n, _mul(c, b * b), None if h is None else h // b, None if w is None else w // b),
                   elt(types[0]))]


def _nchw(t, what):
    if rank_of(t) != 4:
        raise ShapeError(f"{what} needs a rank-4 input, got '{t}'")
    return shape_of(t)


def _mul(d, k):
    return None if d is None else d * k


def shape_slice(rank: int, attrs) -> tuple[int, int]:
    """ONNX Shape's ``start``/``end`` clamped to ``[0, rank]``."""
    def clamp(v):
        v = v + rank if v < 0 else v
        return min(max(v, 0), rank)
    end = attrs.get("end")
    return clamp(attrs.get("start") or 0), clamp(rank if end is None else end)


def _shape(types, attrs):
    s = shape_of(types[0])
    if s is None:
        return [tensor((None,), I64)]
    start, end = shape_slice(len(s), attrs)
    return [tensor((max(0, end - start),), I64)]


def _constant_of_shape(types, attrs):
    value = attrs.get("value")
    et = F32 if value is None else numpy_to_element_type(value.dtype)
    if value is not None and value.size != 1:
        raise ShapeError(f"constant_of_shape value must hold one element, got shape {value.shape}")
    if any(d < 0 for d in attrs["shape"]):
        raise ShapeError(f"constant_of_shape shape {attrs['shape']} has negative dims")
    return [tensor(tuple(attrs["shape"]), et)]


def _range(types, attrs):
    for name, t in zip(("start", "limit", "delta"), types):
        if shape_of(t) not in ((), None):
            raise ShapeError(f"range {name} must be a scalar, got '{t}'")
    return [tensor((None,), elt(types[0]))]


RESHAPE = define("reshape", ("data",), ("reshaped",), {"shape": INTS(required=True), "allowzero": INT(0)},
                 _reshape, summary="ONNX Reshape with a constant target shape.")
DYNAMIC_RESHAPE = define(
    "dynamic_reshape", ("data", "shape"), ("reshaped",), {"dims": INTS(required=True), "allowzero": INT(0)},
    _dynamic_reshape, summary="ONNX Reshape whose target shape is computed at run time (an i64 operand); "
                              "``dims`` are the result dims known before running (-1: unknown).")
FLATTEN = define("flatten", ("input",), ("output",), {"axis": INT(1)}, _flatten,
                 summary="Collapse to 2-D: (prod(dims[:axis]), prod(dims[axis:])).")
TRANSPOSE = define("transpose", ("data",), ("transposed",), {"perm": INTS()}, _transpose,
                   summary="Permute dims (reverse them when perm is absent).")
SQUEEZE = define("squeeze", ("data",), ("squeezed",), {"axes": INTS()}, _squeeze)
UNSQUEEZE = define("unsqueeze", ("data",), ("expanded",), {"axes": INTS(required=True)}, _unsqueeze)
EXPAND = define("expand", ("input",), ("output",), {"shape": INTS(required=True)}, _expand,
                summary="Broadcast to ``shape`` (bidirectionally, as ONNX Expand).")
TILE = define("tile", ("input",), ("output",), {"repeats": INTS(required=True)}, _tile)
DEPTH_TO_SPACE = define("depth_to_space", ("input",), ("output",),
                        {"blocksize": INT(required=True), "mode": STRING("DCR")}, _depth_to_space)
SPACE_TO_DEPTH = define("space_to_depth", ("input",), ("output",),
                        {"blocksize": INT(required=True), "mode": STRING("DCR")}, _space_to_depth)
SHAPE = define("shape", ("data",), ("shape",), {"start": INT(0), "end": INT()}, _shape,
               summary="The input's shape as a 1-D i64 tensor (folds when the dims are static).")
SIZE = define("size", ("data",), ("size",), {}, lambda t, a: [tensor((), I64)],
              summary="The input's element count as an i64 scalar.")
CONSTANT_OF_SHAPE = define("constant_of_shape", (), ("output",),
                           {"shape": INTS(required=True), "value": ELEMENTS()}, _constant_of_shape,
                           summary="A tensor of ``shape`` filled with ``value`` (f32 zero by default).")
RANGE = define("range", ("start", "limit", "delta"), ("output",), {}, _range,
               summary="[start, start + delta, ...) up to limit; the length is known once folded.")
