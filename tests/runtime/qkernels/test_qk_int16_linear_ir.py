"""The qnn interpreter runs the int16x8 kernels when the operands' storage is i16: one tiny qnn op per
family, with ``!quant.uniform<i16:f32, s>`` operands, against the direct qkernels call."""
import numpy as np
import pytest

from quantir.runtime import interpreter
from quantir.runtime import qkernels as qk
from quantir.text import parse_module

Q16 = "!quant.uniform<i16:f32, {s:e}>"
I16 = np.int16


def _t(shape, scale):
    return "tensor<" + "x".join(map(str, shape)) + "x" + Q16.format(s=scale) + ">"


def _run(op: str, ins: list[tuple[tuple, float]], out: tuple[tuple, float], feeds: list[np.ndarray], attrs: str = ""):
    args = ", ".join(f"%a{i}: {_t(*t)}" for i, t in enumerate(ins))
    types = ", ".join(_t(*t) for t in ins)
    names = ", ".join(f"%a{i}" for i in range(len(ins)))
    attr = f" {{{attrs}}}" if attrs else ""
    text = (f"func.func @main({args}) -> {_t(*out)} {{\n"
            f'  %0 = "qnn.{op}"({names}){attr} : ({types}) -> {_t(*out)}\n'
            f"  return %0 : {_t(*out)}\n}}\n")
    result = interpreter.run(parse_module(text, f"{op}.mlir"), {f"arg{i}": f for i, f in enumerate(feeds)})
    got = next(iter(result.values())) if isinstance(result, dict) else result[0]
    assert got.dtype == I16
    return got


def _data(shape, seed=0):
    return np.random.default_rng(seed).integers(-32768, 32768, size=shape).astype(I16)


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
@pytest.mark.parametrize("scales", [(0.01, 0.003, 0.02), (2**-10, 2**-12, 2**-10)])   # general, power of two
def test_binary_int16_runs_the_16_bit_kernel(op, scales):
    s1, s2, so = scales
    a, b = _data((2, 3, 4), 1), _data((2, 3, 4), 2)
    got = _run(op, [((2, 3, 4), s1), ((2, 3, 4), s2)], ((2, 3, 4), so), [a, b])
    prepare, kernel = {"add": (qk.prepare_add, qk.add), "sub": (qk.prepare_sub, qk.sub),
                       "mul": (qk.prepare_mul, qk.mul)}[op]
    p = prepare(s1, s2, so, 0, storage=I16)
    np.testing.assert_array_equal(got, kernel(a, b, input1_zero_point=0, input2_zero_point=0, **p.as_kwargs()))


def test_mean_int16_runs_the_16_bit_kernel():
    x = _data((2, 5, 6))
    got = _run("mean", [((2, 5, 6), 0.01)], ((2, 5), 0.004), [x], "axes = array<i64: 2>, keepdims = 0 : i64")
    p = qk.prepare_mean(0.01, 0, 0.004, 0, count=6, storage=I16)
    np.testing.assert_array_equal(got, qk.mean(x, axes=(2,), keepdims=False, **p.as_kwargs()))


def test_concat_int16_runs_and_keeps_the_equal_scale_rule():
    a, b = _data((2, 3), 1), _data((2, 2), 2)
    got = _run("concat", [((2, 3), 0.01), ((2, 2), 0.01)], ((2, 5), 0.01), [a, b], "axis = 1 : i64")
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis=1))
    with pytest.raises(qk.QKernelError, match="cannot rescale"):
        _run("concat", [((2, 3), 0.01), ((2, 2), 0.02)], ((2, 5), 0.01), [a, b], "axis = 1 : i64")


def _fixed_point(real: float) -> str:
    from quantir.numerics import quantize_multiplier
    m, s = quantize_multiplier(real)
    return f"multiplier = array<i64: {m}>, shift = array<i64: {s}>"


def test_fully_connected_16x8_runs_the_16_bit_kernel():
    x = _data((2, 3, 8))
    w = np.random.default_rng(4).integers(-127, 128, size=(5, 8)).astype(np.int8)
    wt = "tensor<5x8x!quant.uniform<i8<-127:127>:f32, 2.000000e-03>>"
    real = float(np.float32(np.float32(0.01) * np.float32(0.002))) / float(np.float32(0.05))
    text = (f"func.func @main(%x: {_t((2, 3, 8), 0.01)}, %w: {wt}) -> {_t((2, 3, 5), 0.05)} {{\n"
            f'  %0 = "qnn.fully_connected"(%x, %w) {{{_fixed_point(real)}}} : ({_t((2, 3, 8), 0.01)}, {wt}) '
            f"-> {_t((2, 3, 5), 0.05)}\n"
            f"  return %0 : {_t((2, 3, 5), 0.05)}\n}}\n")
    result = interpreter.run(parse_module(text, "fc.mlir"), {"arg0": x, "arg1": w})
    got = next(iter(result.values())) if isinstance(result, dict) else result[0]
    p = qk.prepare_fully_connected(0.01, 0.002, 0.05, 0, channels=5, storage=I16)
    assert got.dtype == I16
    np.testing.assert_array_equal(got, qk.fully_connected(x, w, input_zero_point=0, **p.as_kwargs()))


def test_requantize_int16_to_int16_runs_with_int16_storage():
    x = _data((4, 4))
    p = qk.prepare_requantize(0.01, 0.003)
    got = _run("requantize", [((4, 4), 0.01)], ((4, 4), 0.003), [x],
               f"multiplier = array<i64: {p.multiplier}>, shift = array<i64: {p.shift}>")
    np.testing.assert_array_equal(got, qk.requantize(x, input_zero_point=0, output_zero_point=0, out_dtype=I16,
                                                     **p.as_kwargs()))


def test_batch_matmul_int16_runs_the_16_bit_kernel():
    """The adapter (quantize/ops/matmul.py) needs no change: the kernel dispatches on the int16 arrays."""
    a, b = _data((2, 3, 8), 1), _data((2, 8, 4), 2)
    got = _run("batch_matmul", [((2, 3, 8), 0.001), ((2, 8, 4), 0.002)], ((2, 3, 4), 0.5), [a, b])
    p = qk.prepare_batch_matmul(0.001, 0.002, 0.5, 0, storage=I16)
    np.testing.assert_array_equal(got, qk.batch_matmul(a, b, lhs_zero_point=0, rhs_zero_point=0, **p.as_kwargs()))
