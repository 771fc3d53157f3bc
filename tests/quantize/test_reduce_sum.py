"""SUM end to end: ONNX ReduceSum becomes qnn.reduce_sum, whose kernel is LiteRT's default resolver's
(BUILTIN_REF reads int8 SUM inputs as uint8: quantize/ops/reduce.py). Bit-exact with LiteRT's
optimized resolver after .tflite export, read back as the same op, within one step of ONNX Runtime
after QDQ/QOperator export."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import quantir as qr
from quantir.runtime import run

from .norm_models import CFG, const, float_reasons, int8_of, integer_ops, model, onnx_runtime_within_one_step, \
    output_step, tflite_round_trip

N = helper.make_node
RNG = np.random.default_rng(0)
X2 = RNG.normal(size=(64, 16)).astype(np.float32)
X4 = RNG.normal(size=(32, 3, 5, 6)).astype(np.float32)

CASES = {   # name -> (model, calibration input)
    "last_axis_kept": (model([N("ReduceSum", ["x", "ax"], ["y"], keepdims=1)], [const("ax", [-1], np.int64)]), X2),
    "spatial_dropped": (model([N("ReduceSum", ["x", "ax"], ["y"], keepdims=0)], [const("ax", [2, 3], np.int64)],
                              shape=(None, 3, 5, 6)), X4),
    "channels_kept": (model([N("ReduceSum", ["x", "ax"], ["y"], keepdims=1)], [const("ax", [1], np.int64)],
                            shape=(None, 3, 5, 6)), X4),
    "all_axes": (model([N("ReduceSum", ["x"], ["y"], keepdims=0)], shape=(1, 16), out_shape=[]), X2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reduce_sum_is_one_integer_op_close_to_float(name):
    m, x = CASES[name]
    r = qr.quantize(m, {"x": x}, CFG)
    assert integer_ops(r) == ["qnn.reduce_sum"] and r.annotation.float_ops == []
    assert r.spec_report().ok
    x = x[:1] if name == "all_axes" else x   # calibrated on 64 samples of a static batch of 1
    y, want = run(r.module, {"x": x})["y"], run(r.float_function, {"x": x})["y"]
    s_in = r.module.main.ops[0].results[0].type.element_type.scale
    count = x.size // want.size
    # each input off by half an input step, the output rounded to half an output step (clamped at the range)
    assert np.abs(y - want).max() <= count * s_in / 2 + output_step(r, "qnn.reduce_sum") / 2 + 1e-5


@pytest.mark.parametrize("name", ["last_axis_kept", "spatial_dropped", "channels_kept"])
def test_bit_exact_with_litert_default_resolver_and_read_back(tmp_path, name):
    pytest.importorskip("ai_edge_litert.interpreter")
    m, x = CASES[name]
    r = qr.quantize(m, {"x": x}, CFG)
    tflite_round_trip(r, tmp_path, x[:8], "qnn.reduce_sum", resolver="optimized")


def test_builtin_ref_misreads_negative_int8_which_is_why_quantir_follows_the_default_resolver(tmp_path):
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.backends.tflite.litert import run_model
    m, x = CASES["last_axis_kept"]
    r = qr.quantize(m, {"x": x}, CFG)
    r.save(tmp_path / "m.tflite", io="int8")
    data = (tmp_path / "m.tflite").read_bytes()
    xq = int8_of(r, x[:8])
    (ref,), (opt,) = run_model(data, [xq], "reference"), run_model(data, [xq], "optimized")
    (dcast,) = [o for o in r.module.main.ops if o.name == "quant.dcast"]
    ours = run(r.module, {"x": x[:8]}, intermediates=[dcast.operands[0].name_hint])[dcast.operands[0].name_hint]
    np.testing.assert_array_equal(ours, opt)
    assert np.count_nonzero(ref != opt) > ref.size // 2   # BUILTIN_REF's sums of uint8-read values


def test_onnx_exports_run_in_onnx_runtime_within_one_step(tmp_path):
    m, x = CASES["spatial_dropped"]
    r = qr.quantize(m, {"x": x}, CFG)
    onnx_runtime_within_one_step(r, tmp_path, x, "qnn.reduce_sum")


def test_a_noop_reduce_sum_stays_float():
    m = model([N("ReduceSum", ["x"], ["y"], keepdims=1, noop_with_empty_axes=1)], tanh_first=True)
    r = qr.quantize(m, {"x0": X2}, CFG)
    assert float_reasons(r)["nn.reduce_sum"] == "ReduceSum with no axes and noop_with_empty_axes=1 is an identity, " \
                                                "not a sum"
