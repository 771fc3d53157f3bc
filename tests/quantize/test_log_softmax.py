"""LOG_SOFTMAX end to end: ONNX LogSoftmax over the last axis becomes qnn.log_softmax with output
(16/256, 127), bit-exact with LiteRT BUILTIN_REF (its fixed-point kernel; the default resolver's
float table differs by a step at times), read back from .tflite, within one step of ONNX Runtime
after QDQ/QOperator export; the shapes LiteRT's kernel cannot take stay float with the reason."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import quantir as qr
from quantir.errors import QuantizationWarning
from quantir.ir.dialects import qnn
from quantir.quantize.check import check_module
from quantir.runtime import run

from .norm_models import CFG, float_reasons, integer_ops, model, onnx_runtime_within_one_step, tflite_round_trip

N = helper.make_node
X = (np.random.default_rng(0).normal(size=(64, 10)) * 3.0).astype(np.float32)
LOGITS = model([N("LogSoftmax", ["x"], ["y"], axis=-1)], shape=(None, 10))


def test_log_softmax_is_one_integer_op_with_fixed_output():
    r = qr.quantize(LOGITS, {"x": X}, CFG)
    assert integer_ops(r) == ["qnn.log_softmax"] and r.annotation.float_ops == []
    (op,) = [o for o in r.module.main.ops if o.opdef is qnn.LOG_SOFTMAX]
    q = op.results[0].type.element_type
    assert (q.scale, q.zero_point) == (16 / 256, 127)
    assert r.spec_report().ok
    y = run(r.module, {"x": X})["y"]
    want = run(r.float_function, {"x": X})["y"]
    s_in = r.module.main.ops[0].results[0].type.element_type.scale
    # the output saturates at -255/16 below the maximum; elsewhere half an output step plus the input's
    # rounding (log-softmax moves by at most twice the largest input error)
    live = want > -15.9 + 2 * s_in
    assert np.abs(y - want)[live].max() <= 1 / 32 + 2 * s_in / 2 + 1e-6
    assert np.all(y[~live] <= -15.9 + 1 / 16)


def test_bit_exact_with_litert_reference_and_read_back(tmp_path):
    pytest.importorskip("ai_edge_litert.interpreter")
    r = qr.quantize(LOGITS, {"x": X}, CFG)
    tflite_round_trip(r, tmp_path, X[:32], "qnn.log_softmax")


def test_onnx_exports_run_in_onnx_runtime_within_one_step(tmp_path):
    r = qr.quantize(LOGITS, {"x": X}, CFG)
    onnx_runtime_within_one_step(r, tmp_path, X, "qnn.log_softmax")


def test_not_the_last_axis_and_long_rows_stay_float():
    m = model([N("LogSoftmax", ["x"], ["y"], axis=0)], shape=(None, 10), tanh_first=True)
    r = qr.quantize(m, {"x0": X}, CFG)
    assert float_reasons(r)["nn.log_softmax"] == "only LogSoftmax over the last axis is quantized (LiteRT LOG_SOFTMAX)"
    m = model([N("LogSoftmax", ["x"], ["y"], axis=-1)], shape=(None, 4096), tanh_first=True)
    r = qr.quantize(m, {"x0": np.random.default_rng(1).normal(size=(16, 4096)).astype(np.float32)}, CFG)
    assert float_reasons(r)["nn.log_softmax"] == (
        "LogSoftmax over rows of 4096: LiteRT's int8 LOG_SOFTMAX sums the exponentials in Q12.19, which overflows "
        "on rows of 4096 values at the maximum, so only rows of at most 4095 are quantized")


def test_check_names_an_input_scale_litert_aborts_on():
    """As SOFTMAX's beta limit: the quantizer writes what the data asks for, `quantir check` says LiteRT refuses it."""
    with pytest.warns(QuantizationWarning, match="below int8's smallest range"):
        r = qr.quantize(LOGITS, {"x": X * 1e-8}, CFG)
    assert [str(v) for v in check_module(r.module).violations] == [
        "LOG_SOFTMAX 'nn.log_softmax' options: input scale × 2**26 must be above 1, found input scale 3.92157e-09: "
        "LiteRT's LOG_SOFTMAX aborts the process on it"]
