"""Channel groups: a conv whose output channels differ in range by orders of magnitude, read
through an elementwise activation by a depthwise conv, is split so that each group of channels
gets a scale of its own.

Why: LiteRT quantizes an activation per tensor, one scale for every channel, int8 or int16.
After batch-norm folding, a MobileNet-style network's first convs can write channels that barely
move beside channels that move a lot (PicoDet's stem: four channels within ±0.1-0.7, one up to
41). The rounding step the big channel sets is then most of the small channels' signal, and the
depthwise conv after them normalizes each channel again (folded weights up to 170 in L1 norm), so
it amplifies exactly that rounding noise. Measured on PicoDet with float weights and every
activation rounded to int16 steps of its min/max: the stem's two tensors carry 99% of the output
error; with the stem in two channel groups the outputs' noise falls from -23 to -28..-41 dB
(docs/numerics.md, "Channel groups").

The rewrite is exact in float and uses only ops LiteRT has (CONV_2D, the activation,
DEPTHWISE_CONV_2D, CONCATENATION, GATHER)::

    Z = conv(x, W, b)             Z_g = conv(x, W[g], b[g])            for each group g
    X = act(Z)   (elementwise)    X_g = act(Z_g)
    Y = depthwise(X, V, c)        Y_g = depthwise(X_g, V[g'], c[g'])   (group = |g|)
    A = act2(Y)  (elementwise)    A_g = act2(Y_g)
                                  A = gather(concat(A_a, A_b, axis=1), inverse order, axis=1)

The groups are joined after the depthwise conv's own activation (``act2``, the tail): joined
before it, a RELU6 that was fused into the depthwise conv would become an op of its own and the
depthwise output would need a scale for its whole pre-activation range (EfficientNet-Lite0's
logits fell below cosine 0.98 that way, from above 0.995). The depthwise outputs are normalized again, so
their ranges are alike and CONCATENATION (which requantizes its inputs to one scale) loses
little; the GATHER on constant indices puts the channels back in their order, so whatever reads
``A`` is untouched and keeps its name.

Where: on the float function after the expansions and before calibration (like
``quantize.outliers``), in two steps: ``plan`` reads every channel's range in ``Z`` and ``X``
from one float pass over the first calibration samples, ``apply`` rewrites (the caller copies a
model it does not own in between, only when something splits). A channel goes to the small group
when its range is below ``1 / RATIO`` of the tensor's in both and it is not dead in ``X`` (exact
zero at any scale); a site is split only when both groups hold a channel.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir import Function, Operation, Value
from ..ir import elements_attr
from ..ir.dialects import arith, nn
from .calibrate import EngineFactory, ensure_names, input_specs
from .config import Config
from .data import DatasetManager
from .outliers import remembering
from .regions import constant_array

RATIO = 16.0               # a channel whose range is below 1/RATIO of its tensor's gets a scale of its own
STATISTICS_SAMPLES = 64    # calibration samples the channel ranges are read from (the first ones)
MAX_CHAIN = 8              # elementwise ops between the conv and the depthwise conv, at most
ELEMENTWISE = frozenset([*nn.UNARY.values(), nn.ADD, nn.SUB, nn.MUL, nn.DIV])

DOC = "channels whose ranges are far below their tensor's, in a conv -> activation -> depthwise conv of their own"


@dataclass
class Site:
    """``conv`` writes ``Z``; the elementwise ``chain`` (program order) turns it into ``X``, which
    only ``depthwise`` reads; the elementwise ``tail`` after it (its activation: a fused RELU6 must
    stay fused, so the groups are joined after it) reads only the depthwise output and itself.
    ``values``: ``Z``, the chain's results (``X`` last)."""

    conv: Operation
    chain: list[Operation]
    depthwise: Operation
    tail: list[Operation] = field(default_factory=list)   # the depthwise conv's own activation

    @property
    def exit(self) -> Value:
        """The value the groups are joined at: the tail's last, or the depthwise conv's output."""
        return self.tail[-1].result if self.tail else self.depthwise.result

    @property
    def values(self) -> list[Value]:
        return [self.conv.result] + [op.result for op in self.chain]

    @property
    def ends(self) -> list[Value]:
        """``Z`` and ``X``: the chain's inner values may be interior to one activation op
        (hard-swish written out), whose ranges no scale holds."""
        return [self.conv.result, self.depthwise.operands[0]] if self.chain else [self.conv.result]

    @property
    def label(self) -> str:
        return f"{_label(self.conv)} -> {_label(self.depthwise)}"


