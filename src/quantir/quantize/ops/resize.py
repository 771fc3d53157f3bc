"""Resizing: LiteRT RESIZE_BILINEAR (integer path) and RESIZE_NEAREST_NEIGHBOR, same scale in and out.

RESIZE_NEAREST_NEIGHBOR copies int16 values as it copies int8 ones (LiteRT's reference kernel is a
template on the type), so it has the 16x8 path (``int16=True``). quantir's RESIZE_BILINEAR kernel
is int8 only: it stays int8 in a 16x8 model, requantized at its boundary.
"""
from __future__ import annotations

import numpy as np

from ...errors import QuantirError
from ...ir import OpResult, Operation, Value
from ...ir.dialects import nn, qnn
from ...ir.dialects.nn_index import resize_plan
from ...numerics import resize_nearest_indices
from ...numerics.resize import onnx_nearest, onnx_source_coords
from ...rewrite import Match, Pat
from ...runtime.kernels import qnn_ops
from ..builtins import BuiltinOperator as OP
from ..lower import Lowerer
from ..regions import QuantizerPattern, Region, rank
from ..rules import ACT, ANY, SAME_AS, OpSpec
from .registry import QuantOp, declare


def _check_resize(m: Match) -> str | None:
    op = m.ops["op"]
    if op.attr("mode") != "linear":
        return f"Resize mode '{op.attr('mode')}' is not quantized (only nearest and linear)"
    if rank(op.operands[0]) != 4:
        return "only 4-D NCHW Resize is quantized"
    if op.attr("coordinate_transformation_mode") not in ("half_pixel", "align_corners", "asymmetric"):
        return f"coordinate_transformation_mode '{op.attr('coordinate_transformation_mode')}' has no LiteRT equivalent"
    shape = tuple(op.operands[0].type.shape)
    if None in shape[2:]:   # LiteRT's in / out is then 1 / f, as ONNX's coordinates take it
        found = resize_factors(shape, *resize_plan(shape, op.opdef.attr_values(op)))
        return found if isinstance(found, str) else None
    return None


# -- Resize nearest ------------------------------------------------------------------------------
# LiteRT's RESIZE_NEAREST_NEIGHBOR picks its source pixels by a float32 formula of its own
# (numerics.resize_nearest_indices); ONNX's by coordinate_transformation_mode and nearest_mode. The
# op is quantized when, at the model's static sizes, a LiteRT mode copies exactly the pixels
# ONNX copies: then the integer op computes the float op's function, bit for bit, on q.

# The LiteRT mode (align_corners, half_pixel_centers) an ONNX mode means, tried first:
#   asymmetric + floor                 floor(o / s)                         (False, False), PyTorch's nearest
#   half_pixel + round_prefer_ceil     floor((o + ½) / s - ½ + ½)           (False, True)
#   align_corners + round_prefer_ceil  floor(o · (in - 1)/(out - 1) + ½)    (True, False)
# with s = out / in. Other modes may still copy the same pixels at given sizes (nearest 2x
# upsampling is the same in most of them), so every LiteRT mode is tried after this one.
_NEAREST_AS_LITERT = {("asymmetric", "floor"): (False, False),
                      ("half_pixel", "round_prefer_ceil"): (False, True),
                      ("pytorch_half_pixel", "round_prefer_ceil"): (False, True),
                      ("align_corners", "round_prefer_ceil"): (True, False)}
# The modes TensorFlow's own op accepts (LiteRT also runs both flags together; no converter writes it)
LITERT_NEAREST_MODES = ((False, False), (False, True), (True, False))


def _litert_mode_name(flags: tuple[bool, bool]) -> str:
    return {(False, False): "default", (False, True): "half_pixel_centers", (True, False): "align_corners"}[flags]


def onnx_nearest_indices(n_in: int, n_out: int, scale: float, cmode: str, nearest_mode: str) -> np.ndarray:
    """The input index ONNX Resize (mode nearest) copies for each output index of one axis, as
    quantir's float kernel (``nn.resize``) computes it; an axis whose size and scale are unchanged
    is left alone there, so it is the identity here."""
    if n_out == n_in and scale == 1.0:
        return np.arange(n_out, dtype=np.int64)
    if cmode == "tf_crop_and_resize":
        raise ValueError("no nearest indices for tf_crop_and_resize without its region of interest")
    x = onnx_source_coords(n_in, n_out, scale, cmode)
    return np.clip(onnx_nearest(x, nearest_mode), 0, n_in - 1).astype(np.int64)


