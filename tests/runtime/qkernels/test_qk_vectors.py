"""Hand-checked vectors of docs/numerics.md §7 through the kernels, error contracts, and the
inputs on which LiteRT's resolvers (and so our variants) genuinely differ."""
import numpy as np
import pytest

from quantir.numerics import conv_multiplier, multiply_by_quantized_multiplier, quantize_multiplier, round_half_away
from quantir.runtime import qkernels as qk

F = np.float32


def test_add_vector():
    p = qk.prepare_add(F(0.05), F(0.1), F(0.12), 2)
    assert (p.input1_multiplier, p.input1_shift) == (1 << 30, -1)
    assert (p.input2_multiplier, p.input2_shift) == (1 << 30, 0)
    assert (p.output_multiplier, p.output_shift) == (1789569773, -19)
    out = qk.add(np.array([10], np.int8), np.array([-20], np.int8), input1_zero_point=-3, input2_zero_point=5,
                 **p.as_kwargs())
    assert out.tolist() == [-13]


@pytest.mark.parametrize("total, expected", [(514, 11), (515, 11), (-515, -11)])
def test_mean_7x7_vector(total, expected):
    p = qk.prepare_mean(F(0.0173), 0, F(0.0173), 0, count=49)
    assert (p.multiplier, p.shift) == (701219150, -4)
    base, rest = divmod(abs(total), 49)
    x = np.full(49, base, dtype=np.int64)
    x[:rest] += 1
    x = (np.sign(total) * x).astype(np.int8).reshape(1, 1, 7, 7)
    assert qk.mean(x, axes=(2, 3), keepdims=False, **p.as_kwargs()).tolist() == [[expected]]


@pytest.mark.parametrize("values, expected", [([-2, -3], -3), ([2, 3], 3), ([1, 1, 2], 1)])
def test_average_pool_rounding_vectors(values, expected):
    x = np.array(values, np.int8).reshape(1, 1, 1, -1)
    assert qk.average_pool2d(x, kernel=(1, len(values))).ravel().tolist() == [expected]


def test_quantize_table():
    got = qk.quantize([0.25, -0.25, 0.75, -0.75], scale=0.5, zero_point=0)
    assert got.tolist() == [1, -1, 2, -2] and got.dtype == np.int8


@pytest.mark.parametrize("zp_in", [-128, -5, 0, 77, 127])
def test_logistic_and_tanh_at_the_input_zero_point(zp_in):
    x = np.array([zp_in], np.int8)
    assert qk.logistic(x, table=qk.prepare_logistic(F(0.05), zp_in)).tolist() == [0]
    assert qk.tanh(x, table=qk.prepare_tanh(F(0.05), zp_in)).tolist() == [0]


@pytest.mark.parametrize("variant", ["reference", "lut"])
def test_softmax_four_equal_logits(variant):
    p = qk.prepare_softmax(F(0.1), 1.0, variant=variant)
    x = np.full((1, 4), 17, np.int8)
    got = qk.softmax(x, **p.as_kwargs()) if variant == "reference" else qk.softmax_lut(x, **p.as_kwargs())
    assert got.tolist() == [[-64] * 4]


def test_conv_requantize_vectors():
    p = qk.prepare_conv2d(F(0.02), F(0.003), F(0.05), 0)
    assert (int(p.multiplier[0]), int(p.shift[0])) == (1319413916, -9)
    accs = np.array([12345, 1000, -1000, -777], np.int32)
    x = np.zeros((1, 1, 1, 1), np.int8)  # x = zp_in: the accumulator is the bias
    out = [int(qk.conv2d(x, np.ones((1, 1, 1, 1), np.int8), acc[None], input_zero_point=0,
                         **p.as_kwargs()).item()) for acc in accs]
    assert out == [15, 1, -1, -1]
    fc = qk.prepare_fully_connected(F(0.02), F(0.003), F(0.05), 0)
    assert (int(fc.multiplier[0]), int(fc.shift[0])) == (1319413900, -9)  # float32 product rule


