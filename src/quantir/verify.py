"""Bit-exactness of a .tflite model: LiteRT's reference kernels vs quantir's interpreter.

:func:`verify_tflite` reads the model with quantir's TFLite frontend, runs it in the LiteRT
interpreter with ``BUILTIN_REF`` (the reference kernels; the default resolver adds XNNPACK,
whose float requantization differs by ±1) and in quantir's reference interpreter on the same
feeds, and compares every output and every intermediate tensor element by element.

Where LiteRT's reference and optimized kernels disagree (MEAN, SUM, SOFTMAX, per-channel
FULLY_CONNECTED; docs/numerics.md), quantir's kernels follow the reference.

LiteRT runs in one child process per call (:class:`~.backends.tflite.litert.OracleProcess`):
its kernels trust the file, and a model that quantir runs can make them segfault or abort. Such
a crash, or LiteRT refusing the model, is reported as an :class:`OracleError`, not suffered.

Like :mod:`quantir.api`, this module sits above every layer (frontend, runtime, backend).
``ai_edge_litert`` is needed only when :func:`verify_tflite` runs.
"""
from __future__ import annotations

import importlib.util
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np

from .errors import QuantirError
from .ir.dialects import qnn
from .runtime.interpreter import FeedError

FLOAT_TOLERANCE = 1e-5   # a float32 op in isolation: summation order and libm, relative to its output's range

__all__ = ["TensorDiff", "OpDiff", "VerifyReport", "OracleError", "verify_tflite", "compare_tensors"]


class OracleError(QuantirError):
    """LiteRT crashed on the model (``signal`` names it, e.g. ``SIGSEGV``) or refused it."""

    def __init__(self, message: str, signal: str | None = None):
        super().__init__(message)
        self.signal = signal


@dataclass
class TensorDiff:
    """One tensor compared: how many elements differ and by how much (in stored integer steps)."""

    name: str
    index: int
    shape: tuple[int, ...]
    differing: int
    max_abs_diff: float
    is_output: bool = False

    @property
    def equal(self) -> bool:
        return self.differing == 0

    def as_dict(self) -> dict:
        return {"name": self.name, "index": self.index, "shape": list(self.shape), "differing": self.differing,
                "max_abs_diff": self.max_abs_diff, "output": self.is_output}


@dataclass
class OpDiff:
    """One op run in isolation: quantir's kernel on LiteRT's own input tensors, against LiteRT's
    output tensor (so a difference is this op's, not one carried in from an earlier op)."""

    op: str          # the IR op's name (e.g. ``hybrid.fully_connected``)
    label: str       # its label, or its output's name
    output: TensorDiff
    in_float: bool = False        # computes in float32 (not a hybrid or integer op)
    reference_max: float = 0.0    # max |LiteRT's output|, the scale of a float op's rounding

    @property
    def relative(self) -> float:
        return self.output.max_abs_diff / self.reference_max if self.reference_max else float(self.output.differing > 0)

    @property
    def ok(self) -> bool:
        """Integer arithmetic (int8 ops, the hybrid ops' integer products, data movement) must be
        bit-exact; a float op is allowed its summation order and libm: FLOAT_TOLERANCE of its range."""
        return self.output.equal or (self.in_float and self.relative <= FLOAT_TOLERANCE)

    def as_dict(self) -> dict:
        return {"op": self.op, "label": self.label, **self.output.as_dict(), "in_float": self.in_float,
                "relative": self.relative, "ok": self.ok}


@dataclass
class VerifyReport:
    samples: int
    resolver: str
    outputs: list[TensorDiff] = field(default_factory=list)
    intermediates: list[TensorDiff] = field(default_factory=list)
    ops: list[OpDiff] = field(default_factory=list)   # with isolated=True

    @property
    def ok(self) -> bool:
        return all(d.equal for d in self.outputs + self.intermediates)

    @property
    def ops_ok(self) -> bool:
        """Every op, run in isolation, within what it may differ by (``OpDiff.ok``)."""
        return bool(self.ops) and all(d.ok for d in self.ops)

    def as_dict(self) -> dict:
        return {"samples": self.samples, "resolver": self.resolver, "bit_exact": self.ok,
                "outputs": [d.as_dict() for d in self.outputs],
                "intermediates": [d.as_dict() for d in self.intermediates],
                **({"ops": [d.as_dict() for d in self.ops]} if self.ops else {})}

    def text(self) -> str:
        lines = [f"{self.samples} samples, LiteRT resolver {self.resolver}"]
        for d in self.outputs:
            lines.append(f"output {d.name} {list(d.shape)}: {d.differing} differing elements, "
                         f"max |diff| {d.max_abs_diff:g}")
        bad = [d for d in self.intermediates if not d.equal]
        lines.append(f"intermediate tensors: {len(self.intermediates)} compared, {len(bad)} differ")
        lines += [f"  {d.name} (tensor {d.index}): {d.differing} differing elements, max |diff| {d.max_abs_diff:g}"
                  for d in bad[:20]]
        if self.ops:
            kinds: dict[str, list[OpDiff]] = {}
            for d in self.ops:
                kinds.setdefault(d.op, []).append(d)
            lines.append("ops in isolation (quantir's kernel on LiteRT's inputs):")
            for name, ds in sorted(kinds.items()):
                differ = [d for d in ds if not d.output.equal]
                worst = max((d.relative for d in differ), default=0.0)
                bad = [d for d in ds if not d.ok]
                lines.append(f"  {name}: {len(ds)} ops, {len(differ)} differ"
                             + (f" (float rounding, at most {worst:.1e} of the range)" if differ and not bad else "")
                             + (f"; {len(bad)} beyond what they may: " + ", ".join(d.label for d in bad[:5])
                                if bad else ""))
            lines.append("every op within its arithmetic (integer ops bit-exact)" if self.ops_ok else
                         "NOT every op within its arithmetic")
        lines.append("bit-exact" if self.ok else "NOT bit-exact")
        return "\n".join(lines)


