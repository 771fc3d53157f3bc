"""Pooling, reductions, SOFTMAX and data-movement kernels against LiteRT."""
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from .qk_oracle import ACTIVATIONS, OP, T, assert_same, hsettings, int8_data, log_uniform, nchw, nhwc, run_op, seeds, \
    zero_points
from quantir.backends.tflite import ActivationFunctionType, ConcatenationOptions, L2NormOptions, Padding, \
    Pool2DOptions, ReducerOptions, ResizeBilinearOptions, SoftmaxOptions
from quantir.runtime import qkernels as qk

pytestmark = pytest.mark.oracle

ACT = {"none": ActivationFunctionType.NONE, "relu": ActivationFunctionType.RELU,
       "relu6": ActivationFunctionType.RELU6, "relu_n1_to_1": ActivationFunctionType.RELU_N1_TO_1}


@hsettings(80)
@given(n=st.integers(1, 2), c=st.integers(1, 4), h=st.integers(1, 9), w=st.integers(1, 9), kh=st.integers(1, 4),
       kw=st.integers(1, 4), stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       padding=st.sampled_from(["same", "valid"]), act=st.sampled_from(ACTIVATIONS), scale=log_uniform(1e-3, 1.0),
       zp=zero_points, seed=seeds, maximum=st.booleans())
def test_pooling_matches_litert(n, c, h, w, kh, kw, stride, padding, act, scale, zp, seed, maximum):
    assume(padding == "same" or (h >= kh and w >= kw))
    x = int8_data(np.random.default_rng(seed), (n, c, h, w))
    pads = qk.tflite_pads(padding, (h, w), (kh, kw), stride)
    if maximum:
        p = qk.prepare_max_pool(scale, zp, scale, zp, act)
        got, code, name = qk.max_pool2d(x, kernel=(kh, kw), strides=stride, pads=pads, **p.as_kwargs()), \
            OP.MAX_POOL_2D, "MAX_POOL_2D"
    else:
        p = qk.prepare_average_pool(scale, zp, scale, zp, act)
        got, code, name = qk.average_pool2d(x, kernel=(kh, kw), strides=stride, pads=pads, **p.as_kwargs()), \
            OP.AVERAGE_POOL_2D, "AVERAGE_POOL_2D"
    options = Pool2DOptions(padding=Padding.SAME if padding == "same" else Padding.VALID, stride_h=stride[0],
                            stride_w=stride[1], filter_height=kh, filter_width=kw, fused_activation_function=ACT[act])
    oh, ow = got.shape[2:]
    (expected,) = run_op(code, [T((n, h, w, c), scale=scale, zero_point=zp)],
                         [T((n, oh, ow, c), scale=scale, zero_point=zp)], [nhwc(x)], options)
    assert_same(name, got, nchw(expected))


def test_pooling_rejects_different_input_and_output_parameters():
    with pytest.raises(qk.QKernelError, match="must be equal"):
        qk.prepare_average_pool(0.1, 0, 0.2, 0)
    with pytest.raises(qk.QKernelError, match="covers no input"):
        qk.average_pool2d(np.zeros((1, 1, 2, 2), np.int8), kernel=(2, 2), pads=(3, 0, 0, 0))


@st.composite
def reduction(draw):
    shape = tuple(draw(st.integers(1, 6)) for _ in range(4))
    axes = draw(st.lists(st.integers(-4, 3), min_size=1, max_size=4))
    return shape, tuple(axes), draw(st.booleans())


def _reduced_shape(shape, axes, keepdims):
    ax = {a % len(shape) for a in axes}
    return tuple(1 if i in ax else d for i, d in enumerate(shape) if keepdims or i not in ax)


def _reduce_model(code, x, axes, keepdims, s_in, z_in, s_out, z_out, resolver="reference"):
    out_shape = _reduced_shape(x.shape, axes, keepdims)
    (expected,) = run_op(code, [T(x.shape, scale=s_in, zero_point=z_in),
                                T((len(axes),), np.int32, data=np.array(axes, np.int32))],
                         [T(out_shape, scale=s_out, zero_point=z_out)], [x], ReducerOptions(keep_dims=keepdims),
                         resolver=resolver)
    return expected


@hsettings(50)
@given(red=reduction(), s_in=log_uniform(1e-3, 1.0), ratio=log_uniform(0.05, 20.0), z_in=zero_points,
       z_out=zero_points, seed=seeds)
