"""What the ONNX backend writes: names, shapes, constant inputs, opset rules, errors, files."""
from __future__ import annotations

import os

import numpy as np
import pytest

from .ort_helpers import onnx, rel_err, session
from onnx import helper

from quantir.backends.onnx import DEFAULT_IR_VERSION, DEFAULT_OPSET, save_onnx, to_onnx
from quantir.errors import UnsupportedOpError, VerifyError
from quantir.frontends.onnx import load_onnx
from quantir.ir import Function, Module, StringAttr, dialects, unregistered
from quantir.ir.dialects import nn
from quantir.ir.opdef import elements_attr
from quantir.types import TensorType, f16, f32, parse_type

F32 = np.float32


def _fn(arg_types, res_types, names=("x",), outs=("y",)):
    return Function.create("main", arg_types, res_types,
                           arg_attrs=[{"quantir.name": StringAttr(n)} for n in names],
                           res_attrs=[{"quantir.name": StringAttr(n)} for n in outs])


def _const(fn, array, hint=None):
    op = fn.body.append(dialects.arith.CONSTANT.build([], [elements_attr(array).type], value=elements_attr(array)))
    op.results[0].name_hint = hint
    return op.results[0]


def _ret(fn, *values):
    fn.body.append(dialects.func.RETURN.build(list(values), []))
    fn.update_type()
    return Module([fn])


def _nodes(model):
    return [n.op_type for n in model.graph.node]


def _initializer(model, name):
    return next(onnx.numpy_helper.to_array(t) for t in model.graph.initializer if t.name == name)


def _check_against(model, exported, feeds, tol=0.0):
    """ORT on the exported model gives the original model's outputs (bitwise when tol is 0)."""
    onnx.checker.check_model(exported, full_check=True)
    want = session(model).run(None, feeds)
    have = session(exported).run(None, feeds)
    for w, h in zip(want, have):
        assert w.dtype == h.dtype and w.shape == h.shape
        assert np.array_equal(w, h) if tol == 0 else rel_err(h, w) <= tol


# -- the graph ------------------------------------------------------------------------------------

def test_names_shapes_and_versions():
    t = TensorType((None, 3, 4), f32)
    fn = _fn([t], [t])
    y = fn.body.append(nn.RELU.build(fn.arguments)).result
    y.name_hint = "relu_out"
    model = to_onnx(_ret(fn, y))
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == DEFAULT_IR_VERSION == 10 and DEFAULT_OPSET == 21
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 21)]
    assert model.producer_name == "quantir" and model.graph.name == "main"
    (x,), (out,) = model.graph.input, model.graph.output
    assert x.name == "x" and out.name == "y"          # the quantir.name attributes, not the hint
    dims = x.type.tensor_type.shape.dim
    assert dims[0].dim_param == "x_d0" and [d.dim_value for d in dims[1:]] == [3, 4]
    assert model.graph.node[0].output == ["y"]


def test_unnamed_and_clashing_values_get_unique_names():
    t = TensorType((2,), f32)
    fn = _fn([t], [t])
    a = fn.body.append(nn.RELU.build(fn.arguments)).result
    b = fn.body.append(nn.UNARY["neg"].build([a])).result
    a.name_hint, b.name_hint = "x", "x"            # both clash with the input name
    c = fn.body.append(nn.UNARY["abs"].build([b])).result   # no hint
    model = to_onnx(_ret(fn, c))
    names = [o for n in model.graph.node for o in n.output]
    assert names == ["x__1", "x__2", "y"]
    onnx.checker.check_model(model, full_check=True)


def test_passthrough_and_repeated_outputs_get_identities():
    t = TensorType((2,), f32)
    fn = _fn([t], [t, t, t, t], outs=("x", "y", "y2", "x_copy"))
    y = fn.body.append(nn.RELU.build(fn.arguments)).result
    model = to_onnx(_ret(fn, fn.arguments[0], y, y, fn.arguments[0]))
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output] == ["x", "y", "y2", "x_copy"]
    assert _nodes(model) == ["Relu", "Identity", "Identity"]
    x = np.array([-1, 2], F32)
    out = session(model).run(None, {"x": x})
    for got, want in zip(out, [x, [0, 2], [0, 2], x]):
        np.testing.assert_array_equal(got, want)


