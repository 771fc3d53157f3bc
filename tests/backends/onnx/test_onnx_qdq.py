"""``quant.qcast``/``dcast`` as QuantizeLinear/DequantizeLinear, run in ONNX Runtime, against
``quantir.numerics.quantize_onnx`` / ``dequantize(scheme="onnx")``: bit for bit, ties included
(ONNX rounds half to even)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .ort_helpers import onnx, session

from quantir.backends.onnx import to_onnx
from quantir.errors import UnsupportedOpError
from quantir.ir import Function, Module, StringAttr, dialects
from quantir.numerics import dequantize, quantize_onnx
from quantir.types import TensorType, f32, parse_type

SHAPE = (2, 3, 4)


def qdq_module(qtype: str, shape=SHAPE) -> Module:
    """``x -> qcast -> q`` and ``q -> dcast -> y``; outputs ``q`` (stored integers) and ``y``."""
    ft = TensorType(shape, f32)
    qt = TensorType(shape, parse_type(qtype))
    fn = Function.create("main", [ft], [qt, ft], arg_attrs=[{"quantir.name": StringAttr("x")}],
                         res_attrs=[{"quantir.name": StringAttr("q")}, {"quantir.name": StringAttr("y")}])
    q = fn.body.append(dialects.quant.QCAST.build(fn.arguments, [qt])).result
    y = fn.body.append(dialects.quant.DCAST.build([q], [ft])).result
    fn.body.append(dialects.func.RETURN.build([q, y], []))
    return Module([fn])


def run_qdq(qtype: str, x: np.ndarray, opset: int | None = None):
    model = to_onnx(qdq_module(qtype, x.shape), opset=opset)
    onnx.checker.check_model(model, full_check=True)
    q, y = session(model).run(None, {"x": x})
    return model, q, y


def expected(x, scales, zps, axis, dtype, lo=None, hi=None):
    info = np.iinfo(dtype)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    scales = np.float32(scales) if axis is None else np.asarray(scales, np.float32)
    zps = np.int64(zps) if axis is None else np.asarray(zps, np.int64)
    q = quantize_onnx(x, scales, zps, lo, hi, axis=axis).astype(dtype)
    return q, dequantize(q, scales, zps, axis=axis, scheme="onnx")


def test_per_tensor_i8_nodes_and_initializers():
    x = np.array([0.25, 0.75, -0.25, -0.75, 1.25, 100.0, -100.0, 0.0], np.float32).reshape(2, 4)
    model, q, y = run_qdq("!quant.uniform<i8:f32, 0.5:-3>", x)
    assert [n.op_type for n in model.graph.node] == ["QuantizeLinear", "DequantizeLinear"]
    assert not model.graph.node[0].attribute                          # per-tensor: no axis
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    assert len(inits) == 2                                             # one scale, one zero point, shared
    scale, zp = inits["q_scale"], inits["q_zero_point"]
    assert scale.dtype == np.float32 and scale.shape == () and zp.dtype == np.int8 and zp == -3
    assert q.dtype == np.int8 and y.dtype == np.float32
    # ties to even: 0.25/0.5 = 0.5 -> 0, 0.75/0.5 = 1.5 -> 2, 1.25/0.5 = 2.5 -> 2; 100 saturates
    np.testing.assert_array_equal(q, np.array([-3, -1, -3, -5, -1, 127, -128, -3], np.int8).reshape(2, 4))
    want_q, want_y = expected(x, 0.5, -3, None, np.int8)
    np.testing.assert_array_equal(q, want_q)
    assert y.tobytes() == want_y.tobytes()


def test_per_axis_nodes_and_values():
    qtype = "!quant.uniform<i8:f32:1, {5.000000e-01:-3,2.500000e-01:2,1.250000e-01}>"
    x = np.linspace(-20, 20, 24, dtype=np.float32).reshape(SHAPE)
    model, q, y = run_qdq(qtype, x)
    qnode = model.graph.node[0]
    assert [(a.name, a.i) for a in qnode.attribute] == [("axis", 1)]
    want_q, want_y = expected(x, [0.5, 0.25, 0.125], [-3, 2, 0], 1, np.int8)
    np.testing.assert_array_equal(q, want_q)
    assert y.tobytes() == want_y.tobytes()


def test_u8_storage_and_narrow_range():
    x = np.linspace(-30, 30, 24, dtype=np.float32).reshape(SHAPE)
    _, q, y = run_qdq("!quant.uniform<u8:f32, 0.1:128>", x)
    assert q.dtype == np.uint8
    want_q, want_y = expected(x, 0.1, 128, None, np.uint8)
    np.testing.assert_array_equal(q, want_q)
    assert y.tobytes() == want_y.tobytes()
    model, q, y = run_qdq("!quant.uniform<i8<-127:127>:f32, 0.1>", x)
    assert [n.op_type for n in model.graph.node] == ["QuantizeLinear", "Clip", "DequantizeLinear"]
    assert q.min() == -127
    want_q, want_y = expected(x, 0.1, 0, None, np.int8, -127, 127)
    np.testing.assert_array_equal(q, want_q)
    assert y.tobytes() == want_y.tobytes()


def test_i16_needs_opset_21():
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(SHAPE)
    _, q, y = run_qdq("!quant.uniform<i16:f32, 0.001:5>", x)
    want_q, want_y = expected(x, 0.001, 5, None, np.int16)
    np.testing.assert_array_equal(q, want_q)
    assert y.tobytes() == want_y.tobytes()
    with pytest.raises(UnsupportedOpError, match="i16 storage needs ONNX opset 21"):
        to_onnx(qdq_module("!quant.uniform<i16:f32, 0.001:5>"), opset=19)


def test_unsupported_storage_is_named():
    with pytest.raises(UnsupportedOpError, match="storage type i4"):
        to_onnx(qdq_module("!quant.uniform<i4:f32, 0.5>"))


def test_scast_is_identity():
    ft = TensorType((4,), f32)
    qt = TensorType((4,), parse_type("!quant.uniform<i8:f32, 0.5:1>"))
    it = TensorType((4,), parse_type("i8"))
    fn = Function.create("main", [ft], [it], arg_attrs=[{"quantir.name": StringAttr("x")}],
                         res_attrs=[{"quantir.name": StringAttr("stored")}])
    q = fn.body.append(dialects.quant.QCAST.build(fn.arguments, [qt])).result
    s = fn.body.append(dialects.quant.SCAST.build([q], [it])).result
    fn.body.append(dialects.func.RETURN.build([s], []))
    model = to_onnx(Module([fn]))
    assert [n.op_type for n in model.graph.node] == ["QuantizeLinear", "Identity"]
    x = np.array([0.25, 0.75, -1, 3], np.float32)
    np.testing.assert_array_equal(session(model).run(None, {"x": x})[0], expected(x, 0.5, 1, None, np.int8)[0])


@st.composite
def qdq_cases(draw):
    per_axis = draw(st.booleans())
    unsigned = draw(st.booleans())
    lo, hi = (0, 255) if unsigned else (-128, 127)
    n = 3 if per_axis else 1
    scales = [draw(st.floats(2.0 ** -10, 4.0, width=32)) for _ in range(n)]
    zps = [draw(st.integers(lo, hi)) for _ in range(n)]
    # Values on and next to ties (k + 1/2) * scale, plus far-out ones that saturate.
    ks = draw(st.lists(st.integers(-400, 400), min_size=24, max_size=24))
    jitter = draw(st.sampled_from([0.0, 0.5, 0.25, 0.499999, 0.500001]))
    s = np.asarray(scales, np.float32).reshape(1, n, 1) if per_axis else np.float32(scales[0])
    x = ((np.asarray(ks, np.float32).reshape(SHAPE) + np.float32(jitter)) * s).astype(np.float32)
    storage = "u8" if unsigned else "i8"
    if per_axis:
        params = ",".join(f"{sc!r}:{z}" for sc, z in zip(scales, zps))
        qtype = f"!quant.uniform<{storage}:f32:1, {{{params}}}>"
        return qtype, x, scales, zps, 1, np.uint8 if unsigned else np.int8
    return f"!quant.uniform<{storage}:f32, {scales[0]!r}:{zps[0]}>", x, scales[0], zps[0], None, \
        np.uint8 if unsigned else np.int8


@settings(max_examples=40, deadline=None)
@given(qdq_cases())
def test_matches_numerics_exactly(case):
    qtype, x, scales, zps, axis, dtype = case
    _, q, y = run_qdq(qtype, x)
    want_q, want_y = expected(x, scales, zps, axis, dtype)
    np.testing.assert_array_equal(q, want_q)
    assert y.tobytes() == want_y.tobytes()