def compare_tensors(ours: np.ndarray, theirs: np.ndarray, name: str, index: int, is_output: bool = False) -> TensorDiff:
    if ours.shape != theirs.shape:
        raise QuantirError(f"tensor '{name}': quantir computes shape {ours.shape}, LiteRT {theirs.shape}")
    differing = int(np.count_nonzero(ours != theirs))   # a NaN anywhere counts as differing
    diff = np.abs(ours.astype(np.float64) - theirs.astype(np.float64))
    worst = float(np.nanmax(diff)) if differing and not np.isnan(diff).all() else 0.0
    return TensorDiff(name, index, tuple(ours.shape), differing, worst, is_output)


def _load_feeds(inputs: str | os.PathLike | Mapping[str, np.ndarray], names: list[str]) -> dict[str, np.ndarray]:
    if isinstance(inputs, (str, os.PathLike)):
        try:
            with np.load(inputs, allow_pickle=False) as npz:
                feeds = {k: npz[k] for k in npz.files}
        except (OSError, ValueError, AttributeError) as e:   # missing, not an archive, a bare .npy
            raise FeedError(f"{inputs}: cannot read the inputs as an .npz archive: {e}") from None
    else:
        feeds = {k: np.asarray(v) for k, v in inputs.items()}
    if set(feeds) != set(names):
        if len(feeds) == 1 and len(names) == 1:
            feeds = {names[0]: next(iter(feeds.values()))}
        else:
            raise FeedError(f"inputs have keys {sorted(feeds)}, the model's inputs are {names}")
    counts = {len(v) if v.ndim else 0 for v in feeds.values()}
    if len(counts) != 1 or 0 in counts:
        raise FeedError(f"every input needs the same number of samples on axis 0, found {sorted(counts)}")
    return feeds


def _refuse_aborting_softmax(softmaxes, values: Mapping[str, np.ndarray], first_sample: int) -> None:
    """LiteRT's reference SOFTMAX aborts the whole process on a row whose sum of exponentials is
    512 or more (e.g. 512 logits tied with the maximum): say so instead of running it."""
    from .runtime.qkernels.softmax import prepare_softmax, reference_softmax_aborts
    for op in softmaxes:
        x, y = op.operands[0], op.results[0]
        if x.type.element_type.storage_width != 8:   # int16 (a LUT kernel): its own limits are checked when it runs
            continue
        p = prepare_softmax(float(qnn.scales_of(x.type)), float(op.attr("beta")), float(qnn.scales_of(y.type)),
                            int(qnn.zero_points_of(y.type)))
        rows = reference_softmax_aborts(values[x.name_hint], **p.as_kwargs())
        if rows.any():
            sample = first_sample + int(np.argwhere(rows)[0][0])
            raise QuantirError(f"sample {sample}: LiteRT's reference SOFTMAX ('{y.name_hint}') would abort the process "
                               f"on it (a row's sum of exponentials is 512 or more, e.g. 512 logits tied with the "
                               f"maximum); quantir gives -128 there. Verify with --resolver optimized, or other "
                               f"inputs")


