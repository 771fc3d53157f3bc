"""Pad folding: a zero constant Pad of the spatial dims disappears into the conv's pads."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.ir import verify  # noqa: E402
from quantir.ir.dialects import nn  # noqa: E402
from quantir.passes.fold_pad import FoldPad  # noqa: E402
from quantir.runtime import run  # noqa: E402


def model_with_pad(make_onnx_model, rng, pads, value=0.0, mode="constant", conv_attrs=None):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Pad", ["x", "pads", "value"], ["p"], mode=mode),
             helper.make_node("Conv", ["p", "w"], ["y"], **(conv_attrs or {}))]
    inits = {"w": w, "pads": np.array(pads, np.int64), "value": np.array(value, np.float32)}
    return make_onnx_model(nodes, [("x", np.float32, (2, 3, 8, 7))], [("y", np.float32, None)], inits)


def fold(model, rng):
    module = load_onnx(model, optimize=False)
    x = rng.standard_normal((2, 3, 8, 7)).astype(np.float32)
    before = run(module, {"x": x})["y"]
    result = FoldPad().run(module)
    verify(module)
    np.testing.assert_allclose(run(module, {"x": x})["y"], before, rtol=1e-5, atol=1e-5)
    return module, result


def test_spatial_zero_pad_folds(make_onnx_model, rng):
    model = model_with_pad(make_onnx_model, rng, [0, 0, 1, 2, 0, 0, 3, 0], conv_attrs={"pads": [1, 1, 1, 1]})
    module, result = fold(model, rng)
    assert result.stats == {"fold:nn.pad": 1}
    assert not any(op.opdef is nn.PAD for op in module.main.ops)
    conv = next(op for op in module.main.ops if op.opdef is nn.CONV)
    assert conv.attr("pads") == (2, 3, 4, 1)


@pytest.mark.parametrize("pads,value,mode,reason", [
    ([0, 0, 1, 1, 0, 0, 1, 1], 1.0, "constant", "not zero constant padding"),
    ([0, 0, 1, 1, 0, 0, 1, 1], 0.0, "reflect", "not zero constant padding"),
    ([0, 1, 1, 1, 0, 0, 1, 1], 0.0, "constant", "pads the batch or channel dim"),
    ([0, 0, -1, 1, 0, 0, 1, 1], 0.0, "constant", "negative (cropping) pads"),
])
def test_pads_that_stay(pads, value, mode, reason, make_onnx_model, rng):
    model = model_with_pad(make_onnx_model, rng, pads, value, mode)
    if pads[1]:   # one more input channel: the conv needs a 4-channel weight
        model.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(
            rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "w"))
    module, result = fold(model, rng)
    assert not result.modified and result.stats == {f"skip:{reason}": 1}


def test_same_auto_pad_conv_keeps_its_pad(make_onnx_model, rng):
    model = model_with_pad(make_onnx_model, rng, [0, 0, 1, 1, 0, 0, 1, 1], conv_attrs={"auto_pad": "SAME_UPPER"})
    _, result = fold(model, rng)
    assert result.stats == {"skip:conv uses auto_pad SAME_UPPER": 1}