def test_mean_reference_matches_litert(red, s_in, ratio, z_in, z_out, seed):
    shape, axes, keepdims = red
    x = int8_data(np.random.default_rng(seed), shape)
    s_out = float(np.float32(s_in * ratio))
    count = int(np.prod([shape[a] for a in {a % 4 for a in axes}]))
    p = qk.prepare_mean(s_in, z_in, s_out, z_out, count=count)
    got = qk.mean(x, axes=axes, keepdims=keepdims, **p.as_kwargs())
    assert_same("MEAN (reference)", got, _reduce_model(OP.MEAN, x, axes, keepdims, s_in, z_in, s_out, z_out))


@hsettings(30)
@given(n=st.integers(1, 3), hw=st.tuples(st.integers(1, 9), st.integers(1, 9)), c=st.integers(1, 20),
       s_in=log_uniform(1e-3, 1.0), ratio=log_uniform(0.05, 20.0), z_in=zero_points, z_out=zero_points, seed=seeds)
def test_mean_global_average_pool_optimized_matches_litert(n, hw, c, s_in, ratio, z_in, z_out, seed):
    """The default resolver's GAP kernel (keep_dims, NHWC axes 1 and 2) is the ``optimized`` variant."""
    x = int8_data(np.random.default_rng(seed), (n, c) + hw)  # NCHW
    s_out = float(np.float32(s_in * ratio))
    p = qk.prepare_mean(s_in, z_in, s_out, z_out, count=hw[0] * hw[1], variant="optimized")
    got = qk.mean(x, axes=(2, 3), keepdims=True, **p.as_kwargs())
    expected = _reduce_model(OP.MEAN, nhwc(x), (1, 2), True, s_in, z_in, s_out, z_out, resolver="optimized")
    assert_same("MEAN (optimized GAP)", got, nchw(expected))


@hsettings(40)
@given(red=reduction(), s_in=log_uniform(1e-3, 1.0), ratio=log_uniform(1.0, 300.0), z_in=zero_points,
       z_out=zero_points, seed=seeds)
def test_sum_matches_litert(red, s_in, ratio, z_in, z_out, seed):
    shape, axes, keepdims = red
    x = int8_data(np.random.default_rng(seed), shape)
    s_out = float(np.float32(s_in * ratio))
    p = qk.prepare_sum(s_in, z_in, s_out, z_out)
    expected = _reduce_model(OP.SUM, x, axes, keepdims, s_in, z_in, s_out, z_out)
    # BUILTIN_REF reads int8 through uint8 pointers (reduce.cc); the builtin_ref variant reproduces it ...
    got = qk.reduce_sum(x, axes=axes, keepdims=keepdims, variant="builtin_ref", **p.as_kwargs())
    assert_same("SUM (builtin_ref)", got, expected)
    # ... and where that bug cannot show (non-negative input, result in [0, 126]), the int8
    # fixed-point formula agrees too.
    # (values scaled down by the reduced count, so that sums land in range whatever the draws)
    count = int(np.prod([shape[a] for a in axes]))
    xp = (np.abs(x.astype(np.int16)).clip(0, 127) // count).astype(np.int8)
    got = qk.reduce_sum(xp, axes=axes, keepdims=keepdims, **p.as_kwargs())
    expected = _reduce_model(OP.SUM, xp, axes, keepdims, s_in, z_in, s_out, z_out)
    ok = (got >= 0) & (got < 127)
    OK_ELEMENTS[0] += int(ok.sum())
    OK_ELEMENTS[1] += got.size
    assert_same("SUM (reference)", got[ok], expected[ok])


OK_ELEMENTS = [0, 0]


def test_sum_reference_comparison_was_not_vacuous():
    # runs after test_sum_matches_litert (file order): a fair share of elements was compared
    if OK_ELEMENTS[1]:
        assert OK_ELEMENTS[0] >= 0.2 * OK_ELEMENTS[1], OK_ELEMENTS


@hsettings(60)
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 16)),
       s_in=st.one_of(log_uniform(1e-3, 2.0), log_uniform(8.0, 1e4)),   # from 16: the capped multiplier
       beta=st.sampled_from([1.0, 0.5, 2.0, 0.7]), z_in=zero_points, seed=seeds, lut=st.booleans())
def test_softmax_matches_litert(shape, s_in, beta, z_in, seed, lut):
    rng = np.random.default_rng(seed)
    x = int8_data(rng, shape)
    x[0, 0, :] = x[0, 0, 0]  # a row of equal logits
    variant, resolver = ("lut", "optimized") if lut else ("reference", "reference")
    p = qk.prepare_softmax(s_in, beta, variant=variant)
    got = qk.softmax_lut(x, **p.as_kwargs()) if lut else qk.softmax(x, **p.as_kwargs())
    (expected,) = run_op(OP.SOFTMAX, [T(shape, scale=s_in, zero_point=z_in)],
                         [T(shape, scale=1 / 256, zero_point=-128)], [x], SoftmaxOptions(beta=beta),
                         resolver=resolver)
    assert_same(f"SOFTMAX ({variant})", got, expected)


