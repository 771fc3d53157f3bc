"""ONNX backend node tests through quantir: import + reference interpreter vs expected outputs.

The cases come from the onnx wheel's own generators (``onnx.backend.test.case.node``),
each a one-node model (or, for ``*_expanded*`` cases, the node's function body) with inputs
and expected outputs. ONNX feeds every input at run time, including inputs quantir needs as
compile-time constants (Reshape's shape, Pad's pads ...); :func:`prepare` binds exactly those
to their test values with ``load_onnx(constant_inputs=...)`` and feeds the rest.

A case's outcome is ``pass``, ``unsupported`` (the importer raised ``UnsupportedOpError``:
a feature quantir refuses up front) or ``fail`` (anything else: a wrong value, dtype or
shape, or an unexpected error). Tolerances are the backend runner's (rtol 1e-3, atol 1e-7);
dtypes must match exactly.
"""
from __future__ import annotations

import os
import pickle
import re
import time
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from ...errors import UnsupportedOpError
from .ops import SUPPORTED_OPS, constant_input_slots

_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")


@dataclass
class Case:
    name: str
    op_type: str          # the op the case tests (for expanded cases: the op that was expanded)
    model: onnx.ModelProto
    inputs: list
    outputs: list
    rtol: float
    atol: float

    @property
    def expanded(self) -> bool:
        return bool(_EXPANDED.search(self.name))


@dataclass
class Outcome:
    status: str                  # pass | unsupported | fail
    reason: str = ""
    seconds: float = 0.0
    max_abs_err: float | None = None
    extra: dict = field(default_factory=dict)


def collect_cases(cache_dir: "str | os.PathLike | None" = None) -> tuple[Case, ...]:
    """Every node test case of the installed onnx wheel, tagged with the op it tests.

    Running the generators takes ~10 s of CPU; with ``cache_dir`` the cases are pickled
    there once per onnx version (``onnx_node_cases-<version>.pkl``) and loaded from it later.
    """
    return _collect(None if cache_dir is None else str(cache_dir))


@lru_cache(maxsize=2)
def _collect(cache_dir: str | None) -> tuple[Case, ...]:
    path = Path(cache_dir) / f"onnx_node_cases-{onnx.__version__}.pkl" if cache_dir else None
    if path is not None and path.is_file():
        try:
            with path.open("rb") as f:
                return tuple(pickle.load(f))
        except Exception:  # noqa: BLE001 - a stale or partial cache is rebuilt
            pass
    cases = _generate()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as f:
            pickle.dump(list(cases), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    return cases


def _generate() -> tuple[Case, ...]:
    from onnx.backend.test.case import node as node_cases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = node_cases.collect_testcases()
    base_ops: dict[str, str] = {}
    for c in raw:
        if not _EXPANDED.search(c.name) and len(c.model.graph.node) >= 1:
            base_ops[c.name] = c.model.graph.node[-1].op_type if len(c.model.graph.node) == 1 else \
                _main_op(c.model)
    cases = []
    for c in raw:
        base = _EXPANDED.sub("", c.name)
        op = base_ops.get(base) or _main_op(c.model)
        inputs, outputs = c.data_sets[0]
        cases.append(Case(c.name, op, c.model, list(inputs), list(outputs), c.rtol, c.atol))
    return tuple(sorted(cases, key=lambda c: c.name))


def _main_op(model: onnx.ModelProto) -> str:
    return model.graph.node[-1].op_type if model.graph.node else "<empty>"


def supported_cases(cache_dir=None) -> list[Case]:
    return [c for c in collect_cases(cache_dir) if c.op_type in SUPPORTED_OPS]


def _as_array(v):
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    return v


def prepare(case: Case) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(constant_inputs, feeds): inputs that feed a constant-only slot are bound as constants."""
    graph = case.model.graph
    init = {t.name for t in graph.initializer}
    names = [i.name for i in graph.input if i.name not in init]
    values = dict(zip(names, case.inputs))
    const_names = set()
    for node in graph.node:
        for i in constant_input_slots(node.op_type):
            if i < len(node.input) and node.input[i] in values:
                const_names.add(node.input[i])
    constants = {n: _as_array(values[n]) for n in const_names}
    feeds = {n: v for n, v in values.items() if n not in const_names}
    return constants, feeds


def run_case(case: Case) -> Outcome:
    from ...runtime import run
    from . import load_onnx
    start = time.perf_counter()
    try:
        constants, feeds = prepare(case)
        try:
            module = load_onnx(case.model, constant_inputs=constants)
        except UnsupportedOpError as e:
            return Outcome("unsupported", str(e), time.perf_counter() - start)
        for k, v in list(feeds.items()):
            if not isinstance(v, (np.ndarray, np.generic, onnx.TensorProto)):
                return Outcome("fail", f"input '{k}' is a {type(v).__name__}, but the import accepted it")
            feeds[k] = np.asarray(_as_array(v))
        with np.errstate(all="ignore"):
            got = list(run(module, feeds).values())
        expected = [_as_array(o) for o in case.outputs]
        if len(got) != len(expected):
            return Outcome("fail", f"{len(got)} outputs, expected {len(expected)}", time.perf_counter() - start)
        worst = 0.0
        for i, (g, e) in enumerate(zip(got, expected)):
            e = np.asarray(e)
            if g.dtype != e.dtype:
                return Outcome("fail", f"output {i}: dtype {g.dtype}, expected {e.dtype}", time.perf_counter() - start)
            if g.shape != e.shape:
                return Outcome("fail", f"output {i}: shape {g.shape}, expected {e.shape}", time.perf_counter() - start)
            try:
                np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol)
            except AssertionError as err:
                lines = [ln for ln in str(err).splitlines() if ln.strip()][:6]
                return Outcome("fail", f"output {i}: " + " | ".join(lines), time.perf_counter() - start)
            if g.size and g.dtype.kind in "fiu":
                with np.errstate(all="ignore"):
                    diff = np.abs(g.astype(np.float64) - e.astype(np.float64))
                finite = diff[np.isfinite(diff)]
                if finite.size:
                    worst = max(worst, float(finite.max()))
        return Outcome("pass", "", time.perf_counter() - start, worst)
    except Exception as e:  # noqa: BLE001 - any other error is a failure to report
        return Outcome("fail", f"{type(e).__name__}: {e}", time.perf_counter() - start)
