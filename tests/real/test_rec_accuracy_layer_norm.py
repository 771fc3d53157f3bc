"""The real-model check of the two LayerNorm forms (slow: two quantizations of PP-OCRv6 small rec on
200 rendered lines). Its SVTR LayerNorms see rows whose variances differ by 120-160x. When the RSQRT
form took each row's variance as the MEAN of MUL(d, d) (one int8 scale for every square), the small
rows lost their variance and the L2_NORMALIZATION form (``Config(layer_norm="l2")``, each row
normalized on its own) won: CTC strings equal to fp32 on 90% (l2) against 64% (rsqrt) of 100 other
lines. Since the RSQRT form sums each row's squares as a BATCH_MATMUL of the row with itself (exact
integer products), it measures 92% against l2's 90% (2026-11-25): the default form must stay at
least as good as the l2 form within two lines, and well above the old 64%; the l2 form stays usable."""
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
    assert rate["rsqrt"] >= 0.88 and rate["rsqrt"] >= rate["l2"] - 0.02, rate
    assert rate["l2"] >= 0.85, rate
