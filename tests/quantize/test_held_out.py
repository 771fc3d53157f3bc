"""Mixed precision measures its budget on calibration samples the ranges never saw.

``calibrate(hold_out=...)`` sets samples aside (``Statistics.held_out``), spread over the dataset
after the kept ones; the budget search measures on them, so that a budget is not met only on the
data the ranges came from."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.quantize.calibrate import held_out_rows

from ..runtime.qkernels.qk_oracle import hsettings


@given(st.integers(0, 500), st.integers(1, 64), st.integers(2, 40), st.integers(0, 64))
@hsettings(200)
def test_held_out_rows_are_every_stride_th_sample_after_the_kept_ones(first, n, stride, start):
    rows = held_out_rows(first, n, stride, start)
    index = np.arange(first, first + n)[rows]
    assert np.all(index >= start) and np.all((index - start) % stride == stride - 1)
    # split anywhere, the same samples are chosen
    k = n // 2
    np.testing.assert_array_equal(rows, np.concatenate([held_out_rows(first, k, stride, start),
                                                        held_out_rows(first + k, n - k, stride, start)]))


def _model():
    rng = np.random.default_rng(0)
    inits = {"w1": rng.normal(size=(8, 16)).astype(np.float32), "w2": rng.normal(size=(16, 4)).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
                              [numpy_helper.from_array(a, k) for k, a in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 17)])
    m.ir_version = 9
    return m


def _data(n: int) -> np.ndarray:
    return np.random.default_rng(1).normal(size=(n, 8)).astype(np.float32)


def test_the_budget_is_measured_on_samples_the_ranges_never_saw():
    x = _data(200)
    x[36] *= 50.0          # after the 32 kept, one in (200 - 32) // 32 = 5: sample 36 is held out
    r = qr.quantize(_model(), {"x": x}, qr.Config(progress=False, batch_size=16))
    held = r.statistics.held_out
    assert sum(len(b["x"]) for b in held) == 32
    assert any(np.array_equal(row, x[36]) for b in held for row in b["x"])
    assert r.statistics.num_samples == 200 - 32
    first = next(v for v in r.params if v.name_hint == "x")
    assert r.params[first].rmax < 0.5 * float(np.abs(x[36]).max())   # the outlier was never observed
    assert r.promotion is not None and r.promotion.held_out and r.promotion.samples == 32
    assert "on 32 held-out calibration samples" in r.summary()


@pytest.mark.parametrize("budget", [None, 0.99])
def test_without_a_budget_search_or_with_few_samples_every_sample_calibrates(budget):
    n = 200 if budget is None else 48
    r = qr.quantize(_model(), {"x": _data(n)}, qr.Config(progress=False, budget=budget))
    assert not r.statistics.held_out and r.statistics.num_samples == n
    if budget is not None:
        assert "too few to hold any out" in r.summary()
