"""The ``qnn`` dialect: integer ops on quantized tensors with LiteRT int8 semantics.

Layout is the float graph's (NCHW, ONNX); the TFLite backend converts to NHWC. Operands and
results are tensors of ``!quant.uniform`` types: int8 activations per tensor, int8 weights
symmetric per axis (dimension 0 of OIHW / [C_out, K]), int32 bias with scale
input_scale × weight_scale. Every parameter a kernel needs follows from these types exactly as
LiteRT's Prepare derives it (docs/numerics.md §1.7); ops whose requantization is one fixed-point
multiply per channel (conv, fully_connected, requantize) also carry the ``multiplier``/``shift``
pairs as attributes, so the integer graph shows its fixed-point constants, and the verifier
checks them against the types.

Shapes follow the float op each qnn op was lowered from: the verifier runs that ``nn`` op's
type rule on the operands with their element types made float and compares shapes.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ...errors import QuantirError, VerifyError
from ...numerics import (conv_multiplier, fully_connected_per_tensor_multiplier, quantize_multipliers,
                         requantize_multiplier)
from ...types import (FloatType, IntegerType, QuantizedType, TensorType, Type, UniformQuantizedPerAxisType,
                      UniformQuantizedType)
from ..core import Operation
from ..opdef import AttrKind, AttrSpec, OpDef, Operand, Result, Trait, TypeConstraint, register
from . import nn

F32 = FloatType("f32")
ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def _is_qtensor(t: Type) -> bool:
    return isinstance(t, TensorType) and isinstance(t.element_type, QuantizedType)


Q_TENSOR = TypeConstraint("tensor of quantized type values", _is_qtensor)


def scales_of(t: Type) -> np.ndarray:
    """Scales of a quantized tensor type as float64: shape () per tensor, (C,) per axis."""
    q = t.element_type if isinstance(t, TensorType) else t
    if isinstance(q, UniformQuantizedPerAxisType):
        return np.asarray(q.scales, np.float64)
    if isinstance(q, UniformQuantizedType):
        return np.float64(q.scale)
    raise QuantirError(f"'{t}' is not a uniform quantized type")


def zero_points_of(t: Type) -> np.ndarray:
    q = t.element_type if isinstance(t, TensorType) else t
    if isinstance(q, UniformQuantizedPerAxisType):
        return np.asarray(q.zero_points, np.int64)
    return np.int64(q.zero_point)


def _float_view(t: Type) -> Type:
    if isinstance(t, TensorType) and isinstance(t.element_type, QuantizedType):
        return t.clone(element_type=F32)
    return t


def _shape_checker(float_op: OpDef, attr_map: Mapping[str, str] | None = None, *, operands: int | None = None):
    """A verifier comparing result shapes with ``float_op``'s type rule on float views."""
    def check(op: Operation) -> str | None:
        types = [_float_view(v.type) for v in op.operands[:operands]]
        attrs = {k: s.default for k, s in float_op.attributes.items()}
        for name in float_op.attributes:
            source = (attr_map or {}).get(name, name)
            if source in op.attributes:
                attrs[name] = op.attr(source)
        try:
            expected = float_op.infer(types, attrs)
        except QuantirError as e:
            return f"operands do not fit: {e.message}"
        for i, (want, got) in enumerate(zip(expected, op.results)):
            if isinstance(want, TensorType) and isinstance(got.type, TensorType) and want.shape != got.type.shape:
                return (f"result #{i} shape {_shape(got.type)} does not match the shape {_shape(want)} "
                        f"computed from the operands")
        return None
    return check


def _shape(t: TensorType) -> str:
    return "x".join("?" if d is None else str(d) for d in t.shape) if t.shape is not None else "*"


