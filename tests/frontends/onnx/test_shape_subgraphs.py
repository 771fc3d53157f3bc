"""Shape subgraphs with dynamic dims: what folds to a constant Reshape, what is reshaped at run
time, and the typed error for a target quantir cannot follow. ONNX Runtime is the oracle."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from quantir.errors import UnsupportedOpError  # noqa: E402
from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.ir.dialects import nn  # noqa: E402
from quantir.runtime import run  # noqa: E402


def _i64(*v):
    return np.asarray(v, np.int64)


def _dim(shape_of: str, index: int, out: str) -> list:
    """``Unsqueeze(Gather(Shape(shape_of), index))`` as the 1-element tensor ``out``."""
    return [helper.make_node("Shape", [shape_of], [f"{out}_s"]),
            helper.make_node("Gather", [f"{out}_s", f"{out}_i"], [f"{out}_g"], axis=0),
            helper.make_node("Unsqueeze", [f"{out}_g", "axes0"], [out])], {f"{out}_i": np.int64(index)}


def _ops(module, opdef):
    return [op for op in module.main.ops if op.opdef is opdef]


def _check_against_ort(model, feeds_list):
    module = load_onnx(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for feeds in feeds_list:
        want = sess.run(None, feeds)
        got = list(run(module, feeds).values())
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=0)
    return module


def test_arithmetic_on_dims_folds_to_a_constant_reshape(make_onnx_model, rng):
    # ddddocr's CRNN: x.view(n, c, h * w) with a dynamic batch and width, then (n * c, h * w)
    d0, i0 = _dim("x", 0, "d0")
    d1, i1 = _dim("x", 1, "d1")
    d2, i2 = _dim("x", 2, "d2")
    d3, i3 = _dim("x", 3, "d3")
    nodes = [*d0, *d1, *d2, *d3,
             helper.make_node("Mul", ["d2", "d3"], ["hw"]),
             helper.make_node("Concat", ["d0", "d1", "hw"], ["t1"], axis=0),
             helper.make_node("Reshape", ["x", "t1"], ["y"]),
             helper.make_node("Mul", ["d0", "d1"], ["nc"]),
             helper.make_node("Identity", ["hw"], ["hw2"]),
             helper.make_node("Concat", ["nc", "hw2"], ["t2"], axis=0),
             helper.make_node("Reshape", ["y", "t2"], ["z"])]
    model = make_onnx_model(nodes, [("x", np.float32, (None, 2, 4, "W"))],
                            [("z", np.float32, None)], {**i0, **i1, **i2, **i3, "axes0": _i64(0)})
    module = _check_against_ort(model, [{"x": rng.standard_normal((n, 2, 4, w)).astype(np.float32)}
                                        for n, w in ((1, 5), (3, 2))])
    # (n, c, h * w): position 0 copies x's own dim, the one unknown product is fixed by the count
    assert [tuple(op.attr("shape")) for op in _ops(module, nn.RESHAPE)] == [(0, 2, -1)]
    # (n * c, h * w) of y = (n, 2, 4w): neither a copy nor the only unknown, so it is read at run time
    dyn, = _ops(module, nn.DYNAMIC_RESHAPE)
    assert dyn.results[0].type.shape == (None, None)


def test_static_dims_of_a_dynamic_shape_fold(make_onnx_model, rng):
    # Gather(Shape(x), 2) of a static dim is a constant even though Shape(x) is not
    d2, i2 = _dim("x", 2, "d2")
    d3, i3 = _dim("x", 3, "d3")
    nodes = [*d2, *d3, helper.make_node("Sub", ["d2", "one"], ["a"]), helper.make_node("Add", ["a", "d3"], ["b"]),
             helper.make_node("Div", ["b", "two"], ["c"]),
             helper.make_node("Concat", ["minus1", "c"], ["t"], axis=0),
             helper.make_node("Reshape", ["x", "t"], ["y"])]
    model = make_onnx_model(nodes, [("x", np.float32, (None, 3, 5, 3))], [("y", np.float32, None)],
                            {**i2, **i3, "axes0": _i64(0), "one": _i64(1), "two": _i64(2), "minus1": _i64(-1)})
    module = _check_against_ort(model, [{"x": rng.standard_normal((n, 3, 5, 3)).astype(np.float32)}
                                        for n in (1, 2)])
    assert [tuple(op.attr("shape")) for op in _ops(module, nn.RESHAPE)] == [(-1, 3)]


def test_reshape_to_the_shape_of_a_tensor_with_the_same_dims_folds(make_onnx_model, rng):
    # PP-OCR's attention: Reshape(q * scale, Shape(k)), q and k with the same dynamic batch and
    # sequence (the transposes and the Mul pass them through): every dynamic entry copies a dim
    nodes = [helper.make_node("Transpose", ["x"], ["k"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["k"], ["k2"], perm=[0, 2, 1, 3]),
             helper.make_node("Shape", ["k"], ["ks"]),
             helper.make_node("Mul", ["k2", "scale"], ["q"]),
             helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["qt", "ks"], ["y"])]
    model = make_onnx_model(nodes, [("x", np.float32, ("N", 2, "T", 3))], [("y", np.float32, ("N", "T", 2, 3))],
                            {"scale": np.float32(0.5)})
    module = _check_against_ort(model, [{"x": rng.standard_normal((n, 2, t, 3)).astype(np.float32)}
                                        for n, t in ((1, 7), (2, 4))])
    assert [tuple(op.attr("shape")) for op in _ops(module, nn.RESHAPE)] == [(0, 0, 2, 3)]
    assert not _ops(module, nn.DYNAMIC_RESHAPE) and not _ops(module, nn.SHAPE)


def test_reshape_to_a_run_time_shape_with_two_moved_dynamic_dims(make_onnx_model, rng):
    # (n, 2, t, 3) to the shape of its (t, n, 2, 3) transpose: no entry copies its own position
    nodes = [helper.make_node("Transpose", ["x"], ["k"], perm=[2, 0, 1, 3]),
             helper.make_node("Shape", ["k"], ["ks"]),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Reshape", ["r", "ks"], ["y"])]
    model = make_onnx_model(nodes, [("x", np.float32, ("N", 2, "T", 3))], [("y", np.float32, ("T", "N", 2, 3))])
    module = _check_against_ort(model, [{"x": rng.standard_normal((n, 2, t, 3)).astype(np.float32)}
                                        for n, t in ((1, 7), (2, 4))])
    dyn, = _ops(module, nn.DYNAMIC_RESHAPE)
    assert dyn.results[0].type.shape == (None, None, 2, 3)   # the static dims of Shape(k) are proved


def test_the_minus_one_of_a_reshape_is_the_one_dynamic_dim_it_absorbs(make_onnx_model, rng):
    # ddddocr's CRNN head: (t, 1, c) -> (-1, c) -> FC -> (t, 1, -1) from Shape of the first:
    # the first -1 is t (static sizes 1*c and c agree), so the second target is (0, 1, -1)
    d0, i0 = _dim("x", 0, "d0")
    d1, i1 = _dim("x", 1, "d1")
    nodes = [*d0, *d1, helper.make_node("Reshape", ["x", "flat"], ["y"]),
             helper.make_node("Gemm", ["y", "w"], ["h"]),
             helper.make_node("Concat", ["d0", "d1", "minus1"], ["t"], axis=0),
             helper.make_node("Reshape", ["h", "t"], ["z"])]
    model = make_onnx_model(nodes, [("x", np.float32, ("T", 1, 4))], [("z", np.float32, ("T", 1, 5))],
                            {**i0, **i1, "axes0": _i64(0), "flat": _i64(-1, 4), "minus1": _i64(-1),
                             "w": rng.standard_normal((4, 5)).astype(np.float32)})
    module = _check_against_ort(model, [{"x": rng.standard_normal((t, 1, 4)).astype(np.float32)} for t in (3, 6)])
    assert [tuple(op.attr("shape")) for op in _ops(module, nn.RESHAPE)] == [(-1, 4), (0, 1, -1)]
    assert module.main.outputs[0].type.shape == (None, 1, 5)


def test_a_minus_one_that_also_absorbs_static_sizes_is_not_the_dynamic_dim(make_onnx_model, rng):
    # (n, t, 4) -> (0, -1) is (n, 4t): its dim 1 is not t, so (n, t, -1) must be read at run time
    d0, i0 = _dim("x", 0, "d0")
    d1, i1 = _dim("x", 1, "d1")
    nodes = [*d0, *d1, helper.make_node("Reshape", ["x", "flat"], ["y"]),
             helper.make_node("Relu", ["y"], ["r"]),
             helper.make_node("Concat", ["d0", "d1", "minus1"], ["t"], axis=0),
             helper.make_node("Reshape", ["r", "t"], ["z"])]
    model = make_onnx_model(nodes, [("x", np.float32, ("N", "T", 4))], [("z", np.float32, ("N", "T", 4))],
                            {**i0, **i1, "axes0": _i64(0), "flat": _i64(0, -1), "minus1": _i64(-1)})
    module = _check_against_ort(model, [{"x": rng.standard_normal((n, t, 4)).astype(np.float32)}
                                        for n, t in ((1, 3), (2, 5))])
    assert len(_ops(module, nn.DYNAMIC_RESHAPE)) == 1


def test_a_broadcast_of_two_unrelated_dynamic_dims_proves_nothing(make_onnx_model, rng):
    # b (m, 3) + a (n, 3): m may be 1 at run time, so the sum's dim 0 is not b's
    nodes = [helper.make_node("Add", ["b", "a"], ["s"]),
             helper.make_node("Shape", ["b"], ["bs"]),
             helper.make_node("Concat", ["bs", "minus1"], ["t"], axis=0),
             helper.make_node("Reshape", ["s", "t"], ["y"])]
    model = make_onnx_model(nodes, [("a", np.float32, ("N", 3)), ("b", np.float32, ("M", 3))],
                            [("y", np.float32, None)], {"minus1": _i64(-1)})
    module = _check_against_ort(model, [{"a": rng.standard_normal((4, 3)).astype(np.float32),
                                         "b": rng.standard_normal((m, 3)).astype(np.float32)} for m in (4, 1)])
    # (Dim(b, 0), 3, -1): one unknown beside a -1 is not foldable, so it is read at run time
    assert len(_ops(module, nn.DYNAMIC_RESHAPE)) == 1


def test_a_dynamic_reshape_refuses_a_shape_with_another_element_count(make_onnx_model, rng):
    nodes = [helper.make_node("Shape", ["k"], ["ks"]), helper.make_node("Reshape", ["x", "ks"], ["y"])]
    model = make_onnx_model(nodes, [("x", np.float32, (None, 6)), ("k", np.float32, ("A", "B", 3))],
                            [("y", np.float32, ("A", "B", 3))])
    module = load_onnx(model)
    x = rng.standard_normal((2, 6)).astype(np.float32)
    k = np.zeros((2, 2, 3), np.float32)
    np.testing.assert_array_equal(run(module, {"x": x, "k": k})["y"], x.reshape(2, 2, 3))
    from quantir.errors import ShapeError
    # a different element count: ONNX Runtime refuses it too
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception):
        sess.run(None, {"x": x, "k": np.zeros((5, 1, 3), np.float32)})
    with pytest.raises(ShapeError, match="cannot reshape"):
        run(module, {"x": x, "k": np.zeros((5, 1, 3), np.float32)})


def test_a_target_of_unknown_length_is_a_typed_error_naming_the_node(make_onnx_model):
    # the target's length (the result's rank) is itself computed at run time
    nodes = [helper.make_node("Shape", ["k"], ["ks"]),
             helper.make_node("Relu", ["ks"], ["kr"]),
             helper.make_node("Reshape", ["x", "kr"], ["y"], name="the_reshape")]
    model = make_onnx_model(nodes, [("x", np.float32, (None, 6)), ("k", np.float32, None)],
                            [("y", np.float32, None)])
    with pytest.raises(UnsupportedOpError, match=r"node 'the_reshape' \(Reshape -> 'y'\): the target shape "
                                                 r"\(input 1, 'kr'\) is computed at run time as 'tensor<\?xi64>'; "
                                                 r"quantir expected a 1-D integer tensor whose length"):
        load_onnx(model)


def test_a_target_fed_by_the_caller_is_refused_with_a_hint(make_onnx_model):
    nodes = [helper.make_node("Reshape", ["x", "t"], ["y"], name="r")]
    model = make_onnx_model(nodes, [("x", np.float32, (None, 6)), ("t", np.int64, (2,))],
                            [("y", np.float32, None)])
    with pytest.raises(UnsupportedOpError, match=r"node 'r' .*input 1 \('t', the shape\) of Reshape must be a "
                                                 r"constant.*bind it with load_onnx\(\.\.\., constant_inputs=\.\.\.\)"):
        load_onnx(model)


def test_the_run_time_reshape_refuses_a_result_its_type_contradicts():
    # a dim the importer proved (the type the rest of the graph was built on) is checked at run time
    from quantir.errors import ShapeError
    from quantir.runtime.kernels.reshape import dynamic_reshape
    from quantir.types import TensorType, f32, parse_type
    x_t, s_t = TensorType((None, 6), f32), parse_type("tensor<2xi64>")
    from quantir.ir import Function
    fn = Function.create("main", [x_t, s_t], [])
    op = nn.DYNAMIC_RESHAPE.build(list(fn.arguments), [TensorType((None, 3), f32)], dims=(-1, 3))
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(dynamic_reshape(op, x, _i64(4, 3)), x.reshape(4, 3))
    with pytest.raises(ShapeError, match=r"gives \(3, 4\), but the model's types say \(None, 3\)"):
        dynamic_reshape(op, x, _i64(3, 4))


@pytest.mark.parametrize("consumer", ["Expand", "ConstantOfShape", "Tile"])
def test_other_consumers_of_a_run_time_shape_name_the_node_and_the_input(make_onnx_model, consumer):
    # quantir follows run-time targets of Reshape only; the others must fold, and say so
    # (Expand to a shape of another input's dims that nothing ties to x's: not provably a no-op)
    dims = [helper.make_node("Shape", ["z"], ["xs"])]
    inputs = {"Expand": ["x", "xs"], "ConstantOfShape": ["xs"], "Tile": ["x", "xs"]}[consumer]
    what = {"Expand": "shape", "ConstantOfShape": "shape", "Tile": "repeats"}[consumer]
    slot = 0 if consumer == "ConstantOfShape" else 1
    nodes = [*dims, helper.make_node(consumer, inputs, ["y"], name="c")]
    model = make_onnx_model(nodes, [("x", np.float32, (None, 3)), ("z", np.float32, ("M", 3))],
                            [("y", np.float32, None)])
    with pytest.raises(UnsupportedOpError, match=rf"node 'c' \({consumer} -> 'y'\): input {slot} \('xs', the "
                                                 rf"{what}\) of {consumer} must be a constant"):
        load_onnx(model)


def test_expand_to_dims_the_data_already_has_imports_and_runs(make_onnx_model):
    # F.normalize exports norm.expand_as(x): the target is Shape(x), or built from the batch dim of
    # another input that shares x's dim_param ("N" here, as exporters name every input's batch)
    nodes = [helper.make_node("ReduceL2", ["x", "one"], ["n"], keepdims=1),
             helper.make_node("Shape", ["x"], ["xs"]),
             helper.make_node("Shape", ["w"], ["ws"], start=0, end=1),
             helper.make_node("Concat", ["ws", "three"], ["target"], axis=0),
             helper.make_node("Expand", ["n", "xs"], ["e1"]),
             helper.make_node("Expand", ["n", "target"], ["e2"]),
             helper.make_node("Div", ["x", "e1"], ["y1"]),
             helper.make_node("Div", ["x", "e2"], ["y2"])]
    model = make_onnx_model(nodes, [("x", np.float32, (None, 3)), ("w", np.float32, (None, 5))],
                            [("y1", np.float32, None), ("y2", np.float32, None)],
                            {"three": np.array([3], np.int64), "one": np.array([1], np.int64)},
                            opset=18)
    module = load_onnx(model)
    from quantir.runtime import run
    rng = np.random.default_rng(0)
    for batch in (1, 4):
        x = rng.normal(size=(batch, 3)).astype(np.float32)
        w = rng.normal(size=(batch, 5)).astype(np.float32)
        got = run(module, {"x": x, "w": w})
        want = x / np.linalg.norm(x, axis=1, keepdims=True)
        got = list(got.values()) if isinstance(got, dict) else list(got)
        for g in got:
            np.testing.assert_allclose(g, want, rtol=1e-6)