@dataclass
class SplitStats:
    """What the pass did: site label -> the groups it made."""

    applied: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"applied": dict(self.applied)}


GROUP_SUFFIX = ".channels_"   # a group's copy of tensor "t" is "t.channels_a" / "t.channels_b"


def source_name(name: str | None) -> str | None:
    """The model's tensor name a group's copy stands for (``name`` itself when it is no copy)."""
    return name.rsplit(GROUP_SUFFIX, 1)[0] if name and GROUP_SUFFIX in name else name


def _label(op: Operation) -> str:
    return op.label or op.results[0].name_hint or op.name


def _weights(op: Operation) -> np.ndarray | None:
    return constant_array(op.operands[1]) if len(op.operands) > 1 else None


def _bias(op: Operation) -> np.ndarray | None:
    return constant_array(op.operands[2]) if len(op.operands) > 2 else None


def _channels(v: Value) -> int | None:
    shape = v.type.shape
    return shape[1] if shape is not None and len(shape) == 4 else None


def _depthwise(op: Operation) -> bool:
    """A depthwise conv: one input channel per group, constant weights, static channels."""
    w = _weights(op)
    c = _channels(op.operands[0])
    return (op.opdef is nn.CONV and w is not None and w.ndim == 4 and w.shape[1] == 1 and c is not None
            and c > 1 and int(op.attr("group", 1)) == c and (len(op.operands) < 3 or _bias(op) is not None))


def _scalars_and(op: Operation, known: set[int]) -> bool:
    """Is every operand of ``op`` a scalar constant or one of the ``known`` values (by id)?"""
    for o in op.operands:
        a = constant_array(o)
        if (a is None and id(o) not in known) or (a is not None and a.size != 1):
            return False
    return True


def _tail(dw: Operation, position) -> list[Operation]:
    """The elementwise ops after ``dw`` that read only its output, each other and scalar constants,
    in program order, up to the last point where one value leaves them; [] when none does."""
    y = dw.result
    known, found = {id(y)}, []
    grew = True
    while grew and len(found) < MAX_CHAIN:
        grew = False
        for v in [y] + [op.result for op in found]:
            for user, _ in list(v.uses):
                if (user.opdef in ELEMENTWISE and len(user.results) == 1 and id(user.result) not in known
                        and user.result.type.shape == y.type.shape and _scalars_and(user, known)):
                    found.append(user)
                    known.add(id(user.result))
                    grew = True
    found.sort(key=position)
    for k in range(len(found), 0, -1):   # the longest prefix that only its last value leaves
        prefix = found[:k]
        inside = {id(op) for op in prefix}
        leaving = [v for v in [y] + [op.result for op in prefix]
                   if not v.uses or any(id(user) not in inside for user, _ in v.uses)]
        if leaving == [prefix[-1].result]:
            return prefix
    return []


def _site_of(dw: Operation, position) -> Site | None:
    """The site whose depthwise conv is ``dw``, or None when what feeds it is not a conv through
    elementwise ops that nothing else reads. ``position``: an op's index in the function."""
    x = dw.operands[0]
    if len(x.uses) != 1:
        return None
    chain: list[Operation] = []
    inside: set[int] = set()
    frontier = [x]
    conv = None
    while frontier:
        v = frontier.pop()
        op = getattr(v, "op", None)
        if op is None:   # a function argument: not the conv's channels
            return None
        if id(op) in inside:
            continue
        if op.opdef is nn.CONV:
            if conv is not None and conv is not op:
                return None
            conv = op
            continue
        if op.opdef not in ELEMENTWISE or len(op.results) != 1 or len(chain) >= MAX_CHAIN:
            return None
        chain.append(op)
        inside.add(id(op))
        for o in op.operands:
            a = constant_array(o)
            if a is not None:
                if a.size != 1:   # a per-channel constant would have to be split as well
                    return None
            else:
                frontier.append(o)
    if conv is None or _weights(conv) is None or int(conv.attr("group", 1)) != 1:
        return None
    if len(conv.operands) > 2 and _bias(conv) is None:
        return None
    c = _channels(conv.result)
    if c is None or c != _channels(x):
        return None
    chain.sort(key=position)
    site = Site(conv, chain, dw, _tail(dw, position))
    members = {id(op) for op in chain} | {id(dw)}
    for v in site.values:   # nothing outside the site reads Z or the chain, and shapes never broadcast
        if v.type.shape != conv.result.type.shape or any(id(user) not in members for user, _ in v.uses):
            return None
    return site


