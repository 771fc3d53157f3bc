"""qnn activation ops with ``!quant.uniform<i16:f32, s>`` operands run the int16x8 kernels.

Each test parses a one-op qnn module, runs it (through the interpreter, or the op's adapter in
``runtime/kernels/qnn_ops.py``) and compares every element with LiteRT ``BUILTIN_REF`` running the
same op with the same int16 quantization.
"""
import numpy as np
import pytest

from .qk_oracle import OP, T, assert_same, run_op
from quantir.backends.tflite import LeakyReluOptions, SoftmaxOptions
from quantir.backends.tflite.schema import GeluOptions
from quantir.runtime import interpreter
from quantir.runtime import qkernels as qk
from quantir.runtime.kernels import qnn_ops
from quantir.text import parse_module

pytestmark = pytest.mark.oracle

SHAPE = (2, 3, 40)
Q15 = 2.0**-15


def i16(scale: float) -> str:
    return f"!quant.uniform<i16:f32, {float(np.float32(scale))!r}>"


def one_op_module(name: str, s_in: float, s_out: float, attrs: str = ""):
    t_in, t_out = f"tensor<2x3x40x{i16(s_in)}>", f"tensor<2x3x40x{i16(s_out)}>"
    text = (f"func.func @main(%x: {t_in}) -> {t_out} {{\n"
            f'  %0 = "qnn.{name}"(%x) {attrs} : ({t_in}) -> {t_out}\n'
            f"  return %0 : {t_out}\n}}\n")
    return parse_module(text, f"{name}.mlir")


def data(seed: int, lo: int = -32768) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.integers(lo, 32768, size=SHAPE)
    x.reshape(-1)[:2] = (lo, 32767)
    return x.astype(np.int16)


def litert(code, x, s_in, s_out, options=None):
    (y,) = run_op(code, [T(x.shape, np.int16, scale=s_in)], [T(x.shape, np.int16, scale=s_out)], [x], options)
    return y


def run_main(module, x):
    (y,) = interpreter.run(module, {"arg0": x}).values()
    return y


def test_softmax_i16():
    s_in = 20 / 32767
    x = (data(1) // 16).astype(np.int16)
    y = run_main(one_op_module("softmax", s_in, Q15, "{beta = 1.0 : f32}"), x)
    assert_same("SOFTMAX int16 (IR)", y, litert(OP.SOFTMAX, x, s_in, Q15, SoftmaxOptions(beta=1.0)))


@pytest.mark.parametrize("name, code", [("logistic", OP.LOGISTIC), ("tanh", OP.TANH)])
def test_logistic_tanh_i16(name, code):
    s_in = 12 / 32767
    x = data(2)
    y = run_main(one_op_module(name, s_in, Q15), x)
    assert_same(f"{name.upper()} int16 (IR)", y, litert(code, x, s_in, Q15))


def test_leaky_relu_i16():
    s_in, s_out = 30 / 32767, 25 / 32767
    x = data(3)
    y = run_main(one_op_module("leaky_relu", s_in, s_out, "{alpha = 0.1 : f32}"), x)
    assert_same("LEAKY_RELU int16 (IR)", y, litert(OP.LEAKY_RELU, x, s_in, s_out, LeakyReluOptions(alpha=0.1)))


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu_i16_adapter(approximate):
    """``qnn_ops.gelu`` (int8 and int16); GELU's declaration binds its own int8 kernel today."""
    s_in, s_out = 16 / 32767, 12 / 32767
    module = one_op_module("gelu", s_in, s_out, "{approximate = %s}" % str(approximate).lower())
    op = module.main.ops[0]
    x = data(4)
    assert_same("GELU int16 (IR)", qnn_ops.gelu(op, x),
                litert(OP.GELU, x, s_in, s_out, GeluOptions(approximate=approximate)))


def test_rsqrt_i16_adapter():
    s_in, s_out = 4 / 32767, 60 / 32767
    op = one_op_module("rsqrt", s_in, s_out).main.ops[0]
    x = data(5, lo=0)
    assert_same("RSQRT int16 (IR)", qnn_ops.rsqrt(op, x), litert(OP.RSQRT, x, s_in, s_out))
    with pytest.raises(qk.QKernelError, match="negative"):
        qnn_ops.rsqrt(op, data(5))


def test_i16_checks_reach_the_ir():
    # LiteRT's int16 SOFTMAX output must be (1/32768, 0): an i16 result at another scale is refused
    with pytest.raises(qk.QKernelError, match="int16 output must be quantized with scale 1/32768"):
        run_main(one_op_module("softmax", 0.001, 0.001, "{beta = 1.0 : f32}"), data(6))
    with pytest.raises(qk.QKernelError, match="no int16 HARD_SWISH"):
        run_main(one_op_module("hard_swish", 0.001, 0.001), data(7))