def _check_multipliers(op: Operation, real: np.ndarray) -> str | None:
    """The stored (multiplier, shift) pairs equal QuantizeMultiplier of the real multipliers.

    Both attributes or neither: a backend reading one without the other would fail far from
    the text that caused it."""
    present = [name for name in _FIXED_POINT if name in op.attributes]
    if not present:
        return None
    if len(present) == 1:
        missing = next(name for name in _FIXED_POINT if name not in op.attributes)
        return f"has '{present[0]}' but no '{missing}': give both fixed-point attributes or neither"
    got_m = np.asarray(op.attr("multiplier"), np.int64)
    got_s = np.asarray(op.attr("shift"), np.int64)
    if got_m.shape != got_s.shape:
        return f"has {got_m.size} multipliers but {got_s.size} shifts: they come in pairs"
    want_m, want_s = quantize_multipliers(np.atleast_1d(real))
    if got_m.shape != want_m.shape:
        return (f"has {got_m.size} multiplier/shift pairs, expected {want_m.size} (one per output channel "
                f"of the weight's quantization)")
    if not (np.array_equal(got_m, want_m) and np.array_equal(got_s, want_s)):
        return "multiplier/shift do not match the operand and result scales"
    return None


def _per_tensor_io(x: Type, y: Type) -> None:
    """Convolutions and FC scale per output channel through the weight only: one input and one
    output scale (LiteRT's int8 spec); a per-axis activation from a file has no multiplier."""
    for what, t in (("input", x), ("output", y)):
        if np.ndim(scales_of(t)) != 0:
            raise VerifyError(f"a conv/fully-connected {what} must be quantized per tensor, got "
                              f"{np.size(scales_of(t))} scales")


def conv_real_multipliers(x: Type, w: Type, y: Type) -> np.ndarray:
    """double(s_in)·double(s_w[c]) / double(s_out), as LiteRT's conv Prepare."""
    _per_tensor_io(x, y)
    return np.atleast_1d(conv_multiplier(np.float32(scales_of(x)), np.float32(scales_of(w)),
                                         np.float32(scales_of(y))))


def fc_real_multipliers(x: Type, w: Type, y: Type) -> np.ndarray:
    """Per-channel FC uses the conv formula; per-tensor forms the product in float32."""
    _per_tensor_io(x, y)
    if np.ndim(scales_of(w)) == 1:
        return conv_real_multipliers(x, w, y)
    return np.atleast_1d(fully_connected_per_tensor_multiplier(
        np.float32(scales_of(x)), np.float32(scales_of(w)), np.float32(scales_of(y))))


def requantize_real_multiplier(x: Type, y: Type) -> np.ndarray:
    return np.atleast_1d(requantize_multiplier(np.float32(scales_of(x)), np.float32(scales_of(y))))


def _verify_conv(op: Operation) -> str | None:
    x, w = op.operands[0].type, op.operands[1].type
    if len(op.operands) == 3 and op.operands[2].type.element_type.storage_width != 32:
        return "bias must have 32-bit storage"
    return _shape_checker(nn.CONV)(op) or _check_multipliers(op, conv_real_multipliers(x, w, op.results[0].type))


def _verify_fc(op: Operation) -> str | None:
    x, w = op.operands[0].type, op.operands[1].type
    y = op.results[0].type
    if x.is_ranked and w.is_ranked:
        if w.rank != 2 or x.shape[-1] not in (None, w.shape[1]):
            return f"weights {_shape(w)} must be [C_out, K] with K = the input's last dim ({_shape(x)})"
        if y.is_ranked and y.shape != x.shape[:-1] + (w.shape[0],):
            return f"result shape {_shape(y)} must be the input's leading dims with {w.shape[0]} channels"
    return _check_multipliers(op, fc_real_multipliers(x, w, y))


def _verify_requantize(op: Operation) -> str | None:
    if op.operands[0].type.shape != op.results[0].type.shape:
        return "input and result shapes must match"
    return _check_multipliers(op, requantize_real_multiplier(op.operands[0].type, op.results[0].type))


def _same_shape(op: Operation) -> str | None:
    if op.operands[0].type.shape != op.results[0].type.shape:
        return f"result shape {_shape(op.results[0].type)} must equal the input's {_shape(op.operands[0].type)}"
    return None


