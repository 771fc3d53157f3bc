"""The reference interpreter: naming of inputs/outputs/intermediates, feed checking,
freeing values after their last use, and refusing ops without kernels."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from quantir.errors import QuantirError, ShapeError, UnsupportedOpError
from quantir.ir import Function, Module, StringAttr
from quantir.ir.dialects import func, nn
from quantir.runtime import FeedError, FeedTypeError, Interpreter, run
from quantir.types import FloatType, TensorType

F32 = FloatType("f32")


def chain(n_relus: int = 3, shape=(2, None)) -> Module:
    """x -> (add x x) -> relu ... -> y, with names on everything."""
    t = TensorType(shape, F32)
    fn = Function.create("main", [t], [], arg_attrs=[{"quantir.name": StringAttr("x")}])
    x = fn.arguments[0]
    x.name_hint = "x"
    v = fn.body.append(nn.ADD.build([x, x], label="double")).result
    v.name_hint = "doubled"
    for i in range(n_relus):
        v = fn.body.append(nn.RELU.build([v], label=f"relu{i}")).result
        v.name_hint = f"r{i}"
    fn.body.append(func.RETURN.build([v], []))
    fn.res_attrs = [{"quantir.name": StringAttr("y")}]
    fn.update_type()
    return Module([fn])


def test_outputs_and_intermediates():
    m = chain()
    x = np.array([[-1.0, 2.0], [3.0, -4.0]], np.float32)
    out = run(m, {"x": x})
    assert list(out) == ["y"]
    np.testing.assert_array_equal(out["y"], np.maximum(2 * x, 0))
    out = run(m, {"x": x}, intermediates=["doubled"])
    assert list(out) == ["y", "doubled"]
    np.testing.assert_array_equal(out["doubled"], 2 * x)
    everything = run(m, {"x": x}, intermediates="all")
    assert list(everything) == ["y", "doubled", "r0", "r1", "r2"]
    only = run(m, {"x": x}, outputs=["r0"])
    assert list(only) == ["r0"]


def test_dynamic_dims_accept_any_size():
    m = chain()
    for n in (1, 5):
        assert run(m, {"x": np.ones((2, n), np.float32)})["y"].shape == (2, n)


def test_feed_errors_name_what_is_wrong():
    m = chain()
    with pytest.raises(FeedError, match=r"unknown input 'image' and missing input 'x'; the model expects "
                                        r"\{'x': tensor<2x\?xf32>\}"):
        run(m, {"image": np.ones((2, 2), np.float32)})
    with pytest.raises(FeedError, match=r"missing input 'x'"):
        run(m, {})
    with pytest.raises(ShapeError, match=r"input 'x' expects rank 2 \(tensor<2x\?xf32>\), got rank 3 with shape "
                                         r"\(2, 2, 1\)"):
        run(m, {"x": np.ones((2, 2, 1), np.float32)})
    with pytest.raises(ShapeError, match=r"input 'x' expects dim 0 to be 2 \(tensor<2x\?xf32>\), got 3"):
        run(m, {"x": np.ones((3, 2), np.float32)})
    with pytest.raises(FeedTypeError, match=r"input 'x' expects dtype float32 \(tensor<2x\?xf32>\), got float64"):
        run(m, {"x": np.ones((2, 2))})
    with pytest.raises(FeedError, match=r"no value named 'nope'"):
        run(m, {"x": np.ones((2, 2), np.float32)}, intermediates=["nope"])


def test_inputs_without_names_are_arg_i():
    t = TensorType((2,), F32)
    fn = Function.create("main", [t], [])
    y = fn.body.append(nn.RELU.build([fn.arguments[0]])).result
    fn.body.append(func.RETURN.build([y], []))
    fn.update_type()
    interp = Interpreter(Module([fn]))
    assert interp.input_names == ["arg0"] and interp.output_names == ["out0"]


def test_values_are_freed_after_their_last_use():
    m = chain(n_relus=6)
    interp = Interpreter(m)
    produced: list[weakref.ref] = []
    live_counts = []

    def tracking(kernel):
        def run_kernel(op, *args):
            gc.collect()
            live_counts.append(sum(r() is not None for r in produced))
            out = kernel(op, *args)
            produced.append(weakref.ref(out))
            return out
        return run_kernel

    interp.kernels = {op: tracking(k) for op, k in interp.kernels.items()}
    interp.run({"x": np.ones((2, 3), np.float32)})
    # When each kernel starts, only its own input is alive among earlier results.
    assert max(live_counts) <= 1, live_counts


def test_kept_values_are_not_freed():
    m = chain(n_relus=4)
    out = run(m, {"x": np.ones((2, 3), np.float32)}, intermediates=["r0", "r2"])
    assert set(out) == {"y", "r0", "r2"}


def test_opaque_op_is_refused_before_running():
    t = TensorType((2,), F32)
    fn = Function.create("main", [t], [])
    op = fn.body.append(nn.ONNX_OP.build([fn.arguments[0]], [t], label="weird", op_type="Weird", opset=17,
                                         node=""))
    fn.body.append(func.RETURN.build([op.results[0]], []))
    fn.update_type()
    with pytest.raises(UnsupportedOpError, match=r"ONNX op 'Weird' \(node 'weird'\) was imported as an opaque "
                                                 r"'nn.onnx_op'"):
        Interpreter(Module([fn]))


def test_kernel_result_is_checked_against_the_type():
    m = chain(n_relus=1)
    interp = Interpreter(m)
    relu = next(op for op in m.main.ops if op.opdef is nn.RELU)
    interp.kernels[relu] = lambda op, x: x.astype(np.float64)
    with pytest.raises(ShapeError, match=r"kernel of 'nn.relu' \(node 'relu0'\) produced dtype float64"):
        interp.run({"x": np.ones((2, 2), np.float32)})


def test_run_all_is_run_on_each_feed_in_order():
    m = chain()
    runner = Interpreter(m)
    feeds = [{"x": np.full((2, n), n - 3, np.float32)} for n in (1, 4, 2, 7, 3)]   # every size its own
    for workers in (1, 2, 3):
        got = runner.run_all(feeds, intermediates=["doubled"], workers=workers)
        want = [run(m, f, intermediates=["doubled"]) for f in feeds]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert list(g) == list(w) == ["y", "doubled"]
            for k in w:
                np.testing.assert_array_equal(g[k], w[k])
    assert runner.run_all([], workers=2) == []


def test_run_all_raises_the_first_error_in_feed_order():
    runner = Interpreter(chain())
    good = {"x": np.ones((2, 3), np.float32)}
    with pytest.raises(ShapeError, match=r"input 'x' expects rank 2"):
        runner.run_all([good, {"x": np.ones((2, 2, 1), np.float32)}, {"image": good["x"]}], workers=2)
    for workers in (0, -1, 1.5, True):
        with pytest.raises(QuantirError, match=r"workers must be a whole number of at least 1"):
            runner.run_all([good], workers=workers)
