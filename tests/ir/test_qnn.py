"""qnn ops: shapes follow the float op, stored fixed-point multipliers must match the types."""
import numpy as np
import pytest

from quantir.errors import VerifyError
from quantir.ir import Function, Module, verify
from quantir.ir.dialects import func, qnn
from quantir.numerics import quantize_multipliers
from quantir.types import TensorType, i8, parse_type, uniform

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
