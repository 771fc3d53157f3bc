"""Export rules for the float32 ``nn`` ops: what a dynamic-range model holds around its hybrid ops
(and an int8 model around the ops left float), written as LiteRT's float32 builtins.

======================  ======================================================================
IR (float32)            TFLite
======================  ======================================================================
nn.add / sub / mul /    ADD / SUB / MUL / DIV (numpy broadcasting, as ONNX's); in NHWC when both
div                     operands are 4-D and one already lives there
nn.sqrt, exp, log, abs  SQRT, EXP, LOG, ABS, NEG, RELU, LOGISTIC, TANH, GELU, HARD_SWISH,
neg, relu, sigmoid, ..  LEAKY_RELU; nn.reciprocal: DIV of the constant 1 by the input (RSQRT
                        when it inverts an nn.sqrt); nn.hard_sigmoid: MUL, ADD, RELU_0_TO_1
x·½·(1 + erf(x/√2))     GELU (approximate=False), the tanh form GELU (approximate=True): the
                        quantizer's own GELU patterns recognize the chain
nn.clip                 RELU / RELU6 / RELU_N1_TO_1 when its bounds are theirs, else MAXIMUM
                        and/or MINIMUM with constant bounds
nn.reduce_mean / sum /  MEAN / SUM / REDUCE_MAX / REDUCE_MIN; nn.reduce_l2: SQRT(SUM(SQUARE(x)))
max / min, reduce_l2
nn.softmax              SOFTMAX (last axis, beta 1)
nn.matmul               FULLY_CONNECTED (weights [N, K]) when the right operand is a 2-D
                        constant, else BATCH_MATMUL; nn.gemm (A not transposed, B and C
                        constant): FULLY_CONNECTED with alpha and beta folded in; a constant
                        [N] bias added after it is the FULLY_CONNECTED's bias; a weight-only
                        B (or conv filter): DEQUANTIZE of its int8/int4 integers in the
                        reader's layout (:mod:`.export_weight_only`)
nn.expand               BROADCAST_TO to a static result; with dynamic dims, MUL by a constant
                        of ones of the attribute's shape (x·1 is x: exact, and the broadcast
                        follows the input's run-time dims)
nn.pad                 PAD (constant 0) / PADV2 (another constant)
nn.prelu                PRELU (slope broadcast in the layout used)
nn.batch_normalization  MUL by scale/√(var + ε), ADD b − mean·that (constants folded)
nn.layer_normalization  over the last axis, as TF's converter decomposes it: MEAN,
                        SQUARED_DIFFERENCE, MEAN, ADD ε, RSQRT, MUL, MUL γ, ADD β
nn.equal, less, ...     EQUAL / LESS / LESS_EQUAL / GREATER / GREATER_EQUAL (bool result);
nn.where, tile, split   SELECT_V2, TILE, SPLIT_V; nn.floor: FLOOR; nn.arg_max: ARG_MAX
nn.conv (2-D)           CONV_2D (OHWI) or DEPTHWISE_CONV_2D, SAME/VALID or an explicit PAD,
                        a following RELU / RELU6 / RELU_N1_TO_1 fused
nn.resize (H, W)        RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR in the LiteRT mode that samples
                        as ONNX's (the quantizer's Resize rules decide which)
nn.max_pool / average_  MAX_POOL_2D / AVERAGE_POOL_2D (SAME or VALID only); the global pools:
pool, global pools      MEAN / REDUCE_MAX over H, W
======================  ======================================================================

The movement ops (reshape, transpose, slice, gather, concat, cast, shape, range...) have one rule
for every element type, in :mod:`.export`. An op with none of these forms raises
``UnsupportedOpError`` naming it.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from quantir.backends.tflite.export import (NHWC_PERM, OP, Form, _compare, _dtype, _Exporter, _padding, _resize_size,
                                            _TO_NHWC_AXIS, _what, mean, softmax)
from quantir.backends.tflite.schema import TensorType as TFLiteTensorType
from quantir.backends.tflite.schema import (ActivationFunctionType, AddOptions, ArgMaxOptions, BatchMatMulOptions,
                                            Conv2DOptions, DepthwiseConv2DOptions, DivOptions, EqualOptions,
                                            FullyConnectedOptions, GeluOptions, GreaterEqualOptions, GreaterOptions,
                                            LeakyReluOptions, LessEqualOptions, LessOptions, MaximumMinimumOptions,
                                            MulOptions, Padding, Pool2DOptions, ReducerOptions, ResizeBilinearOptions,
                                            ResizeNearestNeighborOptions, SplitVOptions, SubOptions)
from quantir.backends.tflite.export_weight_only import dequantized, weight_chain
from quantir.errors import UnsupportedOpError
from quantir.ir import Function, Operation, Value
from quantir.ir.dialects import nn, quant
from quantir.ir.dialects.nn_index import resize_plan
from quantir.rewrite import Match, Pat, match
from quantir.types import FloatType, IntegerType, TensorType

__all__ = ["FLOAT_RULES", "fusions"]

Rule = Callable[[_Exporter, Operation], None]
F32 = FloatType("f32")


def _f32(value: float) -> np.ndarray:
    return np.asarray(value, np.float32)


def _scratch(ex: _Exporter, dims, name: str, dtype=np.float32) -> int:
    """A tensor of ``dims`` (None: dynamic) for an intermediate no IR value holds."""
    signature = tuple(-1 if d is None else d for d in dims) if None in dims else ()
    return ex.b.add_tensor(ex._name(name), tuple(1 if d is None else d for d in dims), dtype,
                           shape_signature=signature)


# -- element-wise -----------------------------------------------------------------------------------

def _binary(code, options_type=None) -> Rule:
    def rule(ex: _Exporter, op: Operation) -> None:
        if len(op.operands) != 2:
            raise UnsupportedOpError(f"{_what(op)} of {len(op.operands)} operands; {code.name} takes two")
        a, b = op.operands
        form = ex.prefer(a, b)   # NHWC only when both are 4-D: broadcasting holds in either layout then
        ex.emit(code, op, [ex.get(a, form), ex.get(b, form)], form, options_type() if options_type else None)
    return rule


def _unary(code, options: Callable[[Operation], object] | None = None) -> Rule:
    def rule(ex: _Exporter, op: Operation) -> None:
        form = ex.prefer(op.operands[0])
        ex.emit(code, op, [ex.get(op.operands[0], form)], form, options(op) if options else None)
    return rule


def reciprocal(ex: _Exporter, op: Operation) -> None:
    """LiteRT has no reciprocal: DIV of a scalar 1 (correctly rounded, as 1/x is)."""
    x = op.operands[0]
    form = ex.prefer(x)
    one = ex.constant(_f32(1.0), f"{op.results[0].name_hint}/one")
    ex.emit(OP.DIV, op, [one, ex.get(x, form)], form)


_CLAMPS = {(0.0, math.inf): OP.RELU, (0.0, 6.0): OP.RELU6, (-1.0, 1.0): OP.RELU_N1_TO_1}


def clip(ex: _Exporter, op: Operation) -> None:
    """A standard clamp as its own builtin; other bounds as MAXIMUM then MINIMUM with constants."""
    x, y = op.operands[0], op.results[0]
    if y.type.element_type != F32:
        raise UnsupportedOpError(f"{_what(op)}: a clip of {y.type} is written only for float32")
    lo, hi = float(op.attr("min")), float(op.attr("max"))
    form = ex.prefer(x)
    code = _CLAMPS.get((lo, hi))
    if code is not None:
        ex.emit(code, op, [ex.get(x, form)], form)
        return
    src = ex.get(x, form)
    steps = [(OP.MAXIMUM, lo, "min")] if lo > -math.inf else []
    steps += [(OP.MINIMUM, hi, "max")] if hi < math.inf else []
    if not steps:   # an unbounded clip is the identity
        ex.forms.map(y, {form: src})
        return
    for k, (code, bound, what) in enumerate(steps):
        bound_t = ex.constant(_f32(bound), f"{y.name_hint}/{what}")
        if k == len(steps) - 1:
            ex.emit(code, op, [src, bound_t], form, MaximumMinimumOptions())
        else:
            mid = _scratch(ex, [y.type.shape[i] for i in NHWC_PERM] if form is Form.NHWC else y.type.shape,
                           f"{y.name_hint}/lower_bounded")
            ex.b.add_operator(code, [src, bound_t], [mid], MaximumMinimumOptions())
            src = mid


def hard_sigmoid(ex: _Exporter, op: Operation) -> None:
    """max(0, min(1, α·x + β)): LiteRT has no builtin for it; MUL, ADD, then RELU_0_TO_1."""
    x, y = op.operands[0], op.results[0]
    form = ex.prefer(x)
    dims = [y.type.shape[i] for i in NHWC_PERM] if form is Form.NHWC else y.type.shape
    name = y.name_hint or "hard_sigmoid"
    scaled = _scratch(ex, dims, f"{name}/scaled")
    ex.b.add_operator(OP.MUL, [ex.get(x, form), ex.constant(_f32(op.attr("alpha")), f"{name}/alpha")], [scaled],
                      MulOptions())
    shifted = _scratch(ex, dims, f"{name}/shifted")
    ex.b.add_operator(OP.ADD, [scaled, ex.constant(_f32(op.attr("beta")), f"{name}/beta")], [shifted], AddOptions())
    ex.emit(OP.RELU_0_TO_1, op, [shifted], form)


def _per_channel(ex: _Exporter, values: np.ndarray, x: Value, form: Form, name: str) -> int:
    """A constant that broadcasts against ``x`` as numpy would, in ``form`` (leading ones first)."""
    rank = len(x.type.shape)
    values = np.asarray(values, np.float32)
    values = values.reshape((1,) * (rank - values.ndim) + values.shape)
    return ex.constant(values.transpose(NHWC_PERM) if form is Form.NHWC else values, name)


def prelu(ex: _Exporter, op: Operation) -> None:
    """PRELU with a constant slope, broadcast as ONNX's (unidirectionally) in either layout."""
    x, slope = op.operands
    values = quant.stored_constant(slope)
    if values is None:
        form = Form.ASIS
        alpha = ex.get(slope, form)
    else:
        form = ex.prefer(x)
        alpha = _per_channel(ex, values, x, form, f"{op.results[0].name_hint or 'prelu'}/alpha")
    ex.emit(OP.PRELU, op, [ex.get(x, form), alpha], form)


