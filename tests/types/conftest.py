"""Shared setup for the type-system tests: ``tests/`` on sys.path (for oracle_tools)."""
import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parents[1])
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from oracle_tools import iree_opt_path  # noqa: E402


def pytest_configure(config):
    # pyproject declares the marker too; registering here keeps this folder self-contained.
    config.addinivalue_line("markers", "oracle: runs an external oracle tool (iree-opt, LiteRT); skips when absent")


@pytest.fixture(scope="session")
def iree_opt():
    path = iree_opt_path()
    if path is None:
        pytest.skip("iree-opt not installed (pip install iree-base-compiler)")
    return path
