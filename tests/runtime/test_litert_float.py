"""``float_arithmetic="litert"``: quantir's float32 matmul, mean, sum, softmax and GELU round as
LiteRT's reference kernels do. Each one-op .tflite is imported and run by quantir's interpreter and
by LiteRT (BUILTIN_REF); every element must be identical. Each test also checks that numpy's
default kernels differ on the same inputs, so a match is not an accident of easy data."""
from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest

from quantir.backends.tflite.reader import read_model
from quantir.backends.tflite.schema import (BatchMatMulOptions, FullyConnectedOptions, GeluOptions, ReducerOptions,
                                            SoftmaxOptions)
from quantir.errors import QuantirError
from quantir.frontends.tflite import import_tflite
from quantir.runtime import run
from quantir.runtime.interpreter import Interpreter, input_names
from quantir.runtime.kernels import litert_float

from .qkernels.qk_oracle import OP, T, build_op
from quantir.backends.tflite.litert import run_model

pytestmark = pytest.mark.oracle
F32 = np.float32


def _both(code, inputs, outputs, feeds, options=None):
    """(LiteRT's outputs, quantir's with litert arithmetic, quantir's with numpy's) of a one-op model."""
    data = build_op(code, inputs, outputs, options)
    theirs = run_model(data, feeds)
    module = import_tflite(read_model(data, "<one op>")).module
    named = dict(zip(input_names(module.main), feeds))
    ours = list(run(module, named, float_arithmetic="litert").values())
    numpy_ = list(run(module, named).values())
    return theirs, ours, numpy_


def _assert_exact(theirs, ours, numpy_, *, numpy_differs=True):
    for t, o, n in zip(theirs, ours, numpy_):
        assert o.dtype == t.dtype and o.shape == t.shape
        bad = int(np.sum(o.view(np.uint32) != t.view(np.uint32)))
        assert bad == 0, f"{bad} of {t.size} elements differ from LiteRT"
        if numpy_differs:
            assert np.any(n != t), "numpy's kernel already matches: the inputs do not exercise the rounding"


rng = np.random.default_rng(7)


@pytest.mark.parametrize("a_shape, b_shape", [((2, 3, 17, 40), (2, 3, 40, 9)), ((5, 33, 64), (1, 64, 21))])
def test_batch_matmul_sums_k_in_order(a_shape, b_shape):
    a = (rng.standard_normal(a_shape) * 3).astype(F32)
    b = (rng.standard_normal(b_shape) * 3).astype(F32)
    out = np.matmul(a, b).shape
    _assert_exact(*_both(OP.BATCH_MATMUL, [T(a.shape, F32), T(b.shape, F32)], [T(out, F32)], [a, b],
                         BatchMatMulOptions()))


def test_batch_matmul_adjoints():
    a = rng.standard_normal((3, 48, 7)).astype(F32)
    b = rng.standard_normal((3, 5, 48)).astype(F32)
    _assert_exact(*_both(OP.BATCH_MATMUL, [T(a.shape, F32), T(b.shape, F32)], [T((3, 7, 5), F32)], [a, b],
                         BatchMatMulOptions(adj_x=True, adj_y=True)))


def test_fully_connected_with_constant_weights_and_bias():
    x = (rng.standard_normal((13, 384)) * 2).astype(F32)
    w = rng.standard_normal((96, 384)).astype(F32)
    bias = rng.standard_normal(96).astype(F32)
    _assert_exact(*_both(OP.FULLY_CONNECTED, [T(x.shape, F32), T(w.shape, F32, data=w), T(bias.shape, F32, data=bias)],
                         [T((13, 96), F32)], [x], FullyConnectedOptions()))


@pytest.mark.parametrize("code", [OP.MEAN, OP.SUM])
@pytest.mark.parametrize("shape, axes, keep", [((6, 52, 384), [2], True), ((4, 9, 11, 30), [1, 2], False),
                                               ((3, 700, 5), [-2], False)])
def test_mean_and_sum_add_in_row_major_order(code, shape, axes, keep):
    x = (rng.standard_normal(shape) * 5).astype(F32)
    ax = [a % len(shape) for a in axes]
    out = tuple(1 if i in ax else d for i, d in enumerate(shape) if keep or i not in ax)
    _assert_exact(*_both(code, [T(shape, F32), T((len(axes),), np.int32, data=np.array(axes, np.int32))],
                         [T(out, F32)], [x], ReducerOptions(keep_dims=keep)),
                  numpy_differs=ax == [len(shape) - 1])   # numpy sums other axes in order too


