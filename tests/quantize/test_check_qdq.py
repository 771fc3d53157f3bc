"""``quantir check`` on ONNX QDQ models: ours pass, ONNX Runtime's own output breaks LiteRT's spec."""
import numpy as np
import pytest

import quantir as qr
from quantir.frontends.onnx import load_onnx
from quantir.quantize.check_qdq import check_qdq

from .tiny_models import cnn

quantization = pytest.importorskip("onnxruntime.quantization")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("qdq")
    rng = cnn(d / "cnn.onnx")
    return d, rng.normal(size=(40, 1, 8, 8)).astype(np.float32)


def ort_quantize(d, calib, name, **kw):
    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.batches = [{"x": calib[i:i + 10]} for i in range(0, len(calib), 10)]

        def get_next(self):
            return self.batches.pop(0) if self.batches else None
    out = d / f"{name}.onnx"
    quantization.quantize_static(str(d / "cnn.onnx"), str(out), Reader(), quant_format=quantization.QuantFormat.QDQ,
                                 **kw)
    return out


def report(path):
    return check_qdq(load_onnx(path, optimize=False, keep_qdq=True))


def test_quantir_qdq_export_meets_the_spec(model):
    d, calib = model
    result = qr.quantize(d / "cnn.onnx", {"x": calib}, qr.Config(progress=False))
    result.save(d / "ours.onnx", format="qdq")
    r = report(d / "ours.onnx")
    assert r.checked >= 9 and r.ok, [str(v) for v in r.violations]


def test_onnxruntime_softmax_output_is_not_litert_int8(model):
    d, calib = model
    path = ort_quantize(d, calib, "ort", per_channel=True, activation_type=quantization.QuantType.QInt8,
                        weight_type=quantization.QuantType.QInt8)
    messages = [str(v) for v in report(path).violations]
    assert any(m.startswith("SOFTMAX 'softmax' output 0: output parameters must be (0.00390625, -128)")
               for m in messages)


def test_uint8_asymmetric_weights_and_activations_are_flagged(model):
    d, calib = model
    path = ort_quantize(d, calib, "u8", per_channel=False, activation_type=quantization.QuantType.QUInt8,
                        weight_type=quantization.QuantType.QUInt8)
    messages = [str(v) for v in report(path).violations]
    assert any("weights must be int8, found uint8" in m for m in messages)
    assert any("activations must be int8, found uint8" in m for m in messages)
