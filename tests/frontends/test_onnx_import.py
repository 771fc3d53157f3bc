"""What the ONNX importer builds: names, constants, types, opset upgrade, external data,
and the shape subgraphs exporters leave behind."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.ir import StringAttr, verify  # noqa: E402
from quantir.ir.dialects import arith, nn  # noqa: E402
from quantir.runtime import run  # noqa: E402


def ort_run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def histogram(module):
    return Counter(op.name for op in module.main.ops)


def test_names_constants_and_types(make_onnx_model, rng):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    nodes = [helper.make_node("Conv", ["image", "w", "b"], ["conv_out"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["conv_out"], ["features"], name="relu1")]
    model = make_onnx_model(nodes, [("image", np.float32, (None, 3, 8, 8))],
                            [("features", np.float32, (None, 4, 8, 8))], {"w": w, "b": b})
    module = load_onnx(model)
    verify(module)
    fn = module.main
    assert fn.name == "main"
    assert fn.arg_attrs[0]["quantir.name"] == StringAttr("image")   # the initializers are not arguments
    assert len(fn.arguments) == 1 and fn.res_attrs[0]["quantir.name"] == StringAttr("features")
    assert str(fn.arguments[0].type) == "tensor<?x3x8x8xf32>"
    conv = next(op for op in fn.ops if op.opdef is nn.CONV)
    assert conv.label == "conv1" and conv.results[0].name_hint == "conv_out"
    assert conv.attr("pads") == (1, 1, 1, 1)
    weight = conv.operands[1].op
    assert weight.opdef is arith.CONSTANT and weight.results[0].name_hint == "w"
    assert weight.attributes["value"].array.dtype == np.float32
    np.testing.assert_array_equal(weight.attributes["value"].array, w)
    assert str(fn.outputs[0].type) == "tensor<?x4x8x8xf32>"
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    out = run(module, {"image": x})
    assert list(out) == ["features"]
    np.testing.assert_allclose(out["features"], ort_run(model, {"image": x})[0], rtol=1e-5, atol=1e-5)


def test_initializers_are_held_by_reference(make_onnx_model):
    """The module's constant is the array decoded from the initializer, not a copy per use."""
    w = np.ones((8, 8), np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("MatMul", ["y", "w"], ["z"])]
    model = make_onnx_model(nodes, [("x", np.float32, (1, 8))], [("z", np.float32, (1, 8))], {"w": w})
    module = load_onnx(model)
    consts = [op for op in module.main.ops if op.opdef is arith.CONSTANT]
    assert len(consts) == 1 and len(consts[0].results[0].uses) == 2
    assert isinstance(consts[0].attributes["value"].array, np.ndarray)


def test_opset_9_is_upgraded(make_onnx_model):
    nodes = [helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")]
    model = make_onnx_model(nodes, [("x", np.float32, (1, 1, 2, 2))], [("y", np.float32, (1, 1, 4, 4))],
                            {"scales": np.array([1, 1, 2, 2], np.float32)}, opset=9)
    module = load_onnx(model)
    assert histogram(module)["nn.resize"] == 1
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    np.testing.assert_array_equal(run(module, {"x": x})["y"], x.repeat(2, 2).repeat(2, 3))


def test_external_data(tmp_path, make_onnx_model, rng):
    w = rng.standard_normal((64, 32)).astype(np.float32)
    model = make_onnx_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", np.float32, (2, 64))],
                            [("y", np.float32, (2, 32))], {"w": w})
    sub = tmp_path / "sub"
    sub.mkdir()
    onnx.save(model, str(sub / "m.onnx"), save_as_external_data=True, location="weights.bin", size_threshold=0)
    module = load_onnx(sub / "m.onnx")
    x = rng.standard_normal((2, 64)).astype(np.float32)
    np.testing.assert_allclose(run(module, {"x": x})["y"], x @ w, rtol=1e-5)


