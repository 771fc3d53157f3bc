"""Fold a zero, constant-mode ``nn.pad`` of the spatial dims into the ``nn.conv`` that reads it.

    conv(pad(x, pads=P, mode=constant, value=0), pads=Q)  ->  conv(x, pads=P[spatial] + Q)

Conditions (``check`` returns the first that fails): the pad result feeds only the
conv's input operand; mode ``constant`` with value 0; no padding on the batch and channel
dims; no negative (cropping) pads; the conv has explicit pads (``auto_pad`` NOTSET or
VALID, which is zero padding).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Module, Operation
from ..ir.dialects import nn
from ..ir.dialects.nn_index import pad_amounts
from . import PassResult


def check(pad: Operation) -> str | None:
    out = pad.results[0]
    if len(out.uses) != 1 or out.uses[0][0].opdef is not nn.CONV or out.uses[0][1] != 0:
        return "the padded value is not used only as the input of one conv"
    if pad.attr("mode") != "constant" or pad.attr("constant_value") != 0.0:
        return "not zero constant padding"
    rank = out.type.rank
    if rank is None:
        return "unranked input"
    amounts = pad_amounts(rank, pad.opdef.attr_values(pad))
    if any(amounts[0]) or any(amounts[1]):
        return "pads the batch or channel dim"
    if any(b < 0 or a < 0 for b, a in amounts):
        return "negative (cropping) pads"
    conv = out.uses[0][0]
    if conv.attr("auto_pad") not in ("NOTSET", "VALID"):
        return f"conv uses auto_pad {conv.attr('auto_pad')}"
    return None


def fold(pad: Operation) -> Operation:
    conv = pad.results[0].uses[0][0]
    rank = pad.results[0].type.rank
    amounts = pad_amounts(rank, pad.opdef.attr_values(pad))[2:]
    nsp = rank - 2
    old = conv.attr("pads") if conv.attr("auto_pad") == "NOTSET" else None
    old = old or (0,) * (2 * nsp)
    pads = [old[i] + amounts[i][0] for i in range(nsp)] + [old[nsp + i] + amounts[i][1] for i in range(nsp)]
    conv.attributes.update(conv.opdef.make_attrs({"pads": pads}))
    conv.attributes.pop("auto_pad", None)
    conv.set_operand(0, pad.operands[0])
    pad.block.erase(pad)
    return conv


@dataclass(frozen=True)
class FoldPadOptions:
    pass


class FoldPad:
    """Fold every foldable ``nn.pad`` into its conv. Stats: ``fold:nn.pad``, ``skip:<reason>``."""

    name = "fold-pad"

    def __init__(self, options: FoldPadOptions | None = None):
        self.options = options or FoldPadOptions()

    def run(self, module: Module) -> PassResult:
        stats: dict[str, int] = {}
        modified = False
        for fn in module.functions:
            for op in list(fn.ops):
                if op.opdef is not nn.PAD or op.block is None:
                    continue
                reason = check(op)
                if reason is None:
                    fold(op)
                    modified = True
                key = "fold:nn.pad" if reason is None else "skip:" + reason
                stats[key] = stats.get(key, 0) + 1
        return PassResult(modified, stats)
