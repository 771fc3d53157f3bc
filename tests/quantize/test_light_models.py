"""Coverage on the ONNX wheel's ``light_*`` architectures (real graphs, constant weights): every
model quantizes, only what LiteRT has no int8 kernel for stays float (LRN, named with its
reason), the spec check is clean, and ONNX Runtime runs the QDQ export.

The weights are constants (ConstantOfShape), so accuracy means nothing here; the activations
of the deep ones grow to 1e10 and more, which is itself a useful stress (huge scales, the
capped softmax multiplier). AlexNet, ZFNet and VGG19 (large classifiers) run in ``make bench``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import quantir as qr  # noqa: E402
from quantir.backends.onnx import to_onnx_quantized  # noqa: E402

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
SLOW = {"bvlc_alexnet", "zfnet512", "vgg19"}
LRN = {"bvlc_alexnet", "inception_v1", "zfnet512"}   # local response normalization: no int8 kernel
NAMES = sorted(p.stem.removeprefix("light_") for p in LIGHT.glob("light_*.onnx"))


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in NAMES])
def test_light_model_quantizes(name):
    path = LIGHT / f"light_{name}.onnx"
    model = onnx.load(str(path))
    inits = {i.name for i in model.graph.initializer}
    inp = next(i for i in model.graph.input if i.name not in inits)
    shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).normal(size=(2, *shape[1:])).astype(np.float32)
    # all int8 (budget off): what is checked is that every op quantizes; the mixed-precision search on two
    # noise samples measured nothing real and took most of the time (inception_v2: 20 s -> 3 s)
    r = qr.quantize(path, {inp.name: x}, qr.Config(progress=False, budget=None))
    left = [(op.name, why) for op, why in r.annotation.float_ops]   # what the summary lists, without its SQNR run
    if name in LRN:
        assert left and all(kind == "nn.lrn" and "no quantizer pattern" in why for kind, why in left), left
    else:
        assert left == [] and r.cast_counts() == (1, 1)
    assert r.spec_report().ok, [str(v) for v in r.spec_report().violations][:3]
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(to_onnx_quantized(r.module).SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    (out,) = sess.run(None, {inp.name: x[:1]})
    assert np.all(np.isfinite(out))