def batch_normalization(ex: _Exporter, op: Operation) -> None:
    """Inference BatchNorm (not folded into a conv) as MUL by scale/√(var + ε) and ADD of
    b − mean·that, per channel (axis 1), with the constants folded in float64."""
    x, y = op.operands[0], op.results[0]
    arrays = [quant.stored_constant(v) for v in op.operands[1:]]
    if any(a is None for a in arrays):
        raise UnsupportedOpError(f"{_what(op)}: only a BatchNorm with constant parameters is exported")
    scale, b, mu, var = (np.asarray(a, np.float64) for a in arrays)
    k = scale / np.sqrt(var + float(op.attr("epsilon")))
    channels = (-1,) + (1,) * (len(x.type.shape) - 2)
    form = ex.prefer(x)
    name = y.name_hint or "batch_norm"
    scaled = _scratch(ex, [y.type.shape[i] for i in NHWC_PERM] if form is Form.NHWC else y.type.shape,
                      f"{name}/scaled")
    ex.b.add_operator(OP.MUL, [ex.get(x, form), _per_channel(ex, k.reshape(channels), x, form, f"{name}/multiplier")],
                      [scaled], MulOptions())
    ex.emit(OP.ADD, op, [scaled, _per_channel(ex, (b - mu * k).reshape(channels), x, form, f"{name}/offset")], form,
            AddOptions())


