"""HardSwish in 16x8: LiteRT 2.3 has no int16 HARD_SWISH (``test_qk_int16_activation.py::
test_litert_has_no_int16_kernel``), so with int16 input and output quantir lowers it to

    t = ADD(x, 3) with RELU6 (t at 6/32767),  g = MUL(t, 1/6) (g at 1/32767),  y = MUL(x, g)

(quantize/ops/activation.py, docs/numerics.md §2.25). Checked here: the .tflite holding the three
ops equals quantir's interpreter on every tensor, in LiteRT's ``BUILTIN_REF``, over all 65,536
int16 inputs at six input/output scales; its error against float HardSwish stays within the
derived bound ``0.5 + 0.5·min(3, max|x|)/(32767·s_y)`` output steps; a conv -> HardSwish -> conv
model in 16x8 keeps no hard-swish int8, runs as QDQ in ONNX Runtime, passes ``quantir check``;
a promotion by name (mixed precision) goes through it; int8 stays the one HARD_SWISH.
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.quantize import check, spec
from quantir.quantize.rules import QParams, QuantizedOp
from quantir.runtime import run

N = helper.make_node
ALL16 = np.arange(-32768, 32768)
# calibrated input ranges (min/max of the calibration data): symmetric ones, a small one whose
# output range is [-0.375, 0.67], one whose output is almost all negative (the bound's worst case:
# 4.5 steps) and an asymmetric one; x is also a graph output, so its range is not cut at -3
RANGES = [(-3.0, 3.0), (-10.0, 10.0), (-100.0, 100.0), (-1.0, 1.0), (-4.0, 0.5), (-0.5, 8.0)]


def _model(outputs_x: bool = True):
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 65536])]
    if outputs_x:
        outs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 65536]))
    g = helper.make_graph([N("HardSwish", ["x"], ["y"])], "hard_swish",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 65536])], outs)
    m = helper.make_model(g, opset_imports=[helper.make_operatorsetid("", 18)])
    m.ir_version = 9
    return m


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


def _scale(v) -> float:
    return float(np.float32(v.type.element_type.scale))


@pytest.fixture(scope="module", params=RANGES, ids=lambda r: f"x{r[0]:g}..{r[1]:g}")
def lowered(request):
    lo, hi = request.param
    ramp = np.linspace(lo, hi, 65536, dtype=np.float32)
    cal = [{"x": np.random.default_rng(i).permutation(ramp)[None]} for i in range(16)]   # min/max: lo, hi
    r = qr.quantize(_model(), cal, qr.Config(progress=False, activations="int16", budget=None, method="minmax"))
    ops = [op for op in r.module.main.ops if op.name.startswith("qnn.")]
    y = ops[-1]
    s_x, s_y = _scale(y.operands[0]), _scale(y.results[0])
    x = (ALL16 * np.float32(s_x)).astype(np.float32)[None]   # quantizes back to every int16 value
    return r, ops, x, s_x, s_y


def test_int16_hard_swish_is_add_relu6_mul_mul(lowered):
    r, ops, _, _, _ = lowered
    assert [op.name for op in ops] == ["qnn.add", "qnn.mul", "qnn.mul"]
    add, gate, y = ops
    assert add.attr("activation") == "RELU6" and gate.attr("activation") == y.attr("activation") == "NONE"
    for v in (add.results[0], gate.results[0], y.results[0], *add.operands, *gate.operands):
        q = v.type.element_type
        assert q.storage_type.width == 16 and q.zero_point == 0
    assert _scale(add.results[0]) == np.float32(6 / 32767) and _scale(gate.results[0]) == np.float32(1 / 32767)
    assert y.operands[0] is add.operands[0] and y.operands[1] is gate.results[0]
    assert r.summary_dict()["int8_ops"] == []
    assert check.check_module(r.module).ok


def test_every_int16_input_matches_litert_builtin_ref(lowered, tmp_path):
    """All 65,536 inputs; every tensor (x, t, g, y) equal in LiteRT BUILTIN_REF and quantir."""
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    r, _, x, _, _ = lowered
    r.save(tmp_path / "hard_swish16.tflite")
    report = verify_tflite(tmp_path / "hard_swish16.tflite", {"x": x})
    assert report.ok and len(report.intermediates) >= 3, report.text()


def test_error_against_float_hard_swish_is_within_the_derived_bound(lowered):
    """The gate g has one rounding (half of 1/32767; g is 0 or 1 exactly outside (-3, 3)), times
    |x| <= 3, on top of y's own half step: |y - hs(x)| <= 0.5·s_y + 0.5·min(3, max|x|)/32767,
    plus float32 multipliers' 1e-6 relative. Measured (max / mean steps): ±3: 0.995 / 0.29,
    ±10: 0.643 / 0.077, ±100: 0.512 / 0.008, ±1: 1.247 / 0.31, [-4, 0.5]: 4.48 / 0.45,
    [-0.5, 8]: 0.682 / 0.095."""
    r, _, x, s_x, s_y = lowered
    y = run(r.module, {"x": x})["y"][0].astype(np.float64)
    xq = ALL16 * s_x
    want = np.clip(_hard_swish(xq), -32768 * s_y, 32767 * s_y)
    err = np.abs(y - want) / s_y
    bound = 0.5 + 0.5 * min(3.0, 32768 * s_x) / (32767 * s_y)
    print(f"s_x {s_x * 32767:.4g}/32767 s_y {s_y * 32767:.4g}/32767: max {err.max():.3f} mean {err.mean():.4f} "
          f"steps (bound {bound:.3f})")
    assert err.max() <= bound + 0.01
    assert err.mean() <= 0.5


def test_the_gate_multiply_only_relabels():
    """MUL(t, 1/6) from 6/32767 to 1/32767 has multiplier 1: the gate's integers are t's, for every t."""
    from quantir.quantize.ops.activation import HARD_SWISH_SIXTH_SCALE
    from quantir.runtime import qkernels as qk
    t = np.arange(0, 32768, dtype=np.int16)
    s_t, s_g = float(np.float32(6 / 32767)), float(np.float32(1 / 32767))
    p = qk.prepare_mul(s_t, HARD_SWISH_SIXTH_SCALE, s_g, 0, storage=np.int16)
    g = qk.mul(t, np.array(32767, np.int16), input1_zero_point=0, input2_zero_point=0, **p.as_kwargs())
    np.testing.assert_array_equal(g, t)


def test_the_spec_still_refuses_an_int16_hard_swish_builtin():
    """quantir never writes one, and ``quantir check`` of a file that has one says LiteRT cannot run it."""
    x = QParams("int16", 1e-3, 0)
    assert any("16x8 kernel" in v.message for v in spec.check_op(QuantizedOp("HARD_SWISH", "h", (x,), (x,))))


# -- conv -> HardSwish -> conv -----------------------------------------------------------------------

def _conv_model():
    rng = np.random.default_rng(5)
    inits = {"w1": (rng.normal(size=(8, 3, 3, 3)) * 0.4).astype(np.float32),
             "b1": (rng.normal(size=8) * 0.5).astype(np.float32),
             "w2": (rng.normal(size=(4, 8, 1, 1)) * 0.4).astype(np.float32)}
    nodes = [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("HardSwish", ["c1"], ["h"]),
             N("Conv", ["h", "w2"], ["y"])]
    g = helper.make_graph(nodes, "conv_hs_conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 3, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 4, 12, 12])],
                          [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_operatorsetid("", 18)])
    m.ir_version = 9
    return m


CONV_CAL = [{"x": np.random.default_rng(i).normal(size=(1, 3, 12, 12)).astype(np.float32) * 2} for i in range(16)]
CONV_EVAL = {"x": np.random.default_rng(99).normal(size=(8, 3, 12, 12)).astype(np.float32) * 2}


@pytest.fixture(scope="module")
def conv16():
    return qr.quantize(_conv_model(), CONV_CAL, qr.Config(progress=False, activations="int16", budget=None))


def _hard_swish_sequence(module):
    return [op for op in module.main.ops if op.name == "qnn.add" and op.attr("activation") == "RELU6"
            and op.results[0].type.element_type.storage_type.width == 16]


def test_conv_hard_swish_conv_in_16x8(conv16, tmp_path):
    r = conv16
    assert not any(op.name == "qnn.hard_swish" for op in r.module.main.ops)
    assert len(_hard_swish_sequence(r.module)) == 1
    assert "qnn.hard_swish" not in {f["kind"] for f in r.summary_dict()["int8_ops"]}
    assert check.check_module(r.module).ok
    want = ort.InferenceSession(_conv_model().SerializeToString()).run(None, CONV_EVAL)[0]
    mine = run(r.module, CONV_EVAL)["y"]
    cos = float((want * mine).sum() / np.linalg.norm(want) / np.linalg.norm(mine))
    assert cos > 0.999, cos

    # the .tflite: bit-exact in LiteRT BUILTIN_REF, and `quantir check` passes
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.cli.main import main
    from quantir.verify import verify_tflite
    r.save(tmp_path / "conv_hs.tflite")
    report = verify_tflite(tmp_path / "conv_hs.tflite", CONV_EVAL)
    assert report.ok, report.text()
    assert main(["check", str(tmp_path / "conv_hs.tflite")]) == 0


def test_conv_hard_swish_conv_qdq_runs_in_onnx_runtime(conv16, tmp_path):
    """The QDQ export shows the sequence as float Add/Clip and Mul between int16 DQ/Q pairs; ONNX Runtime's
    rounding (half to even, float32 products) differs from LiteRT's by a step here and there."""
    import onnx
    r = conv16
    r.save(tmp_path / "conv_hs.onnx")
    model = onnx.load(tmp_path / "conv_hs.onnx")
    assert {n.op_type for n in model.graph.node} >= {"Add", "Mul", "QuantizeLinear", "DequantizeLinear"}
    got = ort.InferenceSession(str(tmp_path / "conv_hs.onnx")).run(None, CONV_EVAL)[0]
    mine = run(r.module, CONV_EVAL)["y"]
    step = float(next(op for op in reversed(r.module.main.ops) if op.name.startswith("qnn.")
                      ).results[0].type.element_type.scale)
    diff = np.abs(got - mine).max() / step
    print(f"QDQ in ORT vs interpreter: max {diff:.1f} output steps")
    assert diff <= 4.0


def test_a_promotion_by_name_goes_through_hard_swish():
    """Mixed precision: the hard-swish output is an int16 candidate, and promoting it lowers the sequence."""
    r = qr.quantize(_conv_model(), CONV_CAL, qr.Config(progress=False, budget=None, int16=("h",)))
    bits = {v.name_hint: getattr(p, "bits", 8) for v, p in r.params.items()}
    assert bits["h"] == 16
    assert len(_hard_swish_sequence(r.module)) == 1
    assert r.spec_report().ok


def test_int8_stays_one_hard_swish():
    r = qr.quantize(_conv_model(), CONV_CAL, qr.Config(progress=False, budget=None))
    names = [op.name for op in r.module.main.ops if op.name.startswith("qnn.")]
    assert names.count("qnn.hard_swish") == 1 and "qnn.add" not in names and "qnn.mul" not in names
