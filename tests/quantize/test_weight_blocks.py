"""Large weights are quantized and bias-corrected a block of output channels at a time (two
threads): the results equal the whole-array computation element for element."""
import numpy as np
import pytest

from quantir.numerics import quantize_weights, symmetric_weight_qparams
from quantir.quantize import params as solver   # the weight math (blocks) lives in params
from quantir.quantize.solver import WeightParams, dequantized, quantized_weights, weight_error_output


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(solver, "_BLOCK_ELEMENTS", 1000)   # many blocks on a small weight


@pytest.mark.parametrize("per_channel", [True, False])
def test_blocked_quantization_equals_whole(small_blocks, per_channel):
    rng = np.random.default_rng(1)
    w = (rng.normal(size=(97, 64)) * rng.uniform(0.01, 3, size=(97, 1))).astype(np.float32)
    w[:, :5] = np.round(w[:, :5] * 8) / 8   # some exact ties for some scales
    scale, _ = symmetric_weight_qparams(w, axis=0 if per_channel else None)
    q = quantized_weights(w, WeightParams(np.asarray(scale, np.float32), None))
    assert q.dtype == np.int8 and len(list(solver._row_blocks(w))) > 5
    np.testing.assert_array_equal(q, quantize_weights(w, scale, axis=0 if per_channel else None))
    taps = rng.normal(size=64)
    np.testing.assert_allclose(weight_error_output(None, w, q, scale, taps), (dequantized(q, scale) - w) @ taps,
                               rtol=1e-12, atol=1e-12)