# -- GELU written out -------------------------------------------------------------------------------

def _gelu_patterns():
    """The quantizer's GELU chains (erf and tanh forms) with their constant checks: one definition of
    what counts as GELU for both the int8 lookup table and the float builtin."""
    from quantir.quantize.ops.activation import GELU
    return [(p, p.name == "gelu_tanh") for p in GELU.patterns if p.name in ("gelu_erf", "gelu_tanh")]


# what TF's converter writes as one builtin: a matmul by constant weights plus a constant bias (one
# FULLY_CONNECTED with its bias), 1 / sqrt(x) (RSQRT), a convolution and its RELU (its fused activation)
_MATMUL = Pat.op(nn.MATMUL, Pat.any("x"), Pat.const("w"), name="matmul").one_use()
_FC_BIAS = Pat.alt(Pat.op(nn.ADD, _MATMUL, Pat.const("b"), name="op"),
                   Pat.op(nn.ADD, Pat.const("b"), _MATMUL, name="op"))
# the same with a weight-only B (quant.dcast of int8/int4 integers): FULLY_CONNECTED of its DEQUANTIZE + the bias
_MATMUL_ANY = Pat.op(nn.MATMUL, Pat.any("x"), Pat.any("w"), name="matmul").one_use()
_FC_BIAS_DEQUANTIZED = Pat.alt(Pat.op(nn.ADD, _MATMUL_ANY, Pat.const("b"), name="op"),
                               Pat.op(nn.ADD, Pat.const("b"), _MATMUL_ANY, name="op"))
_CONV_ACT = Pat.op((nn.UNARY["relu"], nn.CLIP), Pat.op(nn.CONV, name="conv", any_operands=True).one_use(),
                   name="op")
_RSQRT = Pat.op(nn.UNARY["reciprocal"], Pat.op(nn.UNARY["sqrt"], Pat.any("x"), name="sqrt").one_use(), name="op")


def _fc_bias(m: Match) -> Rule | None:
    x, w, b = m["x"], m.consts["w"], m.consts["b"]
    n = np.shape(w)[-1]
    if np.ndim(w) != 2 or x.type.shape is None or len(x.type.shape) < 2 or np.size(b) != n or \
            any(d != 1 for d in np.shape(b)[:-1]):
        return None   # a bias that broadcasts along another axis is no FULLY_CONNECTED bias
    weights, bias = np.asarray(w).T, np.asarray(b, np.float32).reshape(n)
    return lambda ex, op: _fc(ex, op, x, weights, bias)


def _fc_bias_dequantized(m: Match) -> Rule | None:
    x, w, b = m["x"], m["w"], m.consts["b"]
    n = w.type.shape[-1] if isinstance(w.type, TensorType) and w.type.shape else None
    if weight_chain(w) is None or len(w.type.shape) != 2 or x.type.shape is None or len(x.type.shape) < 2 or \
            np.size(b) != n or any(d != 1 for d in np.shape(b)[:-1]):
        return None
    bias = np.asarray(b, np.float32).reshape(n)
    return lambda ex, op: _fc(ex, op, x, dequantized(ex, w, (1, 0)), bias)


def _conv_act(m: Match) -> Rule | None:
    """A convolution's RELU / RELU6 / RELU_N1_TO_1 as its fused activation (LiteRT clamps in the kernel)."""
    act = m.ops["op"]
    return None if _clamp_code(act) is None else (lambda ex, op: conv(ex, m.ops["conv"], act))


def _rsqrt(m: Match) -> Rule:
    return _unary_of(OP.RSQRT, m["x"])


_CHAIN_ENDS = (nn.MUL, nn.ADD, nn.UNARY["reciprocal"], nn.UNARY["relu"], nn.CLIP)