def litert_nearest_mode(op: Operation) -> tuple[bool, bool] | str:
    """The LiteRT ``(align_corners, half_pixel_centers)`` that copies the same pixels as the
    ONNX nearest Resize ``op`` at its static sizes, or why there is none."""
    if rank(op.operands[0]) != 4:
        return "only 4-D NCHW Resize is quantized"
    cmode, nmode = op.attr("coordinate_transformation_mode"), op.attr("nearest_mode")
    if cmode == "tf_crop_and_resize":
        return "Resize with tf_crop_and_resize samples a region of interest; LiteRT has no such mode"
    if op.attr("antialias"):
        return "Resize with antialias has no LiteRT equivalent"
    shape = tuple(op.operands[0].type.shape)
    try:
        out, scales = resize_plan(shape, op.opdef.attr_values(op))
    except QuantirError as e:
        return f"Resize is not understood: {e.message}"
    if any(out[a] != shape[a] or scales[a] != 1.0 for a in (0, 1)):
        return f"only H and W may be resized (input {_dims(shape)}, output {_dims(out)})"
    if any(d is None for d in (*shape[2:], *out[2:])) or None in scales[2:]:
        return dynamic_nearest_mode(shape, out, scales, cmode, nmode)
    if any(not 0 < d <= _MAX_NEAREST_AXIS for d in (*shape[2:], *out[2:])):
        # comparing the index rules costs memory per output row/column; an empty or absurd size is no image
        return (f"Resize nearest from {_dims(shape[2:])} to {_dims(out[2:])}: spatial sizes must be in "
                f"[1, {_MAX_NEAREST_AXIS}] to be compared with LiteRT's index rule")
    axes = [(shape[a], out[a], onnx_nearest_indices(shape[a], out[a], scales[a], cmode, nmode)) for a in (2, 3)]
    preferred = _NEAREST_AS_LITERT.get((cmode, nmode))
    candidates = [preferred] * (preferred is not None) + [f for f in LITERT_NEAREST_MODES if f != preferred]
    for flags in candidates:
        if all(np.array_equal(onnx, resize_nearest_indices(n_in, n_out, align_corners=flags[0],
                                                           half_pixel_centers=flags[1]))
               for n_in, n_out, onnx in axes):
            return flags
    flags = preferred or (False, False)
    for axis, (n_in, n_out, onnx) in zip(("row", "column"), axes):
        litert = resize_nearest_indices(n_in, n_out, align_corners=flags[0], half_pixel_centers=flags[1])
        bad = np.flatnonzero(onnx != litert)
        if bad.size:
            o = int(bad[0])
            return (f"Resize nearest ({cmode}, {nmode}) from {_dims(shape[2:])} to {_dims(out[2:])} copies input "
                    f"{axis} {onnx[o]} to output {axis} {o}, LiteRT RESIZE_NEAREST_NEIGHBOR "
                    f"({_litert_mode_name(flags)}) copies {axis} {litert[o]}; no LiteRT mode copies the same pixels")
    raise AssertionError("unreachable: the preferred mode differs on some axis")


_MAX_NEAREST_AXIS = 1 << 24


def resize_factors(shape, out, scales) -> tuple[int, int] | str:
    """The H, W factors of a Resize whose spatial sizes are dynamic: its scales, when both are
    powers of two (1, 2, 4, ...), else why the integer op cannot follow every size."""
    hw = scales[2:]
    if None in hw:
        return (f"Resize to given sizes from dynamic spatial sizes (input {_dims(shape)}, output {_dims(out)}): "
                "its scale follows the input size; quantized on dynamic sizes only with constant scales")
    if any(not (s >= 1 and float(s).is_integer() and int(s) & (int(s) - 1) == 0) for s in hw):
        # LiteRT forms in / out and o · (in / out) in float32: exact for every size only when
        # out / in is a power of two, so only then is one index rule right at all sizes
        return (f"Resize with scales {tuple(float(s) for s in hw)} on the dynamic spatial sizes of {_dims(shape)}: "
                "only power-of-two integer factors (1, 2, 4, ...) map pixels like LiteRT at every size")
    return int(hw[0]), int(hw[1])


