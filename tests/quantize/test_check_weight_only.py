"""``quantir check`` rows for weight-only storage (issue 16): int8/int4 constants dequantized to
float32 for float ops — a .tflite written by ``quantize_weights(...).save("m.tflite")`` passes, and
a per-channel weight quantized along the reduction axis instead of the output channels is named."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.quantize.check import check_module
from quantir.text import parse_module

MATMUL = """
func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x3xf32> {{
  %cst = arith.constant dense<[[1, -2, 3, 4], [5, 6, -7, 8], [0, 1, 2, 3]]> : tensor<3x4xi8>
  %0 = quant.scast %cst : tensor<3x4xi8> to tensor<3x4x!quant.uniform<i8:f32:{axis}, {{{scales}}}>>
  %1 = quant.dcast %0 : tensor<3x4x!quant.uniform<i8:f32:{axis}, {{{scales}}}>> to tensor<3x4xf32>
  %2 = "nn.transpose"(%1) {{perm = array<i64: 1, 0>}} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %3 = "nn.matmul"(%arg0, %2) : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %3 : tensor<2x3xf32>
}}
"""


def test_weight_axis_must_be_the_readers_output_channel():
    ok = check_module(parse_module(MATMUL.format(axis=0, scales="0.1,0.2,0.3")))
    assert ok.checked == 1 and not ok.violations
    bad = check_module(parse_module(MATMUL.format(axis=1, scales="0.1,0.2,0.3,0.4")))
    assert [v.message for v in bad.violations] == [
        "per-channel scales along dimension 1, but the op reading the weight has its output channels on dimension 0"]


@pytest.mark.parametrize("bits", [8, 4])
def test_weight_only_tflite_passes_with_every_weight_checked(bits, tmp_path):
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.cli.main import main
    rng = np.random.default_rng(bits)
    inits = [numpy_helper.from_array(rng.standard_normal((64, 48)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "k")]
    nodes = [helper.make_node("Conv", ["img", "k"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("MatMul", ["x", "w"], ["y"])]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 3, 8, 8]),
                                           helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
                              [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 16, 8, 8]),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 48])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    out = qr.quantize_weights(model, qr.WeightOnlyConfig(bits=bits, min_elements=0)).save(tmp_path / "m.tflite")
    from quantir.frontends.tflite import load_tflite
    report = check_module(load_tflite(out))
    assert report.checked == 2 and not report.violations, report
    assert main(["check", str(out)]) == 0
