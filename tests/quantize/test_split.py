"""Split (PicoDet's heads): one Slice per output before calibration, so every chunk is a copy of
the input's stored integers; .tflite bit-exact with LiteRT's reference kernels, QDQ and
QOperator in ONNX Runtime."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import quantir as qr
from quantir.backends.tflite.reader import read_model
from quantir.runtime import run
from quantir.verify import verify_tflite

RNG = np.random.default_rng(1)
C = 8


def _model(tmp_path, split_node, outs, hw=(6, 5), inits=(), opset=13) -> str:
    conv = helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1])
    w = numpy_helper.from_array(RNG.normal(size=(C, C, 1, 1)).astype(np.float32) * 0.4, "w")
    g = helper.make_graph([conv, split_node], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, C, *hw])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)]
                          + [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
                          [w, *inits])
    path = str(tmp_path / "split.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _quantize(path, hw=(6, 5)):
    return qr.quantize(path, {"x": RNG.normal(size=(16, C, *hw)).astype(np.float32)}, qr.Config(progress=False))


def _step(values: np.ndarray) -> float:
    """The quantization step of dequantized int8 values (their smallest nonzero difference)."""
    d = np.diff(np.unique(values))
    return float(d.min())


FORMS = {
    "sizes_input": (lambda: helper.make_node("Split", ["c", "s"], ["y0", "y1", "y2"], axis=1, name="split"),
                    [numpy_helper.from_array(np.array([2, 4, 2], np.int64), "s")], 13, [(0, 2), (2, 6), (6, 8)]),
    "num_outputs": (lambda: helper.make_node("Split", ["c"], ["y0", "y1"], axis=-1, num_outputs=2, name="split"),
                    [], 18, [(0, 3), (3, 5)]),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_split_outputs_are_the_inputs_stored_integers(tmp_path, form):
    make, inits, opset, chunks = FORMS[form]
    outs = [f"y{i}" for i in range(len(chunks))]
    path = _model(tmp_path, make(), outs, inits=inits, opset=opset)
    r = _quantize(path)
    assert not r.annotation.float_ops and r.cast_counts() == (1, 1 + len(chunks))
    assert r.rewrites.hits["split"] == 1
    x = RNG.normal(size=(2, C, 6, 5)).astype(np.float32)
    got = run(r.module, {"x": x})
    axis = 1 if form == "sizes_input" else 3
    for o, (a, b) in zip(outs, chunks):   # same scale and zero point: the very values of the input's chunk
        np.testing.assert_array_equal(got[o], np.take(got["c"], np.arange(a, b), axis=axis))
    # .tflite: LiteRT's reference kernels compute the same integers
    tfl = r.save(tmp_path / "split.tflite")
    model = read_model(tfl.read_bytes(), "split")
    codes = [model.operator_codes[o.opcode_index].name for o in model.subgraphs[0].operators]
    assert codes.count("SPLIT_V") == 1 and "STRIDED_SLICE" not in codes   # the Slices, one SPLIT_V again
    report = verify_tflite(tfl, {"x": x}, intermediates=False)
    assert report.ok, report.text()
    for fmt in ("qdq", "qoperator"):
        theirs = ort.InferenceSession(str(r.save(tmp_path / f"{fmt}.onnx", format=fmt)),
                                      providers=["CPUExecutionProvider"]).run(None, {"x": x})
        c = theirs[0]
        for value, (a, b) in zip(theirs[1:], chunks):   # a copy of the conv's output there too
            np.testing.assert_array_equal(value, np.take(c, np.arange(a, b), axis=axis))
        assert np.abs(c - got["c"]).max() <= 1.01 * _step(got["c"])   # the conv: ONNX Runtime's own rounding


def test_equal_chunks_of_a_dynamic_axis_stay_float_with_the_reason(tmp_path):
    node = helper.make_node("Split", ["c"], ["y0", "y1"], axis=3, num_outputs=2, name="split")
    path = _model(tmp_path, node, ["y0", "y1"], hw=(6, None), opset=18)
    r = _quantize(path)
    assert [op.label for op, _ in r.annotation.float_ops] == ["split"]
    assert ("split (nn.split): split: Split into 2 equal chunks of a dynamic axis 3: the chunk sizes are only known "
            "at run time (give 'split' sizes)") in r.summary()
    x = RNG.normal(size=(1, C, 6, 7)).astype(np.float32)
    got = run(r.module, {"x": x})
    assert got["y0"].shape == (1, C, 6, 4) and got["y1"].shape == (1, C, 6, 3)
