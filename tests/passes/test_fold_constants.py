"""Constant folding: exporter shape subgraphs dissolve at import, and the pass alone folds
what has constant operands; identity removal."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.ir import Function, Module, StringAttr, verify  # noqa: E402
from quantir.ir.dialects import arith, func, nn  # noqa: E402
from quantir.passes.fold_constants import (FoldConstants, FoldConstantsOptions, RemoveIdentities,  # noqa: E402
                                           make_constant)
from quantir.runtime import run  # noqa: E402
from quantir.types import FloatType, TensorType  # noqa: E402


def ops_except_constants(module):
    return Counter(op.name for op in module.main.ops if op.opdef not in (arith.CONSTANT, func.RETURN))


def ort_run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(np.array(value, dtype)))


def test_torch_legacy_pad_subgraph(make_onnx_model, rng):
    """``F.pad(x, (1, 1, 2, 2))`` as torch's TorchScript exporter writes it (opset 11+), then a conv."""
    nodes = [
        const("pads_py", [1, 1, 2, 2]),
        helper.make_node("Shape", ["pads_py"], ["n_given"]),            # [4]
        const("eight", [8]),
        helper.make_node("Sub", ["eight", "n_given"], ["n_missing"]),   # [4]
        helper.make_node("Cast", ["n_missing"], ["n_missing64"], to=TensorProto.INT64),
        helper.make_node("ConstantOfShape", ["n_missing64"], ["zeros"],
                         value=onnx.numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Concat", ["pads_py", "zeros"], ["flat"], axis=0),
        const("pairs_shape", [-1, 2]),
        helper.make_node("Reshape", ["flat", "pairs_shape"], ["pairs"]),
        const("st", [-1]), const("en", [-(2 ** 63)]), const("ax", [0]), const("stp", [-1]),
        helper.make_node("Slice", ["pairs", "st", "en", "ax", "stp"], ["reversed"]),
        helper.make_node("Transpose", ["reversed"], ["cols"], perm=[1, 0]),
        const("flat_shape", [-1]),
        helper.make_node("Reshape", ["cols", "flat_shape"], ["onnx_pads_raw"]),
        helper.make_node("Cast", ["onnx_pads_raw"], ["onnx_pads"], to=TensorProto.INT64),
        helper.make_node("Pad", ["x", "onnx_pads", "zero_value"], ["padded"], mode="constant"),
        helper.make_node("Conv", ["padded", "w"], ["y"]),
    ]
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    model = make_onnx_model(nodes, [("x", np.float32, (None, 3, 6, 5))], [("y", np.float32, None)],
                            {"w": w, "zero_value": np.array(0, np.float32)}, opset=13)
    module = load_onnx(model)
    verify(module)
    assert ops_except_constants(module) == Counter({"nn.conv": 1})     # the pad folded into the conv
    conv = next(op for op in module.main.ops if op.opdef is nn.CONV)
    assert conv.attr("pads") == (2, 1, 2, 1)
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    np.testing.assert_allclose(run(module, {"x": x})["y"], ort_run(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_range_equal_where_chain(make_onnx_model, rng):
    """Shape -> Size -> Range -> Equal/Less/Not -> Where/Expand/ConstantOfShape -> Tile, batch dynamic."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Size", ["shape"], ["rank"]),
        const("zero", 0), const("one", 1), const("two", 2),
        helper.make_node("Range", ["zero", "rank", "one"], ["r"]),
        helper.make_node("Equal", ["r", "zero"], ["is_batch"]),
        helper.make_node("Not", ["is_batch"], ["not_batch"]),
        helper.make_node("Less", ["r", "two"], ["leading"]),
        helper.make_node("And", ["leading", "not_batch"], ["is_channel"]),
        const("axes0", [0]),
        helper.make_node("Unsqueeze", ["rank", "axes0"], ["rank1"]),
        helper.make_node("ConstantOfShape", ["rank1"], ["ones"],
                         value=onnx.numpy_helper.from_array(np.array([1], np.int64))),
        helper.make_node("Expand", ["two", "rank1"], ["twos"]),
        helper.make_node("Where", ["leading", "ones", "twos"], ["reps"]),
        helper.make_node("Cast", ["is_channel"], ["channel_flag"], to=TensorProto.INT64),
        helper.make_node("Add", ["reps", "channel_flag"], ["reps2"]),           # [1, 2, 2, 2]
        helper.make_node("Tile", ["x", "reps2"], ["y"]),
    ]
    model = make_onnx_model(nodes, [("x", np.float32, (None, 2, 3, 3))], [("y", np.float32, None)], opset=13)
    module = load_onnx(model)
    assert ops_except_constants(module) == Counter({"nn.tile": 1})
    tile = next(op for op in module.main.ops if op.opdef is nn.TILE)
    assert tile.attr("repeats") == (1, 2, 2, 2)
    x = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    np.testing.assert_array_equal(run(module, {"x": x})["y"], ort_run(model, {"x": x})[0])


def _small_module():
    t = TensorType((2,), FloatType("f32"))
    fn = Function.create("main", [t], [], arg_attrs=[{"quantir.name": StringAttr("x")}])
    a = fn.body.append(make_constant(np.array([1, 2], np.float32))).result
    b = fn.body.append(make_constant(np.array([3, 4], np.float32))).result
    s = fn.body.append(nn.ADD.build([a, b], label="sum")).result
    s.name_hint = "s"
    i = fn.body.append(nn.IDENTITY.build([s])).result
    y = fn.body.append(nn.MUL.build([i, fn.arguments[0]])).result
    fn.body.append(func.RETURN.build([y], []))
    fn.update_type()
    return Module([fn])


def test_fold_constants_pass_alone():
    module = _small_module()
    x = np.array([1, -1], np.float32)
    before = run(module, {"x": x})["out0"]
    result = FoldConstants().run(module)
    assert result.modified and result.stats == {"fold:nn.add": 1, "fold:nn.identity": 1}
    verify(module)
    assert ops_except_constants(module) == Counter({"nn.mul": 1})
    named = [op for op in module.main.ops if op.opdef is arith.CONSTANT and op.results[0].name_hint == "s"]
    assert len(named) == 1 and named[0].label == "sum"     # the folded add keeps its name and label
    np.testing.assert_array_equal(named[0].attributes["value"].array, [4, 6])
    np.testing.assert_array_equal(run(module, {"x": x})["out0"], before)
    assert not FoldConstants().run(module).modified


def test_fold_constants_size_limit():
    module = _small_module()
    assert not FoldConstants(FoldConstantsOptions(max_elements=1)).run(module).modified


def test_remove_identities_alone():
    module = _small_module()
    result = RemoveIdentities().run(module)
    assert result.stats == {"erase:nn.identity": 1}
    assert ops_except_constants(module) == Counter({"nn.add": 1, "nn.mul": 1})
