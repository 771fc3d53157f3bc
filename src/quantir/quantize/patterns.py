"""QuantizerPatterns: which float subgraphs become which integer op (the TVM RFC's idea).

Each pattern is data: a dataflow pattern rooted at the *last* float op of a fused group
(conv → relu is matched at the relu), the LiteRT op kind it becomes (the key into
``spec.SPEC``), the names of its activation inputs, and a ``check`` that returns *why* a
matched group must stay float. ``annotate`` walks a function from its outputs back so the
longest fusion claims its ops first, and records every op that stays float with its reason.
The integer lowering of each pattern lives in ``lower.py``, keyed by the pattern name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..errors import QuantirError
from ..ir import Function, OpResult, Operation, Value
from ..ir.dialects import arith, func, nn
from ..ir.dialects.nn_index import resize_plan
from ..numerics import resize_nearest_indices
from ..numerics.resize import onnx_nearest, onnx_source_coords
from ..rewrite import Match, Pat, match
from ..types import FloatType, TensorType
from .config import Config

Check = Callable[[Match], "str | None"]


@dataclass(frozen=True)
class QuantizerPattern:
    name: str                           # also the key of its lowering
    kind: str                           # LiteRT op kind (spec.SPEC key)
    pattern: Pat
    inputs: tuple[str, ...] = ("x",)    # captured activation inputs; () with variadic=True: all operands
    variadic: bool = False
    check: Check | None = None
    doc: str = ""


@dataclass
class Region:
    """One matched group: float ops that become one integer op."""

    pattern: QuantizerPattern
    match: Match
    ops: list[Operation]                # the float ops it claims, in program order
    root: Operation                     # produces the output

    @property
    def output(self) -> Value:
        return self.root.results[0]

    @property
    def inputs(self) -> list[Value]:
        if self.pattern.variadic:
            return list(self.match["op"].operands)
        return [self.match.values[n] for n in self.pattern.inputs if n in self.match.values]

    @property
    def label(self) -> str:
        op = self.match.ops.get("op", self.root)
        return op.label or self.root.label or op.name

    @property
    def activation(self) -> str:
        """The fused LiteRT activation: NONE, RELU, RELU6 or RELU_N1_TO_1."""
        act = self.match.ops.get("act")
        if act is None:
            return "NONE"
        if act.opdef is nn.RELU:
            return "RELU"
        lo, hi = act.attr("min"), act.attr("max")
        return {(0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1", (0.0, math.inf): "RELU"}.get((lo, hi), "NONE")


@dataclass
class Annotation:
    regions: list[Region]
    float_ops: list[tuple[Operation, str]] = field(default_factory=list)   # (op, why it stays float)

    def region_of(self, op: Operation) -> Region | None:
        return self._by_op.get(op)

    def __post_init__(self) -> None:
        self._by_op = {op: r for r in self.regions for op in r.ops}


# -- checks -------------------------------------------------------------------------------------

def _rank(v: Value) -> int | None:
    shape = getattr(v.type, "shape", None)
    return None if shape is None else len(shape)


def _clip_fusable(m: Match) -> str | None:
    act = m.ops.get("act")
    if act is not None and act.opdef is nn.CLIP:
        lo, hi = act.attr("min"), act.attr("max")
        if not lo <= 0.0 <= hi:
            return f"Clip({lo:g}, {hi:g}) excludes 0, which int8 activations must represent"
    return None


def _check_conv(m: Match) -> str | None:
    w = m.consts["w"]
    if w.ndim != 4:
        return f"only 2-D convolutions are quantized ({w.ndim - 2}-D found)"
    if _rank(m["x"]) != 4:
        return "the input must be a 4-D NCHW tensor"
    return _clip_fusable(m)


def _check_gemm(m: Match) -> str | None:
    op = m.ops["op"]
    if op.opdef is nn.GEMM:
        if op.attr("trans_a"):
            return "Gemm with transA=1 is not a fully-connected layer"
        if _rank(m["x"]) != 2:
            return "Gemm input must be 2-D"
        b = m.consts.get("b")
        w = m.consts["w"]
        channels = w.shape[0] if op.attr("trans_b") else w.shape[1]
        if b is not None and b.size not in (1, channels):
            return f"Gemm bias of shape {b.shape} is not per output channel"
    elif m.consts["w"].ndim != 2:
        return "MatMul weights must be a 2-D constant"
    return _clip_fusable(m)


def _check_binary(m: Match) -> str | None:
    if any(isinstance(m.values.get(n), Value) and _rank(m[n]) is None for n in ("a", "b")):
        return "operands must be ranked tensors"
    return _clip_fusable(m)


def _check_div(m: Match) -> str | None:
    b = np.asarray(m.consts["b"], np.float32)
    if b.size == 0 or not np.all(np.isfinite(b)) or np.any(b == 0):
        return "division by a constant that holds 0 or a non-finite value"
    if not np.all(np.isfinite(np.float32(1) / b)):
        return "the divisor's reciprocal overflows float32"
    return _check_binary(m)


def _check_pool(m: Match) -> str | None:
    op = m.ops["op"]
    if _rank(op.operands[0]) != 4:
        return "only 2-D pooling over NCHW tensors is quantized"
    if op.attr("ceil_mode"):
        return "ceil_mode=1 has no LiteRT equivalent"
    if any(d != 1 for d in (op.attr("dilations") or ())):
        return "dilated pooling has no LiteRT equivalent"
    if len(op.results) > 1:
        return "MaxPool indices output is not quantizable"
    if op.opdef is nn.AVERAGE_POOL and op.attr("count_include_pad") and any(op.attr("pads") or ()):
        return "AveragePool with count_include_pad=1 and padding differs from LiteRT (which skips padding)"
    return None


def _check_softmax(m: Match) -> str | None:
    op = m.ops["op"]
    rank = _rank(op.operands[0])
    if rank is None or op.attr("axis") not in (-1, rank - 1):
        return "only softmax over the last axis is quantized (LiteRT SOFTMAX)"
    return None


def _check_pad(m: Match) -> str | None:
    op = m.ops["op"]
    if op.attr("mode") != "constant" or op.attr("constant_value") != 0.0:
        return "only constant zero padding keeps the zero point as the pad value"
    return None


def _check_resize(m: Match) -> str | None:
    op = m.ops["op"]
    if op.attr("mode") != "linear":
        return f"Resize mode '{op.attr('mode')}' is not quantized (only nearest and linear)"
    if _rank(op.operands[0]) != 4:
        return "only 4-D NCHW Resize is quantized"
    if op.attr("coordinate_transformation_mode") not in ("half_pixel", "align_corners", "asymmetric"):
        return f"coordinate_transformation_mode '{op.attr('coordinate_transformation_mode')}' has no LiteRT equivalent"
    return None


# -- Resize nearest ------------------------------------------------------------------------------
# LiteRT's RESIZE_NEAREST_NEIGHBOR picks its source pixels by a float32 formula of its own
# (numerics.resize_nearest_indices); ONNX's by coordinate_transformation_mode and nearest_mode. The
# op is quantized when, at the model's static sizes, a LiteRT mode copies exactly the pixels
# ONNX copies: then the integer op computes the float op's function, bit for bit, on q.

# The LiteRT mode (align_corners, half_pixel_centers) an ONNX mode means, tried first:
#   asymmetric + floor                 floor(o / s)                         (False, False), PyTorch's nearest
#   half_pixel + round_prefer_ceil     floor((o + ½) / s - ½ + ½)           (False, True)
#   align_corners + round_prefer_ceil  floor(o · (in - 1)/(out - 1) + ½)    (True, False)
# with s = out / in. Other modes may still copy the same pixels at given sizes (nearest 2x
# upsampling is the same in most of them), so every LiteRT mode is tried after this one.
_NEAREST_AS_LITERT = {("asymmetric", "floor"): (False, False),
                      ("half_pixel", "round_prefer_ceil"): (False, True),
                      ("pytorch_half_pixel", "round_prefer_ceil"): (False, True),
                      ("align_corners", "round_prefer_ceil"): (True, False)}
# The modes TensorFlow's own op accepts (LiteRT also runs both flags together; no converter writes it)
LITERT_NEAREST_MODES = ((False, False), (False, True), (True, False))


def _litert_mode_name(flags: tuple[bool, bool]) -> str:
    return {(False, False): "default", (False, True): "half_pixel_centers", (True, False): "align_corners"}[flags]


def onnx_nearest_indices(n_in: int, n_out: int, scale: float, cmode: str, nearest_mode: str) -> np.ndarray:
    """The input index ONNX Resize (mode nearest) copies for each output index of one axis, as
    quantir's float kernel (``nn.resize``) computes it; an axis whose size and scale are unchanged
    is left alone there, so it is the identity here."""
    if n_out == n_in and scale == 1.0:
        return np.arange(n_out, dtype=np.int64)
    if cmode == "tf_crop_and_resize":
        raise ValueError("no nearest indices for tf_crop_and_resize without its region of interest")
    x = onnx_source_coords(n_in, n_out, scale, cmode)
    return np.clip(onnx_nearest(x, nearest_mode), 0, n_in - 1).astype(np.int64)


def litert_nearest_mode(op: Operation) -> tuple[bool, bool] | str:
    """The LiteRT ``(align_corners, half_pixel_centers)`` that copies the same pixels as the
    ONNX nearest Resize ``op`` at its static sizes, or why there is none."""
    if _rank(op.operands[0]) != 4:
        return "only 4-D NCHW Resize is quantized"
    cmode, nmode = op.attr("coordinate_transformation_mode"), op.attr("nearest_mode")
    if cmode == "tf_crop_and_resize":
        return "Resize with tf_crop_and_resize samples a region of interest; LiteRT has no such mode"
    if op.attr("antialias"):
        return "Resize with antialias has no LiteRT equivalent"
    shape = tuple(op.operands[0].type.shape)
    try:
        out, scales = resize_plan(shape, op.opdef.attr_values(op))
    except QuantirError as e:
        return f"Resize is not understood: {e.message}"
    if any(out[a] != shape[a] or scales[a] != 1.0 for a in (0, 1)):
        return f"only H and W may be resized (input {_dims(shape)}, output {_dims(out)})"
    if any(d is None for d in (*shape[2:], *out[2:])) or None in scales[2:]:
        return f"Resize nearest needs static spatial sizes (input {_dims(shape)}, output {_dims(out)})"
    if any(not 0 < d <= _MAX_NEAREST_AXIS for d in (*shape[2:], *out[2:])):
        # comparing the index rules costs memory per output row/column; an empty or absurd size is no image
        return (f"Resize nearest from {_dims(shape[2:])} to {_dims(out[2:])}: spatial sizes must be in "
                f"[1, {_MAX_NEAREST_AXIS}] to be compared with LiteRT's index rule")
    axes = [(shape[a], out[a], onnx_nearest_indices(shape[a], out[a], scales[a], cmode, nmode)) for a in (2, 3)]
    preferred = _NEAREST_AS_LITERT.get((cmode, nmode))
    candidates = [preferred] * (preferred is not None) + [f for f in LITERT_NEAREST_MODES if f != preferred]
    for flags in candidates:
        if all(np.array_equal(onnx, resize_nearest_indices(n_in, n_out, align_corners=flags[0],
                                                           half_pixel_centers=flags[1]))
               for n_in, n_out, onnx in axes):
            return flags
    flags = preferred or (False, False)
    for axis, (n_in, n_out, onnx) in zip(("row", "column"), axes):
        litert = resize_nearest_indices(n_in, n_out, align_corners=flags[0], half_pixel_centers=flags[1])
        bad = np.flatnonzero(onnx != litert)
        if bad.size:
            o = int(bad[0])
            return (f"Resize nearest ({cmode}, {nmode}) from {_dims(shape[2:])} to {_dims(out[2:])} copies input "
                    f"{axis} {onnx[o]} to output {axis} {o}, LiteRT RESIZE_NEAREST_NEIGHBOR "
                    f"({_litert_mode_name(flags)}) copies {axis} {litert[o]}; no LiteRT mode copies the same pixels")
    raise AssertionError("unreachable: the preferred mode differs on some axis")


_MAX_NEAREST_AXIS = 1 << 24


def _dims(shape) -> str:
    return "x".join("?" if d is None else str(d) for d in shape)


def _check_resize_nearest(m: Match) -> str | None:
    found = litert_nearest_mode(m.ops["op"])
    return found if isinstance(found, str) else None


def _check_mean(m: Match) -> str | None:
    op = m.ops["op"]
    if op.opdef is nn.REDUCE_MEAN and not op.attr("axes"):
        return "ReduceMean over all axes without explicit axes is not quantized"
    return None


# -- the table ----------------------------------------------------------------------------------

def _with_activation(core: Pat) -> Pat:
    """``core``, optionally followed by a fusable Relu/Clip (which must be its only user)."""
    return Pat.alt(Pat.op([nn.RELU, nn.CLIP], core.one_use(), name="act"), core)


_CONV = Pat.op(nn.CONV, Pat.any("x"), Pat.const("w"), Pat.const("b").optional(), name="op")
_GEMM = Pat.op(nn.GEMM, Pat.any("x"), Pat.const("w"), Pat.const("b").optional(), name="op")
_MATMUL = Pat.op(nn.MATMUL, Pat.any("x"), Pat.const("w"), name="op")
# MatMul + constant bias Add (PyTorch's Linear exported without Gemm), in either operand order
_MATMUL_BIAS = Pat.alt(Pat.op(nn.ADD, _MATMUL.one_use(), Pat.const("b"), name="bias_add"),
                       Pat.op(nn.ADD, Pat.const("b"), _MATMUL.one_use(), name="bias_add"))


def _binary(opdef) -> Pat:
    return Pat.op(opdef, Pat.any("a"), Pat.any("b"), name="op")


def _unary(opdef) -> Pat:
    return Pat.op(opdef, Pat.any("x"), name="op")


def _resize(nearest: bool) -> Pat:
    """A Resize of one family: nearest, or the others (whose check names why cubic stays float)."""
    def family(v: Value) -> bool:   # ``where`` sees any value, before the op kind is checked
        return isinstance(v, OpResult) and v.op.opdef is nn.RESIZE and (v.op.attr("mode") == "nearest") == nearest
    return Pat.op(nn.RESIZE, Pat.any("x"), name="op", where=family)


PATTERNS: tuple[QuantizerPattern, ...] = (
    QuantizerPattern("conv", "CONV_2D", _with_activation(_CONV), check=_check_conv,
                     doc="Conv (+bias) (+Relu/Relu6/Clip); depthwise when group == C_in"),
    QuantizerPattern("matmul_bias", "FULLY_CONNECTED", _with_activation(_MATMUL_BIAS), check=_check_gemm,
                     doc="MatMul with constant weights + constant bias Add (+activation)"),
    QuantizerPattern("gemm", "FULLY_CONNECTED", _with_activation(Pat.alt(_GEMM, _MATMUL)), check=_check_gemm,
                     doc="Gemm or MatMul with constant weights (+activation)"),
    QuantizerPattern("add", "ADD", _with_activation(_binary([nn.ADD, nn.VARIADIC["sum"]])), ("a", "b"),
                     check=_check_binary, doc="Add, or a Sum of two operands (older ResNets' residuals)"),
    QuantizerPattern("sub", "SUB", _with_activation(_binary(nn.SUB)), ("a", "b"), check=_check_binary),
    QuantizerPattern("mul", "MUL", _with_activation(_binary(nn.MUL)), ("a", "b"), check=_check_binary),
    QuantizerPattern("div", "MUL", _with_activation(Pat.op(nn.DIV, Pat.any("a"), Pat.const("b"), name="op")), ("a",),
                     check=_check_div, doc="Div by a constant (x / 255, x / std): MUL by its reciprocal"),
    QuantizerPattern("concat", "CONCATENATION", Pat.op(nn.CONCAT, name="op", any_operands=True), (),
                     variadic=True),
    QuantizerPattern("max_pool", "MAX_POOL_2D", _unary(nn.MAX_POOL), check=_check_pool),
    QuantizerPattern("average_pool", "AVERAGE_POOL_2D", _unary(nn.AVERAGE_POOL), check=_check_pool),
    QuantizerPattern("mean", "MEAN", Pat.alt(_unary(nn.GLOBAL_AVERAGE_POOL), _unary(nn.REDUCE_MEAN)),
                     check=_check_mean, doc="GlobalAveragePool and ReduceMean"),
    QuantizerPattern("pad", "PAD", _unary(nn.PAD), check=_check_pad),
    QuantizerPattern("resize", "RESIZE_BILINEAR", _resize(nearest=False), check=_check_resize,
                     doc="Resize linear (cubic is refused here)"),
    QuantizerPattern("resize_nearest", "RESIZE_NEAREST_NEIGHBOR", _resize(nearest=True),
                     check=_check_resize_nearest, doc="Resize nearest where LiteRT copies the same pixels"),
    QuantizerPattern("softmax", "SOFTMAX", _unary(nn.SOFTMAX), check=_check_softmax),
    QuantizerPattern("sigmoid", "LOGISTIC", _unary(nn.UNARY["sigmoid"])),
    QuantizerPattern("tanh", "TANH", _unary(nn.UNARY["tanh"])),
    QuantizerPattern("hard_swish", "HARD_SWISH", _unary(nn.UNARY["hard_swish"])),
    QuantizerPattern("leaky_relu", "LEAKY_RELU", _unary(nn.UNARY["leaky_relu"])),
    QuantizerPattern("relu", "RELU", Pat.op([nn.RELU, nn.CLIP], Pat.any("x"), name="act"), check=_clip_fusable,
                     doc="a Relu/Clip that no conv, FC or add absorbed"),
    QuantizerPattern("reshape", "RESHAPE", Pat.alt(_unary(nn.RESHAPE), _unary(nn.FLATTEN))),
    QuantizerPattern("transpose", "TRANSPOSE", _unary(nn.TRANSPOSE)),
    QuantizerPattern("squeeze", "SQUEEZE", Pat.alt(_unary(nn.SQUEEZE), _unary(nn.UNSQUEEZE))),
    QuantizerPattern("slice", "STRIDED_SLICE", _unary(nn.SLICE), doc="Slice (constant bounds): a copy"),
)



def _integer_result(ops: Sequence[Operation]) -> str | None:
    """Only float tensors are quantized: integer and bool arithmetic (token ids, masks, shape
    math, a model that is integer already) keeps its exact values."""
    for o in ops:
        for r in o.results:
            et = r.type.element_type if isinstance(r.type, TensorType) else r.type
            if not isinstance(et, FloatType):
                return f"its result is {et}, not float: integer arithmetic is kept as it is"
    return None


def annotate(fn: Function, config: Config, patterns: Sequence[QuantizerPattern] = PATTERNS) -> Annotation:
    """Assign float ops to patterns, outputs first, and say why the others stay float."""
    assert fn.body is not None
    claimed: dict[Operation, Region] = {}
    refused: dict[Operation, str] = {}
    regions: list[Region] = []
    enabled = [p for p in patterns if p.name not in config.exclude and p.kind not in config.exclude]
    position = {op: i for i, op in enumerate(fn.body.ops)}   # a region's ops in program order, without a rescan
    for op in reversed(fn.body.ops):
        if op in claimed or op.opdef in (arith.CONSTANT, func.RETURN) or not op.results:
            continue
        for p in enabled:
            m = match(p.pattern, op.results[0])
            if m is None:
                continue
            ops = [o for o in m.ops.values()]
            if any(o in claimed for o in ops):
                continue
            excluded = next((o for o in ops if config.excludes(o.label, o.name)), None)
            if excluded is not None:
                refused.setdefault(op, f"excluded by the configuration ({excluded.label or excluded.name})")
                continue
            reason = _integer_result(ops) or (p.check(m) if p.check else None)
            if reason is not None:
                refused.setdefault(op, reason)
                continue
            ordered = sorted(set(ops), key=position.__getitem__)
            region = Region(p, m, ordered, op)
            regions.append(region)
            for o in ops:
                claimed[o] = region
            break
    regions.reverse()
    float_ops = []
    for op in fn.body.ops:
        if op in claimed or op.opdef in (arith.CONSTANT, func.RETURN):
            continue
        float_ops.append((op, refused.get(op, f"no quantizer pattern for '{op.name}'")))
    return Annotation(regions, float_ops)