def test_output_named_like_another_input_is_refused():
    t = TensorType((2,), f32)
    fn = _fn([t, t], [t], names=("a", "b"), outs=("a",))
    with pytest.raises(VerifyError, match="input and an output named 'a'"):
        to_onnx(_ret(fn, fn.arguments[1]))


def test_constants_become_initializers_splats_constant_of_shape_and_unused_ones_vanish():
    t = TensorType((2, 1024), f32)
    fn = _fn([t], [t])
    w = np.arange(2048, dtype=F32).reshape(2, 1024)
    fill = np.full((2, 1024), -0.0, F32)
    _const(fn, np.ones(7, F32), "unused")
    cw = _const(fn, w, "w")
    cf = _const(fn, fill, "fill")
    s = fn.body.append(nn.ADD.build([fn.arguments[0], cw])).result
    y = fn.body.append(nn.ADD.build([s, cf])).result
    model = to_onnx(_ret(fn, y))
    onnx.checker.check_model(model, full_check=True)
    inits = {t.name: t for t in model.graph.initializer}
    assert set(inits) == {"w", "fill_shape"}
    assert inits["w"].raw_data and not inits["w"].float_data     # bytes, not a Python list
    np.testing.assert_array_equal(_initializer(model, "w"), w)
    (fill_node,) = [n for n in model.graph.node if n.op_type == "ConstantOfShape"]
    value = onnx.numpy_helper.to_array(fill_node.attribute[0].t)
    assert value.tobytes() == np.array([-0.0], F32).tobytes()     # bitwise: -0.0 stays -0.0
    x = np.ones((2, 1024), F32)
    np.testing.assert_array_equal(session(model).run(None, {"x": x})[0], x + w + fill)


# -- attributes that were ONNX inputs ------------------------------------------------------------

def _one_node_model(make_onnx_model, op_type, inputs, out_shape, initializers, opset=17, x_shape=(1, 3, 8, 8),
                    **attrs):
    node = helper.make_node(op_type, inputs, ["y"], name="the_node", **attrs)
    return make_onnx_model([node], [("x", F32, x_shape)], [("y", F32, out_shape)], initializers, opset=opset)


CONSTANT_INPUT_CASES = {
    "reshape": ("Reshape", ["x", "shape"], (1, 3, 64), {"shape": np.array([1, 3, -1], np.int64)}, {}),
    "slice": ("Slice", ["x", "starts", "ends", "axes", "steps"], (1, 3, 3, 8),
              {"starts": np.array([1], np.int64), "ends": np.array([7], np.int64), "axes": np.array([2], np.int64),
               "steps": np.array([2], np.int64)}, {}),
    "clip_max_only": ("Clip", ["x", "", "hi"], (1, 3, 8, 8), {"hi": np.array(0.5, F32)}, {}),
    "clip_both": ("Clip", ["x", "lo", "hi"], (1, 3, 8, 8), {"lo": np.array(-0.25, F32), "hi": np.array(0.5, F32)}, {}),
    "pad": ("Pad", ["x", "pads", "value"], (1, 3, 10, 11),
            {"pads": np.array([0, 0, 1, 2, 0, 0, 1, 1], np.int64), "value": np.array(1.5, F32)}, {}),
    "resize_scales": ("Resize", ["x", "", "scales"], (1, 3, 16, 16),
                      {"scales": np.array([1, 1, 2, 2], F32)}, {"mode": "linear"}),
    "resize_sizes": ("Resize", ["x", "", "", "sizes"], (1, 3, 5, 12),
                     {"sizes": np.array([1, 3, 5, 12], np.int64)}, {"mode": "nearest"}),
    "unsqueeze": ("Unsqueeze", ["x", "axes"], (1, 3, 1, 8, 8), {"axes": np.array([2], np.int64)}, {}),
    "tile": ("Tile", ["x", "reps"], (1, 3, 16, 8), {"reps": np.array([1, 1, 2, 1], np.int64)}, {}),
    "expand": ("Expand", ["x", "shape"], (2, 3, 8, 8), {"shape": np.array([2, 1, 1, 1], np.int64)}, {}),
    "reduce_mean": ("ReduceMean", ["x"], (1, 3, 1, 1), {}, {"axes": [2, 3]}),
    "reduce_sum": ("ReduceSum", ["x", "axes"], (1, 3), {"axes": np.array([2, 3], np.int64)}, {"keepdims": 0}),
}