_ACT = {"activation": AttrSpec(AttrKind.STRING, default="NONE", doc="fused clamp: " + ", ".join(ACTIVATIONS))}
_FIXED_POINT = {"multiplier": AttrSpec(AttrKind.INTS), "shift": AttrSpec(AttrKind.INTS)}
# auto_pad "SAME_UPPER" (no pads): TFLite's SAME on dynamic H, W, its pads computed from the size at run time
_WINDOW = {"strides": AttrSpec(AttrKind.INTS), "pads": AttrSpec(AttrKind.INTS), "dilations": AttrSpec(AttrKind.INTS),
           "auto_pad": AttrSpec(AttrKind.STRING)}


def _verify_activation(op: Operation) -> str | None:
    act = op.attr("activation")
    if act is not None and act not in ACTIVATIONS:
        return f"activation must be one of {', '.join(ACTIVATIONS)}, got '{act}'"
    return None


def _both(*checks):
    def run(op: Operation) -> str | None:
        for check in checks:
            message = check(op)
            if message:
                return message
        return None
    return run


def qdefine(name: str, operands: Sequence[str | Operand], attributes: Mapping[str, AttrSpec] | None = None,
            verifier=None, summary: str = "", same_scale: bool = False) -> OpDef:
    ops = tuple(o if isinstance(o, Operand) else Operand(o, Q_TENSOR) for o in operands)
    traits = {Trait.PURE} | ({Trait.SAME_SCALE} if same_scale else set())
    return register(OpDef(f"qnn.{name}", operands=ops, results=(Result("y", Q_TENSOR),),
                          attributes=dict(attributes or {}), traits=frozenset(traits),
                          verifier=verifier, summary=summary))


def _opt(name: str) -> Operand:
    return Operand(name, Q_TENSOR, optional=True)


CONV = qdefine("conv", ("x", "w", _opt("bias")), {**_WINDOW, "group": AttrSpec(AttrKind.INT, default=1),
                                                   **_ACT, **_FIXED_POINT},
               _both(_verify_activation, _verify_conv),
               "LiteRT CONV_2D / DEPTHWISE_CONV_2D (group == C_in) with per-channel requantization.")
FULLY_CONNECTED = qdefine("fully_connected", ("x", "w", _opt("bias")), {**_ACT, **_FIXED_POINT},
                          _both(_verify_activation, _verify_fc),
                          "LiteRT FULLY_CONNECTED over the last dim: y = x·wᵀ + bias, requantized.")
REQUANTIZE = qdefine("requantize", ("x",), dict(_FIXED_POINT), _verify_requantize,
                     "LiteRT QUANTIZE int8→int8: change scale/zero point with one fixed-point multiply.")
ADD = qdefine("add", ("lhs", "rhs"), dict(_ACT),
              _both(_verify_activation, _shape_checker(nn.ADD)), "LiteRT ADD (20-bit left shift, three multipliers).")
SUB = qdefine("sub", ("lhs", "rhs"), dict(_ACT),
              _both(_verify_activation, _shape_checker(nn.SUB)), "LiteRT SUB.")
MUL = qdefine("mul", ("lhs", "rhs"), dict(_ACT),
              _both(_verify_activation, _shape_checker(nn.MUL)), "LiteRT MUL.")
SQUARED_DIFFERENCE = qdefine("squared_difference", ("lhs", "rhs"), {}, _shape_checker(nn.SUB),
                             "LiteRT SQUARED_DIFFERENCE: (lhs - rhs)² (7-bit left shift, three multipliers; int8 "
                             "only, no fused activation).")
_POOL = {"kernel_shape": AttrSpec(AttrKind.INTS, required=True), "strides": AttrSpec(AttrKind.INTS),
         "pads": AttrSpec(AttrKind.INTS), "auto_pad": AttrSpec(AttrKind.STRING), **_ACT}
AVERAGE_POOL = qdefine("average_pool", ("x",), _POOL, _both(_verify_activation, _shape_checker(nn.AVERAGE_POOL)),
                       "LiteRT AVERAGE_POOL_2D: rounded mean over in-image taps; same scale in and out.",
                       same_scale=True)
MAX_POOL = qdefine("max_pool", ("x",), _POOL, _both(_verify_activation, _shape_checker(nn.MAX_POOL)),
                   "LiteRT MAX_POOL_2D; same scale in and out.", same_scale=True)
