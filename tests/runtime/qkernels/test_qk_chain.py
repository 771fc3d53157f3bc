"""A small int8 CNN (the Fashion-MNIST model's op mix) as one TFLite graph vs the kernels chained.

Conv3x3+RELU6 -> depthwise3x3/2+RELU6 -> 1x1 conv -> HARD_SWISH -> ADD (residual) ->
CONCATENATION -> MEAN (GAP) -> FULLY_CONNECTED -> SOFTMAX, NHWC in LiteRT and NCHW here.
Every intermediate is a graph output, so each stage is compared, not only the last.
"""
import numpy as np
import pytest

from .qk_oracle import OP, assert_same, int8_data, nchw, nhwc
from quantir.backends.tflite import (
    ActivationFunctionType,
    AddOptions,
    ConcatenationOptions,
    Conv2DOptions,
    DepthwiseConv2DOptions,
    FullyConnectedOptions,
    ModelBuilder,
    Padding,
    Quantization,
    ReducerOptions,
    SoftmaxOptions,
)
from quantir.backends.tflite.litert import run_model
from quantir.runtime import qkernels as qk

pytestmark = pytest.mark.oracle
F = np.float32


def q(scale, zp=0, axis=0):
    s = np.atleast_1d(np.asarray(scale, np.float32))
    return Quantization(tuple(s.tolist()), tuple([int(zp)] * s.size) if np.ndim(zp) == 0 else tuple(zp), axis)


