"""``quantir check`` names the quantized ops it has no rule for instead of skipping them."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from quantir.cli.main import main
from quantir.frontends.onnx import load_onnx
from quantir.quantize.check import check_module
from quantir.quantize.check_qdq import check_qdq
from quantir.text import parse_module

_IR = '''
func.func @main(%x: tensor<1x4x!quant.uniform<i8:f32, 0.5:-3>>) -> tensor<1x4x!quant.uniform<i8:f32, 0.5:-3>> {
  %0 = "nn.neg"(%x) : (tensor<1x4x!quant.uniform<i8:f32, 0.5:-3>>) -> tensor<1x4x!quant.uniform<i8:f32, 0.5:-3>>
  %1 = "qnn.tanh"(%0) : (tensor<1x4x!quant.uniform<i8:f32, 0.5:-3>>) -> tensor<1x4x!quant.uniform<i8:f32, 0.0078125>>
  %2 = "nn.neg"(%1) : (tensor<1x4x!quant.uniform<i8:f32, 0.0078125>>) -> tensor<1x4x!quant.uniform<i8:f32, 0.5:-3>>
  return %2 : tensor<1x4x!quant.uniform<i8:f32, 0.5:-3>>
}
'''


def test_an_ir_op_on_quantized_tensors_without_a_declaration_is_reported():
    report = check_module(parse_module(_IR))
    assert report.checked == 1 and report.unknown == ["nn.neg", "nn.neg"]


def _qdq_model(path):
    s, z = numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.int8(0), "z")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("Neg", ["xd"], ["n"]),
             helper.make_node("QuantizeLinear", ["n", "s", "z"], ["nq"]),
             helper.make_node("DequantizeLinear", ["nq", "s", "z"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [s, z])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_qdq_op_without_a_spec_kind_is_reported(tmp_path):
    _qdq_model(tmp_path / "m.onnx")
    report = check_qdq(load_onnx(tmp_path / "m.onnx", optimize=False, keep_qdq=True))
    assert report.checked == 0 and report.unknown == ["nn.neg"]


def test_the_cli_says_which_ops_it_cannot_check(tmp_path, capsys):
    (tmp_path / "m.mlir").write_text(_IR)
    assert main(["check", str(tmp_path / "m.mlir")]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        "1 ops checked, 0 violations; cannot check (quantized, but quantir has no spec rule for them): nn.neg")
