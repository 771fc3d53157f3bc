"""Golden IR files, the way MLIR tests itself.

Each ``tests/text/golden/*.mlir`` starts with ``// RUN: quantir opt %s [flags]`` and holds
``// CHECK...`` lines (checked with :mod:`filecheck` against stdout) and/or
``// expected-error`` lines (with ``--verify-diagnostics``, the tool must exit 0). The same
file and flags run through ``quantir opt`` and through ``iree-opt --allow-unregistered-dialect``
(the oracle), and both must pass the same checks. ``// ORACLE: none`` skips the oracle (for the
quant instrumentation ops, which upstream MLIR removed).
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


@dataclass(frozen=True)
class Golden:
    path: Path
    flags: tuple[str, ...]
    oracle: bool
    text: str

    @property
    def verify_diagnostics(self) -> bool:
        return "--verify-diagnostics" in self.flags

    @property
    def has_checks(self) -> bool:
        return re.search(r"//\s*CHECK", self.text) is not None


def load(path: Path) -> Golden:
    text = path.read_text()
    first = text.splitlines()[0] if text else ""
    m = re.match(r"//\s*RUN:\s*quantir\s+opt\s+(.*)$", first)
    if m is None:
        raise ValueError(f"{path.name}: the first line must be '// RUN: quantir opt %s [flags]'")
    words = shlex.split(m.group(1).split("|", 1)[0])
    if "%s" not in words:
        raise ValueError(f"{path.name}: the RUN line must name the input as %s")
    flags = tuple(w for w in words if w != "%s")
    oracle = re.search(r"^//\s*ORACLE:\s*none\s*$", text, re.M) is None
    return Golden(path, flags, oracle, text)


def all_goldens() -> list[Golden]:
    return [load(p) for p in sorted(GOLDEN_DIR.glob("*.mlir"))]


def run_quantir(g: Golden) -> tuple[int, str, str]:
    """``quantir opt`` in-process: (exit code, stdout, stderr)."""
    from quantir.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["opt", str(g.path), *g.flags])
    return code, out.getvalue(), err.getvalue()


def run_oracles(goldens: list[Golden], exe: str) -> dict[Path, subprocess.CompletedProcess]:
    """``iree-opt`` over every file, in parallel (one process per file)."""
    def one(g: Golden):
        return g.path, subprocess.run([exe, "--allow-unregistered-dialect", str(g.path), *g.flags],
                                      capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(pool.map(one, goldens))
