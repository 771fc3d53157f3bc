"""LiteRT's dynamic-range ("hybrid") kernels against ``BUILTIN_REF``, every float32 bit equal.

One-op models with float32 activations and int8 constant weights (FULLY_CONNECTED, BATCH_MATMUL,
CONV_2D, DEPTHWISE_CONV_2D, EMBEDDING_LOOKUP), written by quantir's TFLite writer. The inputs
include all-zero rows/images (LiteRT's scale-1 corner case), all-zero inputs (FULLY_CONNECTED's
skip of the product), rows of one sign and constant rows.

Not tested because LiteRT has no such form: GATHER of an int8 table into a float output — its
Prepare sets the output type to the input's, so it returns the raw int8 values
(``test_gather_has_no_hybrid_form`` checks that this is still so).
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .qk_oracle import OP, T, assert_same, hsettings, nchw, nhwc, run_op, seeds
from quantir.backends.tflite import ActivationFunctionType, Conv2DOptions, DepthwiseConv2DOptions, \
    FullyConnectedOptions, Padding
from quantir.backends.tflite.schema import BatchMatMulOptions, GatherOptions
from quantir.runtime import qkernels as qk

pytestmark = pytest.mark.oracle

ACT = {"none": ActivationFunctionType.NONE, "relu": ActivationFunctionType.RELU,
       "relu6": ActivationFunctionType.RELU6, "relu_n1_to_1": ActivationFunctionType.RELU_N1_TO_1}
EMBEDDING_LOOKUP = 7   # BuiltinOperator code; quantir's enum does not name it yet


def float_data(rng: np.random.Generator, shape, rows_axis_len: int, special: str) -> np.ndarray:
    """Gaussian float32 at a random magnitude (1e-3..1e3); ``special`` rewrites the first row
    (or image) to all zeros, one sign, or a constant."""
    x = (rng.standard_normal(shape) * 10 ** rng.uniform(-3, 3)).astype(np.float32)
    flat = x.reshape(rows_axis_len, -1)
    if special == "zero":
        flat[0] = 0
    elif special == "positive":
        flat[0] = np.abs(flat[0])
    elif special == "negative":
        flat[0] = -np.abs(flat[0])
    elif special == "constant":
        flat[0] = np.float32(rng.uniform(-5, 5))
    return flat.reshape(shape)


specials = st.sampled_from(["none", "zero", "positive", "negative", "constant"])


def weight_scales(rng: np.random.Generator, channels: int, mode: str) -> np.ndarray:
    s = (10 ** rng.uniform(-4, -1, size=channels)).astype(np.float32)
    return {"tensor": s[:1], "channel": s, "equal": np.full(channels, s[0], np.float32)}[mode]


# ---------------------------------------------------------------------------- FULLY_CONNECTED

def _fc_litert(x, w, ws, bias, act, asym, keep):
    out_shape = qk.fully_connected_hybrid(x, w, ws, bias, keep_num_dims=keep).shape
    (expected,) = run_op(OP.FULLY_CONNECTED, [
        T(x.shape, np.float32), T(w.shape, scale=ws, data=w),
        T((w.shape[0],), np.float32, data=bias) if bias is not None else None,
    ], [T(out_shape, np.float32)], [x],
        FullyConnectedOptions(fused_activation_function=ACT[act], keep_num_dims=keep, asymmetric_quantize_inputs=asym))
    return expected


@hsettings(120)
@given(lead=st.sampled_from([(1,), (4,), (2, 3), (3, 1)]), k=st.integers(1, 300), c_out=st.integers(1, 16),
       act=st.sampled_from(list(ACT)), scales=st.sampled_from(["tensor", "channel"]), asym=st.booleans(),
       with_bias=st.booleans(), keep=st.booleans(), special=specials, all_zero=st.integers(0, 9), seed=seeds)
def test_fully_connected_hybrid_matches_litert(lead, k, c_out, act, scales, asym, with_bias, keep, special, all_zero,
                                               seed):
    rng = np.random.default_rng(seed)
    x = float_data(rng, (*lead, k), int(np.prod(lead)), special)
    if all_zero == 0:
        x[:] = 0   # LiteRT skips the product: the output is the bias
    w = rng.integers(-127, 128, (c_out, k)).astype(np.int8)
    ws = weight_scales(rng, c_out, scales)
    bias = rng.standard_normal(c_out).astype(np.float32) * 3 if with_bias else None
    got = qk.fully_connected_hybrid(x, w, ws, bias, activation=act, asymmetric_quantize_inputs=asym, keep_num_dims=keep)
    assert_same("FULLY_CONNECTED hybrid", got, _fc_litert(x, w, ws, bias, act, asym, keep))


@pytest.mark.parametrize("asym", [False, True])
def test_fully_connected_hybrid_real_size(asym):
    # MiniLM's FFN up-projection: 128 token rows, 384 -> 1536, per-channel weights
    rng = np.random.default_rng(16)
    x = rng.standard_normal((128, 384)).astype(np.float32) * np.float32(2.5)
    x[5] = 0
    w = rng.integers(-127, 128, (1536, 384)).astype(np.int8)
    ws = weight_scales(rng, 1536, "channel")
    bias = rng.standard_normal(1536).astype(np.float32)
    got = qk.fully_connected_hybrid(x, w, ws, bias, asymmetric_quantize_inputs=asym)
    assert_same("FULLY_CONNECTED hybrid", got, _fc_litert(x, w, ws, bias, "none", asym, False))


@pytest.mark.parametrize("k", [2072, 2088, 4109])
def test_asymmetric_row_sums_wrap_like_litert(k):
    # Weights of one sign past K = 2064 overflow the int16 lanes of LiteRT's x86 row sums
    # (k = 2072: only the SSE 4.1 block of 8 makes a lane wrap).
    rng = np.random.default_rng(k)
    x = (np.float32(1) + rng.random((2, k), dtype=np.float32) / 100).astype(np.float32)
    w = np.full((4, k), 127, np.int8)
    w[1], w[2, ::3] = -127, 90
    ws = np.array([0.01], np.float32)
    assert not np.array_equal(qk.weight_row_sums(w), w.sum(axis=1))
    got = qk.fully_connected_hybrid(x, w, ws, asymmetric_quantize_inputs=True)
    assert_same("FULLY_CONNECTED hybrid", got, _fc_litert(x, w, ws, None, "none", True, False))
    wt = np.ascontiguousarray(w.T)
    got = qk.batch_matmul_hybrid(x, wt, ws, asymmetric_quantize_inputs=True)
    (expected,) = run_op(OP.BATCH_MATMUL, [T(x.shape, np.float32), T(wt.shape, scale=ws, data=wt)],
                         [T(got.shape, np.float32)], [x], BatchMatMulOptions(asymmetric_quantize_inputs=True))
    assert_same("BATCH_MATMUL hybrid", got, expected)


def test_weights_of_int8_min_are_refused_where_litert_is_wrong():
    rng = np.random.default_rng(1)
    x = -np.abs(rng.standard_normal((2, 32)).astype(np.float32))
    w = np.full((3, 32), -128, np.int8)
    with pytest.raises(qk.QKernelError, match=r"\[-127, 127\]"):
        qk.fully_connected_hybrid(x, w, [0.01])
    # LiteRT's sum has the wrong sign: every product q·(-128) with q < 0 comes out negative
    (litert,) = run_op(OP.FULLY_CONNECTED, [T(x.shape, np.float32), T(w.shape, scale=0.01, data=w), None],
                       [T((2, 3), np.float32)], [x], FullyConnectedOptions())
    assert np.all(litert < 0)
    with pytest.raises(qk.QKernelError, match=r"\[-127, 127\]"):
        qk.conv2d_hybrid(np.ones((1, 2, 3, 3), np.float32), np.full((3, 2, 1, 1), -128, np.int8), [0.1])


def test_symmetric_rows_zero_row_gets_scale_one():
    q, s = qk.symmetric_quantize_rows(np.array([[0, 0, 0], [-2.54, 1.27, 0]], np.float32))
    assert s.tolist() == [1.0, np.float32(2.54) / np.float32(127)]
    assert q.tolist() == [[0, 0, 0], [-127, 64, 0]]   # 63.5 rounds away from zero


# ---------------------------------------------------------------------------- BATCH_MATMUL

BMM_SHAPES = [((5, 7), (7, 4)), ((3, 5, 7), (7, 4)), ((3, 5, 7), (3, 7, 4)), ((3, 5, 7), (1, 7, 4)),
              ((1, 5, 7), (2, 7, 4)), ((2, 1, 5, 7), (3, 7, 4)), ((2, 3, 5, 7), (2, 3, 7, 4)),
              ((2, 3, 4, 5, 7), (7, 4))]


@hsettings(60)
@given(shapes=st.sampled_from(BMM_SHAPES), adj_x=st.booleans(), adj_y=st.booleans(), asym=st.booleans(),
       per_channel=st.booleans(), special=specials, seed=seeds)
def test_batch_matmul_hybrid_matches_litert(shapes, adj_x, adj_y, asym, per_channel, special, seed):
    rng = np.random.default_rng(seed)
    (lshape, rshape) = shapes
    if adj_x and len(rshape) > 2 and len(lshape) > 2 and rshape[-3] == 1:
        adj_x = False   # refused (test_batch_matmul_hybrid_refuses_folded_adj_x)
    ls = (*lshape[:-2], lshape[-1], lshape[-2]) if adj_x else lshape
    rs = (*rshape[:-2], rshape[-1], rshape[-2]) if adj_y else rshape
    x = float_data(rng, ls, int(np.prod(ls[:-1])), special)
    w = rng.integers(-127, 128, rs).astype(np.int8)
    ws = weight_scales(rng, rshape[-1], "channel" if per_channel else "tensor")
    got = qk.batch_matmul_hybrid(x, w, ws, adj_x=adj_x, adj_y=adj_y, asymmetric_quantize_inputs=asym)
    (expected,) = run_op(OP.BATCH_MATMUL, [T(ls, np.float32), T(rs, scale=ws, axis=len(rs) - (2 if adj_y else 1),
                                                                  data=w)],
                         [T(got.shape, np.float32)], [x],
                         BatchMatMulOptions(adj_x=adj_x, adj_y=adj_y, asymmetric_quantize_inputs=asym))
    assert_same("BATCH_MATMUL hybrid", got, expected)


def test_batch_matmul_hybrid_keeps_litert_row_scale_indexing():
    # lhs [2, 3, M, K]: LiteRT reads batch (b1, b2)'s row scales at (b1 + b2)·M. Our kernel does
    # too (equal to LiteRT) and so differs from the per-row FULLY_CONNECTED of the same product.
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((2, 3, 4, 5)) * np.array([1, 10, 100], np.float32)[None, :, None, None]).astype(np.float32)
    w = rng.integers(-127, 128, (5, 6)).astype(np.int8)
    ws = np.array([0.01], np.float32)
    got = qk.batch_matmul_hybrid(x, w, ws)
    (expected,) = run_op(OP.BATCH_MATMUL, [T(x.shape, np.float32), T(w.shape, scale=ws, data=w)],
                         [T((2, 3, 4, 6), np.float32)], [x], BatchMatMulOptions())
    assert_same("BATCH_MATMUL hybrid", got, expected)
    per_row = qk.fully_connected_hybrid(x, np.ascontiguousarray(w.T), ws, keep_num_dims=True)
    assert not np.array_equal(per_row, expected)
    assert np.array_equal(per_row[0, 0], expected[0, 0])   # the first batch reads the right scales


def test_batch_matmul_hybrid_refuses_folded_adj_x():
    x = np.ones((2, 5, 3), np.float32)
    w = np.ones((1, 5, 4), np.int8)
    with pytest.raises(qk.QKernelError, match="adj_x"):
        qk.batch_matmul_hybrid(x, w, [0.1], adj_x=True)


# ---------------------------------------------------------------------------- CONV_2D / DEPTHWISE

@st.composite
def conv_geometry(draw):
    h, w = draw(st.integers(3, 9)), draw(st.integers(3, 9))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    strides = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilations = draw(st.sampled_from([(1, 1), (1, 2), (2, 1), (2, 2)]))
    padding = draw(st.sampled_from(["same", "valid"]))
    if padding == "valid" and ((kh - 1) * dilations[0] + 1 > h or (kw - 1) * dilations[1] + 1 > w):
        padding = "same"
    return (h, w), (kh, kw), strides, dilations, padding


def _options(cls, padding, strides, dilations, act, **extra):
    return cls(padding=Padding.SAME if padding == "same" else Padding.VALID, stride_h=strides[0], stride_w=strides[1],
               dilation_h_factor=dilations[0], dilation_w_factor=dilations[1], fused_activation_function=ACT[act],
               **extra)


@hsettings(80)
@given(geo=conv_geometry(), n=st.integers(1, 3), c_in=st.integers(1, 4), c_out=st.integers(1, 6),
       grouped=st.booleans(), scales=st.sampled_from(["tensor", "channel", "equal"]), act=st.sampled_from(list(ACT)),
       special=specials, seed=seeds)
def test_conv2d_hybrid_matches_litert(geo, n, c_in, c_out, grouped, scales, act, special, seed):
    (h, w), kernel, strides, dilations, padding = geo
    groups = 2 if grouped and c_in % 2 == 0 else 1
    c_out *= groups
    if groups > 1 and scales == "tensor":
        scales = "equal"   # a grouped hybrid conv reads one scale per channel (refusal tested below)
    rng = np.random.default_rng(seed)
    x = float_data(rng, (n, c_in, h, w), n, special)
    wt = rng.integers(-127, 128, (c_out, c_in // groups, *kernel)).astype(np.int8)
    ws = weight_scales(rng, c_out, scales)
    bias = rng.standard_normal(c_out).astype(np.float32)
    pads = qk.tflite_pads(padding, (h, w), kernel, strides, dilations)
    got = qk.conv2d_hybrid(x, wt, ws, bias, pads=pads, strides=strides, dilations=dilations, activation=act)
    ohwi = np.ascontiguousarray(wt.transpose(0, 2, 3, 1))
    (expected,) = run_op(OP.CONV_2D, [T(nhwc(x).shape, np.float32), T(ohwi.shape, scale=ws, axis=0, data=ohwi),
                                      T((c_out,), np.float32, data=bias)],
                         [T(nhwc(got).shape, np.float32)], [nhwc(x)],
                         _options(Conv2DOptions, padding, strides, dilations, act))
    assert_same(f"CONV_2D hybrid ({'per-tensor' if scales != 'channel' and groups == 1 else 'per-channel'})",
                got, nchw(expected))


@hsettings(60)
@given(geo=conv_geometry(), n=st.integers(1, 3), c_in=st.integers(1, 4), multiplier=st.integers(1, 3),
       act=st.sampled_from(list(ACT)), with_bias=st.booleans(), special=specials, seed=seeds)
def test_depthwise_conv2d_hybrid_matches_litert(geo, n, c_in, multiplier, act, with_bias, special, seed):
    (h, w), kernel, strides, dilations, padding = geo
    c_out = c_in * multiplier
    rng = np.random.default_rng(seed)
    x = float_data(rng, (n, c_in, h, w), n, special)
    wt = rng.integers(-127, 128, (c_out, 1, *kernel)).astype(np.int8)
    ws = weight_scales(rng, c_out, "channel")
    bias = rng.standard_normal(c_out).astype(np.float32) if with_bias else None
    pads = qk.tflite_pads(padding, (h, w), kernel, strides, dilations)
    got = qk.depthwise_conv2d_hybrid(x, wt, ws, bias, pads=pads, strides=strides, dilations=dilations, activation=act)
    ihwo = np.ascontiguousarray(wt.transpose(1, 2, 3, 0))
    inputs = [T(nhwc(x).shape, np.float32), T(ihwo.shape, scale=ws, axis=3, data=ihwo)]
    if bias is not None:   # no bias: two inputs (an optional -1 slot fails LiteRT's Prepare)
        inputs.append(T((c_out,), np.float32, data=bias))
    (expected,) = run_op(OP.DEPTHWISE_CONV_2D, inputs, [T(nhwc(got).shape, np.float32)], [nhwc(x)],
        _options(DepthwiseConv2DOptions, padding, strides, dilations, act, depth_multiplier=multiplier))
    assert_same("DEPTHWISE_CONV_2D hybrid", got, nchw(expected))


def test_hybrid_convs_refuse_what_litert_cannot_run():
    x = np.ones((1, 4, 5, 5), np.float32)
    with pytest.raises(qk.QKernelError, match="one weight scale per output channel"):
        qk.depthwise_conv2d_hybrid(x, np.ones((4, 1, 3, 3), np.int8), [0.1])
    with pytest.raises(qk.QKernelError, match="grouped"):
        qk.conv2d_hybrid(x, np.ones((4, 2, 3, 3), np.int8), [0.1])


# ---------------------------------------------------------------------------- EMBEDDING_LOOKUP

@hsettings(40)
@given(rows=st.integers(1, 60), shape_tail=st.sampled_from([(8,), (1,), (3, 5)]), per_row=st.booleans(),
       n_ids=st.integers(1, 12), seed=seeds)
def test_embedding_lookup_hybrid_matches_litert(rows, shape_tail, per_row, n_ids, seed):
    rng = np.random.default_rng(seed)
    table = rng.integers(-128, 128, (rows, *shape_tail)).astype(np.int8)
    scales = (10 ** rng.uniform(-5, 1, size=rows if per_row else 1)).astype(np.float32)
    ids = rng.integers(0, rows, n_ids).astype(np.int32)
    got = qk.embedding_lookup_hybrid(ids, table, scales)
    (expected,) = run_op(EMBEDDING_LOOKUP, [T(ids.shape, np.int32), T(table.shape, scale=scales, axis=0, data=table)],
                         [T(got.shape, np.float32)], [ids])
    assert_same("EMBEDDING_LOOKUP hybrid", got, expected)


def test_embedding_lookup_hybrid_refuses_out_of_range_ids_like_litert():
    table = np.ones((4, 3), np.int8)
    ids = np.array([1, 4], np.int32)
    with pytest.raises(qk.QKernelError, match="outside"):
        qk.embedding_lookup_hybrid(ids, table, [0.5])
    with pytest.raises(RuntimeError):
        run_op(EMBEDDING_LOOKUP, [T(ids.shape, np.int32), T(table.shape, scale=0.5, data=table)],
               [T((2, 3), np.float32)], [ids])


def test_gather_has_no_hybrid_form():
    table = np.arange(-6, 6, dtype=np.int8).reshape(4, 3)
    ids = np.array([2, 0], np.int32)
    (out,) = run_op(OP.GATHER, [T(table.shape, scale=0.5, data=table), T(ids.shape, np.int32)],
                    [T((2, 3), np.float32)], [ids], GatherOptions())
    assert out.dtype == np.int8 and np.array_equal(out, table[ids])   # raw int8, not dequantized


@pytest.mark.parametrize("asym", [False, True])
@pytest.mark.parametrize("k", [37, 64])
def test_run_time_rounding_of_ties_follows_litert_by_position(asym, k):
    # Rows full of values that scale to exact halves (and to 0.49999997, one float32 step below a
    # half): LiteRT's SIMD loop over the first K - K % 8 values rounds them by adding ±0.5 in
    # float32 and truncating, its scalar tail half away from zero. An identity weight makes the
    # output the quantized row itself, so every rounding shows.
    rng = np.random.default_rng(k + 2 * asym)
    rows = 400
    x = (rng.standard_normal((rows, k)) * rng.uniform(0.1, 5, (rows, 1))).astype(np.float32)
    lo, hi = np.minimum(0, x.min(1)), np.maximum(0, x.max(1))
    inv = (np.float32(255) / (hi - lo)) if asym else (np.float32(127) / np.abs(x).max(1))
    n = rng.integers(-60, 60, (rows, k))
    ties = ((n + 0.5) / inv[:, None].astype(np.float64)).astype(np.float32)
    x2 = np.where(rng.random((rows, k)) < 0.5, ties, x).astype(np.float32)
    x2[:, 0], x2[:, 1] = x.min(1), x.max(1)     # the rows keep their ranges
    w, ws = np.eye(k, dtype=np.int8), np.ones(k, np.float32)
    got = qk.fully_connected_hybrid(x2, w, ws, None, asymmetric_quantize_inputs=asym)
    assert_same("FULLY_CONNECTED hybrid, rounding of ties", got, _fc_litert(x2, w, ws, None, "none", asym, False))


@pytest.mark.parametrize("scales", ["tensor", "channel"])
def test_conv_run_time_rounding_follows_the_nhwc_row(scales):
    # A convolution quantizes each image as one row in LiteRT's NHWC order, and the rounding of a
    # value depends on its position in that row (test above): tie-heavy images with 5*5*3 = 75
    # values (a tail of 3) tell an NCHW reading from an NHWC one. 1x1 identity-like filters make
    # every rounding visible in the output.
    rng = np.random.default_rng(7 if scales == "tensor" else 8)
    n, c, h, w = 400, 3, 5, 5
    x = (rng.standard_normal((n, c, h, w)) * 2).astype(np.float32)
    flat = x.reshape(n, -1)
    lo, hi = np.minimum(0, flat.min(1)), np.maximum(0, flat.max(1))
    # per-tensor weights: symmetric images (scale r/127); per-channel: asymmetric (width/255)
    inv = (np.float32(127) / np.abs(flat).max(1)) if scales == "tensor" else (np.float32(255) / (hi - lo))
    ties = ((rng.integers(-60, 60, x.shape) + 0.5) / inv[:, None, None, None].astype(np.float64)).astype(np.float32)
    order = np.argsort(flat, axis=1)
    x2 = np.where(rng.random(x.shape) < 0.9, ties, x).astype(np.float32)   # the extremes put back: same ranges
    x2.reshape(n, -1)[np.arange(n), order[:, 0]] = flat[np.arange(n), order[:, 0]]
    x2.reshape(n, -1)[np.arange(n), order[:, -1]] = flat[np.arange(n), order[:, -1]]
    wt = np.zeros((c, c, 1, 1), np.int8)
    wt[np.arange(c), np.arange(c)] = 1
    ws = np.full(c, 0.5, np.float32) if scales == "tensor" else np.array([0.5, 0.25, 1.0], np.float32)
    got = qk.conv2d_hybrid(x2, wt, ws)
    ohwi = np.ascontiguousarray(wt.transpose(0, 2, 3, 1))
    (expected,) = run_op(OP.CONV_2D, [T(nhwc(x2).shape, np.float32), T(ohwi.shape, scale=ws, axis=0, data=ohwi),
                                      T((c,), np.float32, data=np.zeros(c, np.float32))],
                         [T(nhwc(got).shape, np.float32)], [nhwc(x2)], _options(Conv2DOptions, "VALID", (1, 1),
                                                                                (1, 1), "none"))
    assert_same("CONV_2D hybrid, rounding of ties", got, nchw(expected))