class _Oracle:
    """The LiteRT child, started on the first chunk (after quantir ran it), its failures as OracleError."""

    def __init__(self, model: bytes, resolver: str, workdir: str, source: str):
        if importlib.util.find_spec("ai_edge_litert") is None:
            from .backends.tflite.litert import LiteRTUnavailableError
            raise LiteRTUnavailableError("verify needs ai_edge_litert; install it with pip install 'quantir[oracle]'")
        self.model, self.resolver, self.workdir, self.source = model, resolver, workdir, source
        self.process = None

    def __enter__(self) -> _Oracle:
        return self

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            self.process.close()

    def chunk(self, feeds: list[np.ndarray], indices: list[int], start: int, count: int):
        from .backends.tflite.litert import OracleCrash, OracleProcess, OracleRefusal
        samples = f"sample {start}" if count == 1 else f"samples {start}..{start + count - 1}"
        try:
            if self.process is None:
                self.process = OracleProcess(self.model, self.resolver, self.workdir)
            return self.process.chunk(feeds, indices)
        except OSError as e:   # no process or no temporary file could be made
            raise OracleError(f"{self.source}: cannot run LiteRT in a child process: {e.strerror or e}") from None
        except OracleCrash as e:
            said = e.stderr.splitlines()[-1] if e.stderr else ""
            raise OracleError(f"{self.source}: {e} ({samples}); quantir's own run succeeded. LiteRT does not "
                              f"validate the file: `quantir check {self.source}` lists what LiteRT cannot take in it"
                              + (f". LiteRT's last words: {said}" if said else ""),
                              e.how.removeprefix("crashed with ")) from None
        except OracleRefusal as e:
            raise OracleError(f"{self.source}: LiteRT refuses the model while {_phase(e.phase)} ({samples}); "
                              f"quantir's own run succeeded. LiteRT says: {e.message}") from None


def _chunk(sub, names: list[str], n: int, batch: int) -> int:
    """How many entries of axis 0 each run takes: ``batch`` when every input's first dimension is
    dynamic, else the static one (every input's the same); ``n`` must be a multiple of it."""
    leads = [tuple((sub.tensors[i].shape_signature or sub.tensors[i].shape)[:1]) for i in sub.inputs]
    if all(lead == (-1,) for lead in leads):
        return max(1, batch)
    sizes = {lead[0] for lead in leads if lead and lead[0] > 0}
    if len(sizes) != 1 or any(not lead or lead[0] <= 0 for lead in leads):
        return 1
    size = sizes.pop()
    if n % size:
        raise FeedError(f"the model's inputs ({', '.join(names)}) take {size} entries on axis 0 (a static first "
                        f"dimension); the inputs give {n}, not a multiple of {size}")
    return size


def _phase(phase: str) -> str:
    from .backends.tflite.litert import _PHASE_TEXT
    return _PHASE_TEXT.get(phase, phase)


def verify_tflite(model: str | os.PathLike | bytes, inputs: str | os.PathLike | Mapping[str, np.ndarray], *,
                  resolver: str = "reference", intermediates: bool = True, batch: int = 16,
                  isolated: bool = False) -> VerifyReport:
    """Compare LiteRT (``resolver``) and quantir's interpreter on ``inputs`` (.npz path or arrays
    keyed by the model's input names; axis 0 indexes samples, run ``batch`` at a time, or as many
    at a time as the model's static first dimension takes: one for a batch of 1, all T steps of a
    time-major ``[T, B, I]`` input, whose recurrence a step at a time would never run).

    ``isolated``: also run each op on LiteRT's own input tensors and compare its output with
    LiteRT's (``VerifyReport.ops``). quantir's side runs with ``float_arithmetic="litert"``: its
    float matmul, sum, mean, softmax, GELU, exp, log, tanh and sigmoid round as LiteRT's reference
    kernels do, so a dynamic-range model (float ops around hybrid ones) can match end to end; a
    float op without such a kernel shows its own rounding in isolation."""
    from .backends.tflite.reader import read_model
    from .frontends.tflite import import_tflite
    from .runtime import run
    from .runtime.interpreter import input_names

    if isinstance(model, (str, os.PathLike)):
        try:
            data = Path(model).read_bytes()
        except OSError as e:
            raise QuantirError(f"{model}: cannot read the model: {e.strerror or e}") from None
        source = str(model)
    else:
        data, source = bytes(model), "<bytes>"
    tfl = read_model(data, source)
    imported = import_tflite(tfl)
    sub = tfl.subgraphs[0]
    in_names = [sub.tensors[i].name for i in sub.inputs]
    ir_names = input_names(imported.module.main)   # the importer renames empty or duplicate names
    feeds = _load_feeds(inputs, in_names)
    n = len(next(iter(feeds.values())))
    step = _chunk(sub, in_names, n, batch)
    bound = {i: b for i, b in imported.bindings.items()} if intermediates else \
        {i: imported.bindings[i] for i in sub.outputs if i in imported.bindings}
    out_set = set(sub.outputs)
    softmaxes = [op for op in imported.module.main.ops if op.opdef is qnn.SOFTMAX] if resolver == "reference" else []
    acc: dict[int, TensorDiff] = {}
    per_op: dict[tuple, OpDiff] = {}
    if isolated and not intermediates:
        raise QuantirError("isolated=True compares each op on LiteRT's intermediate tensors: keep intermediates")
    with tempfile.TemporaryDirectory(prefix="quantir-verify-") as tmp, _Oracle(data, resolver, tmp, source) as oracle:
        for start in range(0, n, step):
            chunk = {k: v[start:start + step] for k, v in feeds.items()}
            # quantir first: a sample that would make LiteRT's process abort is reported, not run
            ours = run(imported.module, {ir: chunk[t] for t, ir in zip(in_names, ir_names)},
                       intermediates=list(dict.fromkeys([b.name for b in bound.values()] +
                                                        [op.operands[0].name_hint for op in softmaxes])),
                       float_arithmetic="litert")
            _refuse_aborting_softmax(softmaxes, ours, start)
            outs, theirs = oracle.chunk([chunk[k] for k in in_names], list(bound), start, len(chunk[in_names[0]]))
            for i, arr in zip(sub.outputs, outs):
                theirs[i] = arr
            for i, b in bound.items():
                mine = ours[b.name]
                mine = np.transpose(mine, b.to_tflite) if b.to_tflite else mine
                d = compare_tensors(mine, theirs[i], sub.tensors[i].name, i, i in out_set)
                prev = acc.get(i)
                if prev is not None:
                    shape = (prev.shape[0] + d.shape[0],) + d.shape[1:] if d.shape else d.shape   # (a scalar: a size)
                    d = TensorDiff(d.name, i, shape,
                                   prev.differing + d.differing, max(prev.max_abs_diff, d.max_abs_diff), d.is_output)
                acc[i] = d
            if isolated:
                for key, diff in _isolated_ops(imported.module.main, bound, theirs, sub).items():
                    prev = per_op.get(key)
                    per_op[key] = diff if prev is None else _merge(prev, diff)
    outputs = [acc[i] for i in sub.outputs if i in acc]
    inter = [acc[i] for i in sorted(acc) if i not in out_set]
    return VerifyReport(n, resolver, outputs, inter, list(per_op.values()))