MEAN = qdefine("mean", ("x",), {"axes": AttrSpec(AttrKind.INTS, required=True),
                                "keepdims": AttrSpec(AttrKind.INT, default=1)},
               _shape_checker(nn.REDUCE_MEAN), "LiteRT MEAN (reference kernel: 1/N folded into the multiplier).")
CONCAT = qdefine("concat", (Operand("inputs_0", Q_TENSOR), Operand("inputs", Q_TENSOR, variadic=True)),
                 {"axis": AttrSpec(AttrKind.INT, required=True)}, _shape_checker(nn.CONCAT),
                 "LiteRT CONCATENATION: a copy; every input shares the result's parameters.", same_scale=True)
def _verify_pad_value(op: Operation) -> str | None:
    value, t = op.attr("value"), op.results[0].type
    q = t.element_type if isinstance(t, TensorType) else None
    if value is not None and isinstance(q, QuantizedType) and not q.storage_min <= int(value) <= q.storage_max:
        return f"pad value {value} is outside the storage range [{q.storage_min}, {q.storage_max}] of {q}"
    return None


PAD = qdefine("pad", ("x",), {"pads": AttrSpec(AttrKind.INTS, required=True), "value": AttrSpec(AttrKind.INT)},
              _both(_shape_checker(nn.PAD), _verify_pad_value),
              "LiteRT PAD (pads with the zero point, real 0) or, with ``value`` (a stored integer), PADV2 "
              "(a max pool's explicit pads are the storage minimum).", same_scale=True)
# Resize to ``sizes`` (H, W), or, with dynamic H, W, to the input's H, W times the integer
# ``factors`` computed at run time (a .tflite computes its size input with SHAPE, STRIDED_SLICE, MUL)
_RESIZE_TO = {"sizes": AttrSpec(AttrKind.INTS, default=()), "factors": AttrSpec(AttrKind.INTS, default=())}
RESIZE_BILINEAR = qdefine("resize_bilinear", ("x",), {**_RESIZE_TO,
                                                      "half_pixel_centers": AttrSpec(AttrKind.BOOL, default=False),
                                                      "align_corners": AttrSpec(AttrKind.BOOL, default=False)},
                          None, "LiteRT RESIZE_BILINEAR, integer path.", same_scale=True)


def resize_output_hw(op: Operation, hw: Sequence) -> tuple:
    """H, W of a qnn resize's result for an input of spatial size ``hw`` (None stays None)."""
    factors = tuple(op.attr("factors") or ())
    if factors:
        return tuple(None if n is None else int(n) * int(f) for n, f in zip(hw, factors))
    return tuple(int(n) for n in op.attr("sizes"))


def _verify_resize(op: Operation) -> str | None:
    x, y = op.operands[0].type, op.results[0].type
    sizes, factors = tuple(op.attr("sizes") or ()), tuple(op.attr("factors") or ())
    if bool(sizes) == bool(factors):
        return f"give exactly one of sizes and factors, got sizes {sizes} and factors {factors}"
    if len(sizes or factors) != 2 or min(sizes or factors) < 1:
        return f"{'sizes' if sizes else 'factors'} must be two positive values (H, W), got {sizes or factors}"
    if x.is_ranked and x.rank != 4:
        return f"the input must be 4-D NCHW, got {_shape(x)}"
    if x.is_ranked and y.is_ranked and y.shape != (*x.shape[:2], *resize_output_hw(op, x.shape[2:])):
        return f"result shape {_shape(y)} must be the input's N, C with sizes {sizes or factors}"
    return None


RESIZE_NEAREST = qdefine("resize_nearest", ("x",), {**_RESIZE_TO,
                                                    "align_corners": AttrSpec(AttrKind.BOOL, default=False),
                                                    "half_pixel_centers": AttrSpec(AttrKind.BOOL, default=False)},
                         _verify_resize, "LiteRT RESIZE_NEAREST_NEIGHBOR over H, W: copies stored integers "
                         "(see ``quantir.numerics.resize_nearest_indices``).", same_scale=True)
