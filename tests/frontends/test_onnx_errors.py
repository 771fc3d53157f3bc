"""Bad models get typed errors that say what is wrong and where."""
from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from quantir.errors import ModelFormatError, ShapeError, UnsupportedOpError  # noqa: E402
from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.ir.dialects import nn  # noqa: E402
from quantir.runtime import run  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"


def test_truncated_file(tmp_path):
    data = LIGHT.read_bytes()
    for cut in (len(data) // 2, len(data) - 7, 100):
        path = tmp_path / f"cut{cut}.onnx"
        path.write_bytes(data[:cut])
        with pytest.raises(ModelFormatError) as e:
            load_onnx(path)
        assert str(path) in str(e.value)
        assert "truncated" in str(e.value) or "not defined" in str(e.value)


def test_random_bytes(tmp_path):
    path = tmp_path / "noise.onnx"
    path.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ModelFormatError, match=r"noise\.onnx: not a valid ONNX model"):
        load_onnx(path)


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(ModelFormatError, match=r"empty\.onnx: the file is empty"):
        load_onnx(tmp_path / "empty.onnx")
    with pytest.raises(ModelFormatError, match=r"nothere\.onnx: no such file"):
        load_onnx(tmp_path / "nothere.onnx")


def _topk_model(make_onnx_model):
    k = np.array([2], dtype=np.int64)
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], name="top_two", axis=-1)
    return make_onnx_model([node], [("x", np.float32, (3, 4))],
                           [("values", np.float32, (3, 2)), ("indices", np.int64, (3, 2))], {"k": k})


def test_unsupported_op_names_op_node_and_file(tmp_path, make_onnx_model):
    path = tmp_path / "topk.onnx"
    onnx.save(_topk_model(make_onnx_model), str(path))
    with pytest.raises(UnsupportedOpError) as e:
        load_onnx(path)
    message = str(e.value)
    assert "TopK" in message and "top_two" in message and str(path) in message


def test_keep_unsupported_makes_an_opaque_op(make_onnx_model):
    model = _topk_model(make_onnx_model)
    module = load_onnx(model, keep_unsupported=True)
    opaque = [op for op in module.main.ops if op.opdef is nn.ONNX_OP]
    assert len(opaque) == 1
    op = opaque[0]
    assert op.attr("op_type") == "TopK" and op.attr("opset") == 17 and op.label == "top_two"
    node = onnx.NodeProto.FromString(base64.b64decode(op.attr("node")))
    assert node.op_type == "TopK" and list(node.input) == ["x", "k"]
    assert [str(r.type) for r in op.results] == ["tensor<3x2xf32>", "tensor<3x2xi64>"]
    with pytest.raises(UnsupportedOpError, match=r"'TopK' \(node 'top_two'\).*opaque.*ONNX Runtime"):
        run(module, {"x": np.zeros((3, 4), np.float32)})


def test_unsupported_domain(make_onnx_model):
    node = helper.make_node("FusedConv", ["x"], ["y"], name="fc", domain="com.microsoft")
    model = make_onnx_model([node], [("x", np.float32, (1, 1, 4, 4))], [("y", np.float32, None)])
    model.opset_import.append(helper.make_operatorsetid("com.microsoft", 1))
    with pytest.raises(UnsupportedOpError, match=r"<ModelProto>: node 'fc' \(FusedConv -> 'y'\).*domain "
                                                  r"'com.microsoft'"):
        load_onnx(model)


def test_unsupported_attribute_value(make_onnx_model):
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up", mode="linear", antialias=1)
    model = make_onnx_model([node], [("x", np.float32, (1, 1, 4, 4))], [("y", np.float32, (1, 1, 2, 2))],
                            {"scales": np.array([1, 1, 0.5, 0.5], np.float32)}, opset=18)   # antialias: 18+
    with pytest.raises(UnsupportedOpError, match=r"node 'up' \(Resize -> 'y'\): resize with antialias = 1"):
        load_onnx(model)


