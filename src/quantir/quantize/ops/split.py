"""Split, as one Slice per output (an expansion before calibration).

ONNX Split copies consecutive chunks of one axis into several results. Quantized, each chunk
is a copy of stored integers in the input's parameters, which is what the slice declaration
(``shape.SLICE``, LiteRT STRIDED_SLICE, same scale in and out) already does for a single-result
op. So instead of teaching annotation, the solver and the lowering about regions with several
results, the float Split becomes float Slices with the same chunks (the same float32 values:
both copy), and every Slice joins the input's scale class. The .tflite exporter writes such a
group of Slices as one SPLIT_V again (``backends.tflite.export._split_group``), and the reader
reads SPLIT and SPLIT_V back as Slices.
"""
from __future__ import annotations

from ...ir import Value
from ...ir.dialects import nn
from ...ir.dialects.nn_index import split_sizes
from ...rewrite import Match, Pat, Rewriter, Rule
from ...types import FloatType
from .registry import declare_expansion


def _chunks(m: Match) -> list[int] | str:
    """The chunk sizes along the axis, or why they are not known before run time."""
    op = m.ops["op"]
    shape = getattr(op.operands[0].type, "shape", None)
    if shape is None:
        return "Split of an unranked tensor: the chunks are not known"
    axis = op.attr("axis") + (len(shape) if op.attr("axis") < 0 else 0)
    sizes = op.attr("split")
    if sizes:
        return [int(k) for k in sizes]
    if shape[axis] is None:
        return (f"Split into {op.attr('num_outputs')} equal chunks of a dynamic axis {axis}: the chunk sizes are "
                "only known at run time (give 'split' sizes)")
    return split_sizes(shape[axis], op.opdef.attr_values(op))


def _check_split(m: Match) -> str | None:
    op = m.ops["op"]
    if getattr(op.operands[0].type, "element_type", None) != FloatType("f32"):
        return f"Split of {op.operands[0].type} is not float32"
    found = _chunks(m)
    return found if isinstance(found, str) else None


def _expand_split(rw: Rewriter, m: Match) -> list[Value]:
    op, x = m.ops["op"], m["x"]
    axis = op.attr("axis")
    label = op.label or op.results[0].name_hint or "split"
    outs, start = [], 0
    for i, (k, y) in enumerate(zip(_chunks(m), op.results)):
        new = nn.SLICE.build([x], [y.type], starts=[start], ends=[start + k], axes=[axis])
        new.label = f"{label}/{i}"
        out = rw.insert(new).result
        out.name_hint = y.name_hint
        outs.append(out)
        start += k
    return outs


SPLIT = declare_expansion(Rule(
    "split", Pat.op(nn.SPLIT, Pat.any("x"), name="op"), _expand_split, check=_check_split,
    doc="Split -> one Slice per output (STRIDED_SLICE, same scale as the input)"))
