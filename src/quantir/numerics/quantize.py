"""Float <-> integer conversion with given parameters: quantize, dequantize, activation ranges.

``real = scale · (q - zero_point)``. The frameworks differ in how they round and in
what precision they divide, and the difference shows up at ties (numerics.md §2.10, §4.1):

* :func:`quantize_tflite` — LiteRT QUANTIZE: ``clamp(rha(f32(x / f32(s))) + zp)``;
* :func:`quantize_onnx` — ONNX QuantizeLinear and ORT (MLAS): ``saturate(rhe(f32(x / s)) + zp)``;
* :func:`quantize` — any :class:`~quantir.numerics.rounding.Rounding`, float32 or float64
  division, zero point added before or after rounding (MLIR constant fold and
  ``quant.qcast`` lowering are both instances).

So with ``s = 0.5``: ``x = 0.25`` quantizes to 1 in LiteRT and to 0 in ONNX.

Granularity follows ONNX: per-tensor (``axis=None``, scalar scale/zero point), per-axis
(1-D scale of length ``x.shape[axis]``), and blocked (opset 21: ``block_size = B``, the
scale has ``x``'s rank with ``ceil(D/B)`` entries along ``axis``; element ``i`` uses
``scale[i // B]``).

Results of :func:`quantize` are int64 already clamped to ``[qmin, qmax]``; callers cast
to the storage dtype. Values far outside the range (and ±inf) saturate; NaN raises.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from quantir.numerics._validate import as_int64, scalar_or_array
from quantir.numerics.rounding import Rounding, round_half_away, round_to_int

__all__ = [
    "quantize",
    "quantize_tflite",
    "quantize_onnx",
    "dequantize",
    "fused_activation_range",
    "expand_params",
]

DivisionPrecision = Literal["float32", "float64"]
DequantizeScheme = Literal["tflite", "onnx"]
FusedActivation = Literal["none", "relu", "relu6", "relu_n1_to_1"]


def expand_params(param: ArrayLike, shape: tuple[int, ...], axis: int | None,
                  block_size: int | None = None, name: str = "scale") -> np.ndarray:
    """Broadcast a per-tensor / per-axis / blocked parameter to be used against ``shape``.

    Per-tensor returns a 0-d array; per-axis a shape with ``D`` at ``axis`` and 1
    elsewhere; blocked the full ``shape`` (the parameter repeated ``block_size`` times
    along ``axis`` and cut to ``D``). A single value given with an ``axis`` (say a zero
    point of 0 for every channel) broadcasts like a per-tensor one.
    """
    p = np.asarray(param)
    if p.size == 1 and axis is not None:  # one value for every channel/block: plain broadcast
        p = p.reshape(())
        axis = None
        block_size = None
    if axis is None:
        if block_size is not None:
            raise ValueError(f"{name}: block_size needs an axis")
        if p.size != 1:
            raise ValueError(f"{name}: per-tensor parameter must be a scalar, found shape {p.shape}; pass axis=")
        return p.reshape(())
    rank = len(shape)
    if not -rank <= axis < rank:
        raise ValueError(f"{name}: axis {axis} is out of range for a tensor of rank {rank}")
    axis %= rank
    dim = shape[axis]
    if block_size is None:
        if p.ndim != 1 or p.shape[0] != dim:
            raise ValueError(f"{name}: per-axis parameter must be 1-D of length {dim} (axis {axis}), "
                             f"found shape {p.shape}")
        view = [1] * rank
        view[axis] = dim
        return p.reshape(view)
    if block_size <= 0:
        raise ValueError(f"{name}: block_size must be positive, found {block_size}")
    blocks = -(-dim // block_size)
    expected = tuple(blocks if i == axis else d for i, d in enumerate(shape))
    if p.shape != expected:
        raise ValueError(f"{name}: blocked parameter must have shape {expected} "
                         f"(ceil({dim}/{block_size}) along axis {axis}), found {p.shape}")
    return np.take(np.repeat(p, block_size, axis=axis), np.arange(dim), axis=axis)


def _checked_scale(scale: ArrayLike, func: str) -> np.ndarray:
    s = np.asarray(scale)
    if s.dtype.kind != "f":
        s = s.astype(np.float64)
    if s.size and not (np.all(np.isfinite(s)) and np.all(s > 0)):
        bad = s[~(np.isfinite(s) & (s > 0))].ravel()[0]
        raise ValueError(f"{func}: scale must be finite and positive, found {bad}")
    return s


def quantize(
    x: ArrayLike,
    scale: ArrayLike,
    zero_point: ArrayLike,
    qmin: int,
    qmax: int,
    *,
    axis: int | None = None,
    block_size: int | None = None,
    rounding: Rounding | str = Rounding.HALF_EVEN,
    divide_in: DivisionPrecision = "float32",
    zero_point_before_rounding: bool = False,
) -> np.ndarray:
    """Quantize ``x``: ``clamp(round(x / scale) + zero_point, qmin, qmax)`` as int64.

    ``divide_in`` is the precision of ``x / scale`` (``x`` and ``scale`` are converted to
    it first). With ``zero_point_before_rounding`` the zero point is added in that
    precision before rounding, as MLIR's f32->i8 constant fold (``rha(double(x)/s + zp)``,
    ``divide_in="float64"``) and ``quant.qcast`` lowering (``divf``, ``addf``, ``fptosi``:
    ``rounding="toward_zero"``) do; this matters for ties with ``half_away``.

    >>> quantize([0.25, -0.25, 0.75], 0.5, 0, -128, 127)
    array([0, 0, 2])
    """
    func = "quantize"
    if qmin > qmax:
        raise ValueError(f"{func}: empty range [{qmin}, {qmax}]")
    if divide_in not in ("float32", "float64"):
        raise ValueError(f"{func}: divide_in must be 'float32' or 'float64', found {divide_in!r}")
    dtype = np.float32 if divide_in == "float32" else np.float64
    xa = np.asarray(x)
    if xa.dtype.kind not in "fiub":
        raise TypeError(f"{func}: x must be a real array, found dtype {xa.dtype}")
    xa = xa.astype(dtype)
    if np.isnan(xa).any():
        raise ValueError(f"{func}: x contains NaN, which has no quantized value")
    s = expand_params(_checked_scale(scale, func), xa.shape, axis, block_size, "scale").astype(dtype)
    zp = as_int64(expand_params(zero_point, xa.shape, axis, block_size, "zero_point"), func, "zero_point")
    y = xa / s
    if zero_point_before_rounding:
        y = np.clip(y + zp.astype(dtype), qmin - 1, qmax + 1)
        q = round_to_int(y, rounding)
    else:
        # Clipping to one step beyond the range first keeps the result (rounding is
        # monotone and fixes integers) and turns ±inf and huge values into saturation.
        y = np.clip(y, qmin - zp - 1, qmax - zp + 1)
        q = round_to_int(y, rounding) + zp
    return scalar_or_array(np.clip(q, qmin, qmax))


def quantize_tflite(x: ArrayLike, scale: ArrayLike, zero_point: ArrayLike, qmin: int = -128, qmax: int = 127,
                    *, axis: int | None = None) -> np.ndarray:
    """LiteRT float -> int QUANTIZE (``reference/quantize.h``): ``clamp(rha(f32(x / f32(s))) + zp)``.

    Float32 division, ties away from zero, zero point added after rounding. ``axis``
    gives LiteRT's per-channel QUANTIZE. (The optimized kernel divides in double on its
    scalar tail and multiplies by an f32 reciprocal under NEON; these differ only at or
    next to exact ties, §2.10.)

    Divergence, on purpose: when ``x / s`` is beyond int32, LiteRT's float-to-int cast is
    undefined (x86 yields INT32_MIN, so ``x = -1e9`` comes out as ``qmax``); here such
    values saturate to ``qmin``/``qmax``.

    >>> quantize_tflite([0.25, -0.25, 0.75, -0.75], 0.5, 0)
    array([ 1, -1,  2, -2])
    """
    return quantize(x, scale, zero_point, qmin, qmax, axis=axis, rounding=Rounding.HALF_AWAY, divide_in="float32")


def quantize_onnx(x: ArrayLike, scale: ArrayLike, zero_point: ArrayLike, qmin: int, qmax: int,
                  *, axis: int | None = None, block_size: int | None = None) -> np.ndarray:
    """ONNX QuantizeLinear / ORT MLAS: ``saturate(rhe(f32(x / s)) + zp)``.

    Division in float32 (the type of ``y_scale``), ties to even, zero point after
    rounding; per-tensor, per-axis or blocked. Note ONNX's own ``axis`` default is 1;
    here ``axis=None`` means per-tensor and must be given explicitly otherwise.

    >>> quantize_onnx([0.25, -0.25, 0.75, -0.75], 0.5, 0, -128, 127)
    array([ 0,  0,  2, -2])
    """
    return quantize(x, scale, zero_point, qmin, qmax, axis=axis, block_size=block_size,
                    rounding=Rounding.HALF_EVEN, divide_in="float32")


def dequantize(q: ArrayLike, scale: ArrayLike, zero_point: ArrayLike = 0, *, axis: int | None = None,
               block_size: int | None = None, scheme: DequantizeScheme = "tflite") -> np.ndarray:
    """Dequantize to float32: ``scale · (q - zero_point)``.

    * ``tflite`` (default; LiteRT DEQUANTIZE §2.11): ``f32(double(f32 s) · (q - zp))``
      with the difference taken exactly in integers. For ``|q - zp| < 2**24`` this is
      bit-identical to ``f32(s) * f32(q - zp)``.
    * ``onnx`` (ONNX reference DequantizeLinear): ``(f32(q) - f32(zp)) · f32(s)`` in
      float32 throughout; identical to ``tflite`` for 8- and 16-bit inputs, it can differ
      for int32 inputs beyond 2**24.

    >>> dequantize([-64, 0, 127], 0.5, -64)
    array([ 0. , 32. , 95.5], dtype=float32)
    """
    func = "dequantize"
    raw = np.asarray(q)
    narrow = raw.dtype.kind in "iu" and raw.dtype.itemsize <= 2   # 8/16-bit storage, kept as it is
    qa = raw if narrow else as_int64(q, func, "q")
    s = expand_params(_checked_scale(scale, func), qa.shape, axis, block_size, "scale").astype(np.float32)
    zp = as_int64(expand_params(zero_point, qa.shape, axis, block_size, "zero_point"), func, "zero_point")
    if narrow and scheme in ("tflite", "onnx") and (zp.size == 0 or (zp.min() >= -(1 << 16) and zp.max() < (1 << 16))):
        # |q - zp| < 2**24, where both schemes are f32(s) · f32(q - zp), one rounding, with no int64 /
        # float64 copies (a model output's dequantize: 4M elements per budget run)
        out = (qa.astype(np.int32) - zp.astype(np.int32)).astype(np.float32) * s
        return scalar_or_array(np.asarray(out, dtype=np.float32))
    qa = qa.astype(np.int64)
    if scheme == "tflite":
        out = (s.astype(np.float64) * (qa - zp).astype(np.float64)).astype(np.float32)
    elif scheme == "onnx":
        out = (qa.astype(np.float32) - zp.astype(np.float32)) * s
    else:
        raise ValueError(f"{func}: scheme must be 'tflite' or 'onnx', found {scheme!r}")
    return scalar_or_array(np.asarray(out, dtype=np.float32))


def fused_activation_range(activation: FusedActivation, scale: float, zero_point: int,
                           qmin: int = -128, qmax: int = 127) -> tuple[int, int]:
    """LiteRT ``CalculateActivationRangeQuantized`` (``kernel_util.cc``, §1.8).

    With ``Q(v) = zp + rha(f32(v / f32(scale)))``: NONE ``[qmin, qmax]``; RELU
    ``[max(qmin, Q(0)), qmax]``; RELU6 ``[max(qmin, Q(0)), min(qmax, Q(6))]``;
    RELU_N1_TO_1 ``[max(qmin, Q(-1)), min(qmax, Q(1))]``.

    >>> fused_activation_range("relu6", np.float32(6 / 255), -128)
    (-128, 127)
    """
    s = np.float32(scale)
    if not (np.isfinite(s) and s > 0):
        raise ValueError(f"fused_activation_range: scale must be finite and positive, found {scale}")

    def q(v: float) -> int:
        t = float(round_half_away(np.float32(v) / s))
        # LiteRT's Quantize() refuses a bound past int32 (TF_LITE_ENSURE no_integer_overflow_from_quantization)
        if not -2.0 ** 31 <= t <= 2.0 ** 31 - 1:
            raise ValueError(f"fused_activation_range: the {activation} bound {v:g} is {t:.4g} steps of scale "
                             f"{float(s):.6g}, past int32; LiteRT refuses the op (kernel_util.cc Quantize)")
        return int(zero_point) + int(t)

    if activation == "none":
        return qmin, qmax
    if activation == "relu":
        return max(qmin, q(0.0)), qmax
    if activation == "relu6":
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if activation == "relu_n1_to_1":
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    raise ValueError(f"fused_activation_range: activation must be one of none, relu, relu6, relu_n1_to_1; "
                     f"found {activation!r}")
