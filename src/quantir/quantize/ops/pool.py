"""Windows and reductions: LiteRT AVERAGE_POOL_2D, MAX_POOL_2D (same scale in and out) and MEAN.

All three have LiteRT's 16x8 path (``int16=True``): the pools are the int8 kernels on int16
values (LiteRT checks no int16 zero point; quantir's 16x8 activations have 0), MEAN the §2.8 sum.
"""
from __future__ import annotations

from ...ir import Value
from ...ir.dialects import nn, qnn
from ...ir.dialects.nn_conv import window_geometry
from ...rewrite import Match, Pat
from ...runtime import qkernels as qk
from ...runtime.kernels import qnn_ops
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..regions import QuantizerPattern, Region, conv_window, dynamic_padding_reason, lowered_window, rank, unary
from ..rules import ACT, ANY, SAME_AS, OpSpec
from .registry import QuantOp, SolverRules, declare

MEAN_MAX_RATIO = 2.0 ** 20   # s_in / s_out: MBQM(Σ(q - zp), M', sh') then fits int32 for any count
MARGIN = 1.0 + 2.0 ** -10    # float32 rounding of the scale must not land back on the limit


def finest_mean_scale(input_scales: list[float]) -> float | None:
    """MEAN's shift tops out at 30: an output scale finer than this cannot be expressed (see binary.py)."""
    return input_scales[0] / MEAN_MAX_RATIO * MARGIN


def _check_pool(m: Match) -> str | None:
    op = m.ops["op"]
    if rank(op.operands[0]) != 4:
        return "only 2-D pooling over NCHW tensors is quantized"
    if any(d != 1 for d in (op.attr("dilations") or ())):
        return "dilated pooling has no LiteRT equivalent"
    if len(op.results) > 1:
        return "MaxPool indices output is not quantizable"
    reason = dynamic_padding_reason(op, op.attr("kernel_shape"))
    if reason:
        return reason
    if op.opdef is nn.AVERAGE_POOL and op.attr("count_include_pad") and _pads(op):
        return "AveragePool with count_include_pad=1 and padding differs from LiteRT (which skips padding)"
    return _check_ceil(op) if op.attr("ceil_mode") else None


def _pads(op) -> bool:
    """Does the pool pad its input (auto_pad SAME included, which may pad at some sizes only)?"""
    window = lowered_window(op, op.attr("kernel_shape"))
    return "auto_pad" in window or any(window["pads"])


def pool_pads(op) -> tuple[int, ...]:
    """The op's pads ``(top, left, bottom, right)``, with ``ceil_mode``'s extra end padding made explicit.

    ceil_mode=1 adds a last window per axis that overhangs the (padded) input, kept when it starts
    inside it. Padding the end by that overhang gives the same output size and the same windows with
    floor division; the padded cells must then never count: MAX_POOL_2D's explicit pads are the
    storage minimum (never above a real cell), and LiteRT's average divides by the in-image cells,
    as ONNX does for the overhang (and for explicit pads with count_include_pad=0).
    """
    kernel = op.attr("kernel_shape")
    w = conv_window(op, kernel)
    if not op.attr("ceil_mode"):
        return w["pads"]
    spatial = op.operands[0].type.shape[2:]
    outs = op.results[0].type.shape[2:]
    if None in spatial or None in outs:   # stride 1 (_check_ceil): ceil and floor give the same windows
        return w["pads"]
    top, left, bottom, right = w["pads"]
    extra = [(o - 1) * s + k - (n + b + a)
             for o, s, k, n, b, a in zip(outs, w["strides"], kernel, spatial, (top, left), (bottom, right))]
    return (top, left, bottom + max(0, extra[0]), right + max(0, extra[1]))


def _ceil_as_same(op) -> bool:
    """ceil_mode=1 with 2x2 windows, stride 2 and no pads on a dynamic size is TFLite's SAME at every
    size: ceil((n - 2) / 2) + 1 = ceil(n / 2) windows from 0, and SAME pads 2·ceil(n/2) − n ∈ {0, 1}
    pixels, at the end (a stride-1 axis would need its own padding: not taken)."""
    spatial = op.operands[0].type.shape[2:]
    return (None in spatial and tuple(op.attr("kernel_shape")) == (2, 2)
            and tuple(op.attr("strides") or (1, 1)) == (2, 2) and not any(op.attr("pads") or ()))


