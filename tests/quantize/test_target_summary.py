"""Config(target=...): the summary's per-layer errors and the integer trace use the target's arithmetic.

The ONNX Runtime figures are recomputed here without quantir's engine: the QDQ export runs in a
plain ONNX Runtime session, which writes its optimized graph; the layers' tensors are read from
that graph (found by the node names the exporter gives) with optimizations off, so they are what
the deployed model computes.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import quantir as qr
from quantir.api import make_engine
from quantir.quantize.naming import integer_name
from quantir.quantize.solver import told_apart
from quantir.report.layers import compare
from quantir.text import print_module

from .tiny_models import cnn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
fashion = pytest.importorskip("quantir.datasets.fashion_mnist")

MODEL = "models/fashion_mnist_cnn.onnx"


@pytest.fixture(scope="module")
def calib():
    if not fashion.is_available():
        pytest.skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")
    images, _ = fashion.load_fashion_mnist("train")
    return fashion.to_model_input(images[:96])


@pytest.fixture(scope="module")
def results(calib):
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / MODEL
    return {t: qr.quantize(str(path), {"input": calib}, qr.Config(progress=False, target=t))
            for t in ("litert", "onnxruntime")}


def _session(model, optimize: bool, save_to=None):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if save_to is not None:
        options.optimized_model_filepath = str(save_to)
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _ort_layers(result, tmp_path, batches=None) -> dict[str, np.ndarray]:
    """Each region output's int8 tensor as ONNX Runtime computes the QDQ export (default: on the
    kept samples), read from the graph a plain session optimized."""
    from quantir.backends.onnx import to_onnx_quantized
    model = to_onnx_quantized(result.module, format="qdq")
    path = tmp_path / "opt.onnx"
    plain = _session(model, True, path)
    optimized = onnx.load(path)
    nodes = {re.sub(r"_token_\d+$", "", n.name): n for n in optimized.graph.node}
    tensors = {}
    for region in result.annotation.regions:
        x = region.output.name_hint
        node = nodes.get(f"{x}/quantize") or nodes.get(region.label)
        if node is not None:
            tensors[x] = node.output[0]
    for t in tensors.values():
        optimized.graph.output.append(onnx.ValueInfoProto(name=t))
    probed = _session(optimized, False)
    out: dict[str, list] = {x: [] for x in tensors}
    for batch in result.statistics.kept if batches is None else batches:
        fetched = dict(zip([o.name for o in probed.get_outputs()], probed.run(None, batch)))
        final = plain.run(None, batch)
        for o, want in zip(model.graph.output, final):   # the probed graph computes what the plain one does
            np.testing.assert_array_equal(fetched[o.name], want)
        for x, t in tensors.items():
            a = fetched[t]
            if a.dtype == np.uint8:   # ONNX Runtime's S8->U8 rewrite: zero point + 128
                a = (a.astype(np.int16) - 128).astype(np.int8)
            want_shape = (a.shape[0], *_value(result, x).type.shape[1:])
            if a.shape != want_shape:   # kept channels-last between NHWC kernels
                a = np.moveaxis(a, -1, 1)
            assert a.shape == want_shape and a.dtype == np.int8
            out[x].append(a)
    return {x: np.concatenate(v) for x, v in out.items()}


def _value(result, name):
    return next(r.output for r in result.annotation.regions if r.output.name_hint == name)


def test_summary_figures_are_onnx_runtimes(results, tmp_path):
    result = results["onnxruntime"]
    got = _ort_layers(result, tmp_path)
    regions = {r.label: r for r in result.annotation.regions}
    layers = result.layer_errors()
    assert len(layers) == len(got) >= 20
    names = [regions[e.name].output.name_hint for e in layers]
    floats = make_engine(result.float_function, names, "ort")
    ref = [floats.run(b) for b in result.statistics.kept]
    bounds = told_apart(result.annotation)   # a conv read by hard-swish is compared from -3 up
    assert bounds
    for e, x in zip(layers, names):
        p = result.params[regions[e.name].output]
        fl = np.concatenate([r[x].reshape(r[x].shape[0], -1) for r in ref])
        fl = np.clip(fl, *bounds[x]) if x in bounds else fl
        q = got[x].reshape(got[x].shape[0], -1).astype(np.int64)
        deq = np.float32(p.scale) * (q - p.zero_point).astype(np.float32)
        deq = np.clip(deq, *bounds[x]).astype(np.float32) if x in bounds else deq   # both sides within it
        assert (e.sqnr_db, e.cosine, e.max_abs_error) == compare(fl, deq), e.name
    # and they are not LiteRT's: the two runtimes round differently somewhere in this network
    litert = {e.name: e.sqnr_db for e in results["litert"].layer_errors()}
    assert any(litert[e.name] != e.sqnr_db for e in layers)


def test_summary_names_the_ops_onnx_runtime_runs_in_float(results):
    result = results["onnxruntime"]
    in_float = result.onnxruntime_float_ops()
    kinds = {k for _, k in in_float}
    assert "HARD_SWISH" in kinds                 # no QLinear kernel: HardSigmoid · x in float
    assert len(in_float) < len(result.annotation.regions)   # most convs fuse into QLinearConv
    text = result.summary()
    assert f"ONNX Runtime runs {len(in_float)} quantized ops of the QDQ export in float" in text
    assert all(f"  {label} ({kind})" in text for label, kind in in_float)
    assert result.summary_dict()["target"] == "onnxruntime"
    assert results["litert"].onnxruntime_float_ops() == []
    assert "ONNX Runtime runs" not in results["litert"].summary()


def test_target_does_not_change_the_module(results):
    """Without empirical bias correction or callbacks the target only changes what is measured."""
    assert print_module(results["litert"].module) == print_module(results["onnxruntime"].module)


def test_default_target_is_litert(calib, results):
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / MODEL
    default = qr.quantize(str(path), {"input": calib}, qr.Config(progress=False))
    assert default.config.target == "litert"
    assert print_module(default.module) == print_module(results["litert"].module)
    assert default.layer_errors() == results["litert"].layer_errors()


def test_unknown_target_is_refused():
    with pytest.raises(ValueError, match="target must be 'litert' or 'onnxruntime'"):
        qr.Config(target="tflite")


def test_callbacks_see_the_targets_integer_values(tmp_path):
    """quantized_output() under each target equals that runtime on the final one-conv model."""
    path = tmp_path / "cnn.onnx"
    cnn(path)
    x = np.random.default_rng(3).normal(size=(64, 1, 8, 8)).astype(np.float32)
    seen = {}
    for target in ("litert", "onnxruntime"):
        def record(info, target=target):
            if info.region.output.name_hint == "r1":
                seen[target] = info.quantized_output()
            return info.output_range()
        r = qr.quantize(str(path), {"x": x}, qr.Config(progress=False, target=target, callback=record))
        p = r.params[_value(r, "r1")]
        batch = np.concatenate([b["x"] for b in r.statistics.kept])
        if target == "litert":
            q = qr.run(r.module, {"x": batch}, intermediates=[integer_name("r1")])[integer_name("r1")]
        else:
            q = _ort_layers(r, tmp_path, [{"x": batch}])["r1"]
        np.testing.assert_array_equal(seen[target], np.float32(p.scale) * (q.astype(np.float32) - p.zero_point))
    assert not np.array_equal(seen["litert"], seen["onnxruntime"])


def test_empirical_bias_correction_follows_the_target(calib):
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / MODEL
    mods = {t: print_module(qr.quantize(str(path), {"input": calib[:32]},
                                        qr.Config(progress=False, target=t, bias_correction="empirical")).module)
            for t in ("litert", "onnxruntime")}
    assert mods["litert"] != mods["onnxruntime"]   # the integer graph's means differ by runtime
