"""The budget's integer runs on several threads (``Config.workers``): a batch of stacked samples is
cut along axis 0 and joined again only where that axis is the samples' in every output, and the
outputs are the whole batch's either way."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir import api


def _model(time_major: bool):
    """x [N, 4, 6] -> MatMul -> y [N, 4, 5]; with ``time_major`` also t = y transposed to [4, N, 5]."""
    w = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 5])]
    if time_major:
        nodes.append(helper.make_node("Transpose", ["y"], ["t"], perm=[1, 0, 2], name="tr"))
        outputs.append(helper.make_tensor_value_info("t", TensorProto.FLOAT, [4, "N", 5]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 6])],
                              outputs, [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class _Spy:
    """An interpreter engine that records the batch sizes it is given."""

    def __init__(self, fn):
        self.inner, self.sizes = api.make_engine(fn, [], "interpreter"), []

    def run(self, feeds):
        self.sizes.append(len(feeds["x"]))
        return self.inner.run(feeds)

    def run_all(self, batches, workers=None):
        self.sizes += [len(b["x"]) for b in batches]
        return self.inner.run_all(batches, workers)


@pytest.mark.parametrize("time_major", [False, True])
def test_a_stacked_batch_is_cut_only_where_every_output_keeps_the_samples_on_axis_0(time_major):
    rng = np.random.default_rng(1)
    samples = [rng.standard_normal((1, 4, 6)).astype(np.float32) for _ in range(12)]
    r = qr.quantize(_model(time_major), [{"x": s} for s in samples], qr.Config(progress=False, budget=None))
    batch = {"x": np.concatenate(samples[:7])}
    assert api._batch_dynamic(r.module.main)
    reference = [api.make_engine(r.float_function, [], "ort").run(batch)]
    spy = _Spy(r.module.main)
    got = api._run_split(spy, [batch], 3, reference)
    whole = api.make_engine(r.module.main, [], "interpreter").run(batch)
    assert list(got[0]) == list(whole)
    for k in whole:
        np.testing.assert_array_equal(got[0][k], whole[k])
    assert spy.sizes == ([7] if time_major else [3, 2, 2])


def test_a_static_batch_runs_as_given():
    model = _model(False)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_value = 1
    rng = np.random.default_rng(2)
    r = qr.quantize(model, [{"x": rng.standard_normal((1, 4, 6)).astype(np.float32)} for _ in range(16)],
                    qr.Config(progress=False, budget=None))
    assert not api._batch_dynamic(r.module.main)