def dynamic_nearest_mode(shape, out, scales, cmode: str, nmode: str) -> tuple[bool, bool] | str:
    """The LiteRT mode that copies ONNX's pixels at *every* size, for a nearest Resize with dynamic
    H, W and power-of-two factors ``f``, or why there is none.

    Every ONNX mode but align_corners (and tf_crop_and_resize, refused before) then takes the
    source coordinate ``o / f + c`` (``out = n · f`` exactly: half_pixel_symmetric's offset is
    0), and LiteRT's default and half_pixel_centers modes ``floor((o + c') / f)``, exactly in
    float32 for sizes below 2**23. Unclamped, both indices grow by one when ``o`` grows by
    ``f``, so their difference has period ``f``, and both clamp to ``[0, n - 1]``. With ``n = 3``
    the middle period ``o in [f, 2f)`` is never clamped (its indices are 0, 1 or 2): equal
    indices there mean equal unclamped indices everywhere, hence equal clamped ones at every
    ``n``; ``n = 1, 2`` are compared too, the cases with no middle period.
    """
    factors = resize_factors(shape, out, scales)
    if isinstance(factors, str):
        return factors
    if cmode == "align_corners" and factors != (1, 1):
        return (f"Resize nearest (align_corners) on the dynamic spatial sizes of {_dims(shape)}: its index rule "
                "depends on the size, so no one LiteRT mode can be proven equal for every size")
    preferred = _NEAREST_AS_LITERT.get((cmode, nmode))
    affine = [f for f in LITERT_NEAREST_MODES if not f[0]]   # align_corners' rule depends on the size
    for flags in [preferred] * (preferred in affine) + [f for f in affine if f != preferred]:
        if all(np.array_equal(onnx_nearest_indices(n, n * f, float(f), cmode, nmode),
                              resize_nearest_indices(n, n * f, align_corners=flags[0], half_pixel_centers=flags[1]))
               for f in factors for n in (1, 2, 3)):
            return flags
    return (f"Resize nearest ({cmode}, {nmode}) by {factors[0]}x{factors[1]} on dynamic spatial sizes: no LiteRT "
            "mode copies the same pixels")


def _dims(shape) -> str:
    return "x".join("?" if d is None else str(d) for d in shape)


def _check_resize_nearest(m: Match) -> str | None:
    found = litert_nearest_mode(m.ops["op"])
    return found if isinstance(found, str) else None


def _resize(nearest: bool) -> Pat:
    """A Resize of one family: nearest, or the others (whose check names why cubic stays float)."""
    def family(v: Value) -> bool:   # ``where`` sees any value, before the op kind is checked
        return isinstance(v, OpResult) and v.op.opdef is nn.RESIZE and (v.op.attr("mode") == "nearest") == nearest
    return Pat.op(nn.RESIZE, Pat.any("x"), name="op", where=family)


def lower_resize(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    mode = op.attr("coordinate_transformation_mode")
    y_t = lw.out_type(r)
    return lw.emit(qnn.RESIZE_BILINEAR.build([lw.input(r.match["x"])], [y_t], **_target(op, y_t),
                                             half_pixel_centers=mode == "half_pixel",
                                             align_corners=mode == "align_corners"), op).result


def _target(op: Operation, y_t) -> dict:
    """``sizes`` when the output's H, W are static, else the run-time ``factors`` (checked first)."""
    if None not in y_t.shape[2:]:
        return {"sizes": y_t.shape[2:]}
    shape = tuple(op.operands[0].type.shape)
    out, scales = resize_plan(shape, op.opdef.attr_values(op))
    return {"factors": resize_factors(shape, out, scales)}


def lower_resize_nearest(lw: Lowerer, r: Region) -> Value:
    op = r.match.ops["op"]
    align_corners, half_pixel_centers = litert_nearest_mode(op)   # the pattern's check found one
    y_t = lw.out_type(r)
    return lw.emit(qnn.RESIZE_NEAREST.build([lw.input(r.match["x"])], [y_t], **_target(op, y_t),
                                            align_corners=align_corners,
                                            half_pixel_centers=half_pixel_centers), op).result


RESIZE_BILINEAR = declare(QuantOp(
    qnn.RESIZE_BILINEAR, OP.RESIZE_BILINEAR, OpSpec((ACT, ANY), SAME_AS(0)),
    patterns=(QuantizerPattern("resize", _resize(nearest=False), lower_resize, check=_check_resize,
                               doc="Resize linear (cubic is refused here)"),),
    kernel=qnn_ops.resize_bilinear, qdq_ops=(nn.RESIZE,)))

RESIZE_NEAREST = declare(QuantOp(
    qnn.RESIZE_NEAREST, OP.RESIZE_NEAREST_NEIGHBOR, OpSpec((ACT, ANY), SAME_AS(0)),
    patterns=(QuantizerPattern("resize_nearest", _resize(nearest=True), lower_resize_nearest,
                               check=_check_resize_nearest,
                               doc="Resize nearest where LiteRT copies the same pixels"),),
    kernel=qnn_ops.resize_nearest, int16=True))   # a QDQ Resize in mode nearest: check_qdq tells the two apart
