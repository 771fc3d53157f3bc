"""The weight-only ONNX export (backends/onnx/weight_only.py): ONNX Runtime on the written file against
quantir's interpreter on the module, for both forms (DequantizeLinear; MatMulNBits +
GatherBlockQuantized), int8 and int4, per channel and blocked, symmetric and asymmetric."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import quantir as qr
from quantir.backends.onnx.weight_only import to_onnx_weight_only
from quantir.quantize.weight_only import WeightOnlyConfig

from ...quantize.test_weight_only import feeds, model_proto

CONFIGS = {"int8-channel": WeightOnlyConfig(bits=8), "int8-b32": WeightOnlyConfig(bits=8, block_size=32),
           "int4-b32": WeightOnlyConfig(bits=4, block_size=32),
           "int4-b32-asym": WeightOnlyConfig(bits=4, block_size=32, symmetric=False),
           "int4-b48": WeightOnlyConfig(bits=4, block_size=48, ops=("gemm",)),   # no MatMulNBits: not a power of 2
           "int4-channel-asym": WeightOnlyConfig(bits=4, symmetric=False)}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    p = tmp_path_factory.mktemp("woe") / "m.onnx"
    onnx.save(model_proto(), p)
    return p


def _ort(proto: onnx.ModelProto, f: dict, accuracy_level: str | None = None) -> list[np.ndarray]:
    options = ort.SessionOptions()
    if accuracy_level is not None:
        options.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", accuracy_level)
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(None, f)


@pytest.mark.parametrize("contrib", [True, False], ids=["contrib", "dequantize"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_onnxruntime_matches_the_interpreter(model, name, contrib):
    """Within float rounding: the dequantized weights are the same float32 values in both (exact
    products of a float32 scale and a small integer), only the float ops' summation order differs.
    ONNX Runtime is run with accuracy level 0 for its own rewrites: by default it turns a
    DequantizeLinear -> MatMul that quantir left as such (per-channel weights, the standard form)
    into MatMulNBits with accuracy level 4, which quantizes the activations to int8, not the
    model's arithmetic (test_default_session_rewrites_dequantize_matmul says how far that is)."""
    r = qr.quantize_weights(model, CONFIGS[name])
    proto = to_onnx_weight_only(r.module, matmul_nbits=contrib)
    onnx.checker.check_model(proto)
    f = feeds(4)
    want = qr.run(r.module, f)
    got = _ort(proto, f, "0")
    for out, g in zip(("emb", "out", "conv"), got):
        np.testing.assert_allclose(g, want[out], rtol=2e-5, atol=2e-5)
    np.testing.assert_array_equal(got[0], want["emb"])   # a gathered row is the dequantized row, exactly
    kinds = {n.op_type for n in proto.graph.node}
    blocked = CONFIGS[name].block_size == 32
    assert ("MatMulNBits" in kinds) == (contrib and blocked)
    assert ("GatherBlockQuantized" in kinds) == (contrib and blocked and CONFIGS[name].bits == 4)


def test_default_session_rewrites_dequantize_matmul(model):
    """What ONNX Runtime does by default with DequantizeLinear -> MatMul: int8 activations in
    MatMulNBits, farther from the interpreter than float rounding; quantir's own MatMulNBits says
    accuracy_level 0 and stays within float rounding under the same default options."""
    r = qr.quantize_weights(model, WeightOnlyConfig(bits=8, block_size=32))
    f = feeds(4)
    want = qr.run(r.module, f)["out"]
    standard = _ort(to_onnx_weight_only(r.module, matmul_nbits=False), f)[1]
    contrib = _ort(to_onnx_weight_only(r.module, matmul_nbits=True), f)[1]
    assert np.abs(standard - want).max() > 1e-3
    np.testing.assert_allclose(contrib, want, rtol=2e-5, atol=2e-5)


def test_int4_storage_is_packed_and_blocked(model):
    r = qr.quantize_weights(model, WeightOnlyConfig(bits=4, block_size=32))
    proto = to_onnx_weight_only(r.module, matmul_nbits=False)
    init = {t.name: t for t in proto.graph.initializer}
    dq = [n for n in proto.graph.node if n.op_type == "DequantizeLinear"]
    assert len(dq) == 4
    for n in dq:
        w = init[n.input[0]]
        assert w.data_type == onnx.TensorProto.INT4 and len(w.raw_data) == (int(np.prod(w.dims)) + 1) // 2
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        assert attrs["block_size"] == 32
    assert proto.opset_import[0].version == 21


def test_the_exported_file_imports_and_runs_in_the_interpreter(model, tmp_path):
    """The ONNX frontend reads int4 initializers back (one value per byte) and the i4 type."""
    r = qr.quantize_weights(model, WeightOnlyConfig(bits=4, block_size=32, symmetric=False))
    p = tmp_path / "w.onnx"
    r.save(p, matmul_nbits=False)
    f = feeds(2)
    back, want = qr.run(qr.load(p), f), qr.run(r.module, f)
    for k in want:
        np.testing.assert_allclose(back[k], want[k], rtol=1e-6, atol=1e-6)


def test_check_rows_flag_a_wrong_axis(model, tmp_path, capsys):
    """`quantir check`'s weight-only rows: per-channel scales of a MatMul weight along K instead of N
    are reported (ONNX Runtime would run it, but it is not what a per-channel weight means)."""
    from quantir.cli.main import main as cli
    r = qr.quantize_weights(model, WeightOnlyConfig(bits=8))
    proto = to_onnx_weight_only(r.module, matmul_nbits=False)
    good = tmp_path / "good.onnx"
    onnx.save(proto, good)
    assert cli(["check", str(good)]) == 0
    assert "4 ops checked, 0 violations" in capsys.readouterr().out
    init = {t.name: t for t in proto.graph.initializer}
    for n in proto.graph.node:
        if n.op_type == "DequantizeLinear" and init[n.input[0]].dims == [64, 96]:   # fc1's weight [K, N]
            scale = init[n.input[1]]
            scale.CopyFrom(onnx.numpy_helper.from_array(np.full(64, 0.01, np.float32), scale.name))
            zp = init[n.input[2]]
            zp.CopyFrom(onnx.numpy_helper.from_array(np.zeros(64, np.int8), zp.name))
            n.attribute[0].CopyFrom(onnx.helper.make_attribute("axis", 0))
    bad = tmp_path / "bad.onnx"
    onnx.save(proto, bad)
    assert cli(["check", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "MATMUL (weight-only) 'fc1' input 1: per-channel scales must be along the output channels (axis 1), " \
           "found axis 0" in out


def test_opset_below_21_is_refused(model):
    from quantir.errors import UnsupportedOpError
    r = qr.quantize_weights(model, WeightOnlyConfig(bits=4, block_size=32))
    with pytest.raises(UnsupportedOpError, match="needs ONNX opset 21"):
        to_onnx_weight_only(r.module, opset=19)
