"""Shared setup for the text-format tests: ``tests/`` on sys.path (oracle_tools) and the
iree-opt oracle, whose runs over all golden files are batched in parallel once per session."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parents[1]
for p in (str(_TESTS), str(Path(__file__).resolve().parent)):
    if p not in sys.path:
        sys.path.insert(0, p)

from oracle_tools import iree_opt_path  # noqa: E402


@pytest.fixture(scope="session")
def iree_opt():
    path = iree_opt_path()
    if path is None:
        pytest.skip("iree-opt not installed (pip install iree-base-compiler)")
    return path
