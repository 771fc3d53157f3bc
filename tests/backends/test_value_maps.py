"""Every exporter maps IR values through ``ir.mapping.IRMapping``: an op that reads a value no
earlier op defined (a hand-edited, unverified module) is a ``VerifyError`` naming that value,
not a ``KeyError`` from inside the exporter."""
from pathlib import Path

import pytest

from quantir.backends.onnx.quantized import to_onnx_quantized
from quantir.backends.tflite.export import export_tflite
from quantir.errors import VerifyError
from quantir.ir.dialects import qnn, quant
from quantir.text import parse_module

GOLDEN = Path(__file__).resolve().parents[1] / "quantize" / "golden" / "conv_relu.lower.mlir"


def _conv_before_its_input():
    """conv_relu's integer module with the input's qcast moved after the first conv that reads it."""
    module = parse_module(GOLDEN.read_text())
    ops = module.main.body.ops
    qcast = next(op for op in ops if op.opdef is quant.QCAST)
    qcast.result.name_hint = "x__q"
    ops.remove(qcast)
    ops.insert(ops.index(next(op for op in ops if op.opdef is qnn.CONV)) + 1, qcast)
    return module


@pytest.mark.parametrize("export", [
    lambda m: to_onnx_quantized(m, format="qdq"),
    lambda m: to_onnx_quantized(m, format="qoperator"),
    lambda m: to_onnx_quantized(m, format="qdq", activations="uint8"),
    lambda m: export_tflite(m),
], ids=["qdq", "qoperator", "uint8", "tflite"])
def test_a_value_read_before_its_definition_is_named(export):
    with pytest.raises(VerifyError) as e:
        export(_conv_before_its_input())
    assert str(e.value) == "value 'x__q' is used before it is defined"


def test_the_module_in_order_exports():
    module = parse_module(GOLDEN.read_text())
    to_onnx_quantized(module, format="qdq", activations="uint8")
    export_tflite(module)
