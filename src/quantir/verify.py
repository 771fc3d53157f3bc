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

__all__ = ["TensorDiff", "VerifyReport", "OracleError", "verify_tflite", "compare_tensors"]


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
class VerifyReport:
    samples: int
    resolver: str
    outputs: list[TensorDiff] = field(default_factory=list)
    intermediates: list[TensorDiff] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(d.equal for d in self.outputs + self.intermediates)

    def as_dict(self) -> dict:
        return {"samples": self.samples, "resolver": self.resolver, "bit_exact": self.ok,
                "outputs": [d.as_dict() for d in self.outputs],
                "intermediates": [d.as_dict() for d in self.intermediates]}

    def text(self) -> str:
        lines = [f"{self.samples} samples, LiteRT resolver {self.resolver}"]
        for d in self.outputs:
            lines.append(f"output {d.name} {list(d.shape)}: {d.differing} differing elements, "
                         f"max |diff| {d.max_abs_diff:g}")
        bad = [d for d in self.intermediates if not d.equal]
        lines.append(f"intermediate tensors: {len(self.intermediates)} compared, {len(bad)} differ")
        lines += [f"  {d.name} (tensor {d.index}): {d.differing} differing elements, max |diff| {d.max_abs_diff:g}"
                  for d in bad[:20]]
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


def _phase(phase: str) -> str:
    from .backends.tflite.litert import _PHASE_TEXT
    return _PHASE_TEXT.get(phase, phase)


def verify_tflite(model: str | os.PathLike | bytes, inputs: str | os.PathLike | Mapping[str, np.ndarray], *,
                  resolver: str = "reference", intermediates: bool = True, batch: int = 16) -> VerifyReport:
    """Compare LiteRT (``resolver``) and quantir's interpreter on ``inputs`` (.npz path or arrays
    keyed by the model's input names; axis 0 indexes samples, run ``batch`` at a time, or one at
    a time when the model's batch is static)."""
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
    dynamic = all(sub.tensors[i].shape_signature[:1] == (-1,) for i in sub.inputs)
    step = max(1, batch) if dynamic else 1
    bound = {i: b for i, b in imported.bindings.items()} if intermediates else \
        {i: imported.bindings[i] for i in sub.outputs if i in imported.bindings}
    out_set = set(sub.outputs)
    softmaxes = [op for op in imported.module.main.ops if op.opdef is qnn.SOFTMAX] if resolver == "reference" else []
    acc: dict[int, TensorDiff] = {}
    with tempfile.TemporaryDirectory(prefix="quantir-verify-") as tmp, _Oracle(data, resolver, tmp, source) as oracle:
        for start in range(0, n, step):
            chunk = {k: v[start:start + step] for k, v in feeds.items()}
            # quantir first: a sample that would make LiteRT's process abort is reported, not run
            ours = run(imported.module, {ir: chunk[t] for t, ir in zip(in_names, ir_names)},
                       intermediates=list(dict.fromkeys([b.name for b in bound.values()] +
                                                        [op.operands[0].name_hint for op in softmaxes])))
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
    outputs = [acc[i] for i in sub.outputs if i in acc]
    inter = [acc[i] for i in sorted(acc) if i not in out_set]
    return VerifyReport(n, resolver, outputs, inter)
