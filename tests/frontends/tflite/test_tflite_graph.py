"""A small MobileNet-like int8 graph of most supported ops: every intermediate tensor of LiteRT
compared with quantir's through the import's bindings, and the layout plan checked (one
transpose in the whole graph: NCHW from the first conv to the classifier)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .tfl_graph import OP, Graph, compare, hsettings, int8_data, litert, op_names, seeds, zero_points
from quantir.backends.tflite import (ActivationFunctionType, AddOptions, ConcatenationOptions, Conv2DOptions,
                                     DepthwiseConv2DOptions, MulOptions, Padding,
                                     Pool2DOptions, ReducerOptions, ResizeBilinearOptions, SoftmaxOptions)
from quantir.backends.tflite import read_model
from quantir.backends.tflite.schema import QuantizeOptions

pytestmark = pytest.mark.oracle
litert()

RELU6, RELU = ActivationFunctionType.RELU6, ActivationFunctionType.RELU


class Net:
    """Builds the graph with random (seeded) but valid parameters; ``z`` draws zero points."""

    def __init__(self, rng: np.random.Generator, zps, n: int):
        self.g, self.rng, self.zps, self.n = Graph(), rng, iter(zps), n

    def zp(self) -> int:
        return next(self.zps, int(self.rng.integers(-128, 128)))

    def zp_of(self, idx: int) -> int:
        return self.g.b.tensors[idx].quantization.zero_point[0]

    def act(self, name, hwc, scale, zp=None):
        return self.g.act(name, (self.n, *hwc), scale, self.zp() if zp is None else zp), scale

    def conv(self, name, x, s_in, k, c_in, c_out, stride=1, act=ActivationFunctionType.NONE, depthwise=False):
        rng = self.rng
        w_scales = (0.02 * 10.0 ** rng.uniform(-1.5, 1.5, c_out)).astype(np.float32)  # spanning 1e3
        shape = (1, k, k, c_out) if depthwise else (c_out, k, k, c_in)
        w = self.g.const(f"{name}_w", int8_data(rng, shape, -127, 127), w_scales, 0, axis=3 if depthwise else 0)
        b = self.g.const(f"{name}_b", rng.integers(-3000, 3000, c_out).astype(np.int32),
                         (np.float64(s_in) * w_scales).astype(np.float32), 0)
        fan_in = k * k * (1 if depthwise else c_in)
        # keeps real ranges steady from layer to layer (no drift to huge or tiny scales)
        s_out = float(np.float32(s_in * w_scales.mean() * np.sqrt(fan_in) * 8 * rng.uniform(0.5, 2)))
        return w, b, s_out

    def build(self) -> tuple[bytes, list[np.ndarray]]:
        g, rng, n = self.g, self.rng, self.n
        xf = g.input("image", (n, 8, 8, 3), dtype=np.float32)
        x, sx = self.act("image_q", (8, 8, 3), 0.02)
        g.op(OP.QUANTIZE, [xf], [x], QuantizeOptions())
        w, b, s = self.conv("c1", x, sx, 3, 3, 8)
        c1, s1 = self.act("c1", (4, 4, 8), s)
        g.op(OP.CONV_2D, [x, w, b], [c1], Conv2DOptions(padding=Padding.SAME, stride_h=2, stride_w=2,
                                                        fused_activation_function=RELU6))
        w, b, s = self.conv("d1", c1, s1, 3, 8, 16, depthwise=True)
        d1, sd = self.act("d1", (4, 4, 16), s)
        g.op(OP.DEPTHWISE_CONV_2D, [c1, w, b], [d1], DepthwiseConv2DOptions(padding=Padding.SAME, depth_multiplier=2,
                                                                            fused_activation_function=RELU))
        w, b, s = self.conv("c2", d1, sd, 1, 16, 8)
        c2, s2 = self.act("c2", (4, 4, 8), s)
        g.op(OP.CONV_2D, [d1, w, b], [c2], Conv2DOptions(padding=Padding.VALID))
        a1, sa = self.act("residual", (4, 4, 8), float(np.float32(2 * max(s1, s2) * rng.uniform(0.5, 2))))
        g.op(OP.ADD, [c1, c2], [a1], AddOptions())
        # squeeze-and-excite: mean -> 1x1 conv -> 1x1 conv -> logistic -> broadcast mul
        m, sm = self.act("se_mean", (1, 1, 8), sa)
        g.op(OP.MEAN, [a1, g.const("hw", np.array([1, 2], np.int32))], [m], ReducerOptions(keep_dims=True))
        w, b, s = self.conv("se1", m, sm, 1, 8, 4)
        e1, se1 = self.act("se1", (1, 1, 4), s)
        g.op(OP.CONV_2D, [m, w, b], [e1], Conv2DOptions(padding=Padding.VALID, fused_activation_function=RELU))
        w, b, s = self.conv("se2", e1, se1, 1, 4, 8)
        e2, _ = self.act("se2", (1, 1, 8), s)
        g.op(OP.CONV_2D, [e1, w, b], [e2], Conv2DOptions(padding=Padding.VALID))
        gate, _ = self.act("gate", (1, 1, 8), 1 / 256, -128)
        g.op(OP.LOGISTIC, [e2], [gate])
        se, sse = self.act("excited", (4, 4, 8), float(np.float32(sa * rng.uniform(0.3, 1))))
        g.op(OP.MUL, [a1, gate], [se], MulOptions())
        zp = self.zp()   # pad .. average pool move data: they share the parameters of hswish
        hs, shs = self.act("hswish", (4, 4, 8), float(np.float32(sse * rng.uniform(0.5, 2))), zp)
        g.op(OP.HARD_SWISH, [se], [hs])
        p, _ = self.act("padded", (6, 6, 8), shs, zp)
        g.op(OP.PAD, [hs, g.const("pads", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))], [p])
        mp, _ = self.act("pooled", (3, 3, 8), shs, zp)
        g.op(OP.MAX_POOL_2D, [p], [mp], Pool2DOptions(padding=Padding.VALID, stride_h=2, stride_w=2,
                                                      filter_height=2, filter_width=2))
        r, _ = self.act("resized", (6, 6, 8), shs, zp)
        g.op(OP.RESIZE_BILINEAR, [mp, g.const("size", np.array([6, 6], np.int32))], [r],
             ResizeBilinearOptions(half_pixel_centers=True), version=3)
        cat, _ = self.act("concat", (6, 6, 16), shs, zp)
        g.op(OP.CONCATENATION, [r, p], [cat], ConcatenationOptions(axis=3))
        ap, _ = self.act("gap", (1, 1, 16), shs, zp)
        g.op(OP.AVERAGE_POOL_2D, [cat], [ap], Pool2DOptions(padding=Padding.VALID, filter_height=6, filter_width=6))
        # classifier as a 1x1 conv (BUILTIN_REF's FULLY_CONNECTED requantizes in float: see test_tflite_window)
        w, b, _ = self.conv("cls", ap, shs, 1, 16, 10)
        s = float(np.float32(rng.uniform(0.05, 0.5)))   # softmax wants logits of a sane scale (< 16)
        cls, _ = self.act("cls", (1, 1, 10), s)
        g.op(OP.CONV_2D, [ap, w, b], [cls], Conv2DOptions(padding=Padding.VALID))
        logits = g.act("logits", (n, 10), s, self.zp_of(cls))
        g.op(OP.RESHAPE, [cls, g.const("flat_shape", np.array([-1, 10], np.int32))], [logits])
        probs = g.act("probs", (n, 10), 1 / 256, -128)
        g.op(OP.SOFTMAX, [logits], [probs], SoftmaxOptions(beta=1.0))
        out = g.act("probs_f", (n, 10), dtype=np.float32)
        g.op(OP.DEQUANTIZE, [probs], [out])
        feed = (rng.standard_normal((n, 8, 8, 3)) * 1.2).astype(np.float32)
        return g.finish([out, a1]), [feed]


@hsettings(15)
@given(seed=seeds, n=st.integers(1, 2), zps=st.lists(zero_points, min_size=3, max_size=12))
def test_every_intermediate_matches_litert(seed, n, zps):
    data, feeds = Net(np.random.default_rng(seed), zps, n).build()
    result = compare(data, feeds)
    names = op_names(result)
    # the NHWC input goes NCHW once; conv -> depthwise -> conv -> ... -> classifier stay NCHW, and the
    # reshape to logits reads the NCHW 1x1 map directly (same element order);
    # the residual output goes back to NHWC for the function's result
    assert names.count("nn.transpose") == 2, names
    model = read_model(data)
    assert set(result.bindings) == {i for i, t in enumerate(model.subgraphs[0].tensors) if model.tensor_data(t) is None}
    by_name = {b.name: b for b in result.bindings.values()}
    assert by_name["c1"].to_tflite == (0, 2, 3, 1) and by_name["logits"].to_tflite is None
    assert by_name["residual"].to_tflite is None   # a graph output: its TFLite-layout form carries the name
