"""What the quantizer's patterns match, and questions about a matched region.

A ``QuantizerPattern`` is data: a dataflow pattern rooted at the *last* float op of a fused
group (conv → relu is matched at the relu), the names of its activation inputs, a ``check``
that says *why* a matched group must stay float, and the lowering that turns the group into
integer ops. Each pattern belongs to one quantized-op declaration (``quantize.ops``), which
holds its LiteRT op, spec row and kernel; ``patterns.annotate`` assigns float ops to patterns.

The helpers below are the region queries every stage shares (the solver, the lowering, the
calibration info, the health checks): a region's constant operands, its weighted input, the
window of a conv or pool in LiteRT's terms.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import QuantirError
from ..ir import Operation, Value
from ..ir.dialects import arith, nn
from ..ir.dialects.nn_conv import window_geometry
from ..rewrite import Match, Pat

Check = Callable[[Match], "str | None"]
Lowering = Callable[[Any, "Region"], Value]   # (lower.Lowerer, region) -> the region's integer output


@dataclass(frozen=True)
class QuantizerPattern:
    name: str                           # unique; ``Config.exclude`` may name it
    pattern: Pat
    lower: Lowering
    inputs: tuple[str, ...] = ("x",)    # captured activation inputs; () with variadic=True: all operands
    variadic: bool = False
    check: Check | None = None
    doc: str = ""
    weighted: bool = False              # constant weights "w" (and bias "b") feeding input "x": conv, FC
    priority: int = 0                   # lower first; a larger fusion must be tried before its parts
    # the declaration (``quantize.ops.QuantOp``) it belongs to, set when declared: ops imports this module
    op: Any = field(default=None, compare=False, repr=False)

    @property
    def kind(self) -> str:
        """The LiteRT builtin the region becomes (its spec row); ``Config.exclude`` may name it."""
        assert self.op is not None, f"pattern '{self.name}' is not declared"
        return self.op.builtin.name


@dataclass
class Region:
    """One matched group: float ops that become integer ops."""

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
        """The fused LiteRT activation: NONE, RELU, RELU6 or RELU_N1_TO_1. A Clip(0, hi) with no
        activation of its own (a hard sigmoid's Clip(0, 1)) is RELU: its upper bound is the end of
        the output's range, where int8 (asymmetric) and int16 (symmetric) storage both saturate, so
        only the lower bound needs the clamp."""
        act = self.match.ops.get("act")
        if act is None:
            return "NONE"
        if act.opdef is nn.RELU:
            return "RELU"
        lo, hi = act.attr("min"), act.attr("max")
        fused = {(0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1"}.get((lo, hi))
        return fused or ("RELU" if lo == 0.0 else "NONE")


@dataclass
class Annotation:
    regions: list[Region]
    float_ops: list[tuple[Operation, str]] = field(default_factory=list)   # (op, why it stays float)

    def region_of(self, op: Operation) -> Region | None:
        return self._by_op.get(op)

    def __post_init__(self) -> None:
        self._by_op = {op: r for r in self.regions for op in r.ops}

    def demote(self, region: Region, reason: str) -> None:
        """Return ``region``'s ops to float, with ``reason`` (a check that needed the calibrated ranges)."""
        self.regions.remove(region)
        for op in region.ops:
            del self._by_op[op]
            self.float_ops.append((op, reason))


# -- region queries ------------------------------------------------------------------------------

def constant_array(v: Value) -> np.ndarray | None:
    """The array of a value produced by ``arith.constant``, else None."""
    op = getattr(v, "op", None)
    if op is not None and op.opdef is arith.CONSTANT:
        return getattr(op.attributes.get("value"), "array", None)
    return None


def weighted_input(region: Region) -> Value | None:
    """The activation input of a conv/FC region (None for other regions)."""
    return region.match["x"] if region.pattern.weighted else None


def conv_window(op: Operation, kernel: Sequence[int], spatial: Sequence[int] | None = None) -> dict:
    """Strides, pads ``(begin..., end...)`` and dilations of a conv/pool op, as LiteRT needs them;
    ``spatial``: the input's H, W to take instead of its type's (the pads of auto_pad SAME on a
    dynamic size at a calibration sample's size)."""
    window, reason = _window(op, kernel, spatial)
    if reason:
        raise QuantirError(f"'{op.label or op.name}': {reason}")
    return window


def lowered_window(op: Operation, kernel: Sequence[int]) -> dict:
    """The window attributes of the integer op: ``conv_window``'s, or on a dynamic size whose
    SAME_UPPER pads follow the size, ``auto_pad`` SAME_UPPER (TFLite's SAME) in place of pads."""
    window, reason = _window(op, kernel)
    if reason and op.attr("auto_pad") == "SAME_UPPER":
        return {"strides": window["strides"], "dilations": window["dilations"], "auto_pad": "SAME_UPPER"}
    if reason:
        raise QuantirError(f"'{op.label or op.name}': {reason}")
    return window


def dynamic_padding_reason(op: Operation, kernel: Sequence[int]) -> str | None:
    """Why ``lowered_window`` cannot express ``op``'s padding (for a pattern's check), else None."""
    reason = _window(op, kernel)[1]
    return None if op.attr("auto_pad") == "SAME_UPPER" else reason


def _window(op: Operation, kernel: Sequence[int], spatial: Sequence[int] | None = None) -> tuple[dict, str | None]:
    # auto_pad SAME with stride 1 pads e - 1 in total whatever the size (the output is as long as
    # the input), so a dynamic axis still has fixed pads; with a larger stride they follow the size:
    # SAME_UPPER is then TFLite's SAME (the extra pixel at the end), SAME_LOWER has no LiteRT form.
    spatial = op.operands[0].type.shape[2:] if spatial is None else tuple(spatial)
    g = window_geometry(spatial, kernel, {k: op.attr(k) for k in ("strides", "pads", "dilations", "auto_pad")},
                        ceil_mode=bool(op.attr("ceil_mode")) if "ceil_mode" in op.opdef.attributes else False)
    begin, end = list(g.pads_begin), list(g.pads_end)
    for i, (b, s, e) in enumerate(zip(g.pads_begin, g.strides, g.effective)):
        if b is None and s == 1:
            small, large = (e - 1) // 2, e - 1 - (e - 1) // 2
            begin[i], end[i] = (small, large) if op.attr("auto_pad") == "SAME_UPPER" else (large, small)
    window = {"strides": g.strides, "pads": tuple(begin) + tuple(end), "dilations": g.dilations}
    if all(p is not None for p in begin + end):
        return window, None
    x = "x".join("?" if d is None else str(d) for d in spatial)
    if op.attr("auto_pad") == "SAME_LOWER":
        return window, (f"auto_pad SAME_LOWER with strides {g.strides} on the dynamic spatial size {x} puts an odd "
                        "pixel of padding at the beginning, where TFLite's SAME puts it at the end, and the "
                        "padding depends on the size: no LiteRT padding expresses it")
    return window, (f"auto_pad {op.attr('auto_pad')} with strides {g.strides} pads by an amount that depends on "
                    f"the run-time spatial size ({x})")


def rank(v: Value) -> int | None:
    shape = getattr(v.type, "shape", None)
    return None if shape is None else len(shape)


# -- pattern building blocks shared by the declarations -------------------------------------------

def clip_fusable(m: Match) -> str | None:
    act = m.ops.get("act")
    if act is not None and act.opdef is nn.CLIP:
        lo, hi = act.attr("min"), act.attr("max")
        if not lo <= 0.0 <= hi:
            return f"Clip({lo:g}, {hi:g}) excludes 0, which int8 activations must represent"
    return None


def with_activation(core: Pat) -> Pat:
    """``core``, optionally followed by a fusable Relu/Clip (which must be its only user)."""
    return Pat.alt(Pat.op([nn.RELU, nn.CLIP], core.one_use(), name="act"), core)


def unary(opdef) -> Pat:
    return Pat.op(opdef, Pat.any("x"), name="op")


def binary(opdef) -> Pat:
    return Pat.op(opdef, Pat.any("a"), Pat.any("b"), name="op")


def commutative(opdef, p: Pat, q: Pat, name: str | None = None) -> Pat:
    """``opdef(p, q)`` or ``opdef(q, p)``. Name every op of a multi-op pattern: a region claims its named ops."""
    return Pat.alt(Pat.op(opdef, p, q, name=name), Pat.op(opdef, q, p, name=name))