def test_unknown_attribute(make_onnx_model):
    node = helper.make_node("Relu", ["x"], ["y"], name="r", flavour=3)
    model = make_onnx_model([node], [("x", np.float32, (2,))], [("y", np.float32, (2,))])
    with pytest.raises(UnsupportedOpError, match=r"attribute 'flavour' of Relu is not supported"):
        load_onnx(model)


def test_runtime_shape_input_is_refused(make_onnx_model):
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_by_input")
    model = make_onnx_model([node], [("x", np.float32, (2, 3)), ("shape", np.int64, (2,))],
                            [("y", np.float32, None)])
    with pytest.raises(UnsupportedOpError, match=r"input 1 \('shape', the shape\) of Reshape must be a constant"):
        load_onnx(model)


def test_unsupported_element_type(make_onnx_model):
    node = helper.make_node("Relu", ["x"], ["y"])
    model = make_onnx_model([node], [("x", TensorProto.BFLOAT16, (2,))], [("y", TensorProto.BFLOAT16, (2,))])
    with pytest.raises(UnsupportedOpError, match=r"graph input 'x' has element type BFLOAT16"):
        load_onnx(model)


def test_shape_mismatch_names_the_node(make_onnx_model):
    node = helper.make_node("Add", ["a", "b"], ["c"], name="bad_add")
    model = make_onnx_model([node], [("a", np.float32, (2, 3)), ("b", np.float32, (4,))],
                            [("c", np.float32, None)])
    with pytest.raises(ShapeError, match=r"node 'bad_add' \(Add -> 'c'\): shapes \(2, 3\) and \(4\) do not "
                                         r"broadcast"):
        load_onnx(model)


def test_unsorted_graph(make_onnx_model):
    n1 = helper.make_node("Relu", ["t"], ["y"], name="second")
    n2 = helper.make_node("Relu", ["x"], ["t"], name="first")
    model = make_onnx_model([n1, n2], [("x", np.float32, (2,))], [("y", np.float32, (2,))])
    with pytest.raises(ModelFormatError, match=r"node 'second' \(Relu -> 'y'\) uses tensor 't'.*not "
                                               r"topologically sorted"):
        load_onnx(model)


def test_opset_upgrade_failure(make_onnx_model):
    # BatchNormalization-7 with spatial = 0: ONNX's converter asserts on this one.
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn", spatial=0)
    channel = [(k, np.float32, (2,)) for k in "sbmv"]
    model = make_onnx_model([node], [("x", np.float32, (1, 2, 2)), *channel], [("y", np.float32, (1, 2, 2))],
                            opset=8)
    with pytest.raises(ModelFormatError, match=r"opset 8; quantir imports opset 13 and newer, and ONNX's "
                                               r"version converter failed"):
        load_onnx(model)


def test_old_opset_with_unknown_op_is_unsupported(make_onnx_model):
    node = helper.make_node("ImageScaler", ["x"], ["y"], name="scaler", scale=2.0)
    model = make_onnx_model([node], [("x", np.float32, (1, 1, 2, 2))], [("y", np.float32, (1, 1, 2, 2))], opset=6)
    with pytest.raises(UnsupportedOpError, match=r"node 'scaler' \(ImageScaler -> 'y'\): op 'ImageScaler' is not "
                                                 r"supported"):
        load_onnx(model)


def test_missing_external_data(tmp_path, make_onnx_model):
    w = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    model = make_onnx_model([node], [("x", np.float32, (1, 64))], [("y", np.float32, (1, 64))], {"w": w})
    path = tmp_path / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="ext.bin", size_threshold=0)
    (tmp_path / "ext.bin").unlink()
    with pytest.raises(ModelFormatError, match=r"ext\.onnx: initializer 'w' keeps its data in external file "
                                               r"'ext\.bin', which does not exist"):
        load_onnx(path)


def test_model_without_the_default_domain(make_onnx_model):
    node = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml")
    model = make_onnx_model([node], [("x", np.float32, (2,))], [("y", np.float32, (2,))])
    del model.opset_import[:]
    model.opset_import.append(helper.make_operatorsetid("ai.onnx.ml", 3))
    with pytest.raises(UnsupportedOpError, match=r"imports only the domains 'ai.onnx.ml'"):
        load_onnx(model)