SOFTMAX = qdefine("softmax", ("x",), {"beta": AttrSpec(AttrKind.FLOAT, default=1.0)}, _same_shape,
                  "LiteRT SOFTMAX over the last dim; output (1/256, -128).")
LOGISTIC = qdefine("logistic", ("x",), {}, _same_shape, "LiteRT LOGISTIC (256-entry table); output (1/256, -128).")
TANH = qdefine("tanh", ("x",), {}, _same_shape, "LiteRT TANH (256-entry table); output (1/128, 0).")
HARD_SWISH = qdefine("hard_swish", ("x",), {}, _same_shape, "LiteRT HARD_SWISH (int16 fixed point).")
GELU = qdefine("gelu", ("x",), {"approximate": AttrSpec(AttrKind.BOOL, default=False)}, _same_shape,
               "LiteRT GELU (256-entry table of the exact erfc form, or the tanh form when ``approximate``).")
LEAKY_RELU = qdefine("leaky_relu", ("x",), {"alpha": AttrSpec(AttrKind.FLOAT, default=0.01)}, _same_shape,
                     "LiteRT LEAKY_RELU: two multipliers, identity and alpha.")
CLAMP = qdefine("clamp", ("x",), dict(_ACT), _both(_verify_activation, _same_shape),
                "LiteRT RELU / RELU6 / RELU_N1_TO_1 as a standalone op (rescales if parameters differ).")

# Ops that only move data work unchanged on quantized tensors: the nn definitions accept any
# element type, and their kernels copy stored integers.
DATA_MOVEMENT: frozenset[OpDef] = frozenset({nn.RESHAPE, nn.FLATTEN, nn.TRANSPOSE, nn.SQUEEZE, nn.UNSQUEEZE,
                                             nn.SLICE, nn.GATHER, nn.SPLIT, nn.DEPTH_TO_SPACE,
                                             nn.SPACE_TO_DEPTH, nn.IDENTITY, nn.DYNAMIC_RESHAPE})


