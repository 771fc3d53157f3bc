"""SPLIT and SPLIT_V: chunks of one axis, each output a copy of stored integers.

quantir has no multi-result integer op for them (its quantizer writes ONNX Split as one Slice per
output, and the exporter writes such slices as one SPLIT_V), so they read back the same way: one
``nn.slice`` per output, in the input's layout, each copying the stored integers into its output's
type as LiteRT's kernel copies bytes.
"""
from __future__ import annotations

from ...backends.tflite.schema import BuiltinOperator as OP
from ...errors import ModelFormatError, UnsupportedOpError
from ...ir import Operation
from ...ir.dialects import nn
from . import layout as L
from .importer import Converter, OpContext

__all__ = ["CONVERTERS"]


def _axis(ctx: OpContext, i: int, data: int) -> tuple[int, int | None]:
    """The split axis (input ``i``, a constant) of input ``data``, and its size."""
    axis = ctx.const_ints(i, "axis")
    r = ctx.rank(data)
    if len(axis) != 1 or not -r <= axis[0] < r:
        raise ModelFormatError(f"the axis must be one value in [-{r}, {r}), found {list(axis)}")
    a = axis[0] % r
    size = ctx.dims(data)[a]
    if size is None:
        raise UnsupportedOpError(f"{ctx.op_name} of the dynamic axis {a}: quantir reads splits of static sizes")
    return a, size


def split(ctx: OpContext) -> None:
    """SPLIT (axis, input) with ``num_splits`` outputs."""
    a, size = _axis(ctx, 0, 1)
    n = ctx.options.num_splits
    if n != len(ctx.op.outputs) or n < 1:
        raise ModelFormatError(f"num_splits {n} but {len(ctx.op.outputs)} outputs")
    if size % n:
        raise ModelFormatError(f"axis {a} of size {size} does not split into {n} equal chunks")
    _emit_chunks(ctx, 1, a, [size // n] * n)


def split_v(ctx: OpContext) -> None:
    """SPLIT_V (input, size_splits, axis): chunks of the given sizes, one of them -1 (the rest)."""
    a, size = _axis(ctx, 2, 0)
    sizes = list(ctx.const_vector(1, "size_splits"))
    if len(sizes) != len(ctx.op.outputs) or ctx.options.num_splits != len(sizes):
        raise ModelFormatError(f"size_splits {sizes}, num_splits {ctx.options.num_splits} and "
                               f"{len(ctx.op.outputs)} outputs differ")
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = size - (sum(sizes) + 1)
    if min(sizes) < 0 or sum(sizes) != size:
        raise ModelFormatError(f"size_splits {list(ctx.const_vector(1, 'size_splits'))} do not cut axis {a} "
                               f"of size {size}")
    _emit_chunks(ctx, 0, a, sizes)


def _emit_chunks(ctx: OpContext, data: int, a: int, sizes: list[int]) -> None:
    """One ``nn.slice`` per output: consecutive chunks of TFLite axis ``a`` of input ``data``."""
    perm = ctx.native_or_identity(data)   # the input as its producer left it (NCHW after a pool or conv)
    ir_axis = list(L.inverse(perm)).index(a)
    x = ctx.input(data, perm)
    imp = ctx.imp
    n = len(sizes)
    starts = [sum(sizes[:i]) for i in range(n)]
    for i, idx in enumerate(ctx.op.outputs):
        op = Operation(nn.SLICE, [x], [imp.ir_type(idx, perm)],
                       nn.SLICE.make_attrs({"starts": [starts[i]], "ends": [starts[i] + sizes[i]], "axes": [ir_axis]}),
                       label=imp.names[idx])
        op.opdef.verify_op(op)
        (want,) = nn.SLICE.infer([x.type], nn.SLICE.attr_values(op))
        if want.shape != op.results[0].type.shape:
            raise ModelFormatError(f"output '{imp.names[idx]}' is declared with shape {list(imp.tensor(idx).shape)}, "
                                   f"not chunk {i} ({sizes[i]} of axis {a})")
        imp.fn.body.append(op)
        imp.define(idx, op.result, tuple(perm))


CONVERTERS: dict[OP, Converter] = {OP.SPLIT: split, OP.SPLIT_V: split_v}
