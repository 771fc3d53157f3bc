"""Converters of the data-movement ops: RESHAPE, TRANSPOSE, SQUEEZE, EXPAND_DIMS, SLICE, STRIDED_SLICE,
GATHER, SPACE_TO_DEPTH, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND.

They become ``nn`` ops on quantized tensors (``qnn.DATA_MOVEMENT``); the two batch ops, whose
SPACE_TO_BATCH_ND pads with the zero point, ``qnn`` ops. RESHAPE and EXPAND_DIMS
produce the TFLite layout; SQUEEZE drops axes in any layout; TRANSPOSE keeps the data. Each
avoids a layout transpose where the arithmetic allows:

- RESHAPE reads the input's native form when it holds the elements in the TFLite order
  (an NCHW ``1x1x1xC`` is ``C`` values either way);
- TRANSPOSE is a change of layout, not of data: ``nn.identity`` with the composed layout.
"""
from __future__ import annotations

import numpy as np

from ...backends.tflite.schema import BuiltinOperator as OP
from ...errors import ModelFormatError, UnsupportedOpError
from ...ir.dialects import nn, qnn
from . import layout as L
from .importer import Converter, OpContext
from .tensors import dims

__all__ = ["CONVERTERS"]


def reshape(ctx: OpContext) -> None:
    """LiteRT's rule: a 1-D shape input gives the new shape, else ``ReshapeOptions.new_shape``
    (empty, or the legacy ``[0]``, is a scalar). A shape computed at run time cannot be known
    here: the declared output shape stands in for it."""
    out_dims = dims(ctx.out_tensor)
    if ctx.has(1) and ctx.rank(1) == 1:
        if ctx.is_const(1):
            target = ctx.const_ints(1, "shape")
        elif sum(d is None for d in out_dims) > 1:
            copied = _copied_dims(ctx)
            if copied is None:   # the shape as the model computes it (a 0 in it is an empty dim, allowzero)
                ctx.emit(nn.DYNAMIC_RESHAPE, [ctx.input(0, L.identity(ctx.rank(0))), ctx.input(1, L.identity(1))],
                         L.identity(ctx.out_rank), dims=tuple(-1 if d is None else d for d in out_dims), allowzero=1)
                return
            # ONNX's 0 copies the input's dim: on the input in the TFLite order, as the SHAPE read it
            ctx.emit(nn.RESHAPE, [ctx.input(0, L.identity(ctx.rank(0)))], L.identity(ctx.out_rank), shape=copied)
            return
        else:
            target = tuple(-1 if d is None else d for d in out_dims)
    else:
        options = ctx.options
        target = () if options.new_shape in ((), (0,)) else options.new_shape
    if sum(d == -1 for d in target) > 1 or any(d < -1 for d in target):
        raise ModelFormatError(f"new shape {list(target)} must have non-negative dims and at most one -1")
    native = ctx.native_or_identity(0)
    perm = native if L.same_memory_order(ctx.dims(0), native) else L.identity(len(native))
    # allowzero: a 0 in a TFLite shape is an empty dim, never "copy the input's dim" (ONNX)
    ctx.emit(nn.RESHAPE, [ctx.input(0, perm)], L.identity(ctx.out_rank), shape=target, allowzero=1)


def _producer(ctx: OpContext, idx: int, code: OP):
    """The operator that writes tensor ``idx`` if it is a ``code``, else None."""
    for op in ctx.imp.sg.operators:
        if idx in op.outputs:
            return op if ctx.imp.model.operator_codes[op.opcode_index].builtin_code == code else None
    return None


def _copied_dims(ctx: OpContext) -> tuple[int, ...] | None:
    """The ONNX target (``0``: copy the input's dim) of a run-time shape written as quantir writes
    it: GATHER(CONCATENATION(SHAPE(input), sizes), picks), a pick ``i`` below the input's rank
    copying dim ``i`` at position ``i``; else None."""
    imp = ctx.imp
    gather = _producer(ctx, ctx.idx(1), OP.GATHER)
    if gather is None or len(gather.inputs) != 2 or imp.data(gather.inputs[1]) is None:
        return None
    concat = _producer(ctx, gather.inputs[0], OP.CONCATENATION)
    if concat is None or len(concat.inputs) != 2 or imp.data(concat.inputs[1]) is None:
        return None
    shape = _producer(ctx, concat.inputs[0], OP.SHAPE)
    if shape is None or shape.inputs[0] != ctx.idx(0):
        return None
    rank = ctx.rank(0)
    sizes = [int(v) for v in np.asarray(imp.data(concat.inputs[1])).reshape(-1)]
    target = []
    for i, p in enumerate(int(v) for v in np.asarray(imp.data(gather.inputs[1])).reshape(-1)):
        if (p < rank and p != i) or not 0 <= p < rank + len(sizes):
            return None
        target.append(0 if p < rank else sizes[p - rank])
    return tuple(target)