def _space_batch_checker(pairs_name: str, to_batch: bool):
    """SPACE_TO_BATCH_ND (``to_batch``) / BATCH_TO_SPACE_ND on NCHW or NCH: the result shape from
    ``block_shape`` and the flattened ``[M, 2]`` (begin, end) pairs per spatial axis."""
    def check(op: Operation) -> str | None:
        x, y = op.operands[0].type, op.results[0].type
        block, pairs = [int(b) for b in op.attr("block_shape")], [int(p) for p in op.attr(pairs_name)]
        if not x.is_ranked or not y.is_ranked:
            return None
        if x.rank not in (3, 4) or len(block) != x.rank - 2:
            return f"the input must be NCH or NCHW with one block size per spatial axis, got {_shape(x)} and {block}"
        if min(block) < 1 or len(pairs) != 2 * len(block) or min(pairs) < 0:
            return f"block_shape {block} must be positive and {pairs_name} {pairs} two non-negative values per axis"
        total = int(np.prod(block))
        n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
        out = []
        for i, (d, b) in enumerate(zip(spatial, block)):
            lo, hi = pairs[2 * i], pairs[2 * i + 1]
            if d is None:
                out.append(None)
            elif to_batch:
                if (d + lo + hi) % b:
                    return f"padded spatial size {d + lo + hi} (axis {i + 2}) is not a multiple of its block {b}"
                out.append((d + lo + hi) // b)
            else:
                if lo + hi > d * b:
                    return f"crops {lo} + {hi} exceed the spatial size {d * b} (axis {i + 2})"
                out.append(d * b - lo - hi)
        if n is None:
            batch = None
        elif to_batch:
            batch = n * total
        elif n % total:
            return f"batch {n} is not a multiple of the block product {total}"
        else:
            batch = n // total
        if y.shape != (batch, c, *out):
            return f"result shape {_shape(y)} does not match the shape {_shape(x.clone(shape=(batch, c, *out)))} " \
                   "computed from the operand"
        return None
    return check


_BLOCK = {"block_shape": AttrSpec(AttrKind.INTS, required=True)}
SPACE_TO_BATCH_ND = qdefine(
    "space_to_batch_nd", ("x",), {**_BLOCK, "paddings": AttrSpec(AttrKind.INTS, required=True)},
    _space_batch_checker("paddings", True),
    "LiteRT SPACE_TO_BATCH_ND on NCHW (or NCH): pad with the zero point, fold each block phase into the batch; "
    "``paddings`` is TFLite's [M, 2] tensor flattened (begin, end per spatial axis).", same_scale=True)
BATCH_TO_SPACE_ND = qdefine(
    "batch_to_space_nd", ("x",), {**_BLOCK, "crops": AttrSpec(AttrKind.INTS, required=True)},
    _space_batch_checker("crops", False),
    "LiteRT BATCH_TO_SPACE_ND on NCHW (or NCH): unfold the batch into block phases, then crop; ``crops`` is "
    "TFLite's [M, 2] tensor flattened.", same_scale=True)

REDUCE_SUM = qdefine("reduce_sum", ("x",), {"axes": AttrSpec(AttrKind.INTS, required=True),
                                            "keepdims": AttrSpec(AttrKind.INT, default=1)},
                     _shape_checker(nn.REDUCE["sum"]),
                     "LiteRT SUM over ``axes``, rescaled to the output's parameters (its float32 path: "
                     "quantize/ops/reduce.py says why).")
L2_NORMALIZATION = qdefine("l2_normalization", ("x",), {}, _same_shape,
                           "LiteRT L2_NORMALIZATION over the last dim; output (1/128, 0).")
LOG_SOFTMAX = qdefine("log_softmax", ("x",), {}, _same_shape,
                      "LiteRT LOG_SOFTMAX over the last dim (fixed point); output (16/256, 127).")
RSQRT = qdefine("rsqrt", ("x",), {}, _same_shape,
                "LiteRT RSQRT: 1/sqrt of a non-negative int8 value (integer inverse square root, one multiplier).")


def _verify_batch_matmul(op: Operation) -> str | None:
    a, b, y = op.operands[0].type, op.operands[1].type, op.results[0].type
    if not (a.is_ranked and b.is_ranked):
        return None
    if a.rank < 2 or b.rank < 2:
        return f"both operands must have rank 2 or more, got {_shape(a)} and {_shape(b)}"
    k_a = a.shape[-2] if op.attr("adj_x") else a.shape[-1]
    k_b = b.shape[-1] if op.attr("adj_y") else b.shape[-2]
    if None not in (k_a, k_b) and k_a != k_b:
        return f"the contracted dims differ: {k_a} ({_shape(a)}, adj_x={bool(op.attr('adj_x'))}) and {k_b} " \
               f"({_shape(b)}, adj_y={bool(op.attr('adj_y'))})"
    if y.is_ranked and y.rank != max(a.rank, b.rank):
        return f"result rank {y.rank} must be the operands' largest rank {max(a.rank, b.rank)}"
    return None


BATCH_MATMUL = qdefine("batch_matmul", ("lhs", "rhs"), {"adj_x": AttrSpec(AttrKind.BOOL, default=False),
                                                        "adj_y": AttrSpec(AttrKind.BOOL, default=False)},
                       _verify_batch_matmul,
                       "LiteRT BATCH_MATMUL of two int8 activations (per tensor), int32 accumulation, one "
                       "requantizing multiplier; ``adj_x``/``adj_y`` transpose the last two dims of an operand.")



# -- ops whose result is not quantized: int8 inputs, a bool or index result ----------------------

_BOOL_TENSOR = TypeConstraint("tensor of i1 values",
                              lambda t: isinstance(t, TensorType) and t.element_type == IntegerType(1))
_INDEX_TENSOR = TypeConstraint("tensor of i32 or i64 values",
                               lambda t: isinstance(t, TensorType) and t.element_type in (IntegerType(32),
                                                                                          IntegerType(64)))


def _compare(name: str, float_op: OpDef, summary: str) -> OpDef:
    return register(OpDef(f"qnn.{name}", operands=(Operand("lhs", Q_TENSOR), Operand("rhs", Q_TENSOR)),
                          results=(Result("y", _BOOL_TENSOR),), traits=frozenset({Trait.PURE}),
                          verifier=_shape_checker(float_op), summary=summary))


_COMPARE_DOC = ("LiteRT {}: each input rescaled to a fixed-point real value (left shift 8, its scale as the "
                "multiplier), then compared; bool result.")
EQUAL = _compare("equal", nn.COMPARE["equal"], _COMPARE_DOC.format("EQUAL"))
NOT_EQUAL = _compare("not_equal", nn.COMPARE["equal"], _COMPARE_DOC.format("NOT_EQUAL"))
LESS = _compare("less", nn.COMPARE["less"], _COMPARE_DOC.format("LESS"))
LESS_EQUAL = _compare("less_equal", nn.COMPARE["less_or_equal"], _COMPARE_DOC.format("LESS_EQUAL"))
GREATER = _compare("greater", nn.COMPARE["greater"], _COMPARE_DOC.format("GREATER"))
GREATER_EQUAL = _compare("greater_equal", nn.COMPARE["greater_or_equal"], _COMPARE_DOC.format("GREATER_EQUAL"))
MAXIMUM = qdefine("maximum", ("lhs", "rhs"), {}, _shape_checker(nn.VARIADIC["max"]),
                  "LiteRT MAXIMUM: the larger stored value; both inputs share the result's parameters.",
                  same_scale=True)
MINIMUM = qdefine("minimum", ("lhs", "rhs"), {}, _shape_checker(nn.VARIADIC["min"]),
                  "LiteRT MINIMUM: the smaller stored value; both inputs share the result's parameters.",
                  same_scale=True)


def _verify_arg_max(op: Operation) -> str | None:
    x, y = op.operands[0].type, op.results[0].type
    if not x.is_ranked or not y.is_ranked:
        return None
    axis = op.attr("axis")
    if not -x.rank <= axis < x.rank:
        return f"axis {axis} is out of range for the input {_shape(x)}"
    axis %= x.rank
    want = x.shape[:axis] + x.shape[axis + 1:]
    if y.shape != want:
        return f"result shape {_shape(y)} must be the input's {_shape(x)} without axis {axis}"
    return None


ARG_MAX = register(OpDef("qnn.arg_max", operands=(Operand("x", Q_TENSOR),), results=(Result("y", _INDEX_TENSOR),),
                         attributes={"axis": AttrSpec(AttrKind.INT, required=True)}, traits=frozenset({Trait.PURE}),
                         verifier=_verify_arg_max,
                         summary="LiteRT ARG_MAX: the first index of the largest stored value along ``axis``, which "
                                 "it removes; the result's type (i32 or i64) is ArgMaxOptions.output_type."))


def _verify_transpose_conv(op: Operation) -> str | None:
    """Weights ``[C_out, C_in, KH, KW]``; the output is ``stride·(in − 1) + kernel + adjust`` per axis."""
    x, w, y = op.operands[0].type, op.operands[1].type, op.results[0].type
    if len(op.operands) == 3 and op.operands[2].type.element_type.storage_width != 32:
        return "bias must have 32-bit storage"
    if op.attr("padding") not in ("SAME", "VALID"):
        return f"padding must be SAME or VALID, got {op.attr('padding')!r}"
    if x.is_ranked and w.is_ranked and y.is_ranked:
        if x.rank != 4 or w.rank != 4 or y.rank != 4:
            return "input, weights and result must be 4-D (NCHW, [C_out, C_in, KH, KW])"
        if x.shape[1] not in (None, w.shape[1]):
            return f"the input has {x.shape[1]} channels, the weights {_shape(w)} expect {w.shape[1]}"
        strides, adjust = op.attr("strides"), op.attr("adjust")
        want = (x.shape[0], w.shape[0], *(None if i is None else s * (i - 1) + k + a
                                          for i, k, s, a in zip(x.shape[2:], w.shape[2:], strides, adjust)))
        if y.shape != want:
            return f"result shape {_shape(y)} must be {'x'.join('?' if d is None else str(d) for d in want)}"
    return _check_multipliers(op, conv_real_multipliers(x, w, y))


TRANSPOSE_CONV = qdefine(
    "transpose_conv", ("x", "w", _opt("bias")),
    {"strides": AttrSpec(AttrKind.INTS, required=True), "adjust": AttrSpec(AttrKind.INTS, required=True),
     "padding": AttrSpec(AttrKind.STRING, default="VALID"), **_ACT, **_FIXED_POINT},
    _both(_verify_activation, _verify_transpose_conv),
    "LiteRT TRANSPOSE_CONV, per-channel weights [C_out, C_in, KH, KW]; output size stride·(in − 1) + kernel "
    "+ adjust, begin pads from TFLite's SAME/VALID rule on that output size.")


# -- recurrent ------------------------------------------------------------------------------------

LSTM_GATES = ("input", "forget", "cell", "output")   # LiteRT's order (ONNX stacks i, o, f, c)


def _verify_unidirectional_lstm(op: Operation) -> str | None:
    """x ``[T, B, I]``; w ``[4, H, I]``, r ``[4, H, H]`` int8, one symmetric scale per gate (axis 0);
    bias ``[4, H]`` int32; y ``[T, B, H]`` int8 per tensor; the cell state's scale is a power of two."""
    x, w, r, b, y = (v.type for v in (*op.operands, op.results[0]))
    for what, t, width in (("weights", w, 8), ("recurrent weights", r, 8), ("bias", b, 32)):
        q = t.element_type
        if q.storage_width != width:
            return f"{what} must have {width}-bit storage"
        if not isinstance(q, UniformQuantizedPerAxisType) or q.quantized_dimension != 0 or len(q.scales) != 4:
            return f"{what} must be quantized per gate: four scales along axis 0 ({', '.join(LSTM_GATES)})"
        if any(zp != 0 for zp in (q.zero_points or ())):
            return f"{what} must be symmetric (zero point 0)"
    for what, t in (("input", x), ("result", y)):
        if np.ndim(scales_of(t)) != 0 or t.element_type.storage_width != 8:
            return f"the {what} must be int8 quantized per tensor"
    if not all(t.is_ranked for t in (x, w, r, b, y)):
        return None
    if x.rank != 3 or w.rank != 3 or r.rank != 3 or b.rank != 2 or y.rank != 3:
        return "x [T, B, I], w [4, H, I], r [4, H, H], bias [4, H] and y [T, B, H] have ranks 3, 3, 3, 2, 3"
    hidden = w.shape[1]
    if w.shape[0] != 4 or None not in (w.shape[2], x.shape[2]) and w.shape[2] != x.shape[2]:
        return f"weights {_shape(w)} must be [4, H, I] with I = the input's last dim ({_shape(x)})"
    if r.shape != (4, hidden, hidden) or b.shape != (4, hidden):
        return f"recurrent weights {_shape(r)} and bias {_shape(b)} must be [4, {hidden}, {hidden}] and [4, {hidden}]"
    if y.shape != (x.shape[0], x.shape[1], hidden):
        return f"result shape {_shape(y)} must be the input's [T, B] with {hidden} hidden units"
    if not -20 <= op.attr("cell_scale_log2") <= 0:
        return f"cell_scale_log2 {op.attr('cell_scale_log2')} is outside [-20, 0]"
    return None


UNIDIRECTIONAL_LSTM = qdefine(
    "unidirectional_lstm", ("x", "w", "r", "bias"),
    {"cell_scale_log2": AttrSpec(AttrKind.INT, required=True, doc="the int16 cell state's scale is 2**this"),
     "reverse": AttrSpec(AttrKind.BOOL, default=False, doc="run the sequence from its last step"),
     "cell_clip": AttrSpec(AttrKind.FLOAT, default=0.0, doc="bound of the cell state (0: none)")},
    _verify_unidirectional_lstm,
    "LiteRT UNIDIRECTIONAL_SEQUENCE_LSTM, full integer (8x8_16): time-major int8 input, int8 weights with one "
    "scale per gate (input, forget, cell, output), int32 bias, Q3.12 gates, an int16 cell state at scale "
    "2**cell_scale_log2, zero initial states; the hidden state and the result share the result's parameters.")