def fusions(fn: Function) -> tuple[set[Operation], dict[Operation, Rule]]:
    """Float chains one builtin computes — GELU written out (the quantizer's own patterns), matmul +
    bias, 1 / sqrt, a conv and its clamp — as the ops they absorb (skipped) and, per chain's last op,
    its rule."""
    absorbed: set[Operation] = set()
    fused: dict[Operation, Rule] = {}
    ends = [op for op in fn.ops if op.opdef in _CHAIN_ENDS and isinstance(op.results[0].type, TensorType) and
            op.results[0].type.element_type == F32]
    if not ends:
        return absorbed, fused
    patterns = [(p.pattern, p.check, _gelu_builder(tanh)) for p, tanh in _gelu_patterns()]
    patterns += [(_FC_BIAS, None, _fc_bias), (_FC_BIAS_DEQUANTIZED, None, _fc_bias_dequantized),
                 (_RSQRT, None, _rsqrt), (_CONV_ACT, None, _conv_act)]
    for op in ends:
        for pattern, check, build in patterns:
            m = match(pattern, op.results[0])
            if m is None or m.ops.get("op") is not op or (check and check(m)) or \
                    any(o in absorbed or o in fused for o in m.ops.values()):
                continue
            rule = build(m)
            if rule is None:
                continue
            absorbed.update(o for o in m.ops.values() if o is not op)
            fused[op] = rule
            break
    return absorbed, fused


def _gelu_builder(approximate: bool):
    return lambda m: _unary_of(OP.GELU, m["x"], GeluOptions(approximate=approximate))


def _unary_of(code, x: Value, options=None) -> Rule:
    """``code`` of ``x`` as the result of the chain's last op."""
    def rule(ex: _Exporter, op: Operation) -> None:
        form = ex.prefer(x)
        ex.emit(code, op, [ex.get(x, form)], form, options)
    return rule


# -- reductions and normalizations -----------------------------------------------------------------

def _axes(op: Operation) -> list[int] | None:
    """The reduced axes, sorted and non-negative; None for an op that reduces nothing."""
    rank = len(op.operands[0].type.shape)
    axes = op.attr("axes")
    if not axes:
        return None if op.attr("noop_with_empty_axes") else list(range(rank))
    return sorted({int(a) % rank for a in axes})


def _reduce(code) -> Rule:
    def rule(ex: _Exporter, op: Operation) -> None:
        axes = _axes(op)
        if axes is None:
            ex.forms.map(op.results[0], {Form.ASIS: ex.get(op.operands[0], Form.ASIS)})
            return
        mean(ex, op, code, axes)
    return rule


def reduce_l2(ex: _Exporter, op: Operation) -> None:
    """√(Σ x²): SQUARE, SUM over the axes, SQRT (LiteRT has no L2 reduction)."""
    x, y = op.operands[0], op.results[0]
    axes = _axes(op)
    if axes is None:
        raise UnsupportedOpError(f"{_what(op)}: an L2 reduction over no axis (|x|) has no TFLite form here")
    name = y.name_hint or "reduce_l2"
    squares = _scratch(ex, x.type.shape, f"{name}/squares")
    ex.b.add_operator(OP.SQUARE, [ex.get(x, Form.ASIS)], [squares])
    total = _scratch(ex, y.type.shape, f"{name}/sum_of_squares")
    ex.b.add_operator(OP.SUM, [squares, ex.int32(axes, f"{name}/axes")], [total],
                      ReducerOptions(keep_dims=bool(op.attr("keepdims"))))
    ex.emit(OP.SQRT, op, [total], Form.ASIS)


def float_softmax(ex: _Exporter, op: Operation) -> None:
    rank = len(op.operands[0].type.shape)
    if int(op.attr("axis")) % rank != rank - 1:
        raise UnsupportedOpError(f"{_what(op)}: softmax over axis {op.attr('axis')} of rank {rank}; LiteRT's "
                                 "SOFTMAX reads the last axis")
    softmax(ex, op, beta=1.0)   # ONNX's softmax has no beta


def layer_normalization(ex: _Exporter, op: Operation) -> None:
    """LayerNorm over the last axis as TF's converter writes it: mean, variance as the mean of
    SQUARED_DIFFERENCE, RSQRT(variance + ε), then (x − mean)·rsqrt·γ + β."""
    x, y = op.operands[0], op.results[0]
    rank = len(x.type.shape)
    if int(op.attr("axis")) % rank != rank - 1 or len(op.results) > 1 and op.results[1].uses:
        raise UnsupportedOpError(f"{_what(op)}: only LayerNorm over the last axis (and no mean/inv-std results) "
                                 "is exported")
    name = y.name_hint or "layer_norm"
    full, reduced = x.type.shape, tuple(x.type.shape[:-1]) + (1,)
    src = ex.get(x, Form.ASIS)

    def scratch(what: str, dims) -> int:
        return _scratch(ex, dims, f"{name}/{what}")

    axis = ex.int32([rank - 1], f"{name}/axis")
    mu = scratch("mean", reduced)
    ex.b.add_operator(OP.MEAN, [src, axis], [mu], ReducerOptions(keep_dims=True))
    sq = scratch("squared_difference", full)
    ex.b.add_operator(OP.SQUARED_DIFFERENCE, [src, mu], [sq])
    var = scratch("variance", reduced)
    ex.b.add_operator(OP.MEAN, [sq, axis], [var], ReducerOptions(keep_dims=True))
    var_eps = scratch("variance_eps", reduced)
    ex.b.add_operator(OP.ADD, [var, ex.constant(_f32(op.attr("epsilon")), f"{name}/epsilon")], [var_eps],
                      AddOptions())
    inv = scratch("rsqrt", reduced)
    ex.b.add_operator(OP.RSQRT, [var_eps], [inv])
    centered = scratch("centered", full)
    ex.b.add_operator(OP.SUB, [src, mu], [centered], SubOptions())
    normalized = scratch("normalized", full)
    ex.b.add_operator(OP.MUL, [centered, inv], [normalized], MulOptions())
    scale = op.operands[1]
    if len(op.operands) > 2:
        scaled = scratch("scaled", full)
        ex.b.add_operator(OP.MUL, [normalized, ex.get(scale, Form.ASIS)], [scaled], MulOptions())
        ex.emit(OP.ADD, op, [scaled, ex.get(op.operands[2], Form.ASIS)], Form.ASIS, AddOptions())
    else:
        ex.emit(OP.MUL, op, [normalized, ex.get(scale, Form.ASIS)], Form.ASIS, MulOptions())


