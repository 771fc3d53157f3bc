"""ONNX's backend node tests, one pytest case each, through import + reference interpreter.

Every case of every op quantir supports runs (including ``*_expanded`` function bodies).
A case may only fail to run by the importer raising ``UnsupportedOpError`` (shown as xfail
with the reason), and only for the features listed in ``KNOWN_UNSUPPORTED``: a new kind
of refusal is a failure, so a supported feature can never silently turn into an xfail.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("onnx")

from quantir.frontends.onnx.conformance import run_case, supported_cases  # noqa: E402

CACHE = Path(__file__).resolve().parents[2] / ".cache"
CASES = supported_cases(CACHE)

# What quantir refuses on purpose, and why.
KNOWN_UNSUPPORTED = {
    r"element type (BFLOAT16|FLOAT8\w*|FLOAT4E2M1|U?INT[24]|STRING)\b": "no numpy storage type for it",
    r"training": "training-mode BatchNormalization/Dropout (inference graphs only)",
    r"antialias = 1": "Resize antialiasing is not implemented",
    r"op 'Loop' is not supported": "expanded function bodies that use control flow",
    r"is a (sequence|optional)_type": "non-tensor graph inputs",
}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node(case):
    outcome = run_case(case)
    if outcome.status == "unsupported":
        known = [why for pattern, why in KNOWN_UNSUPPORTED.items() if re.search(pattern, outcome.reason)]
        assert known, f"unexpected UnsupportedOpError: {outcome.reason}"
        pytest.xfail(f"{known[0]}: {outcome.reason}")
    assert outcome.status == "pass", outcome.reason


QUANT_OPS = ("QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger",
             "MatMulInteger", "DynamicQuantizeLinear")


def test_quantization_ops_have_passing_cases():
    """Each ONNX quantization op has node tests here, and its 8/16-bit cases all pass."""
    for op in QUANT_OPS:
        cases = [c for c in CASES if c.op_type == op]
        assert cases, f"no node tests collected for {op}"
        assert any(run_case(c).status == "pass" for c in cases), op