def find_sites(fn: Function, config: Config) -> list[Site]:
    """Every conv -> elementwise chain -> depthwise conv of ``fn`` that no ``exclude`` names."""
    sites = []
    order = {id(op): i for i, op in enumerate(fn.ops)}
    for op in fn.ops:
        if op.opdef is nn.CONV and _depthwise(op):
            site = _site_of(op, lambda o: order[id(o)])
            if site is not None and not any(config.excludes(o.label, o.name)
                                            for o in (site.conv, *site.chain, site.depthwise)):
                sites.append(site)
    return sites


# -- statistics and the decision ----------------------------------------------------------------------

def channel_ranges(fn: Function, sites: list[Site], dataset: DatasetManager, config: Config,
                   make_engine: EngineFactory) -> dict[str, np.ndarray]:
    """Per value of every site: each channel's width ``max(hi, 0) - min(lo, 0)`` over the first
    ``STATISTICS_SAMPLES`` samples, from the float function."""
    names = sorted({v.name_hint for s in sites for v in s.ends})
    engine = make_engine(fn, names, config.engine)
    lo: dict[str, np.ndarray] = {}
    hi: dict[str, np.ndarray] = {}
    limit = STATISTICS_SAMPLES if config.max_samples is None else min(config.max_samples, STATISTICS_SAMPLES)
    for batch in dataset.batches(input_specs(fn), config.batch_size, limit):
        out = engine.run(batch)
        for n in names:
            a = np.asarray(out[n], np.float64)
            a_lo, a_hi = a.min(axis=(0, 2, 3)), a.max(axis=(0, 2, 3))
            lo[n] = np.minimum(lo[n], a_lo) if n in lo else a_lo
            hi[n] = np.maximum(hi[n], a_hi) if n in hi else a_hi
    return {n: np.maximum(hi[n], 0.0) - np.minimum(lo[n], 0.0) for n in lo}


def small_channels(widths: list[np.ndarray], ratio: float = RATIO) -> np.ndarray | None:
    """The channels whose width is below ``1/ratio`` of the tensor's in every one of ``widths``
    (``Z``'s, then ``X``'s) and not zero in the last (``X``), as a bool mask; None when a split
    would not help: no such channel, only such channels, or a range that is not finite."""
    if not widths or not all(np.all(np.isfinite(w)) for w in widths):
        return None
    small = widths[-1] > 0   # a channel dead in X is exact zero at any scale: it stays with the wide ones
    for w in widths:
        small &= w * ratio < w.max()
    if not small.any() or small.all():
        return None
    return small


# -- the rewrite ----------------------------------------------------------------------------------------

def _constant(fn: Function, before: Operation, array: np.ndarray, name: str) -> Value:
    attr = elements_attr(np.ascontiguousarray(array))
    c = fn.body.insert_before(before, arith.CONSTANT.build([], [attr.type], value=attr)).results[0]
    c.name_hint = name
    return c


def _copy(fn: Function, before: Operation, src: Operation, operands: list[Value], label: str, name: str,
          **changed) -> Value:
    attrs = {k: src.attr(k) for k in src.attributes}
    attrs.update(changed)
    op = src.opdef.build(operands, None, loc=src.loc, label=label, **attrs)
    out = fn.body.insert_before(before, op).results[0]
    out.name_hint = name
    return out


def _copy_elementwise(fn: Function, before: Operation, ops: list[Operation], mapped: dict[int, Value],
                      tag: str) -> None:
    """Group ``tag``'s copy of elementwise ``ops`` (program order), reading ``mapped`` versions of
    their operands (by id; scalar constants as they are); adds their results to ``mapped``."""
    for op in ops:
        operands = [mapped.get(id(o), o) for o in op.operands]
        mapped[id(op.result)] = _copy(fn, before, op, operands, f"{_label(op)}/channels_{tag}",
                                      f"{op.result.name_hint}{GROUP_SUFFIX}{tag}")