def test_softmax_uses_libm_expf_and_a_sequential_sum():
    z = (rng.standard_normal((8, 12, 52, 52)) * 4).astype(F32)
    z[0, 0, 0, :10] = -1e30                      # exp underflows to 0
    _assert_exact(*_both(OP.SOFTMAX, [T(z.shape, F32)], [T(z.shape, F32)], [z], SoftmaxOptions(beta=1.0)))


@pytest.mark.parametrize("approximate", [False, True])
@pytest.mark.parametrize("n", [1, 7, 13, 4099])
def test_gelu_uses_eigens_erfc_or_tanh(n, approximate):
    g = (rng.standard_normal((n, 37)) * 3).astype(F32)
    edges = np.array([0, -0.0, 1e-30, -1e-30, 1.4142135, -1.4142135, 5, -5, 12, -12, 15, -15, 20, -20,
                      -14.5, 3e4, -3e4, np.inf, -np.inf], F32)
    g.flat[:min(g.size, edges.size)] = edges[:g.size]
    _assert_exact(*_both(OP.GELU, [T(g.shape, F32)], [T(g.shape, F32)], [g], GeluOptions(approximate=approximate)),
                  numpy_differs=n > 1)


def test_expf_equals_the_c_librarys_on_every_element():
    """The float64 path with its near-midpoint fallback against libm's expf called per element."""
    fn = ctypes.CDLL(ctypes.util.find_library("m")).expf
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    x = np.concatenate([-(rng.random(300_000) * 104).astype(F32), (rng.random(20_000) * 88).astype(F32),
                        np.array([0, -0.0, -np.inf, np.inf, -200, 100, 88.72, -103.9], F32)])
    with np.errstate(over="ignore"):
        want = np.frompyfunc(fn, 1, 1)(x).astype(F32)
        wide = np.exp(x.astype(np.float64)).astype(F32)
    got = litert_float.expf(x)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.any(wide != want)   # float64 exp rounded once is not libm's: the fallback is needed


def test_the_default_stays_numpy_and_unknown_choices_are_refused():
    data = build_op(OP.SOFTMAX, [T((2, 9), F32)], [T((2, 9), F32)], SoftmaxOptions(beta=1.0))
    module = import_tflite(read_model(data, "<one op>")).module
    assert Interpreter(module).float_arithmetic == "numpy"
    assert Interpreter(module).kernels == Interpreter(module, float_arithmetic="numpy").kernels
    with pytest.raises(QuantirError, match="float_arithmetic must be one of 'numpy', 'litert', got 'eigen'"):
        Interpreter(module, float_arithmetic="eigen")


@pytest.mark.slow
def test_minilm_dynamic_range_tflite_matches_litert_end_to_end(minilm_path, minilm_tokenizer_files, tmp_path):
    """Every tensor of the dynamic-range MiniLM (315, hybrid and float) equal to LiteRT's, 16 sentences."""
    from quantir.datasets import sentences
    from quantir.datasets.wordpiece import WordPiece
    from quantir.verify import verify_tflite

    from ..cli.test_run_show import quantir
    r = quantir("quantize", minilm_path, "--dynamic", "-o", tmp_path / "m.tflite")
    assert r.returncode == 0, r.stderr
    tok = WordPiece.from_file(minilm_tokenizer_files["vocab.txt"])
    feeds = tok(list(sentences.evaluation_sentences()[:16]), max_length=64)
    np.savez(tmp_path / "feeds.npz", **feeds)
    report = verify_tflite(tmp_path / "m.tflite", tmp_path / "feeds.npz", batch=16, isolated=True)
    tensors = report.outputs + report.intermediates
    assert len(tensors) > 300
    assert [t.name for t in tensors if t.differing] == []
    assert [x.label for x in report.ops if not x.output.equal] == []


@pytest.mark.parametrize("code", [OP.EXP, OP.LOG, OP.TANH, OP.LOGISTIC, OP.HARD_SWISH])
def test_exp_log_tanh_logistic_hard_swish_round_as_litert(code):
    x = (rng.standard_normal((64, 300)) * 6).astype(F32)
    x.flat[:8] = [0, -9.5, -8.5, 16.5, 16.7, 40, -90, 89]       # around LOGISTIC's cutoffs, exp's range
    if code == OP.LOG:
        x = np.abs(x) + F32(1e-3)
    _assert_exact(*_both(code, [T(x.shape, F32)], [T(x.shape, F32)], [x]))
