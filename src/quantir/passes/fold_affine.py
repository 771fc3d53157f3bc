"""Fold multiplications and additions by per-channel constants into the convolution beside them.

Exporters write learnable scales and shifts, a bias, or a BatchNormalization that did not fold
as ``Mul``/``Add`` by one constant per channel (Paddle's PP-LCNetV3 ``learnable_affine_block``:
``conv → mul(a) → add(b) → hard_swish → mul(a') → add(b') → conv``). Quantized as written, each
becomes its own int8 tensor with its own rounding, and the tensors between a conv and its
affine hold the conv's raw range, not the range the network uses. Folded, they vanish.

After a conv or transposed conv ``y`` (used once; constant weights and bias; ``c`` of one value
or one per output channel, broadcasting to ``y``'s shape)::

    mul(y, c), div(y, c)  -> conv(x, W·c[o], b·c)      (div: c → 1/c)
    add(y, c), sub(y, c)  -> conv(x, W, b ± c)

Before a conv ``conv(u, W, b)`` that is ``u``'s only user, ``a`` and ``c`` one value or one per
input channel, ``x`` not itself the result of arithmetic (``x·½`` ends a written GELU)::

    u = mul(x, a)              -> conv(x, W·a[i], b)                         (zero padding stays 0)
    u = add(mul(x, a), c)      -> conv(x, W·a[i], b + Σ W·c)  when the conv pads nothing
                               -> conv(add(x, c / a), W·a[i], b)  otherwise, when no a is 0
    u = add(x, c)              -> conv(x, W, b + Σ W·c)       when the conv pads nothing

(``o`` indexes output channels, ``i`` input channels within the conv's groups.) A shift cannot
pass a padded conv: the padded border would see ``c`` where the model has 0. New constants are
made; a shared weight is never modified in place. Stats count each fold by kind.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Module, Operation, Value
from ..ir.dialects import nn
from . import PassResult
from .fold_constants import constant_value, make_constant

_AFTER = (nn.CONV, nn.CONV_TRANSPOSE)
_ARITHMETIC = (nn.MUL, nn.DIV, nn.ADD, nn.SUB)


def _producer(v: Value) -> Operation | None:
    return getattr(v, "op", None)


def channel_vector(c: np.ndarray, like: Value, channels: int) -> np.ndarray | None:
    """``c`` as one float64 value per channel (dim 1 of ``like``) when it broadcasts so: a scalar,
    ``(C,)`` on a rank-2 value, or ``(C, 1, ..)`` / ``(1, C, 1, ..)`` on NC...; else None."""
    t = like.type
    rank = getattr(t, "rank", None)
    if rank is None or rank < 2 or c.ndim > rank:
        return None
    if c.size == 1:
        return np.full(channels, float(c.reshape(())), np.float64)
    shape = (1,) * (rank - c.ndim) + tuple(c.shape)
    if shape[0] != 1 or shape[1] != channels or any(d != 1 for d in shape[2:]):
        return None
    return np.asarray(c, np.float64).reshape(channels)


def _conv_constants(conv: Operation) -> tuple[np.ndarray, np.ndarray | None] | None:
    w = constant_value(conv.operands[1])
    if w is None or w.dtype.kind != "f":
        return None
    b = constant_value(conv.operands[2]) if len(conv.operands) > 2 else None
    if len(conv.operands) > 2 and b is None:
        return None
    return w, b


def _out_channels(conv: Operation, w: np.ndarray) -> int:
    return w.shape[0] if conv.opdef is nn.CONV else w.shape[1] * conv.attr("group")


def _scale_out(conv: Operation, w: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``w`` with output channel ``o`` multiplied by ``s[o]``."""
    if conv.opdef is nn.CONV:
        return w * s.reshape(-1, *(1,) * (w.ndim - 1))
    group = conv.attr("group")
    cin, mg = w.shape[:2]
    return (w.reshape(group, cin // group, mg, *w.shape[2:])
            * s.reshape(group, 1, mg, *(1,) * (w.ndim - 2))).reshape(w.shape)


def _scale_in(conv: Operation, w: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``w`` (a conv's) with input channel ``i`` multiplied by ``s[i]``."""
    group = conv.attr("group")
    out, cin_g = w.shape[:2]
    return (w.reshape(group, out // group, cin_g, *w.shape[2:])
            * s.reshape(group, 1, cin_g, *(1,) * (w.ndim - 2))).reshape(w.shape)


def _input_sum(conv: Operation, w: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per output channel, what a constant input ``c[i]`` adds to a conv that pads nothing."""
    group = conv.attr("group")
    out, cin_g = w.shape[:2]
    taps = w.reshape(group, out // group, cin_g, -1).astype(np.float64).sum(axis=-1)
    return np.einsum("goi,gi->go", taps, c.reshape(group, cin_g)).reshape(out)


def _pads_nothing(conv: Operation) -> bool:
    return conv.attr("auto_pad") in ("NOTSET", "VALID") and not any(conv.attr("pads") or ())


def _rebuild(conv: Operation, w: np.ndarray, b: np.ndarray | None, x: Value | None = None) -> Operation:
    """``conv`` with weights ``w``, bias ``b`` (float64, cast to the weights' dtype) and input ``x``."""
    dtype = constant_value(conv.operands[1]).dtype
    block, label = conv.block, conv.label
    w_const = make_constant(np.ascontiguousarray(w, dtype=dtype), like=conv.operands[1], label=label)
    w_const.results[0].name_hint = f"{conv.operands[1].name_hint or 'w'}.affine_folded"
    block.insert_before(conv, w_const)
    operands = [conv.operands[0] if x is None else x, w_const.results[0]]
    if b is not None:
        b_const = make_constant(np.ascontiguousarray(b, dtype=dtype), label=label)
        b_const.results[0].name_hint = f"{label or 'conv'}.affine_folded_bias"
        block.insert_before(conv, b_const)
        operands.append(b_const.results[0])
    new = Operation(conv.opdef, operands, [conv.results[0].type], dict(conv.attributes), conv.loc, label)
    block.insert_before(conv, new)
    new.results[0].name_hint = conv.results[0].name_hint
    conv.results[0].replace_all_uses_with(new.results[0])
    block.erase(conv)
    return new


def _affine_operand(op: Operation, kinds) -> tuple[int, np.ndarray] | None:
    """``(index of the non-constant operand, the constant)`` of a binary ``op`` in ``kinds``."""
    if op.opdef not in kinds or len(op.operands) != 2:
        return None
    for i in (0, 1):
        c = constant_value(op.operands[1 - i])
        if c is not None and constant_value(op.operands[i]) is None:
            if op.opdef in (nn.SUB, nn.DIV) and i != 0:
                return None   # c - y, c / y are not affine in y by a per-channel factor
            return i, np.asarray(c)
    return None


def fold_after(op: Operation) -> str | None:
    """Fold ``op`` (mul/div/add/sub by a per-channel constant) into the conv before it; the kind, or None."""
    found = _affine_operand(op, (nn.MUL, nn.DIV, nn.ADD, nn.SUB))
    if found is None:
        return None
    i, c = found
    y = op.operands[i]
    conv = _producer(y)
    if conv is None or conv.opdef not in _AFTER or len(y.uses) != 1 or op.results[0].type != y.type:
        return None
    consts = _conv_constants(conv)
    if consts is None or c.dtype.kind != "f":
        return None
    w, b = consts
    channels = _out_channels(conv, w)
    vec = channel_vector(c, y, channels)
    if vec is None:
        return None
    bias = np.zeros(channels) if b is None else np.asarray(b, np.float64).reshape(channels)
    if op.opdef in (nn.MUL, nn.DIV):
        if np.any(vec == 0):
            # a zero factor (or a division by zero) stays: folded, it would turn the model's dead
            # branch into all-zero weights, and the calibration warnings would name the wrong op
            return None
        if op.opdef is nn.DIV:
            vec = 1.0 / vec
        w, bias = _scale_out(conv, w.astype(np.float64), vec), bias * vec
    else:
        bias = bias + vec if op.opdef is nn.ADD else bias - vec
    new = _rebuild(conv, w, bias)
    new.results[0].name_hint = op.results[0].name_hint or new.results[0].name_hint
    op.results[0].replace_all_uses_with(new.results[0])
    op.block.erase(op)
    return f"after-{conv.name.split('.')[-1]}:{op.name.split('.')[-1]}"


def fold_before(conv: Operation) -> str | None:
    """Fold the mul and/or add by per-channel constants that feed ``conv`` alone into it; the kind, or None."""
    if conv.opdef is not nn.CONV:
        return None
    u = conv.operands[0]
    first = _producer(u)
    consts = _conv_constants(conv)
    if first is None or consts is None or len(u.uses) != 1:
        return None
    w, b = consts
    cin = w.shape[1] * conv.attr("group")
    scale = shift = None
    x = None
    add = _affine_operand(first, (nn.ADD,))
    if add is not None and add[1].dtype.kind == "f":
        shift = channel_vector(add[1], u, cin)
        inner = first.operands[add[0]]
        mul = _producer(inner)
        found = _affine_operand(mul, (nn.MUL,)) if mul is not None and len(inner.uses) == 1 else None
        if shift is not None and found is not None and found[1].dtype.kind == "f":
            scale = channel_vector(found[1], inner, cin)
        x = mul.operands[found[0]] if scale is not None else inner
    else:
        mul = _affine_operand(first, (nn.MUL,))
        if mul is not None and mul[1].dtype.kind == "f":
            scale = channel_vector(mul[1], u, cin)
            x = first.operands[mul[0]]
    if (scale is None and shift is None) or x is None or x.type != u.type:
        return None
    if scale is not None and np.any(scale == 0):
        return None   # a zero factor stays (see fold_after)
    if getattr(_producer(x), "opdef", None) in _ARITHMETIC:
        return None   # the tail of a written-out activation (GELU's · ½): its pattern needs it whole
    w64 = w.astype(np.float64)
    if scale is not None:
        w64 = _scale_in(conv, w64, scale)
    bias = None if b is None else np.asarray(b, np.float64).reshape(-1)
    if shift is None:
        kind = "mul"
    elif _pads_nothing(conv):
        bias = (0.0 if bias is None else bias) + _input_sum(conv, w.astype(np.float64), shift)
        kind = "mul-add" if scale is not None else "add"
    elif scale is not None:
        # the shift stays, divided by the scale the weights took: add(x, c / a) → conv
        kind = "mul (add kept)"
        c_const = make_constant((shift / scale).astype(constant_value(first.operands[1 - add[0]]).dtype)
                                .reshape((1, cin) + (1,) * (u.type.rank - 2)), label=first.label)
        c_const.results[0].name_hint = f"{first.results[0].name_hint or 'shift'}.unscaled"
        shifted = nn.ADD.build([x, c_const.results[0]], [u.type], label=first.label)
        shifted.results[0].name_hint = u.name_hint
        conv.block.insert_before(conv, c_const)
        conv.block.insert_before(conv, shifted)
        x = shifted.results[0]
    else:
        return None
    block = conv.block
    _rebuild(conv, w64, bias, x)
    for op in (first, mul):   # now unused (u and inner had this one user)
        if isinstance(op, Operation) and op.block is not None and not op.results[0].uses:
            block.erase(op)
    return f"before-conv:{kind}"


@dataclass(frozen=True)
class FoldAffineOptions:
    before: bool = True   # also fold an affine that feeds a conv into it


class FoldAffine:
    """Fold per-channel mul/add constants into the convolutions beside them (module docstring).

    Stats: one count per fold, by where and what (``after-conv:mul``, ``before-conv:mul-add``...).
    """

    name = "fold-affine"

    def __init__(self, options: FoldAffineOptions | None = None):
        self.options = options or FoldAffineOptions()

    def run(self, module: Module) -> PassResult:
        stats: dict[str, int] = {}
        for fn in module.functions:
            changed = True
            while changed:   # a chain (conv → add → mul → add) folds one op per sweep
                changed = False
                for op in list(fn.ops):
                    if op.block is None:
                        continue
                    kind = fold_after(op)
                    if kind is None and self.options.before:
                        kind = fold_before(op)
                    if kind is not None:
                        stats[kind] = stats.get(kind, 0) + 1
                        changed = True
        return PassResult(bool(stats), stats)
