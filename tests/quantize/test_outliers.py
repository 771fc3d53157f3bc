"""The LayerNorm outlier passes (quantize.outliers): ``fold_layer_norm`` (γ/β into the matmuls that
read the LayerNorm) and ``smooth_layer_norm`` (SmoothQuant channel scaling, α per LayerNorm).

Float semantics against ONNX Runtime on the original model; the applicability rule (post-LN: left
alone, with the reason); one accuracy-direction check with a margin derived below.

Measured on the ViT (models/vit_fmnist.onnx; 500 training images to calibrate, all 10,000 test
images, quantir's interpreter; fp32 85.60%), ``budget=None`` (the default budget promotes nothing
there, same figures): no pass 85.59%, fold 85.36%, smooth 85.44%, both 85.36% (fold wins all 9
LayerNorms); logits SQNR vs fp32 28.52 / 29.04 / 28.77 / 29.04 dB. With train[500:1000]: 85.50% /
85.42% (fold), 28.27 / 28.90 dB. Hence off by default (docs/numerics.md §9). MiniLM: post-LN, not
applicable at any of its 13 LayerNorms, identical integers.
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.api import make_engine
from quantir.ir.dialects import nn
from quantir.quantize import outliers
from quantir.quantize.calibrate import ensure_names
from quantir.quantize.data import as_dataset
from quantir.quantize.expand import expand
from quantir.runtime import run
from quantir.text import print_module

C, N, T = 32, 24, 6
RNG = np.random.default_rng(7)
GAMMA = RNG.uniform(0.5, 2.0, C).astype(np.float32)
BETA = RNG.normal(0, 0.3, C).astype(np.float32)
W1 = RNG.normal(0, 0.2, (C, N)).astype(np.float32)
B1 = RNG.normal(0, 0.1, N).astype(np.float32)
W2 = RNG.normal(0, 0.2, (C, N)).astype(np.float32)
W3 = RNG.normal(0, 0.2, (N, C)).astype(np.float32)   # Gemm's B, trans_b=1
B3 = RNG.normal(0, 0.1, N).astype(np.float32)
# a residual stream: per-channel offsets and spreads
X = (RNG.normal(size=(48, T, C)) * RNG.uniform(0.3, 3.0, C) + RNG.normal(0, 1.0, C)).astype(np.float32)
BOTH = ("fold_layer_norm", "smooth_layer_norm")


def _c(name, value):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def _model(nodes, inits, shape, outputs, opset=17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _layer_norm(written: bool, gamma=GAMMA, beta=BETA) -> tuple[list, list]:
    """``x`` -> ``ln``: the ONNX op, or the form exporters write out."""
    inits = [_c("gamma", gamma), _c("beta", beta)]
    if not written:
        return [helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1, epsilon=1e-5)], inits
    nodes = [helper.make_node("ReduceMean", ["x"], ["mu"], axes=[-1]), helper.make_node("Sub", ["x", "mu"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["d2"]), helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
             helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["d", "sd"], ["xn"]), helper.make_node("Mul", ["xn", "gamma"], ["xg"]),
             helper.make_node("Add", ["xg", "beta"], ["ln"])]
    return nodes, inits + [_c("two", 2.0), _c("eps", 1e-5)]


def pre_ln_block(written: bool = False, gamma=GAMMA) -> onnx.ModelProto:
    """A pre-LN block's inputs: LayerNorm read by a MatMul + bias Add and by a MatMul without bias."""
    nodes, inits = _layer_norm(written, gamma=gamma)
    nodes += [helper.make_node("MatMul", ["ln", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["y1"]),
              helper.make_node("MatMul", ["ln", "w2"], ["y2"])]
    return _model(nodes, inits + [_c("w1", W1), _c("b1", B1), _c("w2", W2)], ["B", T, C], ["y1", "y2"],
                  opset=13 if written else 17)


def gemm_head() -> onnx.ModelProto:
    """A classifier head: LayerNorm on [batch, C] read by Gemm(trans_b=1, alpha=0.5) with a bias."""
    nodes, inits = _layer_norm(False)
    nodes.append(helper.make_node("Gemm", ["ln", "w3", "b3"], ["y"], transB=1, alpha=0.5))
    return _model(nodes, inits + [_c("w3", W3), _c("b3", B3)], ["B", C], ["y"])


def post_ln_block() -> onnx.ModelProto:
    """Post-LN (BERT): the LayerNorm output is read by the FFN and by the residual Add after it."""
    nodes, inits = _layer_norm(False)
    nodes += [helper.make_node("MatMul", ["ln", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["h"]),
              helper.make_node("MatMul", ["h", "w3"], ["m3"]), helper.make_node("Add", ["ln", "m3"], ["y"])]
    return _model(nodes, inits + [_c("w1", W1), _c("b1", B1), _c("w3", W3)], ["B", T, C], ["y"])


def rewritten(model, passes, calibration: np.ndarray):
    """The float function after the expansions and ``passes`` (as quantir.quantize runs them), and the stats."""
    module = qr.load(model)
    fn = module.main
    config = qr.Config(progress=False, outliers=passes)
    ensure_names(fn)
    expand(fn, config)
    ensure_names(fn)
    stats, _ = outliers.run(fn, as_dataset({"x": calibration}), config, make_engine)
    return fn, stats


def _run(fn, x: np.ndarray) -> list[np.ndarray]:
    out = run(fn, {fn.arguments[0].name_hint: x})
    return list(out.values()) if isinstance(out, dict) else list(out)


def _assert_float_close(got: list[np.ndarray], ref: list[np.ndarray]) -> None:
    """Within float32 rounding: the rewritten sums (C products, then the bias) are reassociated
    ((n·γ + β)·W + b against n·(γ·W) + (β·W + b)): a few ulps of the terms' magnitude."""
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=0, atol=64 * np.finfo(np.float32).eps * max(1.0, np.abs(r).max()))


@pytest.mark.parametrize("passes", [("fold_layer_norm",), ("smooth_layer_norm",), BOTH])
@pytest.mark.parametrize("form", ["op", "written"])
def test_pre_ln_block_keeps_its_float_results(passes, form):
    model = pre_ln_block(written=form == "written")
    fn, stats = rewritten(model, passes, X[:32])
    applied = [e for entries in stats.applied.values() for e in entries]
    assert stats.not_applied == {} and len(applied) == 1, stats
    x = X[32:]
    _assert_float_close(_run(fn, x), ort.InferenceSession(model.SerializeToString()).run(None, {"x": x}))
    if passes == ("fold_layer_norm",):   # γ and β are gone: the matmuls read the normalized rows
        readers = [op for op in fn.ops if op.opdef is nn.MATMUL and op.operands[1].op.name == "arith.constant"]
        assert len(readers) == 2
        assert all(op.operands[0].op.opdef is nn.MUL and "normalized" in op.operands[0].name_hint for op in readers)


@pytest.mark.parametrize("passes", [("fold_layer_norm",), BOTH])
def test_gemm_head_keeps_its_float_results(passes):
    model = gemm_head()
    x2 = X.reshape(-1, C)
    fn, stats = rewritten(model, passes, x2[:128])
    assert sum(len(v) for v in stats.applied.values()) == 1, stats
    _assert_float_close(_run(fn, x2[128:]), ort.InferenceSession(model.SerializeToString()).run(None, {"x": x2[128:]}))


@pytest.mark.parametrize("passes", [("fold_layer_norm",), ("smooth_layer_norm",)])
@pytest.mark.parametrize("activations", ["int8", "int16"])
def test_rewritten_block_is_bit_exact_in_litert_and_passes_the_spec_check(passes, activations, tmp_path):
    """The rewritten block is ordinary LiteRT ops (FULLY_CONNECTED with the new weights and biases, a
    MUL for the smoothing scales): the .tflite gives LiteRT's reference kernels' integers exactly.
    One channel's γ is 32x the others', so that smoothing beats the block as it is in int16 too."""
    from quantir.verify import verify_tflite
    gamma = GAMMA.copy()
    gamma[3] *= 32
    r = qr.quantize(pre_ln_block(gamma=gamma), {"x": X}, qr.Config(progress=False, budget=None, outliers=passes,
                                                        activations=activations))
    assert sum(len(v) for v in r.outliers.applied.values()) == 1
    assert r.spec_report().ok
    r.save(tmp_path / "block.tflite")
    report = verify_tflite(tmp_path / "block.tflite", {"x": X[:4]})
    assert all(t.differing == 0 for t in report.outputs + report.intermediates), report


def test_post_ln_block_is_left_as_it_is_and_the_summary_says_why():
    model = post_ln_block()
    on = qr.quantize(model, {"x": X}, qr.Config(progress=False, budget=None, outliers=BOTH))
    off = qr.quantize(model, {"x": X}, qr.Config(progress=False, budget=None, outliers=None))
    s = on.summary_dict()["outliers"]
    assert s["applied"] == {}
    assert s["not_applied"] == {"ln": "not applicable: LayerNorm output feeds a residual Add (y)"}
    assert "LayerNorm output feeds a residual Add" in on.summary()
    assert print_module(on.module) == print_module(off.module)   # nothing fired: the same integers


def test_a_model_without_layernorm_is_untouched():
    """No LayerNorm (a CNN, say): the passes find nothing, read no data, change nothing."""
    model = _model([helper.make_node("MatMul", ["x", "w1"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                   [_c("w1", W1)], ["B", T, C], ["y"])
    on = qr.quantize(model, {"x": X}, qr.Config(progress=False, budget=None, outliers=BOTH))
    off = qr.quantize(model, {"x": X}, qr.Config(progress=False, budget=None, outliers=None))
    assert on.summary_dict()["outliers"]["applied"] == {} and on.summary_dict()["outliers"]["not_applied"] == {}
    assert print_module(on.module) == print_module(off.module)


def test_smoothing_statistics_do_not_use_up_a_generator():
    """The smoothing pass reads the first samples before calibration: a generator, which can be read
    once, still gives calibration every sample."""
    batches = (X[i:i + 8] for i in range(0, 48, 8))
    r = qr.quantize(pre_ln_block(), ({"x": b} for b in batches),
                    qr.Config(progress=False, budget=None, outliers=("smooth_layer_norm",)))
    assert r.statistics.num_samples == 48


def test_unknown_pass_is_an_error():
    with pytest.raises(ValueError, match="unknown pass"):
        qr.Config(outliers=("fold_layernorm",))


def test_minilm_layer_norms_are_post_ln_and_reported_so(minilm_path):
    """all-MiniLM-L6-v2 is post-LN BERT: every LayerNorm in the encoder also feeds a residual Add
    (and the last one the mean pooling), so neither pass applies anywhere."""
    module = qr.load(minilm_path)
    fn = module.main
    ensure_names(fn)
    expand(fn, qr.Config())
    sites, refused = outliers.find_sites(fn, qr.Config())
    assert sites == [] and len(refused) == 13
    residual = [k for k, v in refused.items() if v.startswith("not applicable: LayerNorm output feeds a residual Add")]
    assert len(residual) == 12


def test_vit_keeps_its_float_results():
    """The Fashion-MNIST ViT (pre-LN): all 9 LayerNorms (QKV, FFN inputs, the head) rewritten by each
    pass; the rewritten float function in quantir's interpreter against ONNX Runtime on the original."""
    from pathlib import Path

    from quantir.datasets import fashion_mnist as fm
    if not fm.is_available():
        pytest.skip("Fashion-MNIST is not installed (make data)")
    path = Path(__file__).resolve().parents[2] / "models" / "vit_fmnist.onnx"
    train, _ = fm.load_fashion_mnist("train")
    test, _ = fm.load_fashion_mnist("test")
    calib, x = fm.to_model_input(train[:64]), fm.to_model_input(test[:16])
    ref = ort.InferenceSession(str(path)).run(None, {"input": x})
    for passes in (("fold_layer_norm",), ("smooth_layer_norm",)):
        module = qr.load(path)
        fn = module.main
        config = qr.Config(progress=False, outliers=passes)
        ensure_names(fn)
        expand(fn, config)
        ensure_names(fn)
        stats, _ = outliers.run(fn, as_dataset({"input": calib}), config, make_engine)
        assert sum(len(v) for v in stats.applied.values()) + len(stats.not_applied) == 9
        if passes == ("fold_layer_norm",):
            assert len(stats.applied["fold_layer_norm"]) == 9
        out = run(fn, {"input": x})
        got = list(out.values()) if isinstance(out, dict) else list(out)
        np.testing.assert_allclose(got[0], ref[0], rtol=0, atol=1e-5)


def test_fold_removes_the_error_of_a_gamma_amplified_channel():
    """A LayerNorm whose γ amplifies one channel G = 32 times (the others 1), read by a matmul of
    ±w weights. Without the pass the matmul reads the γ-scaled tensor, one int8 tensor whose step
    Δ = (max - min)/255 is set by that channel; every channel is rounded to Δ, which adds (uniform
    rounding, independent channels) Δ²/12 · Σ_j W_jk² to each output's squared error. With
    ``fold_layer_norm`` the matmul reads the normalized rows (step ~G times finer) and the weights
    carry γ: the only new error is the rounding of diag(γ)·W, E_w = Σ_j E[n_j²]·(δW_jk)², computed
    below from the same symmetric per-column int8 grid the solver uses. The LayerNorm's own integer
    error is the same in both (the same normalized tensor, same range). So

        MSE(without) - MSE(with) >= Δ²/12 · mean_k Σ_j W_jk² - E_w

    counting one rounding of the γ-scaled tensor (there are two: the MUL γ and the ADD β outputs).
    We assert half of that (the uniform-noise model is approximate for channels whose spread is
    ~1 step). Calibration with min/max, so Δ is the full range (no clipping to account for).
    Measured at the time of writing: MSE 0.0288 without, 0.0036 with; the bound (one rounding) 0.0224."""
    g, w = 32.0, 0.1
    rng = np.random.default_rng(1)
    gamma = np.ones(C, np.float32)
    gamma[5] = g
    weights = (rng.choice([-1.0, 1.0], size=(C, N)) * w).astype(np.float32)
    nodes, inits = _layer_norm(False, gamma=gamma, beta=rng.normal(0, 0.1, C))
    nodes += [helper.make_node("MatMul", ["ln", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["y"])]
    model = _model(nodes, inits + [_c("w1", weights), _c("b1", B1)], ["B", T, C], ["y"])
    calib, x = rng.normal(size=(512, T, C)).astype(np.float32), rng.normal(size=(128, T, C)).astype(np.float32)
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]

    def mse(passes):
        r = qr.quantize(model, {"x": calib}, qr.Config(progress=False, budget=None, method="minmax", outliers=passes))
        return r, float(np.mean((_run(r.module.main, x)[0] - ref) ** 2))
    off, mse_off = mse(None)
    _, mse_on = mse(("fold_layer_norm",))
    step = next(p.scale for v, p in off.params.items() if v.name_hint == "ln")   # the tensor the matmul reads
    removed = step ** 2 / 12 * float(np.mean(np.sum(weights.astype(np.float64) ** 2, axis=0)))
    folded = gamma[:, None].astype(np.float64) * weights
    col = np.abs(folded).max(axis=0) / 127
    dw = np.round(folded / col) * col - folded
    n = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    e_w = float(np.mean(np.sum(np.mean(n.reshape(-1, C) ** 2, axis=0)[:, None] * dw ** 2, axis=0)))
    assert mse_off - mse_on >= 0.5 * (removed - e_w), (mse_off, mse_on, removed, e_w)
