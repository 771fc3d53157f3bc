"""A float module with fake-quant ops (as a QAT tool writes them) -> integer module -> .tflite.

``api.convert_qdq`` on IR: ``--convert-fake-quant`` gives qcast/dcast pairs with the exact types,
``quantize.from_casts`` turns them into QDQ pairs and ``from_qdq`` into qnn ops with requantize,
keeping the module's own scales and zero points (nothing recalibrated).
"""
from __future__ import annotations

import numpy as np
import pytest

from quantir import api
from quantir.ir.dialects import arith, qnn, quant
from quantir.numerics import quantize_tflite
from quantir.numerics.fake_quant import fake_quant_qparams
from quantir.passes.fake_quant import convert_fake_quant
from quantir.quantize.from_casts import casts_to_qdq
from quantir.quantize.from_qdq import QdqError
from quantir.runtime import run
from quantir.text import parse_module

W1 = np.array([[[[0.5, -0.25, 0.0], [0.25, 1.0, 0.25], [0.0, -0.25, 0.5]]],
               [[[-0.5, 0.0, 0.5], [-1.0, 0.1, 1.0], [-0.5, 0.0, 0.5]]],
               [[[0.3, 0.3, 0.3], [0.0, -0.7, 0.0], [0.2, 0.2, -0.2]]]], np.float32)   # 3x1x3x3
W2 = np.linspace(-0.8, 0.9, 2 * 3, dtype=np.float32).reshape(2, 3, 1, 1)
W_MAX = [float(np.abs(W1[c]).max()) for c in range(3)]


def _dense(a: np.ndarray) -> str:
    return f"dense<{np.array2string(a, separator=', ', floatmode='unique', threshold=10**6).replace(chr(10), '')}>"


def _f(v: float) -> str:
    return f"{float(np.float32(v))!r} : f32"


WQ1 = (f"min = [{', '.join(_f(-m) for m in W_MAX)}], max = [{', '.join(_f(m) for m in W_MAX)}], "
       "axis = 0, num_bits = 8, narrow_range = true, is_signed = true")
T1, T3, T2 = "tensor<?x1x6x6xf32>", "tensor<?x3x6x6xf32>", "tensor<?x2x6x6xf32>"
MODEL = f"""module {{
  func.func @main(%x: tensor<?x1x6x6xf32> {{quantir.name = "x"}}) -> (tensor<?x2x6x6xf32> {{quantir.name = "y"}}) {{
    %w1 = arith.constant {_dense(W1)} : tensor<3x1x3x3xf32>
    %b1 = arith.constant dense<[0.125, -0.25, 0.0]> : tensor<3xf32>
    %w2 = arith.constant {_dense(W2)} : tensor<2x3x1x1xf32>
    %xq = "quant.const_fake_quant"(%x) {{min = -1.0 : f32, max = 1.0 : f32, num_bits = 8}} : ({T1}) -> {T1}
    %w1q = "quant.const_fake_quant_per_axis"(%w1) {{{WQ1}}}
      : (tensor<3x1x3x3xf32>) -> tensor<3x1x3x3xf32>
    %0 = "nn.conv"(%xq, %w1q, %b1) {{pads = array<i64: 1, 1, 1, 1>}}
      : ({T1}, tensor<3x1x3x3xf32>, tensor<3xf32>) -> {T3}
    %1 = "nn.relu"(%0) : ({T3}) -> {T3}
    %2 = "quant.const_fake_quant"(%1) {{min = 0.0 : f32, max = 3.0 : f32, num_bits = 8}} : ({T3}) -> {T3}
    %w2q = "quant.const_fake_quant"(%w2) {{min = -0.9 : f32, max = 0.9 : f32, num_bits = 8, narrow_range = true,
      is_signed = true}} : (tensor<2x3x1x1xf32>) -> tensor<2x3x1x1xf32>
    %3 = "nn.conv"(%2, %w2q) : ({T3}, tensor<2x3x1x1xf32>) -> {T2}
    %y = "quant.const_fake_quant"(%3) {{min = -2.0 : f32, max = 1.5 : f32, num_bits = 8}} : ({T2}) -> {T2}
    return %y : tensor<?x2x6x6xf32>
  }}
}}
"""


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("fq") / "model.mlir"
    p.write_text(MODEL)
    return p