def test_accumulator_overflow_is_reported_with_the_op_name():
    k = 70_000  # 70000 · 255 · 127 > 2**31
    x = np.full((1, k), 127, np.int8)
    w = np.full((1, k), 127, np.int8)
    p = qk.prepare_fully_connected(F(0.01), F(0.01), F(1.0), 0)
    with pytest.raises(qk.AccumulatorOverflowError, match="fully_connected: accumulator"):
        qk.fully_connected(x, w, None, input_zero_point=-128, **p.as_kwargs())
    c = qk.prepare_conv2d(F(0.01), F(0.01), F(1.0), 0)
    with pytest.raises(qk.AccumulatorOverflowError, match="conv2d"):
        qk.conv2d(np.full((1, 2, 3, 3), 127, np.int8), np.full((1, 2, 3, 3), 127, np.int8),
                  np.array([2**31 - 1], np.int32), input_zero_point=0, **c.as_kwargs())
    with pytest.raises(qk.AccumulatorOverflowError, match="depthwise_conv2d"):
        qk.depthwise_conv2d(np.full((1, 1, 3, 3), 127, np.int8), np.full((1, 1, 3, 3), 127, np.int8),
                            np.array([2**31 - 1], np.int32), input_zero_point=0, **c.as_kwargs())


def test_kernels_refuse_wrong_dtypes_and_shapes():
    p = qk.prepare_conv2d(F(0.1), F(0.1), F(0.1), 0)
    with pytest.raises(TypeError, match="int8"):
        qk.conv2d(np.zeros((1, 1, 3, 3), np.int32), np.zeros((1, 1, 1, 1), np.int8), None, input_zero_point=0,
                  **p.as_kwargs())
    with pytest.raises(ValueError, match="does not fit"):
        qk.conv2d(np.zeros((1, 1, 2, 2), np.int8), np.zeros((1, 1, 3, 3), np.int8), None, input_zero_point=0,
                  **p.as_kwargs())
    with pytest.raises(qk.QKernelError, match="zero point"):
        qk.prepare_conv2d(F(0.1), F(0.1), F(0.1), 128)


def test_grouped_conv_equals_per_group_convolutions():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (2, 6, 5, 5)).astype(np.int8)
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    b = rng.integers(-1000, 1000, 4).astype(np.int32)
    p = qk.prepare_conv2d(F(0.05), rng.uniform(0.001, 0.01, 4), F(0.3), 3)
    kw = dict(input_zero_point=-2, strides=(2, 1), pads=(1, 0, 1, 2), dilations=(1, 2))
    full = qk.conv2d(x, w, b, groups=2, **kw, **p.as_kwargs())
    for g in range(2):
        sl = slice(2 * g, 2 * g + 2)
        part = qk.conv2d(x[:, 3 * g:3 * g + 3], w[sl], b[sl], **kw, output_zero_point=3, act_min=-128, act_max=127,
                         multiplier=p.multiplier[sl], shift=p.shift[sl])
        np.testing.assert_array_equal(full[:, sl], part)


def test_conv2d_matches_an_int64_loop_reference():
    """Independent check of the im2col/BLAS path: a direct int64 loop over taps."""
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (2, 3, 6, 7)).astype(np.int8)
    w = rng.integers(-128, 128, (4, 3, 3, 2)).astype(np.int8)
    b = rng.integers(-5000, 5000, 4).astype(np.int32)
    zp, stride, dil, pads = 9, (2, 1), (1, 2), (1, 2, 0, 1)
    p = qk.prepare_conv2d(F(0.05), rng.uniform(0.001, 0.01, 4), F(0.2), -4, "relu")
    got = qk.conv2d(x, w, b, input_zero_point=zp, strides=stride, pads=pads, dilations=dil, **p.as_kwargs())
    xp = np.pad(x.astype(np.int64) - zp, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh, ow = got.shape[2:]
    acc = np.zeros((2, 4, oh, ow), np.int64) + b[None, :, None, None]
    for i in range(3):
        for j in range(2):
            patch = xp[:, :, i * dil[0]:i * dil[0] + stride[0] * (oh - 1) + 1:stride[0],
                       j * dil[1]:j * dil[1] + stride[1] * (ow - 1) + 1:stride[1]]
            acc += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.int64))
    m = p.multiplier[None, :, None, None]
    s = p.shift[None, :, None, None]
    expected = np.clip(multiply_by_quantized_multiplier(acc, m, s) + p.output_zero_point, p.act_min, p.act_max)
    np.testing.assert_array_equal(got, expected.astype(np.int8))


