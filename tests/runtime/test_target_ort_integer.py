"""runtime.ort.OrtIntegerExecutor: the integer module as ONNX Runtime runs its QDQ / QOperator export."""
from __future__ import annotations

import numpy as np
import pytest

import quantir as qr
from quantir.runtime.interpreter import FeedError

from ..quantize.tiny_models import cnn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from quantir.backends.onnx import to_onnx_quantized  # noqa: E402
from quantir.runtime.ort import OrtIntegerExecutor  # noqa: E402


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    path = tmp_path_factory.mktemp("ort_integer") / "cnn.onnx"
    cnn(path)
    x = np.random.default_rng(0).normal(size=(64, 1, 8, 8)).astype(np.float32)
    return qr.quantize(str(path), {"x": x}, qr.Config(progress=False))


def _integer_names(result):
    return [v.name_hint for op in result.module.main.ops for v in op.results if (v.name_hint or "").endswith("__q")]


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
def test_exposing_values_does_not_change_what_ort_computes(result, fmt):
    x = np.random.default_rng(1).normal(size=(16, 1, 8, 8)).astype(np.float32)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    plain = ort.InferenceSession(to_onnx_quantized(result.module, format=fmt).SerializeToString(), options,
                                 providers=["CPUExecutionProvider"])
    names = _integer_names(result)
    ex = OrtIntegerExecutor(result.module, expose=names, format=fmt)
    got = ex.run({"x": x})
    for name, want in zip(ex.output_names, plain.run(None, {"x": x})):
        np.testing.assert_array_equal(got[name], want)
    ref = qr.run(result.module, {"x": x}, intermediates=names)
    assert set(ex.exposed) | set(ex.unavailable) == set(names)
    for name in ex.exposed:   # int8, channels first, and within a few steps of LiteRT's arithmetic
        assert got[name].dtype == np.int8 and got[name].shape == ref[name].shape, name
        assert np.abs(got[name].astype(int) - ref[name].astype(int)).max() <= 4, name


def test_unknown_name_is_refused(result):
    with pytest.raises(FeedError, match="no quantized value named 'nope__q'"):
        OrtIntegerExecutor(result.module, expose=["nope__q"])
