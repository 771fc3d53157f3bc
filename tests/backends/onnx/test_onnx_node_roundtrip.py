"""ONNX's backend node tests through import -> export -> ONNX Runtime, against their expected outputs.

Every non-expanded case the importer accepts is exported at the default opset and run in
ONNX Runtime. A case may fail only for a reason listed in ``KNOWN``: ONNX Runtime itself
cannot run it (the original model fails the same way), ONNX's own shape inference
disagrees with the correct output shape, or the feature needs a newer opset than the
default 21 (the exporter refuses it with ``UnsupportedOpError`` rather than change it).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from .ort_helpers import onnx, session

from quantir.backends.onnx import to_onnx
from quantir.errors import QuantirError
from quantir.frontends.onnx import load_onnx
from quantir.frontends.onnx.conformance import _as_array, prepare, supported_cases

CACHE = Path(__file__).resolve().parents[3] / ".cache"
CASES = [c for c in supported_cases(CACHE) if not c.expanded]

KNOWN = {
    # ONNX Runtime 1.32 cannot run these at all (the original test model fails identically).
    r"^test_(max|min)_u?int16$": "ORT has no Max/Min kernel for 16-bit integers",
    r"^test_pow_types_float32_uint(32|64)$": "ORT has no Pow kernel for unsigned exponents",
    r"^test_reduce_max_empty_set_bool$": "ORT refuses ReduceMax over an empty bool set",
    r"^test_convinteger_with_padding$": "ORT's ConvInteger fails with padding",
    r"^test_lstm_batchwise$": "ORT has no batchwise (layout = 1) LSTM",
    r"^test_resize_downsample_scales_(linear|cubic)_align_corners$":
        "ORT's align_corners downsampling differs from ONNX's expected output (original model too)",
    # Float Mod with fmod=0 became legal in opset 28; ORT refuses it at opset 21.
    r"^test_mod_.*float.*fmod_0": "float Mod with fmod=0 needs opset 28",
    # onnx.checker's shape inference disagrees with the (correct) ceil-mode pool output shape.
    r"^test_(average|max)pool_2d_ceil_(last_window_starts_on_pad|output_size_reduce_by_one)$":
        "ONNX shape inference of ceil_mode pooling",
    # Needs a newer opset than the default export opset.
    r"^test_celu_float16$|^test_range_float16|^test_spacetodepth_crd": "needs an opset newer than 21",
}


def _known(name: str) -> str | None:
    return next((why for pattern, why in KNOWN.items() if re.search(pattern, name)), None)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_case(case):
    constants, feeds = prepare(case)
    try:
        module = load_onnx(case.model, constant_inputs=constants)
    except QuantirError:
        pytest.skip("the importer refuses this case (tests/frontends says why)")
    feeds = {k: np.asarray(_as_array(v)) for k, v in feeds.items()}
    try:
        model = to_onnx(module)
        onnx.checker.check_model(model, full_check=True)
        with np.errstate(all="ignore"):
            got = session(model).run(None, feeds)
        for g, e in zip(got, case.outputs):
            e = np.asarray(_as_array(e))
            assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, g.shape, e.dtype, e.shape)
            np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol)
    except Exception as e:  # noqa: BLE001 - any failure (assertion, refusal, ORT error) may be a known one
        why = _known(case.name)
        if why is None:
            raise
        pytest.xfail(f"{why}: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}")
    else:
        assert _known(case.name) is None, f"{case.name} passes now: remove it from KNOWN"