def test_small_cnn_chain_matches_litert_stage_by_stage():
    rng = np.random.default_rng(2024)
    n, h = 3, 12
    s_x, z_x = F(0.02), -10
    s_a, z_a = F(0.03), -128   # relu6 outputs
    s_b, z_b = F(0.05), 4
    s_h, z_h = F(0.04), -20
    s_r, z_r = F(0.06), -5
    s_m, z_m = F(0.05), 2
    s_f, z_f = F(0.03), 7
    w1 = int8_data(rng, (8, 1, 3, 3), -127, 127)
    w1s = rng.uniform(0.002, 0.02, 8).astype(F)
    b1 = rng.integers(-500, 500, 8).astype(np.int32)
    w2 = int8_data(rng, (8, 1, 3, 3), -127, 127)
    w2s = rng.uniform(0.002, 0.02, 8).astype(F)
    b2 = rng.integers(-500, 500, 8).astype(np.int32)
    w3 = int8_data(rng, (8, 8, 1, 1), -127, 127)
    w3s = rng.uniform(0.002, 0.02, 8).astype(F)
    b3 = rng.integers(-500, 500, 8).astype(np.int32)
    wf = int8_data(rng, (10, 16), -127, 127)
    wfs = rng.uniform(0.002, 0.02, 10).astype(F)
    bf = rng.integers(-500, 500, 10).astype(np.int32)
    x = int8_data(rng, (n, 1, h, h))

    # --- quantir kernels, NCHW
    p1 = qk.prepare_conv2d(s_x, w1s, s_a, z_a, "relu6")
    a = qk.conv2d(x, w1, b1, input_zero_point=z_x, pads=qk.tflite_pads("same", (h, h), (3, 3)), **p1.as_kwargs())
    p2 = qk.prepare_conv2d(s_a, w2s, s_a, z_a, "relu6")
    d = qk.depthwise_conv2d(a, w2, b2, input_zero_point=z_a, strides=(2, 2),
                            pads=qk.tflite_pads("same", (h, h), (3, 3), (2, 2)), **p2.as_kwargs())
    p3 = qk.prepare_conv2d(s_a, w3s, s_b, z_b)
    pw = qk.conv2d(d, w3, b3, input_zero_point=z_a, **p3.as_kwargs())
    hs = qk.hard_swish(pw, **qk.prepare_hard_swish(s_b, z_b, s_h, z_h).as_kwargs())
    r = qk.add(hs, d, input1_zero_point=z_h, input2_zero_point=z_a, **qk.prepare_add(s_h, s_a, s_r, z_r).as_kwargs())
    rq = qk.requantize(d, input_zero_point=z_a, output_zero_point=z_r, **qk.prepare_requantize(s_a, s_r).as_kwargs())
    cat = qk.concatenation([r, rq], axis=1)
    pm = qk.prepare_mean(s_r, z_r, s_m, z_m, count=(h // 2) ** 2)
    gap = qk.mean(cat, axes=(2, 3), keepdims=False, **pm.as_kwargs())
    pf = qk.prepare_fully_connected(s_m, wfs, s_f, z_f, channels=10)
    logits = qk.fully_connected(gap, wf, bf, input_zero_point=z_m, reference_float=True, **pf.as_kwargs())
    probs = qk.softmax(logits, **qk.prepare_softmax(s_f).as_kwargs())

    # --- the same graph in TFLite, NHWC
    b = ModelBuilder()
    hh = h // 2
    tx = b.add_tensor("x", (n, h, h, 1), np.int8, q(s_x, z_x))
    ta = b.add_tensor("a", (n, h, h, 8), np.int8, q(s_a, z_a))
    td = b.add_tensor("d", (n, hh, hh, 8), np.int8, q(s_a, z_a))
    tpw = b.add_tensor("pw", (n, hh, hh, 8), np.int8, q(s_b, z_b))
    ths = b.add_tensor("hs", (n, hh, hh, 8), np.int8, q(s_h, z_h))
    tr = b.add_tensor("r", (n, hh, hh, 8), np.int8, q(s_r, z_r))
    trq = b.add_tensor("rq", (n, hh, hh, 8), np.int8, q(s_r, z_r))
    tcat = b.add_tensor("cat", (n, hh, hh, 16), np.int8, q(s_r, z_r))
    tgap = b.add_tensor("gap", (n, 16), np.int8, q(s_m, z_m))
    tlog = b.add_tensor("logits", (n, 10), np.int8, q(s_f, z_f))
    tprob = b.add_tensor("probs", (n, 10), np.int8, q(1 / 256, -128))

    def const(name, data, scale, axis=0):
        return b.add_constant(name, data, q(scale, 0, axis))

    bias_q = lambda s_in, ws: (np.float64(s_in) * ws.astype(np.float64)).astype(F)  # noqa: E731
    b.add_operator(OP.CONV_2D, [tx, const("w1", w1.transpose(0, 2, 3, 1), w1s), const("b1", b1, bias_q(s_x, w1s))],
                   [ta], Conv2DOptions(padding=Padding.SAME, fused_activation_function=ActivationFunctionType.RELU6))
    b.add_operator(OP.DEPTHWISE_CONV_2D,
                   [ta, const("w2", w2.reshape(8, 3, 3).transpose(1, 2, 0)[None], w2s, 3),
                    const("b2", b2, bias_q(s_a, w2s))], [td],
                   DepthwiseConv2DOptions(padding=Padding.SAME, stride_h=2, stride_w=2,
                                          fused_activation_function=ActivationFunctionType.RELU6))
    b.add_operator(OP.CONV_2D, [td, const("w3", w3.transpose(0, 2, 3, 1), w3s), const("b3", b3, bias_q(s_a, w3s))],
                   [tpw], Conv2DOptions(padding=Padding.VALID))
    b.add_operator(OP.HARD_SWISH, [tpw], [ths])
    b.add_operator(OP.ADD, [ths, td], [tr], AddOptions())
    b.add_operator(OP.QUANTIZE, [td], [trq])
    b.add_operator(OP.CONCATENATION, [tr, trq], [tcat], ConcatenationOptions(axis=3))
    b.add_operator(OP.MEAN, [tcat, b.add_constant("axes", np.array([1, 2], np.int32))], [tgap],
                   ReducerOptions(keep_dims=False))
    b.add_operator(OP.FULLY_CONNECTED, [tgap, const("wf", wf, wfs), const("bf", bf, bias_q(s_m, wfs))], [tlog],
                   FullyConnectedOptions())
    b.add_operator(OP.SOFTMAX, [tlog], [tprob], SoftmaxOptions(beta=1.0))
    stages = [ta, td, tpw, ths, tr, trq, tcat, tgap, tlog, tprob]
    b.set_io([tx], stages)
    outs = run_model(b.finish(), [nhwc(x)], "reference")

    ours = [a, d, pw, hs, r, rq, cat, gap, logits, probs]
    names = ["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D", "HARD_SWISH", "ADD", "QUANTIZE (requantize)",
             "CONCATENATION", "MEAN (reference)", "FULLY_CONNECTED (ref)", "SOFTMAX (reference)"]
    for name, mine, theirs in zip(names, ours, outs, strict=True):
        assert len(np.unique(mine)) > 3, f"{name}: a degenerate stage (saturated) would prove little"
        assert_same(f"chain: {name}", mine, nchw(theirs) if theirs.ndim == 4 else theirs)