def _merge(a: OpDiff, b: OpDiff) -> OpDiff:
    x, y = a.output, b.output
    shape = (x.shape[0] + y.shape[0],) + y.shape[1:] if y.shape else y.shape
    return OpDiff(a.op, a.label, TensorDiff(x.name, x.index, shape, x.differing + y.differing,
                                            max(x.max_abs_diff, y.max_abs_diff), x.is_output),
                  a.in_float, max(a.reference_max, b.reference_max))


def _isolated_ops(fn, bound: dict, theirs: dict[int, np.ndarray], sub) -> dict[tuple, OpDiff]:
    """Each op with a LiteRT tensor among its results, computed by quantir's kernel from LiteRT's
    tensors for its operands (values with no tensor of their own — layout transposes, constants —
    are computed from the nearest ones that have)."""
    from .runtime.interpreter import kernel_for
    from .runtime.kernels.litert_float import kernel_for as litert_kernel_for
    named: dict[str, object] = {a.name_hint: a for a in fn.arguments if a.name_hint}
    for op in fn.ops:
        for r in op.results:
            if r.name_hint:
                named.setdefault(r.name_hint, r)
    known, where = {}, {}
    for i, b in bound.items():
        v = named.get(b.name)
        if v is None or i not in theirs:
            continue
        arr = theirs[i]
        known[v] = np.transpose(arr, np.argsort(b.to_tflite)) if b.to_tflite else arr
        where[v] = i
    memo: dict = {}

    def compute(op) -> tuple:
        kernel = litert_kernel_for(op.opdef, "litert") or kernel_for(op.opdef)
        out = kernel(op, *[value(o) for o in op.operands])
        return out if isinstance(out, tuple) else (out,)

    def value(v):
        if v in known:
            return known[v]
        if v not in memo:
            producer = getattr(v, "op", None)
            if producer is None:
                raise KeyError(v)
            for r, a in zip(producer.results, compute(producer)):
                memo[r] = np.asarray(a)
        return memo[v]

    out: dict[tuple, OpDiff] = {}
    for op in fn.ops:
        if not any(r in where for r in op.results):
            continue
        try:
            results = compute(op)
        except KeyError:
            continue
        for r, a in zip(op.results, results):
            if r in where:
                i = where[r]
                d = compare_tensors(np.asarray(a), known[r], sub.tensors[i].name, i, i in sub.outputs)
                theirs_i = known[r]
                in_float = theirs_i.dtype.kind == "f" and not op.name.startswith("hybrid.")
                top = float(np.max(np.abs(theirs_i))) if theirs_i.size and in_float else 0.0
                out[(op, i)] = OpDiff(op.name, op.label or r.name_hint or "", d, in_float, top)
    return out
