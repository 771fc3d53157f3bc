"""qnn ops: shapes follow the float op, stored fixed-point multipliers must match the types."""
import numpy as np
import pytest

from quantir.errors import VerifyError
from quantir.ir import Function, Module, verify
from quantir.ir.dialects import func, qnn
from quantir.numerics import quantize_multipliers
from quantir.types import TensorType, i8, parse_type, uniform, uniform_per_axis

ACT_IN = uniform(storage="i8", expressed="f32", scale=0.02, zero_point=-5)
ACT_OUT = uniform(storage="i8", expressed="f32", scale=0.05, zero_point=3)
W = parse_type("!quant.uniform<i8<-127:127>:f32:0, {0.003, 0.004}>")


def conv_fn(out_shape=(1, 2, 3, 3), multiplier=None, activation="RELU6"):
    x_t = TensorType((1, 3, 5, 5), ACT_IN)
    w_t = TensorType((2, 3, 3, 3), W)
    y_t = TensorType(out_shape, ACT_OUT)
    fn = Function.create("main", [x_t, w_t], [y_t])
    x, w = fn.arguments
    real = qnn.conv_real_multipliers(x_t, w_t, y_t)
    m, s = quantize_multipliers(real)
    if multiplier is not None:
        m = np.asarray(multiplier)
    op = qnn.CONV.build([x, w], [y_t], strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
                        activation=activation, multiplier=m.tolist(), shift=s.tolist())
    fn.body.append(op)
    fn.body.append(func.RETURN.build([op.result], []))
    return Module([fn]), real


def test_conv_with_matching_fixed_point_constants_verifies():
    module, real = conv_fn()
    verify(module)
    # the same derivation rule as LiteRT's conv Prepare: double(s_in)·double(s_w)/double(s_out)
    assert real[0] == np.float64(np.float32(0.02)) * np.float64(np.float32(0.003)) / np.float64(np.float32(0.05))


def test_tampered_multiplier_is_rejected():
    module, _ = conv_fn(multiplier=[1 << 30, 1 << 30])
    with pytest.raises(VerifyError, match="'qnn.conv' op multiplier/shift do not match"):
        verify(module)


def test_result_shape_must_follow_the_float_rule():
    module, _ = conv_fn(out_shape=(1, 2, 5, 5))
    with pytest.raises(VerifyError, match=r"result #0 shape 1x2x5x5 does not match the shape 1x2x3x3"):
        verify(module)


def test_unknown_activation_is_rejected():
    module, _ = conv_fn(activation="GELU")
    with pytest.raises(VerifyError, match="activation must be one of NONE, RELU, RELU6, RELU_N1_TO_1"):
        verify(module)


def test_operands_must_be_quantized():
    t = TensorType((1, 4), i8)
    fn = Function.create("main", [t, t], [t])
    op = qnn.ADD.build(list(fn.arguments), [t])
    with pytest.raises(VerifyError, match="operand #0 must be tensor of quantized type values"):
        op.verify()


# -- qnn.unidirectional_lstm: what LiteRT's 8x8_16 kernel takes, refused otherwise ----------------

def _gates(storage="i8", scales=(0.01, 0.02, 0.03, 0.04), zero_points=None):
    return uniform_per_axis(storage=storage, axis=0, scales=scales, zero_points=zero_points,
                            storage_range=(-127, 127) if storage == "i8" else None)


def lstm_op(*, hidden=3, features=5, w=None, r=None, bias=None, x=None, y_shape=None, cell=-11):
    x_t = TensorType((7, 1, features), x or ACT_IN)
    w_t = TensorType((4, hidden, features), w or _gates())
    r_t = TensorType((4, hidden, hidden), r or _gates())
    b_t = TensorType((4, hidden), bias or _gates("i32", scales=(1e-4, 2e-4, 3e-4, 4e-4)))
    y_t = TensorType(y_shape or (7, 1, hidden), ACT_OUT)
    fn = Function.create("main", [x_t, w_t, r_t, b_t], [y_t])
    return qnn.UNIDIRECTIONAL_LSTM.build(list(fn.arguments), [y_t], cell_scale_log2=cell)


def test_an_lstm_litert_takes_verifies():
    lstm_op().verify()


@pytest.mark.parametrize("kwargs, message", [
    ({"w": parse_type("!quant.uniform<i8<-127:127>:f32, 0.01>")}, "weights must be quantized per gate"),
    ({"r": _gates(scales=(0.1, 0.2))}, "recurrent weights must be quantized per gate"),
    ({"w": _gates(zero_points=(0, 3, 0, 0))}, "weights must be symmetric"),
    ({"bias": _gates(scales=(1e-4,) * 4)}, "bias must have 32-bit storage"),
    ({"x": uniform(storage="i16", scale=0.01)}, "the input must be int8 quantized per tensor"),
    ({"y_shape": (7, 1, 4)}, "result shape 7x1x4 must be the input's"),
    ({"cell": -21}, r"cell_scale_log2 -21 is outside \[-20, 0\]"),
])
def test_an_lstm_litert_cannot_take_is_refused_with_the_reason(kwargs, message):
    with pytest.raises(VerifyError, match=f"'qnn.unidirectional_lstm' op {message}"):
        lstm_op(**kwargs).verify()
