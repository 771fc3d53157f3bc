"""The validation pass before ONNX conversion: one typed line per malformed part (issue 11, item 4)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from quantir.errors import ModelFormatError, UnsupportedOpError, quote_name  # noqa: E402
from quantir.frontends.onnx import load_onnx  # noqa: E402

X = [("x", (1, 1, 4, 4))]


def _model(nodes, inputs=X, inits=(), opset=17) -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "g", [vi(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [vi("y", TensorProto.FLOAT, None)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", opset)])


def _weight() -> onnx.TensorProto:
    return numpy_helper.from_array(np.ones((4, 1, 3, 3), np.float32), "w")


def _message(model, cls=ModelFormatError) -> str:
    with pytest.raises(cls) as e:
        load_onnx(model)
    assert "\n" not in str(e.value)
    return str(e.value)


# -- arity and required attributes, from ONNX's own schemas ------------------------------------------

NO_INPUT = {  # op -> (schema version at opset 17, inputs it takes)
    "Relu": (14, "1 input"), "Softmax": (13, "1 input"), "Flatten": (13, "1 input"), "MatMul": (13, "2 inputs"),
    "Gemm": (13, "2 to 3 inputs"), "Conv": (11, "2 to 3 inputs"), "MaxPool": (12, "1 input"),
    "QLinearConv": (10, "8 to 9 inputs"), "ConvTranspose": (11, "2 to 3 inputs"),
    "QuantizeLinear": (13, "2 to 3 inputs"), "DequantizeLinear": (13, "2 to 3 inputs"),
    "Pad": (13, "2 to 3 inputs"), "Slice": (13, "3 to 5 inputs"), "Reshape": (14, "2 inputs"),
    "Tile": (13, "2 inputs"),
}


@pytest.mark.parametrize("op", sorted(NO_INPUT))
def test_node_without_its_inputs(op):
    version, wanted = NO_INPUT[op]
    assert _message(_model([helper.make_node(op, [], ["y"], name="n")])) == (
        f"<ModelProto>: node 0 'n' ({op}): {op} (opset {version}) takes {wanted}, the node has 0")


def test_too_many_inputs_and_outputs():
    assert _message(_model([helper.make_node("Relu", ["x", "x"], ["y"])])) == (
        "<ModelProto>: node 0 (unnamed) (Relu): Relu (opset 14) takes 1 input, the node has 2")
    assert _message(_model([helper.make_node("Relu", ["x"], ["y", "z"])])) == (
        "<ModelProto>: node 0 (unnamed) (Relu): Relu (opset 14) has 1 output, the node names 2")


def test_required_input_left_empty():
    assert _message(_model([helper.make_node("Conv", ["x", ""], ["y"], name="c")])) == (
        "<ModelProto>: node 0 'c' (Conv): input 1 (W) of Conv is required, but the node leaves it empty")


@pytest.mark.parametrize("op, inputs, attribute", [("LRN", ["x"], "size"), ("Concat", ["x", "x"], "axis")])
def test_missing_required_attribute(op, inputs, attribute):
    assert _message(_model([helper.make_node(op, inputs, ["y"], name="n")])) == (
        f"<ModelProto>: node 0 'n' ({op}): {op} (opset 13) requires attribute '{attribute}' (INT), the node does "
        f"not set it")


@pytest.mark.parametrize("attrs, found", [({"strides": 2}, "INTS, the node gives INT"),
                                          ({"group": "SAME"}, "INT, the node gives STRING"),
                                          ({"pads": 1.5}, "INTS, the node gives FLOAT")])
def test_attribute_of_the_wrong_kind(attrs, found):
    (name, _), = attrs.items()
    model = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", **attrs)], inits=[_weight()])
    assert _message(model) == f"<ModelProto>: node 0 'c' (Conv): attribute '{name}' of Conv is {found}"


def test_attribute_given_twice():
    node = helper.make_node("Softmax", ["x"], ["y"], name="s", axis=1)
    node.attribute.append(helper.make_attribute("axis", 2))
    assert _message(_model([node])) == "<ModelProto>: node 0 's' (Softmax): attribute 'axis' is given twice"


def test_old_opset_is_checked_against_its_own_schema():
    # Reshape-1 takes its shape as an attribute: one input is right at opset 1, wrong at 17
    node = helper.make_node("Reshape", ["x"], ["y"], name="r", shape=[1, 16])
    assert "Reshape (opset 14) takes 2 inputs, the node has 1" in _message(_model([node]))
    module = load_onnx(_model([node], opset=1))     # upgraded by ONNX's version converter
    assert str(module.main.type.results[0]) == "tensor<1x16xf32>"


# -- tensors -----------------------------------------------------------------------------------------

def _conv_with(w) -> onnx.ModelProto:
    return _model([helper.make_node("Conv", ["x", "w"], ["y"], name="c")], inits=[w])


def test_initializer_dims_do_not_match_raw_data():
    w = _weight()
    w.dims[0] = 5       # was `ValueError: cannot reshape array of size 36 into shape (5,1,3,3)`
    assert _message(_conv_with(w)) == (
        "<ModelProto>: initializer 0 ('w'): dims [5, 1, 3, 3] of FLOAT need 180 bytes of raw_data, the file has "
        "144; the tensor is truncated or its dims are wrong")


def test_initializer_typed_data_count():
    w = helper.make_tensor("w", TensorProto.FLOAT, (4, 1, 3, 3), [1.0] * 36)
    del w.float_data[-1]
    assert _message(_conv_with(w)).endswith("dims [4, 1, 3, 3] of FLOAT need 36 values in float_data, the file "
                                            "has 35; the tensor is truncated or its dims are wrong")


def test_negative_initializer_dim():
    w = _weight()
    w.dims[0] = -4      # was silently accepted; ONNX Runtime refuses it
    assert _message(_conv_with(w)) == (
        "<ModelProto>: initializer 0 ('w'): dim 0 is -4 in dims [-4, 1, 3, 3]; dims of a tensor are >= 0")


def test_huge_dims_with_little_data_allocate_nothing():
    w = _weight()
    w.dims[0] = 2**40
    assert "need 39582418599936 bytes of raw_data, the file has 144" in _message(_conv_with(w))


def test_negative_graph_input_dim():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], inputs=[("x", (1, -3))])
    assert _message(model) == ("<ModelProto>: graph input 0 ('x'): dim 1 is -3; a dim is a size >= 0 (or a "
                               "symbolic name for a dynamic one)")


def test_constant_tensor_is_checked_like_an_initializer():
    t = numpy_helper.from_array(np.zeros((2, 2), np.float32))
    t.dims[1] = 3
    model = _model([helper.make_node("Constant", [], ["y"], name="k", value=t)])
    assert _message(model) == ("<ModelProto>: node 0 'k' (Constant): attribute 'value': dims [2, 3] of FLOAT "
                               "need 24 bytes of raw_data, the file has 16; the tensor is truncated or its dims "
                               "are wrong")


@pytest.mark.parametrize("attrs, what", [({"value_string": "hi"}, "a string (value_string)"),
                                         ({"value_strings": ["a", "b"]}, "strings (value_strings)")])
def test_string_constant_is_unsupported(attrs, what):
    model = _model([helper.make_node("Constant", [], ["y"], name="k", **attrs)])
    assert _message(model, UnsupportedOpError) == (
        f"<ModelProto>: node 0 'k' (Constant): a Constant holding {what} is not supported; quantir holds "
        f"numeric tensors only")


def test_sparse_constant_is_unsupported():
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.ones(1, np.float32)),
                                       numpy_helper.from_array(np.zeros(1, np.int64)), [2])
    model = _model([helper.make_node("Constant", [], ["y"], name="k", sparse_value=sparse)])
    assert "a Constant holding a sparse tensor (sparse_value) is not supported" in _message(model, UnsupportedOpError)


def test_external_data_not_read_in_memory():
    w = _weight()
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    assert "initializer 0 ('w'): the data is in an external file that was not read" in _message(_conv_with(w))


# -- text ----------------------------------------------------------------------------------------------

def _with_bad_utf8(model: onnx.ModelProto, marker: str) -> bytes:
    """Protobuf only sets str fields: put a same-length marker, then swap in invalid UTF-8 bytes."""
    return model.SerializeToString().replace(marker.encode(), b"\xff" + marker.encode()[1:])


@pytest.mark.parametrize("where, message", [
    ("name", "<bytes>: the name of node 0 (Relu) is not valid UTF-8 ('\\xffNAMEX'); the file is corrupt"),
    ("input", "<bytes>: the name of graph input 0 is not valid UTF-8 ('\\xffNAMEX'); the file is corrupt"),
    ("op_type", "<bytes>: the op type of node 0 is not valid UTF-8 ('\\xffNAMEX'); the file is corrupt"),
    ("mode", "<bytes>: node 0 (unnamed) (Pad): attribute 'mode': the string '\\xffNAMEX' is not valid UTF-8"),
])
def test_invalid_utf8(where, message):
    # upb parses invalid UTF-8 in a proto2 string field and hands it back as bytes
    marker = "XNAMEX"
    if where == "name":
        model = _model([helper.make_node("Relu", ["x"], ["y"], name=marker)])
    elif where == "input":
        model = _model([helper.make_node("Relu", [marker], ["y"])], inputs=[(marker, (2,))])
    elif where == "op_type":
        model = _model([helper.make_node(marker, ["x"], ["y"])])
    else:
        model = _model([helper.make_node("Pad", ["x", "p"], ["y"], mode=marker)],
                       inits=[numpy_helper.from_array(np.zeros(8, np.int64), "p")])
    assert _message(_with_bad_utf8(model, marker)) == message


def test_names_are_escaped_when_echoed():
    forged = "x\nquantir check: 0 violations"
    model = _model([helper.make_node("Relu", [forged], ["y"], name="r\x1b[2J")])
    assert _message(model) == (
        "<ModelProto>: node 'r\\x1b[2J' (Relu -> 'y') uses tensor 'x\\nquantir check: 0 violations', which no "
        "initializer, graph input or earlier node defines (the graph is not topologically sorted or is truncated)")


@pytest.mark.parametrize("name, quoted", [
    ("conv1/weight", "'conv1/weight'"), ("a\nb", "'a\\nb'"), ("\x1b[31m", "'\\x1b[31m'"), ("é", "'é'"),
    ("zero\u200bwidth", "'zero\\u200bwidth'"), ("it's", "'it\\'s'"), ("back\\slash", "'back\\\\slash'"),
    (b"a\xffb", "'a\\xffb'"), (b"ok", "'ok'"), ("", "''"),
])
def test_quote_name(name, quoted):
    assert quote_name(name) == quoted
