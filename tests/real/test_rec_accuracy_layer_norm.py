"""The real-model check of the recognizer methods (slow: two quantizations of PP-OCRv6 small rec on
200 rendered lines). Its SVTR LayerNorms see rows whose variances differ by 120-160x: the
L2_NORMALIZATION form (``Config(layer_norm="l2")``) keeps them, the RSQRT form does not. Measured
when written: CTC strings equal to fp32 on 90% (l2) against 64% (rsqrt) of 100 other lines."""
from __future__ import annotations

import warnings

import pytest

import quantir as qr
from quantir.runtime import run

pytestmark = pytest.mark.slow


def test_layer_norm_l2_form_on_ppocrv6_small_rec(real_model):
    ort = pytest.importorskip("onnxruntime")
    from _real_metrics import ctc_greedy, string_equal_rate
    model = real_model("ppocrv6_small_rec")
    chars = model.characters()
    calib, evaluate = model.inputs(200, seed=0), model.inputs(100, seed=1)
    session = ort.InferenceSession(str(model.path), providers=["CPUExecutionProvider"])
    feed = session.get_inputs()[0].name
    batches = [evaluate[i:i + 10] for i in range(0, len(evaluate), 10)]
    ref = [ctc_greedy(s, chars) for b in batches for s in session.run(None, {feed: b})[0]]
    rate = {}
    for form in ("rsqrt", "l2"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = qr.quantize(str(model.path), [{feed: calib[i:i + 10]} for i in range(0, len(calib), 10)],
                            qr.Config(progress=False, layer_norm=form))
        got = [ctc_greedy(s, chars) for b in batches for s in next(iter(run(r.module, {feed: b}).values()))]
        rate[form] = string_equal_rate(ref, got)
    assert rate["l2"] >= 0.85 and rate["l2"] >= rate["rsqrt"] + 0.1, rate
