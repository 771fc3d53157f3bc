"""OrtIntegerExecutor on a Conv1D written as Unsqueeze -> Conv -> Squeeze (PP-OCR recognizers' neck):
ONNX Runtime runs the conv channels-last, squeezes to (N, W, C) and goes back with a rank-3
Transpose (0, 2, 1), which is also the permutation *to* channels-last. The values after it are
channels first again and must be read that way (target="onnxruntime", the CLI's default for .onnx);
and where ONNX Runtime cancels the model's own Transpose to (N, W, C), its tensors are the model's."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

import quantir as qr  # noqa: E402
from quantir.runtime.ort import OrtIntegerExecutor  # noqa: E402


@pytest.fixture(params=["conv1d", "then_nwc"])
def result(request, make_onnx_model, rng):
    """``then_nwc``: the model transposes the result to (N, W, C) itself, as the recognizers do before
    their head; ONNX Runtime then drops that Transpose and the one back from its channels-last conv."""
    def node(op, inputs, out, **attrs):   # named after its output: the layers' labels are unique
        return helper.make_node(op, inputs, [out], name=out, **attrs)
    nodes = [node("Unsqueeze", ["x", "ax"], "u"), node("Conv", ["u", "w"], "c"), node("Squeeze", ["c", "ax"], "s"),
             node("BatchNormalization", ["s", "g", "b", "mu", "var"], "bn"), node("HardSwish", ["bn"], "h"),
             node("Unsqueeze", ["h", "ax"], "u2"), node("Conv", ["u2", "w2"], "c2"), node("Squeeze", ["c2", "ax"], "y")]
    if request.param == "then_nwc":
        nodes[-1] = node("Squeeze", ["c2", "ax"], "sq")
        nodes += [node("Transpose", ["sq"], "t", perm=[0, 2, 1]), node("Add", ["t", "k"], "y")]
    inits = {"ax": np.array([2], np.int64), "w": rng.standard_normal((8, 4, 1, 3)).astype(np.float32),
             "g": rng.uniform(0.5, 1.5, 8).astype(np.float32), "b": rng.standard_normal(8).astype(np.float32),
             "mu": rng.standard_normal(8).astype(np.float32), "var": rng.uniform(0.5, 1.5, 8).astype(np.float32),
             "w2": rng.standard_normal((5, 8, 1, 1)).astype(np.float32), "k": rng.standard_normal(5).astype(np.float32)}
    if request.param == "conv1d":
        del inits["k"]
    model = make_onnx_model(nodes, [("x", np.float32, ("N", 4, "T"))], [("y", np.float32, None)], inits)
    x = rng.standard_normal((16, 4, 12)).astype(np.float32)
    return qr.quantize(model, {"x": x}, qr.Config(progress=False, target="onnxruntime"))


def test_values_after_a_rank3_transpose_back_are_read_channels_first(result, rng):
    names = [v.name_hint for op in result.module.main.ops for v in op.results if (v.name_hint or "").endswith("__q")]
    ex = OrtIntegerExecutor(result.module, expose=names, format="qdq")
    assert "h__q" in ex.exposed
    x = rng.standard_normal((3, 4, 10)).astype(np.float32)
    got = ex.run({"x": x})
    ref = qr.run(result.module, {"x": x}, intermediates=names)
    for name in ex.exposed:   # int8, channels first, within a few steps of LiteRT's arithmetic
        assert got[name].shape == ref[name].shape, name
        assert np.abs(got[name].astype(int) - ref[name].astype(int)).max() <= 4, name


def test_layer_errors_with_the_onnxruntime_target(result):
    # the same layers as the interpreter's report (LiteRT arithmetic), less those ONNX Runtime
    # optimized away, each within a step's worth of cosine of it
    on_ort = result.layer_errors()
    litert = dataclasses.replace(result, config=dataclasses.replace(result.config, target="litert"), _layers=None)
    reference = {e.name: e for e in litert.layer_errors()}
    gone = len(reference) - len(on_ort)
    assert "HARD_SWISH" in [e.kind for e in on_ort] and gone <= 1
    for e in on_ort:
        assert e.cosine == pytest.approx(reference[e.name].cosine, abs=5e-3), e.name