@hsettings(15)
@given(rows=st.integers(1, 3), n=st.integers(256, 1500), s_in=log_uniform(1e-2, 0.5), seed=seeds)
def test_softmax_long_rows_match_litert(rows, n, s_in, seed):
    """Rows at least as long as the 256 possible differences q - max(q): the kernel then tabulates
    each row's outputs per difference (a recognizer's 6,625 classes) instead of computing each element."""
    rng = np.random.default_rng(seed)
    x = int8_data(rng, (rows, n))
    p = qk.prepare_softmax(s_in)
    (expected,) = run_op(OP.SOFTMAX, [T((rows, n), scale=s_in, zero_point=0)],
                         [T((rows, n), scale=1 / 256, zero_point=-128)], [x], SoftmaxOptions(beta=1.0),
                         resolver="reference")
    assert_same("SOFTMAX (long rows)", qk.softmax(x, **p.as_kwargs()), expected)


def test_softmax_rejects_what_litert_rejects():
    with pytest.raises(qk.QKernelError, match="1/256"):
        qk.prepare_softmax(0.1, 1.0, 1 / 256, -127)
    with pytest.raises(RuntimeError):
        run_op(OP.SOFTMAX, [T((1, 4), scale=0.1)], [T((1, 4), scale=1 / 256, zero_point=-127)],
               [np.zeros((1, 4), np.int8)], SoftmaxOptions(beta=1.0))


@hsettings(25)
@given(n_inputs=st.integers(1, 4), axis=st.integers(-4, 3), scale=log_uniform(1e-3, 1.0), zp=zero_points, seed=seeds,
       sizes=st.lists(st.integers(1, 4), min_size=4, max_size=4))
def test_concatenation_matches_litert(n_inputs, axis, scale, zp, seed, sizes):
    rng = np.random.default_rng(seed)
    shapes = []
    for _ in range(n_inputs):
        s = list(sizes)
        s[axis % 4] = int(rng.integers(1, 4))
        shapes.append(tuple(s))
    xs = [int8_data(rng, s) for s in shapes]
    qk.prepare_concatenation([(scale, zp)] * n_inputs, scale, zp)
    got = qk.concatenation(xs, axis=axis)
    (expected,) = run_op(OP.CONCATENATION, [T(s, scale=scale, zero_point=zp) for s in shapes],
                         [T(got.shape, scale=scale, zero_point=zp)], xs, ConcatenationOptions(axis=axis))
    assert_same("CONCATENATION", got, expected)


def test_concatenation_rejects_different_parameters_like_litert():
    with pytest.raises(qk.QKernelError, match="cannot rescale"):
        qk.prepare_concatenation([(0.1, 0), (0.2, 0)], 0.1, 0)
    with pytest.raises(RuntimeError):
        run_op(OP.CONCATENATION, [T((1, 2), scale=0.1), T((1, 2), scale=0.2)], [T((1, 4), scale=0.1)],
               [np.zeros((1, 2), np.int8)] * 2, ConcatenationOptions(axis=1))


@pytest.mark.parametrize("with_constant", [False, True], ids=["PAD", "PADV2"])
@hsettings(15)
@given(shape=st.tuples(st.integers(1, 2), st.integers(1, 5), st.integers(1, 5), st.integers(1, 3)),
       pads=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=4, max_size=4),
       scale=log_uniform(1e-3, 1.0), zp=zero_points, value=st.integers(-128, 127), seed=seeds)
def test_pad_matches_litert(with_constant, shape, pads, scale, zp, value, seed):
    constant = value if with_constant else None
    x = int8_data(np.random.default_rng(seed), shape)
    value = qk.prepare_pad(scale, zp, scale, zp, constant=None if constant is None else (constant, scale, zp))
    got = qk.pad(x, pads=pads, value=value)
    inputs = [T(shape, scale=scale, zero_point=zp), T((4, 2), np.int32, data=np.array(pads, np.int32))]
    code = OP.PAD
    if constant is not None:
        code = OP.PADV2
        inputs.append(T((1,), scale=scale, zero_point=zp, data=np.array([constant], np.int8)))
    (expected,) = run_op(code, inputs, [T(got.shape, scale=scale, zero_point=zp)], [x])
    assert_same(code.name, got, expected)


@hsettings(40)
@given(n=st.integers(1, 2), c=st.integers(1, 3), hw_in=st.tuples(st.integers(1, 7), st.integers(1, 7)),
       hw_out=st.tuples(st.integers(1, 12), st.integers(1, 12)),
       mode=st.sampled_from(["default", "align_corners", "half_pixel_centers"]), seed=seeds)
