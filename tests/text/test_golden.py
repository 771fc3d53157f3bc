"""Runs every golden file through ``quantir opt`` and through the ``iree-opt`` oracle
(see :mod:`golden_runner`)."""
from __future__ import annotations

import pytest

from .filecheck import check
from .golden_runner import all_goldens, run_oracles, run_quantir

GOLDENS = all_goldens()
IDS = [g.path.name for g in GOLDENS]


def _assert_passes(g, code: int, out: str, err: str, tool: str) -> None:
    assert code == 0, f"{tool} failed on {g.path.name} (exit {code}):\n{err}"
    if g.has_checks:
        check(g.text, out, f"{g.path.name} [{tool}]")


@pytest.mark.parametrize("golden", GOLDENS, ids=IDS)
def test_quantir(golden):
    _assert_passes(golden, *run_quantir(golden), "quantir opt")


@pytest.fixture(scope="module")
def oracle_results(iree_opt):
    return run_oracles([g for g in GOLDENS if g.oracle], iree_opt)


@pytest.mark.oracle
@pytest.mark.parametrize("golden", GOLDENS, ids=IDS)
def test_oracle(golden, oracle_results):
    if not golden.oracle:
        pytest.skip("ORACLE: none (ops removed from upstream MLIR)")
    proc = oracle_results[golden.path]
    _assert_passes(golden, proc.returncode, proc.stdout, proc.stderr, "iree-opt")