@pytest.fixture(scope="module")
def converted(model_path):
    return api.convert_qdq(model_path)


def _inputs(n=64, seed=0):
    return np.random.default_rng(seed).uniform(-1.2, 1.2, (n, 1, 6, 6)).astype(np.float32)


def test_parameters_are_the_fake_quant_ones(converted):
    c = converted
    assert not c.repairs
    fn = c.module.main
    x_t = fn.ops[0].results[0].type.element_type          # quant.qcast of the input
    s, zp = fake_quant_qparams(-1.0, 1.0, 8)              # u8 zero point 128 -> int8 0
    assert fn.ops[0].opdef is quant.QCAST and (x_t.scale, x_t.zero_point) == (s, zp - 128)
    convs = [op for op in fn.ops if op.opdef is qnn.CONV]
    assert len(convs) == 2
    out_types = [op.results[0].type.element_type for op in convs]
    assert (out_types[0].scale, out_types[0].zero_point) == (fake_quant_qparams(0.0, 3.0, 8)[0], -128)
    s_y, zp_y = fake_quant_qparams(-2.0, 1.5, 8)
    assert (out_types[1].scale, out_types[1].zero_point) == (s_y, zp_y - 128)
    # the first conv's weights: the per-channel stored integers of the fake-quant grid
    w_t = convs[0].operands[1].type.element_type
    params = [fake_quant_qparams(-m, m, 8, True, True) for m in W_MAX]
    assert w_t.scales == tuple(p[0] for p in params) and set(w_t.zero_points) == {0}
    stored = convs[0].operands[1].op.operands[0].op
    assert stored.opdef is arith.CONSTANT
    want = quantize_tflite(W1, np.array([p[0] for p in params], np.float32), 0, -127, 127, axis=0)
    assert np.array_equal(np.asarray(stored.attributes["value"].array), want)


def test_within_one_step_of_the_fake_quant_module(converted):
    ref = parse_module(MODEL)
    convert_fake_quant(ref)             # the float module with its qcast/dcast pairs
    x = _inputs()
    y_ref = run(ref, {"x": x})["y"]
    y_int = run(converted.module, {"x": x})["y"]
    s_y = fake_quant_qparams(-2.0, 1.5, 8)[0]
    # both sides are grid points f32(k * s_y): compare the grid indices k
    k_ref, k_int = (np.round(y.astype(np.float64) / s_y).astype(np.int64) for y in (y_ref, y_int))
    assert np.array_equal(y_int, np.float32(k_int * s_y)) and np.array_equal(y_ref, np.float32(k_ref * s_y))
    diff = np.abs(k_int - k_ref)
    assert diff.max() <= 1
    assert (diff == 0).mean() > 0.9     # most outputs on the same grid point


def test_tflite_bit_exact_with_litert(converted, tmp_path):
    pytest.importorskip("ai_edge_litert")
    from quantir.verify import verify_tflite
    converted.save(tmp_path / "m.tflite")
    report = verify_tflite(tmp_path / "m.tflite", {"x": _inputs(32, seed=1)})
    assert report.ok, report.text()


def test_cli_convert(model_path, tmp_path, capsys):
    from quantir.cli.main import main
    assert main(["convert", str(model_path), "-o", str(tmp_path / "m.tflite")]) == 0
    assert "with the model's own parameters" in capsys.readouterr().out
    assert (tmp_path / "m.tflite").stat().st_size > 0


def test_module_input_is_left_unchanged():
    m = parse_module(MODEL)
    before = len(m.main.ops)
    api.convert_qdq(m)
    assert len(m.main.ops) == before


def test_refusals():
    narrow_act = MODEL.replace('{min = -1.0 : f32, max = 1.0 : f32, num_bits = 8}',
                               '{min = -1.0 : f32, max = 1.0 : f32, num_bits = 8, narrow_range = true}')
    m = parse_module(narrow_act)
    convert_fake_quant(m)
    with pytest.raises(QdqError, match=r"activation storage u8<1:255> is not converted"):
        casts_to_qdq(m)
