"""Fold an inference ``nn.batch_normalization`` into the conv, transposed conv or gemm before it.

With ``a = scale / sqrt(var + epsilon)`` per output channel::

    bn(conv(x, W, b))            -> conv(x, W * a[o], (b - mean) * a + beta)
    bn(conv_transpose(x, W, b))  -> conv_transpose(x, W * a[o], (b - mean) * a + beta)
    bn(gemm(A, B, C))            -> gemm(A, B * a[n], (beta_g * C - mean) * a + beta), beta_g = 1

(``o`` indexes output channels: dim 0 of a conv weight, dim 1 within each group of a
transposed-conv weight, the N dim of gemm's B.) A bias written as a separate ``Add`` of one
constant per channel between the conv (or transposed conv) and the BN — Paddle's exports — is
first moved into the producer's bias (``absorb_bias_add``), so the BN folds too. The rule
applies only when the producer's result has no other user and its weights, bias and the BN
parameters are constants; new constants are made (a shared weight is never modified in place).
``check`` returns why a BN was left alone, and the pass counts the reasons in ``stats``.

A BN that cannot fold (DenseNet's pre-activation BN after a concat, say) but has constant
parameters is decomposed (``decompose=True``, the default) into the per-channel affine it is::

    bn(x) -> add(mul(x, a[C, 1, ..]), (beta - mean · a)[C, 1, ..])

which is how LiteRT represents it (MUL + ADD), so the quantizer's mul and add patterns take it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Module, Operation, Value
from ..ir.dialects import nn
from . import PassResult
from .fold_constants import constant_value, make_constant

_PRODUCERS = (nn.CONV, nn.CONV_TRANSPOSE, nn.GEMM)


def check(bn: Operation) -> str | None:
    """None when ``bn`` can fold into its producer, else the reason it cannot."""
    producer = getattr(bn.operands[0], "op", None)
    if producer is None or producer.opdef not in _PRODUCERS:
        return "input is not produced by conv, conv_transpose or gemm"
    if len(bn.operands[0].uses) != 1:
        return f"the {producer.name} result has other users"
    if any(constant_value(v) is None for v in bn.operands[1:]):
        return "batch-norm parameters are not constants"
    if constant_value(producer.operands[1]) is None:
        return "weights are not constant"
    if len(producer.operands) > 2 and constant_value(producer.operands[2]) is None:
        return "bias is not constant"
    if producer.opdef is nn.GEMM and bn.operands[0].type.rank != 2:
        return "gemm result is not 2-D"
    return None


def bias_add(bn: Operation) -> tuple[Operation, Operation, np.ndarray] | None:
    """``(add, producer, per-channel values)`` when ``bn``'s input is ``add(conv or conv_transpose, c)``
    with ``c`` one constant per channel (Paddle writes a conv's bias so), the add and the producer
    each used once; else None."""
    add = getattr(bn.operands[0], "op", None)
    if add is None or add.opdef is not nn.ADD or len(bn.operands[0].uses) != 1:
        return None
    for i in (0, 1):
        producer, c = getattr(add.operands[i], "op", None), constant_value(add.operands[1 - i])
        if producer is None or producer.opdef not in (nn.CONV, nn.CONV_TRANSPOSE) or c is None:
            continue
        y = add.operands[i].type
        channels = y.shape[1] if getattr(y, "rank", None) and y.rank >= 3 else None
        per_channel = c.size == 1 or (channels is not None and c.size == channels and c.ndim in (y.rank - 1, y.rank)
                                      and c.shape[-(y.rank - 1)] == channels)
        if (per_channel and channels is not None and len(add.operands[i].uses) == 1
                and add.results[0].type == y):
            return add, producer, np.broadcast_to(np.asarray(c).reshape(-1), (channels,))
    return None


def with_bias(producer: Operation, bias: Value) -> Operation:
    """``producer`` (conv, conv_transpose, gemm) reading ``bias`` as its third operand: set in
    place, or, when it has none, a new op with it that replaces ``producer``."""
    if len(producer.operands) > 2:
        producer.set_operand(2, bias)
        return producer
    block = producer.block
    new = Operation(producer.opdef, [*producer.operands, bias], [producer.results[0].type],
                    dict(producer.attributes), producer.loc, producer.label)
    block.insert_before(producer, new)
    producer.results[0].replace_all_uses_with(new.results[0])
    new.results[0].name_hint = producer.results[0].name_hint
    block.erase(producer)
    return new


def absorb_bias_add(bn: Operation) -> bool:
    """Move the per-channel constant of ``bias_add(bn)`` into its producer's bias and drop the add."""
    found = bias_add(bn)
    if found is None or any(constant_value(v) is None for v in found[1].operands[1:]):
        return False
    add, producer, c = found
    old = constant_value(producer.operands[2]) if len(producer.operands) > 2 else None
    dtype = constant_value(producer.operands[1]).dtype
    bias = make_constant(np.ascontiguousarray((0 if old is None else old) + c, dtype=dtype), label=producer.label)
    bias.results[0].name_hint = f"{add.label or producer.label or 'bias'}.added_bias"
    block = producer.block
    block.insert_before(producer, bias)
    out = with_bias(producer, bias.results[0]).results[0]
    add.results[0].replace_all_uses_with(out)
    block.erase(add)
    return True


def _folded_params(bn: Operation):
    scale, beta, mean, var = (constant_value(v).astype(np.float64) for v in bn.operands[1:])
    a = scale / np.sqrt(var + bn.attr("epsilon"))
    return a, beta - mean * a, mean


def fold(bn: Operation) -> Operation:
    producer: Operation = bn.operands[0].op
    a, shift, mean = _folded_params(bn)
    w = constant_value(producer.operands[1])
    dtype = w.dtype
    old_bias = constant_value(producer.operands[2]) if len(producer.operands) > 2 else None
    attrs = {}
    if producer.opdef is nn.CONV:
        new_w = w * a.reshape(-1, *(1,) * (w.ndim - 1))
        bias = (0 if old_bias is None else old_bias) * a + shift
    elif producer.opdef is nn.CONV_TRANSPOSE:
        group = producer.attr("group")
        cin, mg = w.shape[:2]
        new_w = (w.reshape(group, cin // group, mg, *w.shape[2:])
                 * a.reshape(group, 1, mg, *(1,) * (w.ndim - 2))).reshape(w.shape)
        bias = (0 if old_bias is None else old_bias) * a + shift
    else:
        new_w = w * (a.reshape(-1, 1) if producer.attr("trans_b") else a.reshape(1, -1))
        c = 0 if old_bias is None else old_bias * producer.attr("beta")
        bias = c * a + shift
        if np.ndim(bias) == 0:
            bias = np.broadcast_to(bias, a.shape)
        attrs["beta"] = 1.0
    block = producer.block
    w_const = make_constant(new_w.astype(dtype), like=producer.operands[1], label=producer.label)
    b_const = make_constant(np.ascontiguousarray(bias, dtype=dtype), label=producer.label)
    w_const.results[0].name_hint = f"{producer.operands[1].name_hint or 'w'}.bn_folded"
    b_const.results[0].name_hint = f"{bn.label or producer.label or 'bias'}.bn_folded_bias"
    block.insert_before(producer, w_const)
    block.insert_before(producer, b_const)
    producer.set_operand(1, w_const.results[0])
    producer = with_bias(producer, b_const.results[0])
    producer.attributes.update(producer.opdef.make_attrs(attrs))
    out = producer.results[0]
    out.name_hint = bn.results[0].name_hint or out.name_hint
    bn.results[0].replace_all_uses_with(out)
    block.erase(bn)
    return producer


def decompose(bn: Operation) -> Operation:
    """``bn`` as ``mul`` by the per-channel factor then ``add`` of the per-channel shift; returns the add."""
    x = bn.operands[0]
    a, shift, _ = _folded_params(bn)
    dtype = constant_value(bn.operands[1]).dtype
    trailing = (1,) * (x.type.rank - 2)
    block, label = bn.block, bn.label
    name = bn.results[0].name_hint or label or "bn"
    a_const = make_constant(a.astype(dtype).reshape(-1, *trailing), label=label)
    b_const = make_constant(shift.astype(dtype).reshape(-1, *trailing), label=label)
    a_const.results[0].name_hint, b_const.results[0].name_hint = f"{name}.bn_scale", f"{name}.bn_shift"
    mul = nn.MUL.build([x, a_const.results[0]], [bn.results[0].type], label=f"{label}/mul" if label else None)
    add = nn.ADD.build([mul.results[0], b_const.results[0]], [bn.results[0].type], label=label)
    mul.results[0].name_hint = f"{name}.bn_scaled"
    for op in (a_const, b_const, mul, add):
        block.insert_before(bn, op)
    add.results[0].name_hint = bn.results[0].name_hint
    bn.results[0].replace_all_uses_with(add.results[0])
    block.erase(bn)
    return add


def _decomposable(bn: Operation) -> bool:
    t = bn.operands[0].type
    return (all(constant_value(v) is not None for v in bn.operands[1:]) and not bn.attr("training_mode")
            and len(bn.results) == 1 and getattr(t, "rank", None) is not None and t.rank >= 2)


@dataclass(frozen=True)
class FoldBatchNormOptions:
    decompose: bool = True   # a BN that cannot fold becomes mul + add (constant parameters only)


class FoldBatchNorm:
    """Fold every foldable ``nn.batch_normalization``, decompose the others (module docstring).

    Stats: ``fold:<producer op>`` per fold, ``decompose:<why it did not fold>`` per mul + add,
    ``skip:<reason>`` per batch norm left alone.
    """

    name = "fold-batchnorm"

    def __init__(self, options: FoldBatchNormOptions | None = None):
        self.options = options or FoldBatchNormOptions()

    def run(self, module: Module) -> PassResult:
        stats: dict[str, int] = {}
        modified = False
        for fn in module.functions:
            for op in list(fn.ops):
                if op.opdef is not nn.BATCH_NORMALIZATION or op.block is None:
                    continue
                if absorb_bias_add(op):
                    stats["absorb-bias-add"] = stats.get("absorb-bias-add", 0) + 1
                    modified = True
                reason = check(op)
                key = "fold:" + op.operands[0].op.name if reason is None else "skip:" + reason
                if reason is None:
                    fold(op)
                    modified = True
                elif self.options.decompose and _decomposable(op):
                    decompose(op)
                    key, modified = "decompose:" + reason, True
                stats[key] = stats.get(key, 0) + 1
        return PassResult(modified, stats)
