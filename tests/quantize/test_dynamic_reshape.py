"""A Reshape whose target is computed at run time (``Reshape(y, Shape(k))`` with a dynamic batch
and width) is quantized like any Reshape: it moves int8 values with the input's scale, the shape
computation beside it stays integer and the data path never goes back to float. The exports run
in ONNX Runtime at two input sizes and agree with quantir's interpreter."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402

from quantir.api import quantize  # noqa: E402
from quantir.backends.onnx import to_onnx_quantized  # noqa: E402
from quantir.ir.dialects import nn, quant  # noqa: E402
from quantir.runtime import run  # noqa: E402
from quantir.types import QuantizedType  # noqa: E402

SIZES = ((1, 4, 3, 5), (2, 4, 3, 2))


def _model(make_onnx_model, rng):
    w = rng.standard_normal((6, 4, 1, 1)).astype(np.float32) * 0.5
    w2 = rng.standard_normal((3, 6, 1, 1)).astype(np.float32) * 0.5
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Transpose", ["r"], ["k"], perm=[3, 0, 1, 2]),
             helper.make_node("Shape", ["k"], ["ks"]),
             helper.make_node("Reshape", ["r", "ks"], ["y"], name="runtime_reshape"),   # (w, n, 6, 3)
             helper.make_node("Transpose", ["y"], ["t"], perm=[1, 2, 3, 0]),
             helper.make_node("Conv", ["t", "w2"], ["z"])]
    return make_onnx_model(nodes, [("x", np.float32, ("N", 4, 3, "W"))], [("z", np.float32, ("N", 3, 3, "W"))],
                           {"w": w, "w2": w2})


def test_runtime_reshape_is_integer_and_exports_run_at_two_sizes(make_onnx_model, rng):
    model = _model(make_onnx_model, rng)
    calib = [{"x": rng.standard_normal(SIZES[0]).astype(np.float32)} for _ in range(16)]
    result = quantize(model, calib)
    fn = result.module.main
    dyn, = [op for op in fn.ops if op.opdef is nn.DYNAMIC_RESHAPE]
    # the int8 data moves with the input's parameters; the target is the i64 shape of k
    assert isinstance(dyn.operands[0].type.element_type, QuantizedType)
    assert dyn.results[0].type.element_type == dyn.operands[0].type.element_type
    assert dyn.results[0].type.shape == (None, None, 6, 3)
    assert sum(op.opdef is quant.QCAST for op in fn.ops) == 1
    assert sum(op.opdef is quant.DCAST for op in fn.ops) == 1
    assert [a.type.shape for a in fn.arguments] == [(None, 4, 3, None)]
    scale = fn.outputs[0].op.operands[0].type.element_type.scale
    for fmt in ("qdq", "qoperator"):
        exported = to_onnx_quantized(result.module, format=fmt)
        sess = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
        for size in SIZES:
            x = rng.standard_normal(size).astype(np.float32)
            want = run(result.module, {"x": x})["z"]
            got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
            assert got.shape == want.shape == (size[0], 3, 3, size[3])
            # ONNX Runtime rounds its float requantization differently: at most one step apart
            assert np.max(np.abs(got - want)) <= scale * 1.01, (fmt, size)


def test_shape_arithmetic_stays_integer_beside_the_int8_path(make_onnx_model, rng):
    # x.view(n * c, h * w) on a conv output with dynamic batch and width: Shape -> Gather -> Mul ->
    # Concat on i64 computes the target at run time; only the data is quantized
    def dim(i):
        return [helper.make_node("Shape", ["c"], [f"s{i}"]),
                helper.make_node("Gather", [f"s{i}", f"i{i}"], [f"g{i}"], axis=0),
                helper.make_node("Unsqueeze", [f"g{i}", "axes0"], [f"d{i}"])]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), *dim(0), *dim(1), *dim(2), *dim(3),
             helper.make_node("Mul", ["d0", "d1"], ["nc"]), helper.make_node("Mul", ["d2", "d3"], ["hw"]),
             helper.make_node("Concat", ["nc", "hw"], ["t"], axis=0), helper.make_node("Reshape", ["c", "t"], ["y"]),
             helper.make_node("Relu", ["y"], ["z"])]
    inits = {**{f"i{i}": np.int64(i) for i in range(4)}, "axes0": np.array([0], np.int64),
             "w": rng.standard_normal((3, 2, 1, 1)).astype(np.float32)}
    model = make_onnx_model(nodes, [("x", np.float32, ("N", 2, 4, "W"))], [("z", np.float32, None)], inits)
    result = quantize(model, [{"x": rng.standard_normal((1, 2, 4, 5)).astype(np.float32)} for _ in range(16)])
    fn = result.module.main
    integer = [op for op in fn.ops if op.opdef in (nn.GATHER, nn.MUL, nn.CONCAT)]
    assert integer and all(str(op.results[0].type.element_type) == "i64" for op in integer)
    assert sum(op.opdef is quant.QCAST for op in fn.ops) == 1 and sum(op.opdef is quant.DCAST for op in fn.ops) == 1
    dyn, = [op for op in fn.ops if op.opdef is nn.DYNAMIC_RESHAPE]
    assert isinstance(dyn.operands[0].type.element_type, QuantizedType)
    scale = fn.outputs[0].op.operands[0].type.element_type.scale
    for fmt in ("qdq", "qoperator"):
        sess = ort.InferenceSession(to_onnx_quantized(result.module, format=fmt).SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        for size in ((1, 2, 4, 5), (3, 2, 4, 2)):
            x = rng.standard_normal(size).astype(np.float32)
            want, got = run(result.module, {"x": x})["z"], sess.run(None, {"x": x})[0]
            assert got.shape == want.shape == (size[0] * 3, 4 * size[3])
            assert np.max(np.abs(got - want)) <= scale * 1.01, (fmt, size)
