"""SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND, which only .tflite files hold (TFLite's dilated
convolution): a one-op model read into qnn ops runs in quantir's interpreter exactly as LiteRT's
BUILTIN_REF runs it, is written back to an equivalent .tflite, and exports to ONNX (QDQ and
QOperator, as Pad / Reshape / Transpose / Slice) that ONNX Runtime runs to the same integers."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given
from hypothesis import strategies as st

from quantir.backends.onnx import to_onnx_quantized
from quantir.backends.tflite import BuiltinOperator as OP
from quantir.backends.tflite.export import export_tflite
from quantir.backends.tflite.schema import BatchToSpaceNDOptions, SpaceToBatchNDOptions
from quantir.errors import ModelFormatError, UnsupportedOpError
from quantir.frontends.tflite import import_tflite
from quantir.ir.dialects import qnn
from quantir.quantize import spec
from quantir.quantize.views import plain_view
from quantir.runtime import run
from quantir.runtime.qkernels import QKernelError

pytest.importorskip("ai_edge_litert.interpreter")
from quantir.backends.tflite.litert import run_model  # noqa: E402
from tests.runtime.qkernels.qk_oracle import T, build_op, hsettings  # noqa: E402

SCALE, ZP = 0.0625, -7


def _model(to_batch: bool, shape, block, pairs, *, zp: int = ZP, out_zp: int | None = None,
           const_block: bool = True) -> bytes:
    """A one-op int8 model: input of NHWC (or NHC) ``shape``, constant block_shape and [M, 2] pairs."""
    x = np.zeros(shape, np.int8)
    out = _expected(to_batch, x, block, pairs, zp).shape
    code, options = ((OP.SPACE_TO_BATCH_ND, SpaceToBatchNDOptions()) if to_batch
                     else (OP.BATCH_TO_SPACE_ND, BatchToSpaceNDOptions()))
    block_t = T((len(block),), np.int32, data=np.asarray(block, np.int32) if const_block else None)
    return build_op(code, [T(shape, np.int8, SCALE, zp), block_t,
                           T((len(block), 2), np.int32, data=np.asarray(pairs, np.int32))],
                    [T(out, np.int8, SCALE, zp if out_zp is None else out_zp)], options)


def _expected(to_batch, x, block, pairs, pad):
    """The NHWC arithmetic in numpy, only for the output shape and an independent check of values."""
    from quantir.runtime.qkernels import batch_to_space_nd_nhwc, space_to_batch_nd_nhwc
    if to_batch:
        return space_to_batch_nd_nhwc(x, block_shape=block, paddings=pairs, pad_value=pad)
    return batch_to_space_nd_nhwc(x, block_shape=block, crops=pairs)


CASES = {
    "s2b_2x2_padded": (True, (2, 5, 6, 3), [2, 2], [[1, 0], [1, 1]]),
    "s2b_3x2": (True, (1, 6, 4, 2), [3, 2], [[0, 0], [0, 0]]),
    "s2b_1d": (True, (2, 7, 4), [3], [[1, 1]]),
    "b2s_2x2_cropped": (False, (8, 3, 4, 3), [2, 2], [[1, 0], [0, 2]]),
    "b2s_2x3": (False, (6, 2, 2, 5), [2, 3], [[0, 0], [0, 0]]),
    "b2s_1d": (False, (4, 5, 2), [2], [[0, 3]]),
}


def _feed(shape, seed=0):
    return np.random.default_rng(seed).integers(-128, 128, size=shape).astype(np.int8)


@pytest.mark.parametrize("name", sorted(CASES))
def test_import_runs_as_litert_reference(name):
    to_batch, shape, block, pairs = CASES[name]
    model = _model(to_batch, shape, block, pairs)
    imported = import_tflite(model).module
    ops = [op.opdef for op in imported.main.ops]
    assert (qnn.SPACE_TO_BATCH_ND if to_batch else qnn.BATCH_TO_SPACE_ND) in ops
    x = _feed(shape)
    (theirs,) = run_model(model, [x])
    ours = next(iter(run(imported, {"in0": x}).values()))
    np.testing.assert_array_equal(ours, theirs)
    # and the padding is the zero point, not 0: the padded phases hold ZP
    np.testing.assert_array_equal(theirs, _expected(to_batch, x, block, pairs, ZP))


@pytest.mark.parametrize("name", sorted(CASES))
def test_written_back_to_tflite_it_runs_the_same(name):
    to_batch, shape, block, pairs = CASES[name]
    model = _model(to_batch, shape, block, pairs)
    imported = import_tflite(model).module
    x = _feed(shape, 1)
    (want,) = run_model(model, [x])
    if len(shape) == 3:   # one spatial axis: read and run, but only the 4-D form is written
        with pytest.raises(UnsupportedOpError, match="only the 4-D .two spatial axes. form is exported"):
            export_tflite(imported)
        return
    back = export_tflite(imported).to_bytes()
    (got,) = run_model(back, [x])
    np.testing.assert_array_equal(got, want)
    again = import_tflite(back).module
    assert [op.opdef for op in again.main.ops if op.opdef.dialect == "qnn"] == \
        [op.opdef for op in imported.main.ops if op.opdef.dialect == "qnn"]


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_onnx_exports_move_the_same_integers(name, fmt):
    to_batch, shape, block, pairs = CASES[name]
    imported = import_tflite(_model(to_batch, shape, block, pairs)).module
    x = _feed(shape, 2)
    want = next(iter(run(imported, {"in0": x}).values()))
    onnx_model = to_onnx_quantized(imported, format=fmt)
    kinds = {n.op_type for n in onnx_model.graph.node}
    assert "Reshape" in kinds and "Transpose" in kinds
    sess = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x})
    np.testing.assert_array_equal(got, want)


def test_spec_row_and_check_see_a_rescaling_op():
    model = _model(True, (1, 4, 4, 1), [2, 2], [[0, 0], [0, 0]], out_zp=ZP + 1)
    imported = import_tflite(model).module
    op = next(o for o in imported.main.ops if o.opdef is qnn.SPACE_TO_BATCH_ND)
    (violation,) = spec.check_op(plain_view(op, "SPACE_TO_BATCH_ND"))
    assert violation.where == "output 0"
    with pytest.raises(QKernelError, match="space_to_batch_nd: input 0 has scale 0.0625 and zero point -7, the output "
                                           "0.0625 and -6"):
        run(imported, {"in0": _feed((1, 4, 4, 1))})
    with pytest.raises(RuntimeError):   # LiteRT's Prepare refuses it too
        run_model(model, [_feed((1, 4, 4, 1))])


def test_run_time_block_shape_is_refused_with_its_reason():
    with pytest.raises(UnsupportedOpError, match="SPACE_TO_BATCH_ND with its block_shape computed at run time"):
        import_tflite(_model(True, (1, 4, 4, 1), [2, 2], [[0, 0], [0, 0]], const_block=False))


def test_crops_larger_than_the_image_are_a_format_error():
    from quantir.backends.tflite import ModelBuilder, Quantization
    b = ModelBuilder()
    q = Quantization((SCALE,), (ZP,))
    x = b.add_tensor("x", (4, 1, 1, 1), np.int8, q)
    y = b.add_tensor("y", (1, 1, 1, 1), np.int8, q)
    b.add_operator(OP.BATCH_TO_SPACE_ND, [x, b.add_constant("block", np.asarray([2, 2], np.int32)),
                                          b.add_constant("crops", np.asarray([[2, 1], [0, 1]], np.int32))], [y],
                   BatchToSpaceNDOptions())
    b.set_io([x], [y])
    with pytest.raises(ModelFormatError, match=r"crops 2 \+ 1 exceed the spatial size 2 \(axis 2\)"):
        import_tflite(b.finish())


# -- drawn cases, and the dilated convolution TensorFlow writes -----------------------------------------


@st.composite
def _cases(draw):
    to_batch = draw(st.booleans())
    m = draw(st.sampled_from([1, 2]))
    block = [draw(st.integers(1, 3)) for _ in range(m)]
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    if to_batch:
        pairs, spatial = [], []
        for b in block:   # the padded size must be a multiple of the block, the size at least 1
            lo, hi = draw(st.integers(0, 2)), draw(st.integers(0, 2))
            outer = max(draw(st.integers(1, 3)), -(-(lo + hi + 1) // b))
            pairs.append([lo, hi])
            spatial.append(outer * b - lo - hi)
        shape = (n, *spatial, c)
    else:
        spatial = [draw(st.integers(1, 3)) for _ in block]
        pairs = [[draw(st.integers(0, d * b // 2)), draw(st.integers(0, d * b // 2))] for d, b in zip(spatial, block)]
        shape = (n * int(np.prod(block)), *spatial, c)
    return to_batch, shape, block, pairs, draw(st.integers(-128, 127)), draw(st.integers(0, 2**31))


@hsettings(40)
@given(_cases())
def test_drawn_cases_run_as_litert_reference(case):
    to_batch, shape, block, pairs, zp, seed = case
    model = _model(to_batch, shape, block, pairs, zp=zp)
    x = _feed(shape, seed)
    (theirs,) = run_model(model, [x])
    ours = next(iter(run(import_tflite(model).module, {"in0": x}).values()))
    np.testing.assert_array_equal(ours, theirs)


def test_a_dilated_convolution_as_tensorflow_writes_it(tmp_path):
    """SPACE_TO_BATCH_ND -> CONV_2D (VALID) -> BATCH_TO_SPACE_ND: quantir reads and runs it as LiteRT
    does, every intermediate included."""
    from quantir.backends.tflite import ModelBuilder, Quantization
    from quantir.backends.tflite.schema import Conv2DOptions, Padding
    from quantir.verify import verify_tflite
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    q_in, q_out = Quantization((SCALE,), (ZP,)), Quantization((0.25,), (3,))
    x = b.add_tensor("x", (1, 6, 6, 2), np.int8, q_in)
    s2b = b.add_tensor("s2b", (4, 4, 4, 2), np.int8, q_in)   # pads 1 each side, block 2
    b.add_operator(OP.SPACE_TO_BATCH_ND, [x, b.add_constant("block", np.asarray([2, 2], np.int32)),
                                          b.add_constant("pads", np.asarray([[1, 1], [1, 1]], np.int32))], [s2b],
                   SpaceToBatchNDOptions())
    w_scales = (0.02, 0.03, 0.05)
    w = b.add_constant("w", rng.integers(-127, 128, size=(3, 3, 3, 2)).astype(np.int8),
                       Quantization(w_scales, (0, 0, 0), 0))
    bias = b.add_constant("bias", rng.integers(-500, 500, size=3).astype(np.int32),
                          Quantization(tuple(SCALE * s for s in w_scales), (0, 0, 0), 0))
    conv = b.add_tensor("conv", (4, 2, 2, 3), np.int8, q_out)
    b.add_operator(OP.CONV_2D, [s2b, w, bias], [conv], Conv2DOptions(padding=Padding.VALID, stride_w=1, stride_h=1))
    y = b.add_tensor("y", (1, 4, 4, 3), np.int8, q_out)
    b.add_operator(OP.BATCH_TO_SPACE_ND, [conv, b.add_constant("block2", np.asarray([2, 2], np.int32)),
                                          b.add_constant("crops", np.asarray([[0, 0], [0, 0]], np.int32))], [y],
                   BatchToSpaceNDOptions())
    b.set_io([x], [y])
    path = tmp_path / "dilated.tflite"
    path.write_bytes(b.finish())
    report = verify_tflite(path, {"x": np.concatenate([_feed((1, 6, 6, 2), s) for s in range(4)])})
    assert report.ok, report.text()
    ops = [op.opdef for op in import_tflite(path.read_bytes()).module.main.ops if op.opdef.dialect == "qnn"]
    assert ops == [qnn.SPACE_TO_BATCH_ND, qnn.CONV, qnn.BATCH_TO_SPACE_ND]
