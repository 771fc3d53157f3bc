"""Small ONNX models and the end-to-end checks shared by the SUM, L2_NORMALIZATION and LOG_SOFTMAX
tests: quantize, export (.tflite, QDQ, QOperator), run in LiteRT and ONNX Runtime, read back."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.backends.tflite.reader import read_model
from quantir.backends.tflite.check import check_tflite
from quantir.frontends.onnx import load_onnx
from quantir.quantize.check_qdq import check_qdq
from quantir.frontends.tflite import import_tflite
from quantir.runtime import run

CFG = qr.Config(progress=False, budget=None)   # the int8 kernels under test: no mixed precision


def const(name: str, value, dtype=np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def model(nodes, inits=(), shape=(None, 16), out_shape=None, opset=18, tanh_first=False) -> onnx.ModelProto:
    """``nodes`` from input ``x`` to output ``y``; ``tanh_first``: x is Tanh of the input (so that a
    model whose op stays float still has something to quantize)."""
    name = "x"
    if tanh_first:
        nodes, name = [helper.make_node("Tanh", ["x0"], ["x"])] + list(nodes), "x0"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def integer_ops(r) -> list[str]:
    return [op.name for op in r.module.main.ops if op.name not in ("quant.qcast", "quant.dcast", "func.return")]


def float_reasons(r) -> dict[str, str]:
    return {op.name: why for op, why in r.annotation.float_ops}


def output_step(r, opname: str) -> float:
    (op,) = [o for o in r.module.main.ops if o.name == opname]
    return float(op.results[0].type.element_type.scale)


def int8_of(r, x: np.ndarray) -> np.ndarray:
    """``x`` quantized as the model's input qcast quantizes it."""
    q = next(o for o in r.module.main.ops if o.name == "quant.qcast").results[0].type.element_type
    return np.clip(np.round(x / np.float32(q.scale)) + q.zero_point, -128, 127).astype(np.int8)


def assert_checked(report) -> None:
    """`quantir check` clean, and it did check the ops (a quantized op with no spec rule is listed as unknown)."""
    assert report.ok and report.unknown == [], ([str(v) for v in report.violations], report.unknown)
    assert report.checked >= 1


def tflite_round_trip(r, tmp_path, x: np.ndarray, opname: str, resolver: str = "reference") -> np.ndarray:
    """Export with int8 io, run LiteRT (``resolver``) on the int8 input, compare every element with
    quantir's interpreter on the same input, and read the .tflite back: the same integer op, and
    ``quantir check`` clean. Returns LiteRT's output."""
    from quantir.backends.tflite.litert import run_model
    path = tmp_path / "m.tflite"
    r.save(path, io="int8")
    data = path.read_bytes()
    xq = int8_of(r, x)
    (theirs,) = run_model(data, [xq], resolver)
    back = import_tflite(read_model(data, "m.tflite")).module
    assert [op.name for op in back.main.ops if op.name.startswith("qnn.")] == [opname]
    ours = run(back, {back.main.arguments[0].name_hint or "x": xq})
    (mine,) = ours.values()
    assert mine.dtype == np.int8 and mine.shape == theirs.shape
    assert np.count_nonzero(mine != theirs) == 0, f"{np.count_nonzero(mine != theirs)} of {mine.size} differ"
    # the quantizer's own module gives the same integers as its .tflite read back
    (dcast,) = [o for o in r.module.main.ops if o.name == "quant.dcast"]
    direct = run(r.module, {"x": x}, intermediates=[dcast.operands[0].name_hint])[dcast.operands[0].name_hint]
    np.testing.assert_array_equal(direct, theirs)
    assert_checked(check_tflite(path))
    return theirs


def onnx_runtime_within_one_step(r, tmp_path, x: np.ndarray, opname: str) -> None:
    import onnxruntime as ort
    ours = run(r.module, {"x": x})["y"]
    step = output_step(r, opname)
    for fmt in ("qdq", "qoperator"):
        path = tmp_path / f"m.{fmt}.onnx"
        r.save(path, format=fmt)
        got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        assert np.abs(got - ours).max() <= step * 1.0001, (fmt, np.abs(got - ours).max(), step)
        if fmt == "qdq":   # what `quantir check model.onnx` runs
            assert_checked(check_qdq(load_onnx(str(path), optimize=False, keep_qdq=True)))
