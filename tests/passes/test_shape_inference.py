"""Shape inference: result types recomputed from the op rules, e.g. after fixing the batch."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from quantir.errors import ShapeError  # noqa: E402
from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.ir import verify  # noqa: E402
from quantir.passes.shape_inference import ShapeInference, ShapeInferenceOptions  # noqa: E402
from quantir.runtime import run  # noqa: E402


@pytest.fixture
def cnn(make_onnx_model, rng):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    g = rng.standard_normal((10, 4 * 3 * 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]),
             helper.make_node("Gemm", ["f", "g"], ["y"], transB=1)]
    return load_onnx(make_onnx_model(nodes, [("x", np.float32, (None, 3, 7, 7))], [("y", np.float32, None)],
                                     {"w": w, "g": g}))


def types(module):
    return [str(r.type) for op in module.main.ops for r in op.results if op.name != "arith.constant"]


def test_fix_batch(cnn):
    assert types(cnn) == ["tensor<?x4x3x3xf32>", "tensor<?x4x3x3xf32>", "tensor<?x36xf32>", "tensor<?x10xf32>"]
    result = ShapeInference(ShapeInferenceOptions(input_shapes={"x": (5, 3, 7, 7)})).run(cnn)
    assert result.modified and result.stats["update:argument"] == 1 and result.stats["update:nn.conv"] == 1
    verify(cnn)
    assert types(cnn) == ["tensor<5x4x3x3xf32>", "tensor<5x4x3x3xf32>", "tensor<5x36xf32>", "tensor<5x10xf32>"]
    assert str(cnn.main.type.results[0]) == "tensor<5x10xf32>"
    assert run(cnn, {"x": np.zeros((5, 3, 7, 7), np.float32)})["y"].shape == (5, 10)
    assert not ShapeInference().run(cnn).modified


def test_incompatible_shape_names_the_op(cnn):
    with pytest.raises(ShapeError, match=r"'nn.conv'.*x has 2 channels but w expects 3"):
        ShapeInference(ShapeInferenceOptions(input_shapes={"x": (1, 2, 7, 7)})).run(cnn)