def rewrite(fn: Function, site: Site, small: np.ndarray) -> None:
    """Split ``site`` into the ``small`` channels and the others (see the module notes)."""
    dw = site.depthwise
    anchor = site.tail[-1] if site.tail else dw   # every op and constant the copies read comes before it
    groups = [np.flatnonzero(small), np.flatnonzero(~small)]
    weight, bias = _weights(site.conv), _bias(site.conv)
    dw_weight, dw_bias = _weights(dw), _bias(dw)
    multiplier = dw_weight.shape[0] // len(small)
    parts, order = [], []
    for tag, g in zip("ab", groups):
        conv = site.conv
        name = f"{conv.result.name_hint}{GROUP_SUFFIX}{tag}"
        operands = [conv.operands[0], _constant(fn, anchor, weight[g], f"{name}.weight")]
        if bias is not None:
            operands.append(_constant(fn, anchor, bias[g], f"{name}.bias"))
        mapped = {id(conv.result): _copy(fn, anchor, conv, operands, f"{_label(conv)}/channels_{tag}", name)}
        _copy_elementwise(fn, anchor, site.chain, mapped, tag)
        out_channels = (g[:, None] * multiplier + np.arange(multiplier)[None, :]).ravel()
        name = f"{dw.result.name_hint}{GROUP_SUFFIX}{tag}"
        operands = [mapped[id(dw.operands[0])], _constant(fn, anchor, dw_weight[out_channels], f"{name}.weight")]
        if dw_bias is not None:
            operands.append(_constant(fn, anchor, dw_bias[out_channels], f"{name}.bias"))
        mapped[id(dw.result)] = _copy(fn, anchor, dw, operands, f"{_label(dw)}/channels_{tag}", name, group=len(g))
        _copy_elementwise(fn, anchor, site.tail, mapped, tag)
        parts.append(mapped[id(site.exit)])
        order.append(out_channels)
    joined = fn.body.insert_before(anchor, nn.CONCAT.build(parts, None, loc=dw.loc, label=f"{_label(dw)}/channels",
                                                       axis=1)).results[0]
    exit = site.exit
    joined.name_hint = f"{exit.name_hint}.channels"
    inverse = np.argsort(np.concatenate(order)).astype(np.int64)
    index = _constant(fn, anchor, inverse, f"{exit.name_hint}.channel_order")
    back = fn.body.insert_before(anchor, nn.GATHER.build([joined, index], None, loc=dw.loc,
                                                     label=f"{_label(dw)}/channel_order", axis=1)).results[0]
    name = exit.name_hint
    exit.replace_all_uses_with(back)
    for op in [*reversed(site.tail), dw, *reversed(site.chain), site.conv]:
        consts = [o for o in op.operands if constant_array(o) is not None]
        fn.body.erase(op)
        for c in consts:
            if not c.uses:
                fn.body.erase(c.op)
    back.name_hint = name   # the user's tensor name stays on the tensor with the user's values


# -- the pass -------------------------------------------------------------------------------------------

def plan(fn: Function, dataset: DatasetManager, config: Config,
         make_engine: EngineFactory) -> tuple[list[tuple[int, np.ndarray, str]], DatasetManager]:
    """Which sites of ``fn`` to split (``Config.channel_split``), read-only: ``(index in find_sites,
    small-channel mask, what the summary says)`` each, and the dataset to calibrate with (the same
    samples). Reading first lets the caller copy a model it does not own only when a site splits."""
    if not config.channel_split:
        return [], dataset
    sites = find_sites(fn, config)
    if not sites:
        return [], dataset
    head, dataset = remembering(dataset)
    widths = channel_ranges(fn, sites, head, config, make_engine)
    chosen = []
    for i, site in enumerate(sites):
        ws = [widths[v.name_hint] for v in site.ends if v.name_hint in widths]
        small = small_channels(ws) if len(ws) == len(site.ends) else None
        if small is not None:
            inner = max(float(w[small].max()) for w in ws)
            outer = max(float(w.max()) for w in ws)
            chosen.append((i, small, f"{int(small.sum())} of {len(small)} channels (range <= {inner:.3g}) apart "
                                     f"from the rest (<= {outer:.3g})"))
    return chosen, dataset


def apply(fn: Function, chosen: list[tuple[int, np.ndarray, str]], config: Config) -> SplitStats:
    """Split the ``chosen`` sites of ``fn`` (from ``plan`` on ``fn`` or on an unchanged copy of it)."""
    stats = SplitStats()
    if not chosen:
        return stats
    sites = find_sites(fn, config)
    for i, small, what in chosen:
        rewrite(fn, sites[i], small)
        stats.applied[sites[i].label] = what
    ensure_names(fn)
    return stats


def summary_lines(stats: SplitStats) -> list[str]:
    """The summary's account of the pass."""
    if not stats.applied:
        return []
    lines = [f"channel groups: {len(stats.applied)} ({DOC})"]
    lines += [f"  {label}: {what}" for label, what in stats.applied.items()]
    return lines