# ---------------------------------------------------------------------------
# Variants that differ: find inputs where they do, and check each against its resolver.


def _fc_discrepancy():
    """Scales and accumulators where per-channel fixed point and BUILTIN_REF's float path differ.

    With m = 1/8 exactly, MBQM rounds twice (SRDHM at 1/2, then RDBPOT): acc = 3 gives
    0.375 -> 1 in fixed point but 0 in float (the §7 vector-12 effect).
    """
    s_in, s_w, s_out = F(0.5), F(0.25), F(1.0)
    m = conv_multiplier(s_in, s_w, s_out)
    big_m, shift = quantize_multiplier(m)
    acc = np.arange(-900, 900, dtype=np.int64)
    fixed = multiply_by_quantized_multiplier(acc, big_m, shift)
    floaty = round_half_away(acc.astype(np.float64) * m)
    where = np.flatnonzero(fixed != floaty)
    assert where.size, "no discrepancy found: pick other scales"
    return s_in, s_w, s_out, acc[where[:4]]


@pytest.mark.oracle
def test_fully_connected_float_path_differs_from_fixed_point_and_matches_builtin_ref():
    from .qk_oracle import OP, T, assert_same, run_op

    s_in, s_w, s_out, accs = _fc_discrepancy()
    accs = np.append(accs, 0)  # at least two channels: LiteRT takes >1 scale as per-channel
    c = accs.size
    w_scales = np.full(c, s_w, np.float32)
    p = qk.prepare_fully_connected(s_in, w_scales, s_out, 0, channels=c)
    x = np.zeros((1, 3), np.int8)  # x = zp_in: the accumulator is the bias
    w = np.ones((c, 3), np.int8)
    bias = accs.astype(np.int32)
    fixed = qk.fully_connected(x, w, bias, input_zero_point=0, **p.as_kwargs())
    floaty = qk.fully_connected(x, w, bias, input_zero_point=0, reference_float=True, **p.as_kwargs())
    assert (fixed != floaty).any()
    inputs = [T((1, 3), scale=s_in), T((c, 3), scale=w_scales, data=w),
              T((c,), np.int32, scale=(np.float64(s_in) * w_scales).astype(np.float32), data=bias)]
    outputs = [T((1, c), scale=s_out)]
    assert_same("FULLY_CONNECTED (ref)", floaty, run_op(OP.FULLY_CONNECTED, inputs, outputs, [x])[0])
    assert_same("FULLY_CONNECTED (optimized)", fixed,
                run_op(OP.FULLY_CONNECTED, inputs, outputs, [x], resolver="optimized")[0])


@pytest.mark.oracle
def test_softmax_variants_differ_somewhere_and_each_matches_its_resolver():
    from .qk_oracle import OP, T, assert_same, int8_data, run_op
    from quantir.backends.tflite import SoftmaxOptions

    rng = np.random.default_rng(0)
    rows = []
    for s in (0.013, 0.05, 0.07, 0.11):
        x = int8_data(rng, (3000, 10))
        a = qk.softmax(x, **qk.prepare_softmax(F(s)).as_kwargs())
        b = qk.softmax_lut(x, **qk.prepare_softmax(F(s), variant="lut").as_kwargs())
        for r in np.flatnonzero((a != b).any(axis=1)):
            rows.append((s, x[r:r + 1]))
    assert rows, "the fixed-point and LUT softmax agreed everywhere on this sample"
    for s, x in rows:
        ref, lut = qk.prepare_softmax(F(s)), qk.prepare_softmax(F(s), variant="lut")
        model = ([T(x.shape, scale=s)], [T(x.shape, scale=1 / 256, zero_point=-128)], [x], SoftmaxOptions(beta=1.0))
        assert_same("SOFTMAX (reference)", qk.softmax(x, **ref.as_kwargs()), run_op(OP.SOFTMAX, *model)[0])
        assert_same("SOFTMAX (lut)", qk.softmax_lut(x, **lut.as_kwargs()),
                    run_op(OP.SOFTMAX, *model, resolver="optimized")[0])
