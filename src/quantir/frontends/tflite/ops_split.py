"""SPLIT: ``num_splits`` equal chunks of one axis, each output a copy of stored integers.

quantir has no multi-result integer op for it (its quantizer writes ONNX Split as one Slice per
output), so a .tflite SPLIT reads back the same way: one ``nn.slice`` per output, in the input's
layout, each copying the stored integers into its output's type as LiteRT's kernel copies bytes.
"""
from __future__ import annotations

from ...backends.tflite.schema import BuiltinOperator as OP
from ...errors import ModelFormatError, UnsupportedOpError
from ...ir import Operation
from ...ir.dialects import nn
from . import layout as L
from .importer import Converter, OpContext

__all__ = ["CONVERTERS"]


def split(ctx: OpContext) -> None:
    """SPLIT (axis, input) with ``num_splits`` outputs."""
    axis = ctx.const_ints(0, "axis")
    r = ctx.rank(1)
    if len(axis) != 1 or not -r <= axis[0] < r:
        raise ModelFormatError(f"the axis must be one value in [-{r}, {r}), found {list(axis)}")
    a = axis[0] % r
    outputs = list(ctx.op.outputs)
    n = ctx.options.num_splits
    if n != len(outputs) or n < 1:
        raise ModelFormatError(f"num_splits {n} but {len(outputs)} outputs")
    size = ctx.dims(1)[a]
    if size is None:
        raise UnsupportedOpError(f"SPLIT of the dynamic axis {a}: quantir reads splits of static sizes")
    if size % n:
        raise ModelFormatError(f"axis {a} of size {size} does not split into {n} equal chunks")
    k = size // n
    perm = ctx.native_or_identity(1)   # the input as its producer left it (NCHW after a pool or conv)
    ir_axis = list(L.inverse(perm)).index(a)
    x = ctx.input(1, perm)
    imp = ctx.imp
    for i, idx in enumerate(outputs):
        op = Operation(nn.SLICE, [x], [imp.ir_type(idx, perm)],
                       nn.SLICE.make_attrs({"starts": [i * k], "ends": [(i + 1) * k], "axes": [ir_axis]}),
                       label=imp.names[idx])
        op.opdef.verify_op(op)
        (want,) = nn.SLICE.infer([x.type], nn.SLICE.attr_values(op))
        if want.shape != op.results[0].type.shape:
            raise ModelFormatError(f"output '{imp.names[idx]}' is declared with shape {list(imp.tensor(idx).shape)}, "
                                   f"not a 1/{n} chunk of axis {a}")
        imp.fn.body.append(op)
        imp.define(idx, op.result, tuple(perm))


CONVERTERS: dict[OP, Converter] = {OP.SPLIT: split}