def test_resize_bilinear_matches_litert(n, c, hw_in, hw_out, mode, seed):
    x = int8_data(np.random.default_rng(seed), (n, c) + hw_in)
    align, half = mode == "align_corners", mode == "half_pixel_centers"
    got = qk.resize_bilinear(x, size=hw_out, align_corners=align, half_pixel_centers=half)
    (expected,) = run_op(OP.RESIZE_BILINEAR,
                         [T((n,) + hw_in + (c,), scale=0.1, zero_point=3),
                          T((2,), np.int32, data=np.array(hw_out, np.int32))],
                         [T((n,) + hw_out + (c,), scale=0.1, zero_point=3)], [nhwc(x)],
                         ResizeBilinearOptions(align_corners=align, half_pixel_centers=half),
                         version=3 if half else 2)
    assert_same("RESIZE_BILINEAR", got, nchw(expected))


def test_resize_bilinear_rejects_both_modes():
    with pytest.raises(qk.QKernelError, match="cannot both"):
        qk.prepare_resize_bilinear(True, True)


@hsettings(30)
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 40)), s_in=log_uniform(1e-3, 1.0), z_in=zero_points,
       seed=seeds)
def test_l2_normalization_matches_litert(shape, s_in, z_in, seed):
    x = int8_data(np.random.default_rng(seed), shape)
    x[0] = z_in  # an all-zero row
    qk.prepare_l2_normalization(1 / 128, 0)
    got = qk.l2_normalization(x, input_zero_point=z_in)
    (expected,) = run_op(OP.L2_NORMALIZATION, [T(shape, scale=s_in, zero_point=z_in)],
                         [T(shape, scale=1 / 128, zero_point=0)], [x], L2NormOptions())
    assert_same("L2_NORMALIZATION", got, expected)


def test_l2_normalization_rejects_what_litert_rejects():
    with pytest.raises(qk.QKernelError, match="1/128"):
        qk.prepare_l2_normalization(1 / 128, 1)
    with pytest.raises(RuntimeError):
        run_op(OP.L2_NORMALIZATION, [T((1, 4), scale=0.1)], [T((1, 4), scale=1 / 128, zero_point=1)],
               [np.zeros((1, 4), np.int8)], L2NormOptions())


def test_softmax_rows_beyond_the_reference_kernel():
    """A row whose Q12.19 sum of exponentials reaches 512 (here: n tied logits) is outside LiteRT's
    reference kernel: it aborts the process (checked in a subprocess). 511 ties still match LiteRT;
    from 512 quantir gives -128 and ``reference_softmax_aborts`` flags the row (even past 4096,
    where the sum would wrap an int32)."""
    import subprocess
    import sys
    from quantir.runtime.qkernels.softmax import reference_softmax_aborts
    p = qk.prepare_softmax(0.1, 1.0)
    x = np.full((1, 511), 5, np.int8)
    (expected,) = run_op(OP.SOFTMAX, [T(x.shape, scale=0.1)], [T(x.shape, scale=1 / 256, zero_point=-128)], [x],
                         SoftmaxOptions(beta=1.0))
    assert_same("SOFTMAX (511 ties)", qk.softmax(x, **p.as_kwargs()), expected)
    rows = np.stack([np.full(6000, 5, np.int8), np.full(6000, 5, np.int8), np.arange(6000).astype(np.int8)])
    rows[0, 512:] = -128   # 512 ties, the rest far below
    rows[1, 511:] = -128   # 511 ties
    assert reference_softmax_aborts(rows, **p.as_kwargs()).tolist() == [True, False, False]
    assert np.all(qk.softmax(rows[:1], **p.as_kwargs()) == -128)
    assert np.all(qk.softmax(np.full((1, 6000), 5, np.int8), **p.as_kwargs()) == -128)
    code = ("import sys; sys.path.insert(0, %r); import numpy as np\n"
            "from tests.runtime.qkernels.qk_oracle import OP, T, run_op\n"
            "from quantir.backends.tflite import SoftmaxOptions\n"
            "x = np.full((1, 512), 5, np.int8)\n"
            "run_op(OP.SOFTMAX, [T(x.shape, scale=0.1)], [T(x.shape, scale=1 / 256, zero_point=-128)], [x], "
            "SoftmaxOptions(beta=1.0))\n") % str(Path(__file__).resolve().parents[3])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == -6, proc.stderr.decode()[-500:]   # SIGABRT: gemmlowp's assert in RoundingDivideByPOT
