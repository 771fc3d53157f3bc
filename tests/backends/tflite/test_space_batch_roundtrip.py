"""SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND, which only .tflite files hold (TFLite's dilated
convolution): a one-op model read into qnn ops runs in quantir's interpreter exactly as LiteRT's
BUILTIN_REF runs it, is written back to an equivalent .tflite, and exports to ONNX (QDQ and
QOperator, as Pad / Reshape / Transpose / Slice) that ONNX Runtime runs to the same integers."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

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
from tests.runtime.qkernels.qk_oracle import T, build_op  # noqa: E402

SCALE, ZP = 0.0625, -7


def _model(to_batch: bool, shape, block, pairs, *, out_zp: int = ZP, const_block: bool = True) -> bytes:
    """A one-op int8 model: input of NHWC (or NHC) ``shape``, constant block_shape and [M, 2] pairs."""
    x = np.zeros(shape, np.int8)
    out = _expected(to_batch, x, block, pairs, ZP).shape
    code, options = ((OP.SPACE_TO_BATCH_ND, SpaceToBatchNDOptions()) if to_batch
                     else (OP.BATCH_TO_SPACE_ND, BatchToSpaceNDOptions()))
    block_t = T((len(block),), np.int32, data=np.asarray(block, np.int32) if const_block else None)
    return build_op(code, [T(shape, np.int8, SCALE, ZP), block_t,
                           T((len(block), 2), np.int32, data=np.asarray(pairs, np.int32))],
                    [T(out, np.int8, SCALE, out_zp)], options)


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
