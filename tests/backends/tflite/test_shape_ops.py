"""Reshapes with several dynamic dims in .tflite: the int32 target is computed at run time
(SHAPE -> CONCATENATION -> GATHER) and RESHAPE reads it; LiteRT resizes every tensor whose shape
signature holds a -1. Checked bit-exact with LiteRT's reference kernels (``quantir verify``) at
two sizes, and read back by quantir's .tflite reader."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("ai_edge_litert")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import quantir as qr  # noqa: E402
from quantir.backends.tflite.export import export_tflite  # noqa: E402
from quantir.backends.tflite.schema import BuiltinOperator as OP  # noqa: E402
from quantir.ir.dialects import nn  # noqa: E402
from quantir.runtime import run  # noqa: E402
from quantir.verify import verify_tflite  # noqa: E402

RNG = np.random.default_rng(0)


def _dim(of: str, index: int, out: str) -> list:
    return [helper.make_node("Shape", [of], [f"{out}_s"]),
            helper.make_node("Gather", [f"{out}_s", f"{out}_i"], [f"{out}_g"], axis=0),
            helper.make_node("Unsqueeze", [f"{out}_g", "axes0"], [out])]


def _attention_like(tmp_path) -> str:
    """PP-OCR's recognizer in small: (n, t, 6) -> (0, 1, -1, 6) (batch copied, width the -1), and
    Reshape(q, Shape(k)) of two tensors with the same batch and width -> (0, 0, 2, 3)."""
    nodes = [helper.make_node("Mul", ["x", "s"], ["m"]),
             *_dim("x", 1, "t"),
             helper.make_node("Concat", ["zero", "one", "t", "six"], ["target"], axis=0),
             helper.make_node("Reshape", ["m", "target"], ["r4"]),                 # (n, 1, t, 6)
             helper.make_node("Reshape", ["r4", "split"], ["k"]),                  # (n, 1, t, 2, 3): (0, 0, 0, 2, 3)
             helper.make_node("Squeeze", ["k", "axes1"], ["k3"]),                  # (n, t, 2, 3)
             helper.make_node("Relu", ["k3"], ["q"]),
             helper.make_node("Shape", ["k3"], ["ks"]),
             helper.make_node("Reshape", ["q", "ks"], ["y"])]
    inits = {"s": np.float32(0.5), "zero": np.array([0], np.int64), "one": np.array([1], np.int64),
             "six": np.array([6], np.int64), "split": np.array([0, 0, 0, 2, 3], np.int64),
             "axes0": np.array([0], np.int64), "axes1": np.array([1], np.int64), "t_i": np.int64(1)}
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T", 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "T", 2, 3])],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_reshapes_with_two_dynamic_dims_are_bit_exact_at_two_sizes(tmp_path):
    path = _attention_like(tmp_path)
    module = qr.load(path)
    assert [tuple(op.attr("shape")) for op in module.main.ops if op.opdef is nn.RESHAPE] == [
        (0, 1, -1, 6), (0, 0, 0, 2, 3), (0, 0, 2, 3)]
    r = qr.quantize(path, {"x": RNG.normal(size=(16, 5, 6)).astype(np.float32)}, qr.Config(progress=False))
    exported = export_tflite(r.module)
    codes = [exported.model.operator_codes[o.opcode_index].builtin_code for o in exported.model.subgraphs[0].operators]
    assert codes.count(OP.GATHER) == 3 and codes.count(OP.SHAPE) == 3   # one run-time target per reshape
    out = r.save(tmp_path / "m.tflite")
    for n, t in ((1, 7), (3, 4)):
        x = RNG.normal(size=(n, t, 6)).astype(np.float32)
        report = verify_tflite(out, {"x": x}, intermediates=True)
        assert report.ok, report.text()
        assert report.outputs[0].shape == (n, t, 2, 3)
    # the reader takes it back as the reshapes it was written from (copies at their positions)
    back = qr.load(out)
    assert [tuple(op.attr("shape")) for op in back.main.ops if op.opdef is nn.RESHAPE] == [
        (0, 1, -1, 6), (0, 0, 0, 2, 3), (0, 0, 2, 3)]
    x = RNG.normal(size=(2, 3, 6)).astype(np.float32)
    np.testing.assert_array_equal(run(back, {"x": x})["y"], run(r.module, {"x": x})["y"])