def transpose(ctx: OpContext) -> None:
    """Free when it only relabels: the output *is* the input's IR array, in layout
    ``compose(native, perm)`` (``nn.identity``), so NCHW -> TRANSPOSE -> CONV_2D (what converters
    of PyTorch models write) costs nothing. A TRANSPOSE that also changes the quantization
    (a spec violation, kept for ``quantir check``) stays an ``nn.transpose``."""
    r = ctx.rank(0)
    perm = ctx.const_vector(1, "perm")
    if sorted(p % r if -r <= p < r else -1 for p in perm) != list(range(r)):
        raise ModelFormatError(f"perm {list(perm)} is not a permutation of {r} axes")
    native = ctx.native_or_identity(0)
    layout = L.compose(native, tuple(p % r for p in perm))
    x = ctx.input(0, native)
    if ctx.result_type(layout).element_type == x.type.element_type:
        ctx.emit(nn.IDENTITY, [x], layout)
    else:
        ctx.emit(nn.TRANSPOSE, [x], L.identity(r), perm=layout)


def squeeze(ctx: OpContext) -> None:
    shape = ctx.dims(0)
    r = len(shape)
    requested = ctx.options.squeeze_dims
    if any(not -r <= a < r for a in requested):
        raise ModelFormatError(f"squeeze_dims {list(requested)} out of range for rank {r}")
    axes = sorted({a % r for a in requested}) if requested else [a for a, d in enumerate(shape) if d == 1]
    native = ctx.native_or_identity(0)
    ctx.emit(nn.SQUEEZE, [ctx.input(0, native)], L.drop_axes(native, axes), axes=sorted(native[a] for a in axes))


def expand_dims(ctx: OpContext) -> None:
    r = ctx.rank(0)
    axis = ctx.const_ints(1, "axis")
    if len(axis) != 1 or not -(r + 1) <= axis[0] <= r:
        raise ModelFormatError(f"axis {list(axis)} must be one value in [{-(r + 1)}, {r}]")
    ctx.emit(nn.UNSQUEEZE, [ctx.input(0, L.identity(r))], L.identity(r + 1), axes=(axis[0] % (r + 1),))


_TO_THE_END = (1 << 31) - 1   # a slice end past any dim: a masked axis, or SLICE's size -1


def _emit_slice(ctx: OpContext, starts, ends, steps) -> None:
    """``nn.slice`` over every axis, in the input's layout (TFLite axis ``inv[j]`` is IR axis ``j``)."""
    perm = ctx.native_or_identity(0)
    inv = L.inverse(perm)
    r = len(perm)
    ctx.emit(nn.SLICE, [ctx.input(0, perm)], perm, starts=[starts[inv[j]] for j in range(r)],
             ends=[ends[inv[j]] for j in range(r)], axes=list(range(r)), steps=[steps[inv[j]] for j in range(r)])


def strided_slice(ctx: OpContext) -> None:
    """Positive strides, begin/end masks; the ellipsis, new-axis and shrink-axis masks are refused."""
    r = ctx.rank(0)
    begin, end, strides = (ctx.const_vector(i, what) for i, what in ((1, "begin"), (2, "end"), (3, "strides")))
    if not len(begin) == len(end) == len(strides) == r:
        raise ModelFormatError(f"begin {list(begin)}, end {list(end)} and strides {list(strides)} must have "
                               f"{r} values")
    o = ctx.options
    if o.ellipsis_mask or o.new_axis_mask or o.shrink_axis_mask or o.offset:
        raise UnsupportedOpError("STRIDED_SLICE with an ellipsis, new-axis or shrink-axis mask or offset")
    if any(s <= 0 for s in strides):
        raise UnsupportedOpError(f"STRIDED_SLICE with strides {list(strides)}: only positive strides")
    starts = [0 if o.begin_mask >> a & 1 else begin[a] for a in range(r)]
    ends = [_TO_THE_END if o.end_mask >> a & 1 else end[a] for a in range(r)]
    _emit_slice(ctx, starts, ends, strides)