# -- matrix products --------------------------------------------------------------------------------

def _fc(ex: _Exporter, op: Operation, x: Value, weights: np.ndarray | int, bias: np.ndarray | None) -> None:
    """FULLY_CONNECTED of ``x`` [..., K] with ``weights`` [N, K] (an array, or the index of a
    dequantized weight tensor); keep_num_dims for rank > 2."""
    name = op.results[0].name_hint or "fc"
    w = weights if isinstance(weights, int) else \
        ex.constant(np.ascontiguousarray(weights, np.float32), f"{name}/weights")
    inputs = [ex.get(x, Form.ASIS), w]
    inputs.append(ex.constant(np.asarray(bias, np.float32), f"{name}/bias") if bias is not None else -1)
    ex.emit(OP.FULLY_CONNECTED, op, inputs, Form.ASIS, FullyConnectedOptions(keep_num_dims=len(x.type.shape) > 2))


def matmul(ex: _Exporter, op: Operation) -> None:
    a, b = op.operands
    w = quant.stored_constant(b)
    if w is not None and np.ndim(w) == 2 and len(a.type.shape) >= 2:
        return _fc(ex, op, a, np.asarray(w).T, None)
    if len(b.type.shape) == 2 and len(a.type.shape) >= 2 and (dq := dequantized(ex, b, (1, 0))) is not None:
        return _fc(ex, op, a, dq, None)   # a weight-only int8/int4 B, as [N, K]
    if len(a.type.shape) < 2 or len(b.type.shape) < 2:
        raise UnsupportedOpError(f"{_what(op)}: a matmul of a 1-D operand has no BATCH_MATMUL form here")
    ex.emit(OP.BATCH_MATMUL, op, [ex.get(a, Form.ASIS), ex.get(b, Form.ASIS)], Form.ASIS,
            BatchMatMulOptions(adj_x=False, adj_y=False))


def gemm(ex: _Exporter, op: Operation) -> None:
    """alpha·A·op(B) + beta·C with constant B and C: FULLY_CONNECTED, alpha and beta folded in."""
    a, b = op.operands[0], op.operands[1]
    w = quant.stored_constant(b)
    c = quant.stored_constant(op.operands[2]) if len(op.operands) > 2 else None
    if w is None and weight_chain(b) is not None and not op.attr("trans_a") and (len(op.operands) == 2 or
                                                                                   c is not None):
        return _gemm_dequantized(ex, op, c)
    if op.attr("trans_a") or w is None or (len(op.operands) > 2 and c is None):
        raise UnsupportedOpError(f"{_what(op)}: only a gemm with A not transposed and constant B and C has a "
                                 "FULLY_CONNECTED form")
    w = np.asarray(w, np.float64) * float(op.attr("alpha"))
    weights = w if op.attr("trans_b") else w.T
    bias = None
    if c is not None:
        bias = np.broadcast_to(np.asarray(c, np.float64) * float(op.attr("beta")), (weights.shape[0],))
        if np.ndim(c) > 1 and np.shape(c)[0] != 1:
            raise UnsupportedOpError(f"{_what(op)}: C of shape {list(np.shape(c))} is not one row; "
                                     "FULLY_CONNECTED's bias is")
    _fc(ex, op, a, weights.astype(np.float32), None if bias is None else bias.astype(np.float32))


def _gemm_dequantized(ex: _Exporter, op: Operation, c) -> None:
    """A gemm whose B is a weight-only int8/int4 weight: FULLY_CONNECTED of its DEQUANTIZE ([N, K])."""
    if float(op.attr("alpha")) != 1.0:
        raise UnsupportedOpError(f"{_what(op)}: alpha {op.attr('alpha')} with a quantized B; the weight's "
                                 "integers cannot absorb it (export with alpha folded into B before quantizing)")
    n = op.results[0].type.shape[-1]
    bias = None
    if c is not None:
        if np.ndim(c) > 1 and np.shape(c)[0] != 1:
            raise UnsupportedOpError(f"{_what(op)}: C of shape {list(np.shape(c))} is not one row; "
                                     "FULLY_CONNECTED's bias is")
        bias = np.broadcast_to(np.asarray(c, np.float64) * float(op.attr("beta")), (n,)).astype(np.float32)
    _fc(ex, op, op.operands[0], dequantized(ex, op.operands[1], (0, 1) if op.attr("trans_b") else (1, 0)), bias)


def expand(ex: _Exporter, op: Operation) -> None:
    x, y = op.operands[0], op.results[0]
    name = y.name_hint or "expand"
    if None not in y.type.shape:
        # version 2: the builtin's first (version 1 was its custom-op predecessor; LiteRT registers 2 and up)
        ex.emit(OP.BROADCAST_TO, op, [ex.get(x, Form.ASIS), ex.int32(y.type.shape, f"{name}/shape")], Form.ASIS,
                version=2)
        return
    ones = np.ones(tuple(int(d) for d in op.attr("shape")), np.float32)
    if y.type.element_type != F32:
        raise UnsupportedOpError(f"{_what(op)}: an expand to dynamic dims is written only for float32")
    ex.emit(OP.MUL, op, [ex.get(x, Form.ASIS), ex.constant(ones, f"{name}/ones")], Form.ASIS, MulOptions())