def _check_ceil(op) -> str | None:
    spatial, outs = op.operands[0].type.shape[2:], op.results[0].type.shape[2:]
    strides = tuple(op.attr("strides") or (1, 1))
    if _ceil_as_same(op):
        return None
    if any(n is None and s > 1 for n, s in zip(spatial, strides)) or None in outs and any(s > 1 for s in strides):
        return (f"ceil_mode=1 with strides {strides} on a dynamic spatial size: the overhang padded at the end "
                "depends on the size, and LiteRT's pools take fixed padding (2x2 windows with stride 2 are SAME)")
    if None in spatial:   # stride 1: ceil and floor give the same windows
        return None
    pads = pool_pads(op)
    if op.opdef is nn.AVERAGE_POOL and not _same_or_valid(pads, spatial, op.attr("kernel_shape"), strides):
        return (f"AveragePool with ceil_mode=1 on {spatial[0]}x{spatial[1]} pads {pads} (the overhang made "
                "explicit), neither SAME nor VALID: LiteRT AVERAGE_POOL_2D takes no other padding")
    return None


def _same_or_valid(pads, spatial, kernel, strides) -> bool:
    if not any(pads):
        return True
    same = window_geometry(spatial, kernel, {"strides": strides, "auto_pad": "SAME_UPPER"})
    return tuple(pads) == tuple(same.pads_begin) + tuple(same.pads_end)


def _check_mean(m: Match) -> str | None:
    op = m.ops["op"]
    if op.opdef is nn.REDUCE_MEAN and not op.attr("axes"):
        return "ReduceMean over all axes without explicit axes is not quantized"
    return None


def lower_pool(opdef):
    def lower(lw: Lowerer, r: Region) -> Value:
        op = r.match.ops["op"]
        kernel = op.attr("kernel_shape")
        attrs = lowered_window(op, kernel)
        same = "auto_pad" in attrs or (op.attr("ceil_mode") and _ceil_as_same(op))
        pads = {"auto_pad": "SAME_UPPER"} if same else {"pads": pool_pads(op)}
        x = lw.input(r.match["x"])
        return lw.emit(opdef.build([x], [lw.out_type(r)], kernel_shape=kernel, strides=attrs["strides"], **pads),
                       op).result
    return lower


def lower_mean(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    axes, keep = ((2, 3), 1) if op.opdef is nn.GLOBAL_AVERAGE_POOL else (op.attr("axes"), op.attr("keepdims"))
    rank_ = len(op.operands[0].type.shape)
    axes = tuple(a + rank_ if a < 0 else a for a in axes)
    return lw.emit(qnn.MEAN.build([lw.input(r.match["x"])], [lw.out_type(r)], axes=axes, keepdims=keep), op).result


MAX_POOL = declare(QuantOp(
    qnn.MAX_POOL, OP.MAX_POOL_2D, OpSpec((ACT,), SAME_AS(0)),
    patterns=(QuantizerPattern("max_pool", unary(nn.MAX_POOL), lower_pool(qnn.MAX_POOL), check=_check_pool),),
    kernel=qnn_ops.pool(qk.prepare_max_pool, qk.max_pool2d), int16=True,
    qdq_ops=(nn.MAX_POOL,)))

AVERAGE_POOL = declare(QuantOp(
    qnn.AVERAGE_POOL, OP.AVERAGE_POOL_2D, OpSpec((ACT,), SAME_AS(0)),
    patterns=(QuantizerPattern("average_pool", unary(nn.AVERAGE_POOL), lower_pool(qnn.AVERAGE_POOL),
                               check=_check_pool),),
    kernel=qnn_ops.pool(qk.prepare_average_pool, qk.average_pool2d), int16=True,
    qdq_ops=(nn.AVERAGE_POOL,)))

MEAN = declare(QuantOp(
    qnn.MEAN, OP.MEAN, OpSpec((ACT, ANY), ACT),
    patterns=(QuantizerPattern("mean", Pat.alt(unary(nn.GLOBAL_AVERAGE_POOL), unary(nn.REDUCE_MEAN)), lower_mean,
                               check=_check_mean, doc="GlobalAveragePool and ReduceMean"),),
    kernel=qnn_ops.mean, int16=True,
    solver=SolverRules(finest_output_scale=finest_mean_scale),
    qdq_ops=(nn.GLOBAL_AVERAGE_POOL, nn.REDUCE_MEAN)))