def slice_(ctx: OpContext) -> None:
    """SLICE(begin, size): size -1 runs to the end."""
    r = ctx.rank(0)
    begin, size = ctx.const_vector(1, "begin"), ctx.const_vector(2, "size")
    if not len(begin) == len(size) == r or any(b < 0 for b in begin) or any(s < -1 for s in size):
        raise ModelFormatError(f"begin {list(begin)} and size {list(size)} must be {r} values, begin >= 0, "
                               "size >= -1")
    _emit_slice(ctx, begin, [_TO_THE_END if s == -1 else b + s for b, s in zip(begin, size)], [1] * r)


def gather(ctx: OpContext) -> None:
    """``nn.gather``; with 1-D indices the output keeps the data's layout (the gathered axis is
    replaced in place). LiteRT's batch_dims has no ``nn.gather`` form and is refused."""
    o, r = ctx.options, ctx.rank(0)
    if o.batch_dims:
        raise UnsupportedOpError(f"GATHER with batch_dims {o.batch_dims} is not supported (only 0)")
    if not -r <= o.axis < r:
        raise ModelFormatError(f"axis {o.axis} is out of range for rank {r}")
    k = ctx.rank(1)
    perm = ctx.native_or_identity(0) if k == 1 else L.identity(r)
    if not ctx.is_const(1):
        indices = ctx.input(1, L.identity(k))
    elif k == 0:   # one index (the axis goes away); the importer's constants are at least 1-D
        indices = ctx.imp.plain_constant(np.asarray(ctx.const(1, "indices")).reshape(()))
    else:
        indices = ctx.constant(1, L.identity(k))
    ctx.emit(nn.GATHER, [ctx.input(0, perm), indices], perm if k == 1 else L.identity(r - 1 + k),
             axis=perm[o.axis % r])


def space_to_depth(ctx: OpContext) -> None:
    if ctx.rank(0) != 4 or ctx.options.block_size < 1:
        raise ModelFormatError(f"SPACE_TO_DEPTH needs a 4-D input and a positive block size, found shape "
                               f"{list(ctx.tensor(0).shape)} and block size {ctx.options.block_size}")
    nchw = L.channels_first(4)
    ctx.emit(nn.SPACE_TO_DEPTH, [ctx.input(0, nchw)], nchw, blocksize=ctx.options.block_size)


def _space_batch(opdef, pairs: str) -> Converter:
    """SPACE_TO_BATCH_ND (``paddings``) / BATCH_TO_SPACE_ND (``crops``) on NHWC or NHC: the qnn op
    on the channels-first form, with constant block sizes and [M, 2] pairs."""
    def convert(ctx: OpContext) -> None:
        r = ctx.rank(0)
        if r not in (3, 4):
            raise UnsupportedOpError(f"{ctx.op_name} of a rank-{r} input; LiteRT's kernels take rank 3 or 4")
        for i, what in ((1, "block_shape"), (2, pairs)):
            if not ctx.is_const(i):
                raise UnsupportedOpError(f"{ctx.op_name} with its {what} computed at run time: quantir needs "
                                         "them constant")
        block, table = ctx.const_vector(1, "block_shape"), np.asarray(ctx.const(2, pairs))
        if len(block) != r - 2 or table.shape != (r - 2, 2):
            raise ModelFormatError(f"block_shape {list(block)} and {pairs} of shape {list(table.shape)} must "
                                   f"cover the {r - 2} spatial axes ({r - 2} values, [{r - 2}, 2])")
        layout = L.channels_first(r)
        ctx.emit(opdef, [ctx.input(0, layout)], layout, block_shape=block,
                 **{pairs: [int(v) for v in table.reshape(-1)]})
    return convert


CONVERTERS: dict[OP, Converter] = {
    OP.GATHER: gather,
    OP.SPACE_TO_DEPTH: space_to_depth,
    OP.SPACE_TO_BATCH_ND: _space_batch(qnn.SPACE_TO_BATCH_ND, "paddings"),
    OP.BATCH_TO_SPACE_ND: _space_batch(qnn.BATCH_TO_SPACE_ND, "crops"),
    OP.RESHAPE: reshape,
    OP.TRANSPOSE: transpose,
    OP.SQUEEZE: squeeze,
    OP.EXPAND_DIMS: expand_dims,
    OP.STRIDED_SLICE: strided_slice,
    OP.SLICE: slice_,
}
