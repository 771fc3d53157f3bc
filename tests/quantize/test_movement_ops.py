"""GATHER and SPACE_TO_DEPTH end to end: ONNX Gather (constant indices) and SpaceToDepth become
integer data movement that copies stored integers, run in LiteRT BUILTIN_REF exactly as in
quantir's interpreter, read back from .tflite as the same ops, export to QDQ and QOperator, and
pass `quantir check`; a Gather whose indices are computed at run time stays float, with why."""
from __future__ import annotations

import argparse

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.cli.check import run as quantir_check
from quantir.frontends.tflite import import_tflite
from quantir.ir.dialects import nn
from quantir.runtime import run
from quantir.types import QuantizedType

RNG = np.random.default_rng(0)
X = RNG.normal(size=(48, 3, 8, 8)).astype(np.float32)
W = RNG.normal(size=(6, 3, 3, 3)).astype(np.float32)


def _save(tmp_path, tail: list, out_shape, extra_inits=(), extra_inputs=()) -> str:
    """Conv (so the moved tensor is a real activation) followed by ``tail`` reading 'c'."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), *tail]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3, 8, 8]),
                                       *extra_inputs],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          [numpy_helper.from_array(W, "w"), *extra_inits])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _gather(indices, axis=1):
    idx = numpy_helper.from_array(np.asarray(indices, np.int64), "idx")
    return [helper.make_node("Gather", ["c", "idx"], ["y"], axis=axis)], [idx]


MODELS = {
    # negative indices count from the end in ONNX; LiteRT needs them non-negative
    "gather_channels": (*_gather([0, -1, 2, -3]), [None, 4, 8, 8], nn.GATHER),
    "gather_rows": (*_gather([[7, 0], [-2, 3]], axis=2), [None, 6, 2, 2, 8], nn.GATHER),
    "gather_scalar": (*_gather(-2, axis=3), [None, 6, 8], nn.GATHER),
    "space_to_depth": ([helper.make_node("SpaceToDepth", ["c"], ["y"], blocksize=2)], [], [None, 24, 4, 4],
                       nn.SPACE_TO_DEPTH),
}


def _quantize(tmp_path, name):
    tail, inits, shape, opdef = MODELS[name]
    r = qr.quantize(_save(tmp_path, tail, shape, inits), {"x": X}, qr.Config(progress=False))
    return r, opdef


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_op_is_integer_and_shares_its_input_parameters(tmp_path, name):
    r, opdef = _quantize(tmp_path, name)
    assert r.annotation.float_ops == []
    (op,) = [o for o in r.module.main.ops if o.opdef is opdef]
    x_t, y_t = op.operands[0].type.element_type, op.results[0].type.element_type
    assert isinstance(y_t, QuantizedType) and y_t == x_t
    if opdef is nn.GATHER:
        indices = op.operands[1].op.attributes["value"].array
        assert indices.min() >= 0   # normalised for LiteRT at lowering
    assert r.spec_report().ok
    # the stored integers move unchanged: the result is numpy's gather / space-to-depth of the input's
    x_name, y_name = op.operands[0].name_hint, op.results[0].name_hint
    got = run(r.module, {"x": X[:4]}, intermediates=[x_name, y_name])
    if opdef is nn.GATHER:
        want = np.take(got[x_name], _indices(name), axis=op.attr("axis"))
    else:
        want = _space_to_depth(got[x_name])
    np.testing.assert_array_equal(got[y_name], want)


def _indices(name):
    return numpy_helper.to_array(MODELS[name][1][0])


def _space_to_depth(a):
    n, ch, h, w = a.shape
    return a.reshape(n, ch, h // 2, 2, w // 2, 2).transpose(0, 3, 5, 1, 2, 4).reshape(n, ch * 4, h // 2, w // 2)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_bit_exact_with_litert_and_read_back(tmp_path, name, capsys):
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.backends.tflite.litert import run_model
    from quantir.verify import verify_tflite
    r, opdef = _quantize(tmp_path, name)
    path = tmp_path / "m.tflite"
    r.save(path)
    # LiteRT on the exported file vs quantir's interpreter on the quantized module, same inputs
    for i in range(0, 8, 4):
        (theirs,) = run_model(path.read_bytes(), [X[i:i + 4]])
        np.testing.assert_array_equal(run(r.module, {"x": X[i:i + 4]})["y"], theirs)
    report = verify_tflite(path, {"x": X[:8]})   # import + interpreter vs LiteRT, intermediates too
    assert report.ok, report.text()
    back = import_tflite(path.read_bytes()).module
    assert [o.opdef for o in back.main.ops].count(opdef) == 1
    assert quantir_check(argparse.Namespace(model=str(path))) == 0
    assert "0 violations" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
@pytest.mark.parametrize("name", ["gather_channels", "gather_scalar", "space_to_depth"])
def test_onnx_exports_run_in_onnx_runtime_within_one_step(tmp_path, name, fmt, capsys):
    r, _ = _quantize(tmp_path, name)
    out = tmp_path / f"m.{fmt}.onnx"
    r.save(out, format=fmt)
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
    ours = run(r.module, {"x": X})["y"]
    step = r.module.main.ops[-2].operands[0].type.element_type.scale
    assert np.abs(got - ours).max() <= step * 1.0001
    if fmt == "qdq":
        assert quantir_check(argparse.Namespace(model=str(out))) == 0
        assert "0 violations" in capsys.readouterr().out


def test_indices_computed_at_run_time_stay_float_with_the_reason(tmp_path):
    tail = [helper.make_node("Gather", ["c", "i"], ["y"], axis=1)]
    path = _save(tmp_path, tail, [None, None, 8, 8],
                 extra_inputs=[helper.make_tensor_value_info("i", TensorProto.INT64, [None])])
    r = qr.quantize(path, {"x": X, "i": RNG.integers(-6, 6, size=len(X))}, qr.Config(progress=False))
    reasons = [why for op, why in r.annotation.float_ops if op.opdef is nn.GATHER]
    assert reasons == ["its indices are computed at run time: ONNX counts a negative index from the end, LiteRT's "
                       "GATHER refuses it, and nothing proves them non-negative"]
