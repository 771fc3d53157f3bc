"""LayerNorm as MEAN, SUB, L2_NORMALIZATION and one MUL (``Config(layer_norm="l2")``, issue 14).

``d / sqrt(mean(d²) + eps) = sqrt(C) · d / ||d||`` up to the epsilon: LiteRT's L2_NORMALIZATION
normalizes each row with its own integer inverse square root, so rows whose variances differ by
100x (the SVTR residual streams of PP-OCRv6 small rec) keep their precision, where the RSQRT form
quantizes every row's variance on one int8 scale. Checked against a float64 LayerNorm, against the
RSQRT form on such rows, bit-exact with LiteRT's reference kernels, and in ONNX Runtime.
"""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import quantir as qr
from quantir.runtime import run
from tests.quantize.test_layer_norm import D, GAMMA, X, _cosine, _layer_norm, _onnx_op, _save, _written

L2_OPS = {"written": ["qnn.mean", "qnn.sub", "qnn.l2_normalization", "qnn.mul", "qnn.mul", "qnn.add"],
          "onnx": ["qnn.mean", "qnn.sub", "qnn.l2_normalization", "qnn.mul", "qnn.add"]}


def _form(tmp_path, form):
    return _save(tmp_path, _written() if form == "written" else _onnx_op())


@pytest.mark.parametrize("form", ["written", "onnx"])
def test_layer_norm_l2_form(tmp_path, form):
    r = qr.quantize(_form(tmp_path, form), {"x": X}, qr.Config(progress=False, layer_norm="l2"))
    assert [op.name for op in r.module.main.ops if op.name.startswith("qnn.")] == L2_OPS[form]
    assert r.cast_counts() == (1, 1) and not r.annotation.float_ops and r.spec_report().ok
    assert r.summary_dict()["rewritten"] == {"layer_norm_written_l2" if form == "written" else "layer_norm_l2": 1}
    y = run(r.module, {"x": X})["y"]
    assert _cosine(y, _layer_norm(X)) > 0.999


def _wide_rows(n: int = 24, seed: int = 3) -> np.ndarray:
    """Rows whose variances span about 150x, one channel an outlier (as the SVTR residual streams)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 10, D)) * rng.uniform(0.3, 1.0, D)
    x *= rng.choice([0.35, 1.0, 4.0], size=(n, 10, 1))
    x[..., 7] -= rng.uniform(0, 40, size=(n, 10))
    return x.astype(np.float32)


def test_l2_form_keeps_rows_of_small_variance(tmp_path):
    x = _wide_rows()
    path = _form(tmp_path, "written")
    ref = _layer_norm(x)
    err = {}
    for form in ("rsqrt", "l2"):
        cfg = qr.Config(progress=False, layer_norm=form, budget=None)
        y = run(qr.quantize(path, {"x": x}, cfg).module, {"x": x})["y"]
        err[form] = float(np.sum((y - ref) ** 2) / np.sum(ref ** 2))
    # 1 dB better here since the rsqrt form sums each row's squares exactly (BATCH_MATMUL; 4 dB with
    # MUL(d, d) and MEAN); the variance's one int8 range for all rows is what remains
    assert err["l2"] < err["rsqrt"], err


def test_l2_form_over_other_axes_keeps_the_rsqrt_form(tmp_path):
    """L2_NORMALIZATION normalizes the last axis only: LayerNormalization over the last two axes
    keeps MEAN, SUB, MUL, MEAN, ADD, RSQRT, MUL."""
    nodes, inits, opset = _onnx_op()
    nodes[0].attribute[0].i = -2   # axis
    from onnx import numpy_helper
    inits[:] = [numpy_helper.from_array(np.ones((10, D), np.float32), "gamma"),
                numpy_helper.from_array(np.zeros((10, D), np.float32), "beta")]
    r = qr.quantize(_save(tmp_path, (nodes, inits, opset)), {"x": X}, qr.Config(progress=False, layer_norm="l2"))
    ops = [op.name for op in r.module.main.ops if op.name.startswith("qnn.")]
    assert "qnn.rsqrt" in ops and "qnn.l2_normalization" not in ops


def test_l2_form_tflite_bit_exact_and_onnx_exports_run(tmp_path):
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.verify import verify_tflite
    x = _wide_rows()
    r = qr.quantize(_form(tmp_path, "onnx"), {"x": x}, qr.Config(progress=False, layer_norm="l2"))
    r.save(tmp_path / "ln.tflite")
    report = verify_tflite(tmp_path / "ln.tflite", {"x": x[:4]})
    assert all(t.differing == 0 for t in report.outputs + report.intermediates), report
    ours = run(r.module, {"x": x[:4]})["y"]
    step = r.module.main.ops[-2].operands[0].type.element_type.scale
    for fmt in ("qdq", "qoperator"):
        r.save(tmp_path / f"ln_{fmt}.onnx", format=fmt)
        y = ort.InferenceSession(str(tmp_path / f"ln_{fmt}.onnx")).run(None, {"x": x[:4]})[0]
        assert np.abs(y - ours).max() <= 4 * step, (fmt, np.abs(y - ours).max() / step)
        assert _cosine(y, _layer_norm(x[:4])) > 0.99


def test_layer_norm_form_is_checked():
    with pytest.raises(ValueError, match="layer_norm"):
        qr.Config(layer_norm="sqrt")
    assert GAMMA.shape == (D,)