def test_dynamic_batch_flatten_pattern(make_onnx_model, rng):
    """torch's ``x.view(x.size(0), -1)``: Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="flatten_like"),
    ]
    inits = {"zero": np.array(0, np.int64), "axes0": np.array([0], np.int64),
             "minus1": np.array([-1], np.int64)}
    model = make_onnx_model(nodes, [("x", np.float32, (None, 4, 3, 3))], [("y", np.float32, (None, 36))], inits)
    module = load_onnx(model)
    assert dict(histogram(module)) == {"nn.reshape": 1, "func.return": 1}
    reshape = next(op for op in module.main.ops if op.opdef is nn.RESHAPE)
    assert reshape.attr("shape") == (0, -1)
    assert str(module.main.outputs[0].type) == "tensor<?x36xf32>"
    for batch in (1, 3):
        x = rng.standard_normal((batch, 4, 3, 3)).astype(np.float32)
        np.testing.assert_array_equal(run(module, {"x": x})["y"], x.reshape(batch, -1))


def test_identity_and_dropout_are_removed(make_onnx_model):
    nodes = [helper.make_node("Identity", ["x"], ["a"]),
             helper.make_node("Dropout", ["a"], ["b"], name="drop"),
             helper.make_node("Relu", ["b"], ["c"]),
             helper.make_node("Identity", ["c"], ["y"])]
    model = make_onnx_model(nodes, [("x", np.float32, (2, 3))], [("y", np.float32, (2, 3))], opset=13)
    module = load_onnx(model)
    assert dict(histogram(module)) == {"nn.relu": 1, "func.return": 1}
    assert module.main.res_attrs[0]["quantir.name"] == StringAttr("y")
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(run(module, {"x": x})["y"], np.maximum(x, 0))


def test_without_optimize_keeps_every_node(make_onnx_model):
    nodes = [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
    model = make_onnx_model(nodes, [("x", np.float32, (2,))], [("y", np.float32, (2,))])
    assert histogram(load_onnx(model, optimize=False))["nn.identity"] == 1


def test_constant_inputs_binds_graph_inputs(make_onnx_model):
    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    model = make_onnx_model([node], [("x", np.float32, (2, 3)), ("shape", np.int64, (2,))],
                            [("y", np.float32, (3, 2))])
    module = load_onnx(model, constant_inputs={"shape": np.array([3, 2], np.int64)})
    assert [a["quantir.name"].value for a in module.main.arg_attrs] == ["x"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run(module, {"x": x})["y"], x.reshape(3, 2))


def test_declared_output_type_is_checked(make_onnx_model):
    node = helper.make_node("Relu", ["x"], ["y"])
    model = make_onnx_model([node], [("x", np.float32, (2, 3))], [("y", np.float32, (3, 2))])
    from quantir.errors import ShapeError
    with pytest.raises(ShapeError, match=r"graph output 'y' is declared as tensor<3x2xf32> but quantir infers "
                                         r"tensor<2x3xf32>"):
        load_onnx(model)


def test_imported_module_round_trips_through_text(make_onnx_model, rng):
    """Every attribute kind the nn ops use prints as MLIR text and parses back to the same model."""
    text_api = pytest.importorskip("quantir.text")
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"], mode="reflect"),
             helper.make_node("Conv", ["p", "w"], ["c"], strides=[2, 2]),
             helper.make_node("Resize", ["c", "", "scales"], ["r"], mode="linear"),
             helper.make_node("LeakyRelu", ["r"], ["l"], alpha=0.25),
             helper.make_node("Cast", ["l"], ["h"], to=onnx.TensorProto.FLOAT16),
             helper.make_node("Cast", ["h"], ["y"], to=onnx.TensorProto.FLOAT)]
    inits = {"w": w, "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64),
             "scales": np.array([1, 1, 2, 1.5], np.float32)}
    model = make_onnx_model(nodes, [("x", np.float32, (1, 3, 8, 8))], [("y", np.float32, None)], inits)
    module = load_onnx(model)
    text = text_api.print_module(module)
    again = text_api.parse_module(text)
    assert text_api.print_module(again) == text
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(run(again, {"x": x})["y"], run(module, {"x": x})["y"])
