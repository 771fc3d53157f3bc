"""Reproducers from the ONNX model fuzzer (issue 11): shapes and values that a file chooses and
that only the kernels (or the type rules) see, each refused with a typed one-line error or
computed correctly."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

import quantir as qr  # noqa: E402
from quantir.errors import CalibrationError, ResourceError, ShapeError, VerifyError  # noqa: E402
from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.ir.dialects.nn_index import split_sizes  # noqa: E402
from quantir.runtime import run  # noqa: E402


def test_split_into_two_billion_outputs_is_refused_before_any_list_is_built(make_onnx_model):
    node = helper.make_node("Split", ["x"], ["a", "b"], num_outputs=2**31 - 1)
    model = make_onnx_model([node], [("x", np.float32, [7])], [("a", np.float32, None), ("b", np.float32, None)],
                            opset=18)
    with pytest.raises(ShapeError, match=r"split into 2147483647 outputs: expected 1 to 65536 outputs$"):
        load_onnx(model)
    # the sizes themselves are checked in O(1): the fuzzer's file allocated one entry per output
    with pytest.raises(ShapeError) as e:
        split_sizes(7, {"num_outputs": 2**31 - 1})
    assert str(e.value) == "cannot split a dim of 7 into 2147483647 outputs (each chunk must be non-empty)"
    with pytest.raises(ShapeError, match=r"^cannot split a dim of 7 into 0 outputs"):
        split_sizes(7, {"num_outputs": 0})
    assert split_sizes(7, {"num_outputs": 3}) == [3, 3, 1]
    assert split_sizes(6, {"num_outputs": 6}) == [1] * 6


def test_gemm_with_run_time_shapes_that_disagree_is_a_shape_error(make_onnx_model, rng):
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transA=1, transB=1)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    b = np.zeros(3, np.float32)
    model = make_onnx_model([node], [("x", np.float32, [None, None])], [("y", np.float32, None)], {"w": w, "b": b})
    fn = load_onnx(model)
    with pytest.raises(ShapeError) as e:
        run(fn, {"x": np.ones((2, 5), np.float32)})
    assert str(e.value) == ("gemm (node 'fc'): op(A) [5, 2] and op(B) [4, 3] (trans_a True, trans_b True) "
                            "must be 2-D matrices [M, K] and [K, N] with one K")
    x = rng.standard_normal((4, 2)).astype(np.float32)          # the same model, shapes that agree
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(run(fn, {"x": x})["y"], ref, rtol=1e-5, atol=1e-6)


def test_gemm_c_that_does_not_broadcast_is_a_shape_error(make_onnx_model):
    node = helper.make_node("Gemm", ["x", "w", "c"], ["y"], name="fc")
    model = make_onnx_model([node], [("x", np.float32, [None, 4]), ("c", np.float32, [None])],
                            [("y", np.float32, None)], {"w": np.ones((4, 3), np.float32)})
    with pytest.raises(ShapeError) as e:
        run(load_onnx(model), {"x": np.ones((2, 4), np.float32), "c": np.ones(5, np.float32)})
    assert str(e.value) == "gemm (node 'fc'): C [5] does not broadcast to the result [2, 3]"


def test_tile_of_an_empty_tensor_into_unindexable_dims_is_a_resource_error(make_onnx_model):
    # the fuzzer's file: an empty axis (0 bytes in all) beside dims numpy cannot index
    node = helper.make_node("Tile", ["x", "rep"], ["y"], name="tile")
    model = make_onnx_model([node], [("x", np.float32, [None, 1, 6, 6])], [("y", np.float32, None)],
                            {"rep": np.array([1, 1, 2, 47287796087390209], np.int64)})
    with pytest.raises(ResourceError) as e:
        run(load_onnx(model), {"x": np.zeros((0, 1, 6, 6), np.float32)})
    assert str(e.value) == ("tensor 'y' of 'nn.tile' (node 'tile') would need shape [0, 1, 12, 283726776524341254] "
                            "of float32: empty, but its other dims exceed what an array can index (9.22e+18 bytes); "
                            "the model's sizes are likely corrupt")
    small = make_onnx_model([node], [("x", np.float32, [None, 1, 6, 6])], [("y", np.float32, None)],
                            {"rep": np.array([1, 1, 2, 3], np.int64)})
    assert run(load_onnx(small), {"x": np.zeros((0, 1, 6, 6), np.float32)})["y"].shape == (0, 1, 12, 18)


def test_pointwise_conv_of_an_empty_batch_is_empty_as_in_onnx_runtime(make_onnx_model, rng):
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"])
    inits = {"w": rng.standard_normal((16, 8, 1, 1)).astype(np.float32), "b": np.ones(16, np.float32)}
    model = make_onnx_model([node], [("x", np.float32, [None, 8, 5, 5])], [("y", np.float32, None)], inits)
    x = np.zeros((0, 8, 5, 5), np.float32)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = run(load_onnx(model), {"x": x})["y"]
    assert got.shape == ref.shape == (0, 16, 5, 5)


def test_calibrating_a_model_whose_batch_is_fixed_at_zero_is_a_calibration_error(make_onnx_model, tmp_path):
    node = helper.make_node("Relu", ["x"], ["y"])
    model = make_onnx_model([node], [("x", np.float32, [0, 4])], [("y", np.float32, [0, 4])])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(CalibrationError) as e:
        qr.quantize(str(path), [{"x": np.zeros((0, 4), np.float32)}], qr.Config(engine="interpreter"))
    assert str(e.value) == ("the model's batch dimension is fixed at 0 (input 'x'): no calibration sample can be "
                            "fed; give the input a batch of 1 or more")


def _qdq(make_onnx_model, scale_input: bool):
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="q"),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["y"], name="dq")]
    inputs = [("x", np.float32, [2])] + ([("xs", np.float32, [])] if scale_input else [])
    inits = {"xz": np.array(0, np.int8)} | ({} if scale_input else {"xs": np.array(0.0, np.float32)})
    return make_onnx_model(nodes, inputs, [("y", np.float32, None)], inits)


def test_a_constant_zero_quantization_scale_is_refused_at_import(make_onnx_model):
    with pytest.raises(VerifyError, match=r"node 'q' \(QuantizeLinear -> 'xq'\): the scale \(input 1\) of "
                                          r"QuantizeLinear must be finite and positive, found 0\.0; the model's "
                                          r"quantization parameters are corrupt$"):
        load_onnx(_qdq(make_onnx_model, scale_input=False))


@pytest.mark.parametrize("scale", [0.0, -1.0, np.nan])
def test_a_run_time_quantization_scale_that_is_not_positive_is_a_verify_error(make_onnx_model, scale):
    fn = load_onnx(_qdq(make_onnx_model, scale_input=True))
    with pytest.raises(VerifyError) as e:
        run(fn, {"x": np.ones(2, np.float32), "xs": np.array(scale, np.float32)})
    assert str(e.value) == (f"'nn.quantize_linear' (node 'q'): the scale must be finite and positive, found "
                            f"{np.float32(scale)}; the model's quantization parameters are corrupt")
    good = run(fn, {"x": np.array([0.5, -1.0], np.float32), "xs": np.array(0.5, np.float32)})["y"]
    np.testing.assert_array_equal(good, [0.5, -1.0])


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_reflect_or_edge_pad_of_an_empty_axis_is_a_shape_error_as_in_onnx_runtime(make_onnx_model, mode):
    node = helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode=mode)
    model = make_onnx_model([node], [("x", np.float32, [1, 2, None])], [("y", np.float32, None)],
                            {"pads": np.array([0, 0, 1, 0, 0, 1], np.int64)})
    x = np.zeros((1, 2, 0), np.float32)
    with pytest.raises(Exception, match=f"Cannot use '{mode}' mode to pad dimension with a value of 0"):
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    with pytest.raises(ShapeError) as e:
        run(load_onnx(model), {"x": x})
    assert str(e.value) == (f"'nn.pad' (node 'pad'): cannot use '{mode}' mode to pad axis 2 of size 0 "
                            f"(input shape [1, 2, 0]); only 'constant' mode pads an empty axis")
    # padding only the non-empty axes of an empty tensor is fine (and empty)
    batch = make_onnx_model([node], [("x", np.float32, [None, 2, 3])], [("y", np.float32, None)],
                            {"pads": np.array([0, 0, 1, 0, 0, 1], np.int64)})
    assert run(load_onnx(batch), {"x": np.zeros((0, 2, 3), np.float32)})["y"].shape == (0, 2, 5)


def test_gather_with_an_index_out_of_range_is_a_shape_error_as_in_onnx_runtime(make_onnx_model):
    node = helper.make_node("Gather", ["x", "i"], ["y"], name="g", axis=0)
    model = make_onnx_model([node], [("x", np.float32, [None, 3]), ("i", np.int64, [2])], [("y", np.float32, None)])
    fn = load_onnx(model).main
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert run(fn, {"x": x, "i": np.array([-2, 1])})["y"].tolist() == [[0, 1, 2], [3, 4, 5]]
    for bad, shown in (([0, 2], "2"), ([-3, 0], "-3")):
        with pytest.raises(ShapeError, match=rf"^gather: index {shown} is out of range for axis 0 of size 2 "
                                             r"\(valid: -2 to 1\)$"):
            run(fn, {"x": x, "i": np.array(bad)})
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        with pytest.raises(Exception, match="out of data bounds"):
            session.run(None, {"x": x, "i": np.array(bad)})


def test_an_attribute_the_opset_does_not_define_is_refused_at_import(make_onnx_model):
    """Found by fuzz_models: Cast-13 with an INTS ``saturate`` (an attribute of Cast-19) reached
    the attribute conversion as a tuple (TypeError). ONNX Runtime refuses the model too."""
    from quantir.errors import UnsupportedOpError

    node = helper.make_node("Cast", ["x"], ["y"], name="c", to=onnx.TensorProto.FLOAT, saturate=[1, 2])
    model = make_onnx_model([node], [("x", np.float64, [2])], [("y", np.float32, [2])], opset=13)
    with pytest.raises(UnsupportedOpError, match=r"'c' \(Cast\): attribute 'saturate' of Cast is not supported: "
                                                 r"Cast \(opset 13\) has no such attribute \(it has to\)$"):
        load_onnx(model)
    with pytest.raises(Exception, match="saturate"):
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_operands_that_do_not_broadcast_at_run_time_are_a_shape_error(make_onnx_model):
    """Found by fuzz_models: dims known only at run time reached numpy's broadcasting ValueError."""
    model = make_onnx_model([helper.make_node("Add", ["a", "b"], ["y"], name="add")],
                            [("a", np.float32, [1, None]), ("b", np.float32, [1, None])], [("y", np.float32, None)])
    fn = load_onnx(model).main
    ones = np.ones((1, 3), np.float32)
    assert run(fn, {"a": ones, "b": np.ones((1, 1), np.float32)})["y"].tolist() == [[2, 2, 2]]
    with pytest.raises(ShapeError, match=r"^nn.add: operand shapes \[1, 120\], \[1, 24\] do not broadcast$"):
        run(fn, {"a": np.ones((1, 120), np.float32), "b": np.ones((1, 24), np.float32)})


def test_a_pool_kernel_below_one_is_refused_at_import(make_onnx_model):
    """Found by fuzz_models: kernel_shape (2, -1) reached numpy's sliding window (ValueError)."""
    node = helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, -1])
    model = make_onnx_model([node], [("x", np.float32, [1, 1, 4, 4])], [("y", np.float32, None)])
    with pytest.raises(ShapeError, match=r"'pool' \(MaxPool -> 'y'\): kernel_shape \(2, -1\) must be >= 1$"):
        load_onnx(model)