@pytest.mark.parametrize("opset", [17, 18, 21])
@pytest.mark.parametrize("case", sorted(CONSTANT_INPUT_CASES))
def test_constant_inputs_come_back(make_onnx_model, rng, case, opset):
    op_type, inputs, out_shape, inits, attrs = CONSTANT_INPUT_CASES[case]
    model = _one_node_model(make_onnx_model, op_type, inputs, out_shape, inits, **attrs)
    exported = to_onnx(load_onnx(model, optimize=False), opset=opset)
    (node,) = exported.graph.node
    assert node.op_type == op_type and node.name == "the_node"
    for i, name in enumerate(inputs[1:], 1):      # the same slots are given (or left out) again
        assert bool(node.input[i] if i < len(node.input) else "") == bool(name), (i, list(node.input))
    if op_type == "ReduceMean":   # axes: an attribute before opset 18, an input from 18
        assert (len(node.input) == 2) == (opset >= 18)
    x = rng.standard_normal((1, 3, 8, 8)).astype(F32)
    _check_against(model, exported, {"x": x})


@pytest.mark.parametrize("opset", [17, 18])
def test_split_num_outputs_before_and_from_opset_18(make_onnx_model, rng, opset):
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)
    model = make_onnx_model([node], [("x", F32, (2, 9))], [(n, F32, (2, 3)) for n in "abc"], opset=18)
    exported = to_onnx(load_onnx(model), opset=opset)
    (split,) = exported.graph.node
    if opset < 18:
        assert len(split.input) == 2 and not any(a.name == "num_outputs" for a in split.attribute)
        np.testing.assert_array_equal(_initializer(exported, split.input[1]), [3, 3, 3])
    else:
        assert [a.i for a in split.attribute if a.name == "num_outputs"] == [3]
    _check_against(model, exported, {"x": rng.standard_normal((2, 9)).astype(F32)})


def test_camel_case_attributes_and_optional_bias(make_onnx_model, rng):
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1, alpha=0.5),
             helper.make_node("Softmax", ["h"], ["y"], axis=-1)]
    inits = {"w": rng.standard_normal((5, 4)).astype(F32), "b": rng.standard_normal(5).astype(F32)}
    model = make_onnx_model(nodes, [("x", F32, ("N", 4))], [("y", F32, ("N", 5))], inits)
    exported = to_onnx(load_onnx(model))
    gemm = exported.graph.node[0]
    assert {a.name: (a.i if a.type == a.INT else a.f) for a in gemm.attribute} == {"transB": 1, "alpha": 0.5}
    _check_against(model, exported, {"x": rng.standard_normal((3, 4)).astype(F32)})


def test_opaque_onnx_nodes_are_written_back(make_onnx_model, rng):
    # EyeLike: an op quantir does not implement (Einsum, used here before, is imported now)
    nodes = [helper.make_node("EyeLike", ["x"], ["h"], k=1),
             helper.make_node("Relu", ["h"], ["y"])]
    model = make_onnx_model(nodes, [("x", F32, (2, 3))], [("y", F32, (2, 3))], {})
    module = load_onnx(model, keep_unsupported=True)
    assert any(op.opdef is nn.ONNX_OP for op in module.main.ops)
    exported = to_onnx(module, opset=17)
    assert _nodes(exported) == ["EyeLike", "Relu"]
    _check_against(model, exported, {"x": rng.standard_normal((2, 3)).astype(F32)})


