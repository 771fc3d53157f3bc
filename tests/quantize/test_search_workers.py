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
    samples = [rng.standard_normal((1, 4, 6)).astype(np.float32) for _ in range(16)]
    r = qr.quantize(_model(time_major), [{"x": s} for s in samples], qr.Config(progress=False, budget=None))
    batch = {"x": np.concatenate(samples[:7])}
    assert api._batch_dynamic(r.module.main)
    spy = _Spy(r.module.main)
    whole = api.make_engine(r.module.main, [], "interpreter").run(batch)
    got, cut = api._run_split(spy, [batch], 3, [{k: np.zeros_like(v) for k, v in whole.items()}])
    assert list(got[0]) == list(whole)
    for k in whole:
        np.testing.assert_array_equal(got[0][k], whole[k])
    assert (spy.sizes, cut) == (([7], []) if time_major else ([3, 2, 2], [0]))


def test_parts_whose_outputs_do_not_join_into_the_expected_shapes_run_whole():
    """An input that is not per sample but has as many rows (indices for a Gather along axis 1):
    cut, each part's output has its own part's rows on axis 0 but fewer columns."""
    rng = np.random.default_rng(3)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])
    i = helper.make_tensor_value_info("i", TensorProto.INT64, ["K"])
    w = numpy_helper.from_array(rng.standard_normal((6, 6)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                               helper.make_node("Gather", ["h", "i"], ["y"], axis=1, name="g")], "g", [x, i],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "K"])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    n = 16
    feeds = {"x": rng.standard_normal((n, 6)).astype(np.float32), "i": rng.integers(0, 6, size=n)}
    r = qr.quantize(model, feeds, qr.Config(progress=False, budget=None))
    spy = _Spy(r.module.main)
    whole = api.make_engine(r.module.main, [], "interpreter").run(feeds)
    got, cut = api._run_split(spy, [feeds], 2, [whole])
    assert cut == [] and spy.sizes == [8, 8, 16]
    for k in whole:
        np.testing.assert_array_equal(got[0][k], whole[k])


def test_a_model_that_mixes_the_samples_of_a_batch_is_measured_on_whole_batches():
    """y = (x - mean over the batch) @ W: cut, its parts would each take their own mean. The first
    measurement finds that out and the search measures what one thread measures."""
    rng = np.random.default_rng(4)
    w = numpy_helper.from_array(rng.standard_normal((8, 5)).astype(np.float32), "w")
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[0], keepdims=1, name="mean"),
             helper.make_node("Sub", ["x", "m"], ["c"], name="sub"),
             helper.make_node("MatMul", ["c", "w"], ["y"], name="mm")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = (rng.standard_normal((96, 8)) * rng.uniform(0.1, 3, size=8)).astype(np.float32)
    figures = []
    for workers in (1, 2):
        r = qr.quantize(model, {"x": x}, qr.Config(progress=False, budget="60dB", workers=workers))
        p = r.promotion
        figures.append((p.before, p.after, p.evaluations, [c.names for c in p.promoted]))
    assert figures[0] == figures[1]


def test_a_static_batch_runs_as_given():
    model = _model(False)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_value = 1
    rng = np.random.default_rng(2)
    r = qr.quantize(model, [{"x": rng.standard_normal((1, 4, 6)).astype(np.float32)} for _ in range(16)],
                    qr.Config(progress=False, budget=None))
    assert not api._batch_dynamic(r.module.main)