# -- convolutions and pools -------------------------------------------------------------------------

def conv(ex: _Exporter, op: Operation, act: Operation | None = None) -> None:
    """CONV_2D / DEPTHWISE_CONV_2D; ``act``: the clamp after it, fused (its result is the output)."""
    x, w = op.operands[0], op.operands[1]
    xs, ws = x.type.shape, w.type.shape
    weights = quant.stored_constant(w)
    if (weights is None and weight_chain(w) is None) or len(xs) != 4:
        raise UnsupportedOpError(f"{_what(op)}: TFLite needs a 2-D convolution with constant weights")
    group = int(op.attr("group") or 1)
    depthwise = group > 1 and group == xs[1] and ws[1] == 1
    if group > 1 and not depthwise:
        raise UnsupportedOpError(f"{_what(op)}: grouped convolution (group {group} of {xs[1]} channels) has no "
                                 "TFLite builtin; only depthwise (group == channels) is exported")
    strides = tuple(op.attr("strides") or (1, 1))
    dilations = tuple(op.attr("dilations") or (1, 1))
    src = ex.get(x, Form.NHWC)
    padding = _padding(op, xs[2:], ws[2:], strides, dilations)
    if padding is None:
        src, padding = _zero_pad(ex, x, src, op.attr("pads")), Padding.VALID
    name = op.results[0].name_hint or "conv"
    bias = ex.get(op.operands[2], Form.ASIS) if len(op.operands) > 2 else \
        ex.constant(np.zeros(ws[0], np.float32), f"{name}/bias")
    common = dict(padding=padding, stride_w=strides[1], stride_h=strides[0], dilation_w_factor=dilations[1],
                  dilation_h_factor=dilations[0], fused_activation_function=_activation(act))
    arr = None if weights is None else np.asarray(weights, np.float32)   # None: a weight-only int8/int4 filter
    if depthwise:
        filt = dequantized(ex, w, (1, 2, 3, 0)) if arr is None else \
            ex.constant(np.ascontiguousarray(arr.transpose(1, 2, 3, 0)), f"{name}/filter_1hwc")
        ex.emit(OP.DEPTHWISE_CONV_2D, act or op, [src, filt, bias], Form.NHWC,
                DepthwiseConv2DOptions(depth_multiplier=ws[0] // xs[1], **common))
    else:
        filt = dequantized(ex, w, (0, 2, 3, 1)) if arr is None else \
            ex.constant(np.ascontiguousarray(arr.transpose(0, 2, 3, 1)), f"{name}/filter_ohwi")
        ex.emit(OP.CONV_2D, act or op, [src, filt, bias], Form.NHWC, Conv2DOptions(**common))


_FUSED_ACTIVATIONS = {OP.RELU: ActivationFunctionType.RELU, OP.RELU6: ActivationFunctionType.RELU6,
                      OP.RELU_N1_TO_1: ActivationFunctionType.RELU_N1_TO_1}


def _clamp_code(op: Operation):
    """The RELU builtin an nn.relu / nn.clip is, or None."""
    if op.opdef is nn.UNARY["relu"]:
        return OP.RELU
    return _CLAMPS.get((float(op.attr("min")), float(op.attr("max")))) if op.opdef is nn.CLIP else None


def _activation(act: Operation | None) -> ActivationFunctionType:
    return ActivationFunctionType.NONE if act is None else _FUSED_ACTIVATIONS[_clamp_code(act)]


def _zero_pad(ex: _Exporter, x: Value, src: int, pads) -> int:
    t, left, bt, r = (int(p) for p in pads)
    shape, sig = ex._shape(x, Form.NHWC)
    grown = (shape[0], shape[1] + t + bt, shape[2] + left + r, shape[3])
    padded = ex.b.add_tensor(ex._name(f"{x.name_hint}/pad"), grown, np.float32,
                             shape_signature=tuple(-1 if d == -1 else g for d, g in zip(sig, grown)) if sig else ())
    ex.b.add_operator(OP.PAD, [src, ex.int32([[0, 0], [t, bt], [left, r], [0, 0]], f"{x.name_hint}/paddings")],
                      [padded])
    return padded


def _pool(code) -> Rule:
    def rule(ex: _Exporter, op: Operation) -> None:
        x = op.operands[0]
        kernel = tuple(op.attr("kernel_shape"))
        strides = tuple(op.attr("strides") or (1, 1))
        if len(kernel) != 2 or op.attr("ceil_mode") or any(d != 1 for d in (op.attr("dilations") or (1, 1))):
            raise UnsupportedOpError(f"{_what(op)}: only 2-D pools without ceil_mode or dilation are exported")
        padding = _padding(op, x.type.shape[2:], kernel, strides)
        if padding is None or (code is OP.AVERAGE_POOL_2D and padding is Padding.SAME and op.attr("count_include_pad")):
            raise UnsupportedOpError(f"{_what(op)}: pads {tuple(op.attr('pads') or ())} are neither SAME nor VALID "
                                     "(or count the padded taps); TFLite's pools take no explicit padding")
        ex.emit(code, op, [ex.get(x, Form.NHWC)], Form.NHWC,
                Pool2DOptions(padding=padding, stride_w=strides[1], stride_h=strides[0], filter_width=kernel[1],
                              filter_height=kernel[0]))
    return rule


def _global_pool(code) -> Rule:
    def rule(ex: _Exporter, op: Operation) -> None:
        x = op.operands[0]
        form = ex.prefer(x)
        axes = [_TO_NHWC_AXIS[a] for a in (2, 3)] if form is Form.NHWC else [2, 3]
        ex.emit(code, op, [ex.get(x, form), ex.int32(axes, f"{op.results[0].name_hint}/axes")], form,
                ReducerOptions(keep_dims=True))
    return rule


def pad(ex: _Exporter, op: Operation) -> None:
    """Constant padding: PAD (with 0) or PADV2 (another value); [before, after] per axis, in NHWC when the
    input lives there."""
    x = op.operands[0]
    rank = len(x.type.shape)
    pads = [int(p) for p in op.attr("pads")]
    axes = [int(a) % rank for a in (op.attr("axes") or range(rank))]
    if op.attr("mode") != "constant" or min(pads, default=0) < 0:
        raise UnsupportedOpError(f"{_what(op)}: only constant padding by non-negative amounts has a PAD form "
                                 f"(mode {op.attr('mode')}, pads {pads})")
    pairs = [[0, 0] for _ in range(rank)]
    for k, a in enumerate(axes):
        pairs[a] = [pads[k], pads[k + len(axes)]]
    form = ex.prefer(x)
    if form is Form.NHWC:
        pairs = [pairs[i] for i in (0, 2, 3, 1)]
    name = op.results[0].name_hint or "pad"
    inputs = [ex.get(x, form), ex.int32(pairs, f"{name}/paddings")]
    value = float(op.attr("constant_value") or 0.0)
    if value == 0.0:
        ex.emit(OP.PAD, op, inputs, form)
    else:
        ex.emit(OP.PADV2, op, inputs + [ex.constant(_f32(value).reshape(1), f"{name}/value")], form)


def arg_max(ex: _Exporter, op: Operation) -> None:
    """ARG_MAX in the IR's layout, into the result's index type; LiteRT drops the axis, so keepdims=1
    is an EXPAND_DIMS after it. Both take the first of equal values, as ONNX's default does."""
    x, y = op.operands[0], op.results[0]
    axis = int(op.attr("axis")) % len(x.type.shape)
    if op.attr("select_last_index"):
        raise UnsupportedOpError(f"{_what(op)}: select_last_index=1; LiteRT picks the first of equal values")
    out_type = TFLiteTensorType.INT64 if y.type.element_type == IntegerType(64) else TFLiteTensorType.INT32
    name = y.name_hint or "arg_max"
    inputs = [ex.get(x, Form.ASIS), ex.int32([axis], f"{name}/axis")]
    if not op.attr("keepdims"):
        ex.emit(OP.ARG_MAX, op, inputs, Form.ASIS, ArgMaxOptions(output_type=out_type))
        return
    dims = [d for i, d in enumerate(y.type.shape) if i != axis]
    signature = tuple(-1 if d is None else d for d in dims) if None in dims else ()
    flat = ex.b.add_tensor(ex._name(f"{name}/indices"), tuple(1 if d is None else d for d in dims), _dtype(y),
                           shape_signature=signature)
    ex.b.add_operator(OP.ARG_MAX, inputs, [flat], ArgMaxOptions(output_type=out_type))
    ex.emit(OP.EXPAND_DIMS, op, [flat, ex.int32([axis], f"{name}/keep_axis")], Form.ASIS)


def where(ex: _Exporter, op: Operation) -> None:
    """SELECT_V2 (broadcasting, as ONNX's Where) in the IR's layout."""
    ex.emit(OP.SELECT_V2, op, [ex.get(v, Form.ASIS) for v in op.operands], Form.ASIS)


def tile(ex: _Exporter, op: Operation) -> None:
    x, name = op.operands[0], op.results[0].name_hint or "tile"
    ex.emit(OP.TILE, op, [ex.get(x, Form.ASIS), ex.int32([int(r) for r in op.attr("repeats")], f"{name}/multiples")],
            Form.ASIS)


def split(ex: _Exporter, op: Operation) -> None:
    """SPLIT_V into the results' sizes along the axis (static there), in the IR's layout."""
    x = op.operands[0]
    axis = int(op.attr("axis")) % len(x.type.shape)
    sizes = [r.type.shape[axis] for r in op.results]
    if None in sizes:
        raise UnsupportedOpError(f"{_what(op)}: a split of a dynamic axis has no SPLIT_V form here")
    name = op.results[0].name_hint or "split"
    outs = [ex.new_tensor(r, Form.ASIS) for r in op.results]
    ex.b.add_operator(OP.SPLIT_V, [ex.get(x, Form.ASIS), ex.int32(sizes, f"{name}/size_splits"),
                                   ex.int32(axis, f"{name}/axis")], outs, SplitVOptions(num_splits=len(outs)))


def resize(ex: _Exporter, op: Operation) -> None:
    """ONNX Resize of H, W as RESIZE_BILINEAR (linear: half_pixel, align_corners, asymmetric) or
    RESIZE_NEAREST_NEIGHBOR (the LiteRT mode that copies the same pixels, which the quantizer's
    Resize declaration works out), to static sizes or power-of-two factors of dynamic ones."""
    from quantir.quantize.ops.resize import litert_nearest_mode, resize_factors
    x = op.operands[0]
    shape = tuple(x.type.shape)
    if len(shape) != 4:
        raise UnsupportedOpError(f"{_what(op)}: only a 4-D (NCHW) Resize has a TFLite form")
    out, scales = resize_plan(shape, op.opdef.attr_values(op))
    if any(out[a] != shape[a] or scales[a] != 1.0 for a in (0, 1)):
        raise UnsupportedOpError(f"{_what(op)}: only H and W may be resized for TFLite")
    mode, cmode = op.attr("mode"), op.attr("coordinate_transformation_mode")
    if mode == "nearest":
        flags = litert_nearest_mode(op)
    elif mode == "linear" and cmode in ("half_pixel", "align_corners", "asymmetric"):
        flags = (cmode == "align_corners", cmode == "half_pixel")
    else:
        flags = f"Resize {mode} with coordinate_transformation_mode {cmode} has no LiteRT equivalent"
    if isinstance(flags, str):
        raise UnsupportedOpError(f"{_what(op)}: {flags}")
    sizes = factors = None
    if None in out[2:]:
        factors = resize_factors(shape, out, scales)
        if isinstance(factors, str):
            raise UnsupportedOpError(f"{_what(op)}: {factors}")
    else:
        sizes = out[2:]
    src = ex.get(x, Form.NHWC)
    size = _resize_size(ex, op, src, sizes, factors)
    if mode == "nearest":
        ex.emit(OP.RESIZE_NEAREST_NEIGHBOR, op, [src, size], Form.NHWC,
                ResizeNearestNeighborOptions(align_corners=flags[0], half_pixel_centers=flags[1]),
                version=3 if any(flags) else None)   # as op_version.cc
    else:
        ex.emit(OP.RESIZE_BILINEAR, op, [src, size], Form.NHWC,
                ResizeBilinearOptions(align_corners=flags[0], half_pixel_centers=flags[1]))


def _leaky(op: Operation) -> LeakyReluOptions:
    return LeakyReluOptions(alpha=float(op.attr("alpha")))


FLOAT_RULES: dict[object, Rule] = {
    nn.ADD: _binary(OP.ADD, AddOptions), nn.SUB: _binary(OP.SUB, SubOptions), nn.MUL: _binary(OP.MUL, MulOptions),
    nn.DIV: _binary(OP.DIV, DivOptions),
    nn.BINARY["pow"]: _binary(OP.POW),
    nn.VARIADIC["max"]: _binary(OP.MAXIMUM, MaximumMinimumOptions),
    nn.VARIADIC["min"]: _binary(OP.MINIMUM, MaximumMinimumOptions),
    nn.UNARY["sqrt"]: _unary(OP.SQRT), nn.UNARY["exp"]: _unary(OP.EXP), nn.UNARY["log"]: _unary(OP.LOG),
    nn.UNARY["abs"]: _unary(OP.ABS), nn.UNARY["neg"]: _unary(OP.NEG), nn.UNARY["relu"]: _unary(OP.RELU),
    nn.UNARY["sigmoid"]: _unary(OP.LOGISTIC), nn.UNARY["tanh"]: _unary(OP.TANH),
    nn.UNARY["hard_swish"]: _unary(OP.HARD_SWISH), nn.UNARY["leaky_relu"]: _unary(OP.LEAKY_RELU, _leaky),
    nn.UNARY["gelu"]: _unary(OP.GELU, lambda op: GeluOptions(approximate=op.attr("approximate") == "tanh")),
    nn.UNARY["reciprocal"]: reciprocal, nn.CLIP: clip, nn.UNARY["hard_sigmoid"]: hard_sigmoid,
    nn.PRELU: prelu, nn.BATCH_NORMALIZATION: batch_normalization,
    nn.REDUCE_MEAN: _reduce(OP.MEAN), nn.REDUCE["sum"]: _reduce(OP.SUM), nn.REDUCE["max"]: _reduce(OP.REDUCE_MAX),
    nn.REDUCE["min"]: _reduce(OP.REDUCE_MIN), nn.REDUCE["l2"]: reduce_l2,
    nn.SOFTMAX: float_softmax, nn.LAYER_NORMALIZATION: layer_normalization,
    nn.MATMUL: matmul, nn.GEMM: gemm, nn.EXPAND: expand, nn.PAD: pad,
    nn.RESIZE: resize, nn.ARG_MAX: arg_max, nn.WHERE: where, nn.TILE: tile, nn.SPLIT: split,
    nn.UNARY["floor"]: _unary(OP.FLOOR),
    **{nn.COMPARE[name]: _compare(code, options) for name, (code, options) in {
        "equal": (OP.EQUAL, EqualOptions), "less": (OP.LESS, LessOptions),
        "less_or_equal": (OP.LESS_EQUAL, LessEqualOptions), "greater": (OP.GREATER, GreaterOptions),
        "greater_or_equal": (OP.GREATER_EQUAL, GreaterEqualOptions)}.items()},
    nn.CONV: conv, nn.MAX_POOL: _pool(OP.MAX_POOL_2D), nn.AVERAGE_POOL: _pool(OP.AVERAGE_POOL_2D),
    nn.GLOBAL_AVERAGE_POOL: _global_pool(OP.MEAN), nn.GLOBAL_MAX_POOL: _global_pool(OP.REDUCE_MAX),
}