# -- what cannot be exported ----------------------------------------------------------------------

def test_unregistered_op_is_named():
    t = TensorType((2,), f32)
    fn = _fn([t], [t])
    op = fn.body.append(unregistered("foo.bar").build(fn.arguments, [t]))
    op.label = "mystery"
    with pytest.raises(UnsupportedOpError, match=r"'foo.bar' \(node 'mystery'\) has no ONNX export"):
        to_onnx(_ret(fn, op.results[0]))


def test_legacy_fake_quant_is_unsupported():
    t = TensorType((2,), f32)
    fn = _fn([t], [t])
    y = fn.body.append(dialects.quant.CONST_FAKE_QUANT.build(fn.arguments, [t], min=-1.0, max=1.0)).result
    with pytest.raises(UnsupportedOpError, match="'quant.const_fake_quant'"):
        to_onnx(_ret(fn, y))


def test_op_newer_than_the_opset_is_refused():
    t = TensorType((2,), f32)
    fn = _fn([t], [t])
    y = fn.body.append(nn.UNARY["gelu"].build(fn.arguments)).result
    module = _ret(fn, y)
    with pytest.raises(UnsupportedOpError, match="opset 19 does not define.*from opset 20"):
        to_onnx(module, opset=19)
    assert _nodes(to_onnx(module, opset=20)) == ["Gelu"]


def test_attribute_unknown_to_the_opset_is_refused_unless_default():
    x = TensorType((1, 3, 4, 4), f32)
    fn = _fn([x], [TensorType((1, 1, 1, 1), f32)])   # placeholder result type, recomputed below
    y = fn.body.append(nn.SPACE_TO_DEPTH.build(fn.arguments, blocksize=2, mode="CRD")).result
    module = _ret(fn, y)
    with pytest.raises(UnsupportedOpError, match="has no attribute 'mode'"):
        to_onnx(module)
    fn2 = _fn([x], [x])
    y2 = fn2.body.append(nn.SPACE_TO_DEPTH.build(fn2.arguments, blocksize=2, mode="DCR")).result
    assert [a.name for a in to_onnx(_ret(fn2, y2)).graph.node[0].attribute] == ["blocksize"]


def test_element_type_outside_the_schema_is_refused():
    t = TensorType((2,), f16)
    fn = _fn([t], [t])
    y = fn.body.append(nn.UNARY["celu"].build(fn.arguments)).result
    with pytest.raises(UnsupportedOpError, match=r"Celu at opset 21 does not accept tensor\(float16\)"):
        to_onnx(_ret(fn, y))


def test_type_without_onnx_form_is_refused():
    t = TensorType((2,), parse_type("bf16"))
    fn = _fn([t], [t])
    with pytest.raises(UnsupportedOpError, match="element type 'bf16'"):
        to_onnx(_ret(fn, fn.arguments[0]))


@pytest.mark.parametrize("opset", [12, 29])
def test_opset_out_of_range(opset):
    t = TensorType((2,), f32)
    fn = _fn([t], [t])
    with pytest.raises(UnsupportedOpError, match=f"cannot export at opset {opset}"):
        to_onnx(_ret(fn, fn.arguments[0]), opset=opset)


# -- files ----------------------------------------------------------------------------------------

def test_save_onnx_is_atomic(tmp_path):
    t = TensorType((2,), f32)
    fn = _fn([t], [t])
    module = _ret(fn, fn.body.append(nn.RELU.build(fn.arguments)).result)
    path = tmp_path / "model.onnx"
    assert save_onnx(module, path) == path
    assert onnx.load(str(path)).graph.node[0].op_type == "Relu"
    before = path.read_bytes()
    bad = _fn([t], [t])
    bad_module = _ret(bad, bad.body.append(unregistered("foo.bar").build(bad.arguments, [t])).results[0])
    with pytest.raises(UnsupportedOpError):
        save_onnx(bad_module, path)
    assert path.read_bytes() == before                # a failed save leaves the old file alone
    assert os.listdir(tmp_path) == ["model.onnx"]      # and no temporary files
