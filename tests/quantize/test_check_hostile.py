"""``quantir check`` on hostile quantized models: a QDQ model whose graph input has no shape, a
SOFTMAX whose beta makes LiteRT abort (issue 11, item 5)."""
import numpy as np
import onnx
import pytest

import quantir as qr
from quantir.errors import QuantirError
from quantir.frontends.onnx import load_onnx
from quantir.quantize.check import check_module
from quantir.quantize.check_qdq import check_qdq

from .tiny_models import cnn


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    d = tmp_path_factory.mktemp("check_hostile")
    rng = cnn(d / "cnn.onnx")
    calib = rng.normal(size=(20, 1, 8, 8)).astype(np.float32)
    return d, qr.quantize(d / "cnn.onnx", {"x": calib}, qr.Config(progress=False, budget=None))


def test_qdq_model_whose_graph_input_has_no_shape_is_checked(quantized):
    d, result = quantized
    result.save(d / "ours.onnx", format="qdq")
    proto = onnx.load(d / "ours.onnx")
    proto.graph.input[0].type.tensor_type.ClearField("shape")   # an unranked input, as some exporters write
    onnx.save(proto, d / "noshape.onnx")
    shaped = check_qdq(load_onnx(d / "ours.onnx", optimize=False, keep_qdq=True))
    report = check_qdq(load_onnx(d / "noshape.onnx", optimize=False, keep_qdq=True))
    assert report.ok, [str(v) for v in report.violations]
    # the same ops are checked; only the depthwise conv, whose channels come from the input's shape, is unknown
    assert report.checked == shaped.checked > 5


@pytest.mark.parametrize("beta", [0.0, float("nan"), -1.0, 1e-12])
def test_softmax_beta_that_makes_litert_abort_is_flagged_and_refused_by_run(quantized, beta):
    from quantir.ir.dialects import qnn
    from quantir.runtime import run
    from quantir.runtime.interpreter import input_names

    _, result = quantized
    module = result.module
    (softmax,) = [op for op in module.main.ops if op.opdef is qnn.SOFTMAX]
    before = dict(softmax.attributes)
    softmax.attributes.update(qnn.SOFTMAX.make_attrs({"beta": beta}))
    try:
        report = check_module(module)
        (v,) = [v for v in report.violations if v.kind == "SOFTMAX"]
        assert v.where == "options"
        assert "beta × input scale × 2**26 must be above 1, found beta" in v.message and "aborts" in v.message
        with pytest.raises(QuantirError, match=r"softmax: beta × input scale × 2\*\*26 must be above 1"):
            run(module, {input_names(module.main)[0]: np.zeros((1, 1, 8, 8), np.float32)})
    finally:
        softmax.attributes = before
