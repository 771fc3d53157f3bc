"""The ``quant`` dialect's types (docs/mlir-quant-spec.md §1-§7), as immutable values.

Construction: all classes take keyword arguments only (several fields share types, so
positional calls would be easy to get wrong)::

    UniformQuantizedType(storage_type=i8, expressed_type=f32, scale=0.05, zero_point=-3)

``is_signed`` defaults from the storage type (``i8``/``si8``/floats: signed, ``ui8``:
unsigned; pass ``is_signed=False`` with a signless ``i8`` for MLIR's ``u8``), and
``storage_min``/``storage_max`` default to the storage type's full range. Every
constructor verifies the type and raises :class:`~quantir.errors.VerifyError` with MLIR's
message (``illegal storage type size: 33``, ``scale ... out of expressed type range ...``);
the keyword factories in :mod:`quantir.types.quant_factories` accept spellings
(``storage="u8"``) for convenience.

Invariants kept (what MLIR's parser and verifier enforce together):

* storage: a signless/signed/unsigned integer of 1..32 bits, or one of the float formats
  LLVM main allows (``f8E5M2``, ``f8E4M3FN``, ``f4E2M1FN``), whose default range is
  ``±max finite``; ``default_min <= storage_min < storage_max <= default_max``;
* scales: ``smallest subnormal <= scale <= largest finite`` of the expressed type,
  compared as doubles (a NaN scale passes, as in MLIR); zero points fit in int64 and are
  *not* checked against the storage range;
* sub-channel scales are held rounded to the expressed type and zero points wrapped to the
  storage width (MLIR stores them as dense attributes of those element types).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import VerifyError
from .builtin import FloatType, IntegerType, NoneType, Type
from .floatfmt import format_apfloat, format_mlir_float, format_mlir_float_e
from .floatsem import fval_from_double, round_to, to_double

__all__ = [
    "QuantizedType", "UniformQuantizedType", "UniformQuantizedPerAxisType",
    "UniformQuantizedSubChannelType", "AnyQuantizedType", "CalibratedQuantizedType",
    "MAX_STORAGE_BITS", "FLOAT_STORAGE_TYPES", "scale_range_message",
]

MAX_STORAGE_BITS = 32
FLOAT_STORAGE_TYPES = ("f8E5M2", "f8E4M3FN", "f4E2M1FN")  # LLVM main's QuantizationInterface
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def _check_int(v, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise VerifyError(f"expected an integer, got {v!r}")
    v = int(v)
    if not lo <= v <= hi:
        raise VerifyError("integer value too large")
    return v


def _check_ints(values) -> tuple[int, ...]:
    """``_check_int`` of each value, in order; a sequence of in-range Python ints is checked as
    a whole (per-channel types carry one zero point per channel)."""
    values = tuple(values)
    if values and set(map(type, values)) == {int} and INT64_MIN <= min(values) and max(values) <= INT64_MAX:
        return values
    return tuple(_check_int(v) for v in values)


def scale_range_message(scale: float, expressed: FloatType) -> str | None:
    """MLIR's ``isScaleInExpressedTypeRange``: None if ``scale`` is accepted."""
    lo, hi = expressed.min_denormal, expressed.max_finite
    if scale < lo or scale > hi:
        return (f"scale {format_mlir_float_e(scale)} out of expressed type range "
                f"[{format_mlir_float_e(lo)}, {format_mlir_float_e(hi)}]")
    return None


_qdataclass = dataclass(frozen=True, eq=False, repr=False, kw_only=True)


@_qdataclass
class QuantizedType(Type):
    """Fields shared by all quantized types (AnyQuantizedType has no scale)."""

    storage_type: Type = None  # type: ignore[assignment]  # required except for calibrated
    expressed_type: FloatType | None = None
    is_signed: bool | None = None
    storage_min: int | None = None
    storage_max: int | None = None

    def __post_init__(self):
        st = self.storage_type
        if st is None:
            raise VerifyError(f"{type(self).__name__} needs a storage_type")
        if self.is_signed is None:
            signed = not (isinstance(st, IntegerType) and st.signedness == "unsigned")
            object.__setattr__(self, "is_signed", signed)
        else:
            object.__setattr__(self, "is_signed", bool(self.is_signed))
        msg = self._verify_storage_kind()
        if msg:
            raise VerifyError(msg)
        if self.storage_min is None:
            object.__setattr__(self, "storage_min", self.default_storage_min)
        if self.storage_max is None:
            object.__setattr__(self, "storage_max", self.default_storage_max)
        object.__setattr__(self, "storage_min", _check_int(self.storage_min))
        object.__setattr__(self, "storage_max", _check_int(self.storage_max))
        msg = self._verify_storage_range() or self._verify()
        if msg:
            raise VerifyError(msg)

    # -- verification -------------------------------------------------------------------
    def _verify_storage_kind(self) -> str | None:
        st = self.storage_type
        if isinstance(st, FloatType):
            if st.name not in FLOAT_STORAGE_TYPES:
                return "illegal storage type prefix"
            if not self.is_signed:
                return f"float storage type {st} must be signed"
            return None
        if not isinstance(st, IntegerType):
            return "illegal storage type prefix"
        if st.width == 0 or st.width > MAX_STORAGE_BITS:
            return f"illegal storage type size: {st.width}"
        if st.signedness == "signed" and not self.is_signed:
            return f"storage type {st} is signed; is_signed must be True"
        if st.signedness == "unsigned" and self.is_signed:
            return f"storage type {st} is unsigned; is_signed must be False"
        return None

    def _verify_storage_range(self) -> str | None:
        lo, hi = self.storage_min, self.storage_max
        if lo < self.default_storage_min:
            return f"illegal storage type minimum: {lo}"
        if hi > self.default_storage_max:
            return f"illegal storage type maximum: {hi}"
        if hi - lo <= 0:
            return f"illegal storage min and storage max: ({lo}:{hi})"
        return None

    def _verify(self) -> str | None:
        et = self.expressed_type
        if et is not None and not isinstance(et, FloatType):
            return "invalid kind of type specified"
        return None

    # -- storage queries ----------------------------------------------------------------
    @property
    def storage_width(self) -> int:
        st = self.storage_type
        return st.width if isinstance(st, IntegerType) else st.bitwidth  # type: ignore[union-attr]

    @property
    def default_storage_min(self) -> int:
        if isinstance(self.storage_type, FloatType):
            return -int(self.storage_type.exact_max_finite)
        return -(1 << (self.storage_width - 1)) if self.is_signed else 0

    @property
    def default_storage_max(self) -> int:
        if isinstance(self.storage_type, FloatType):
            return int(self.storage_type.exact_max_finite)
        w = self.storage_width
        return (1 << (w - 1)) - 1 if self.is_signed else (1 << w) - 1

    @property
    def has_default_storage_range(self) -> bool:
        return (self.storage_min, self.storage_max) == (self.default_storage_min,
                                                        self.default_storage_max)

    @property
    def storage_numpy_dtype(self):
        """numpy integer dtype holding the stored values (next wider for odd widths).

        None for float storage (numpy has no f8/f4 dtypes).
        """
        if isinstance(self.storage_type, FloatType):
            return None
        w = self.storage_width
        bits = 8 if w <= 8 else 16 if w <= 16 else 32 if w <= 32 else 64
        return np.dtype(f"{'int' if self.is_signed else 'uint'}{bits}")

    @property
    def storage_spelling(self) -> str:
        """``i8``/``u8`` for signless storage, ``si8``/``ui8``/``f8E4M3FN`` as written."""
        st = self.storage_type
        if isinstance(st, IntegerType) and st.is_signless:
            return ("i" if self.is_signed else "u") + str(st.width)
        return str(st)

    def _storage_str(self) -> str:
        if self.has_default_storage_range:
            return self.storage_spelling
        return f"{self.storage_spelling}<{self.storage_min}:{self.storage_max}>"


def _check_scale(scale, expressed: FloatType) -> float:
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (int, float, np.floating, np.integer)):
        raise VerifyError(f"expected a float scale, got {scale!r}")
    scale = float(scale)
    msg = scale_range_message(scale, expressed)
    if msg:
        raise VerifyError(msg)
    return scale


def _check_scales(scales, expressed: FloatType) -> tuple[float, ...]:
    """``_check_scale`` of each scale, in order (the first bad one raises); a sequence of
    in-range Python floats is checked as a whole (per-channel types carry one scale per channel).

    NaN passes (as in MLIR) and cannot hide a bad scale from ``min``/``max``: a NaN that
    becomes the running minimum or maximum fails the comparison, and the slow path decides.
    """
    scales = tuple(scales)
    if scales and set(map(type, scales)) == {float} and \
            expressed.min_denormal <= min(scales) and max(scales) <= expressed.max_finite:
        return scales
    return tuple(_check_scale(s, expressed) for s in scales)


def _quant_params_str(scale: float, zp: int) -> str:
    s = format_mlir_float(scale)
    return f"{s}:{zp}" if zp else s


@_qdataclass
class AnyQuantizedType(QuantizedType):
    """``!quant.any<i8:f32>``: storage (and optionally expressed) type, no parameters."""

    def __str__(self) -> str:
        et = f":{self.expressed_type}" if self.expressed_type is not None else ""
        return f"!quant.any<{self._storage_str()}{et}>"


class _UniformBase(QuantizedType):
    def _verify(self) -> str | None:
        et = self.expressed_type
        if et is None:
            return "uniform quantization requires expressed type"
        if not isinstance(et, FloatType):
            return "invalid kind of type specified"
        return None


@_qdataclass
class UniformQuantizedType(_UniformBase):
    """``!quant.uniform<i8:f32, 5.000000e-02:-3>``: one scale and zero point.

    real = scale * (stored - zero_point).
    """

    scale: float
    zero_point: int = 0

    def _verify(self) -> str | None:
        msg = super()._verify()
        if msg:
            return msg
        object.__setattr__(self, "scale", _check_scale(self.scale, self.expressed_type))
        object.__setattr__(self, "zero_point", _check_int(self.zero_point))
        return None

    def __str__(self) -> str:
        return (f"!quant.uniform<{self._storage_str()}:{self.expressed_type}, "
                f"{_quant_params_str(self.scale, self.zero_point)}>")


@_qdataclass
class UniformQuantizedPerAxisType(_UniformBase):
    """``!quant.uniform<u8:f32:1, {5.000000e-01:10,2.500000e-01}>``: one (scale, zero
    point) per index along ``quantized_dimension`` (no upper bound at type level)."""

    scales: tuple[float, ...]
    zero_points: tuple[int, ...] | None = None
    quantized_dimension: int

    def _verify(self) -> str | None:
        msg = super()._verify()
        if msg:
            return msg
        scales = tuple(_flat_list(self.scales))
        zps = (0,) * len(scales) if self.zero_points is None else tuple(_flat_list(self.zero_points))
        if not scales:
            return "per-axis quantization needs at least one scale"
        if len(scales) != len(zps):
            return f"illegal number of scales and zeroPoints: {len(scales)}, {len(zps)}"
        object.__setattr__(self, "scales", _check_scales(scales, self.expressed_type))
        object.__setattr__(self, "zero_points", _check_ints(zps))
        axis = _check_int(self.quantized_dimension, INT32_MIN, INT32_MAX)
        object.__setattr__(self, "quantized_dimension", axis)
        if axis < 0:
            return f"illegal quantized dimension: {axis}"
        return None

    @property
    def num_channels(self) -> int:
        return len(self.scales)

    def scales_array(self) -> np.ndarray:
        return np.array(self.scales, dtype=np.float64)

    def zero_points_array(self) -> np.ndarray:
        return np.array(self.zero_points, dtype=np.int64)

    def __str__(self) -> str:
        params = ",".join(_quant_params_str(s, z) for s, z in zip(self.scales, self.zero_points))
        return (f"!quant.uniform<{self._storage_str()}:{self.expressed_type}:"
                f"{self.quantized_dimension}, {{{params}}}>")


def _flat_list(x) -> list:
    if isinstance(x, np.ndarray):
        return x.reshape(-1).tolist()
    if not isinstance(x, (list, tuple)):
        raise VerifyError(f"expected a sequence of per-channel values, got {x!r}")
    return list(x)


def _nested_to_flat(x, what: str) -> tuple[tuple, tuple[int, ...]]:
    """Flatten a nested sequence or ndarray, checking that it is rectangular."""
    if isinstance(x, np.ndarray):
        if x.ndim == 0:
            raise VerifyError(f"sub-channel {what} must have rank >= 1")
        return tuple(x.reshape(-1).tolist()), tuple(int(d) for d in x.shape)

    def walk(node):
        if isinstance(node, (list, tuple)):
            parts = [walk(e) for e in node]
            if not parts:
                raise VerifyError(f"sub-channel {what} lists must not be empty")
            shapes = {p[1] for p in parts}
            if len(shapes) != 1:
                raise VerifyError("tensor literal is invalid; ranks are not consistent between elements")
            return [v for p in parts for v in p[0]], (len(parts),) + parts[0][1]
        return [node], ()

    flat, shape = walk(x)
    if not shape:
        raise VerifyError(f"sub-channel {what} must have rank >= 1")
    return tuple(flat), shape


def _wrap_signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _f32_scales(flat: tuple, et: FloatType) -> list | None:
    """The per-element loop's result, vectorized, for Python floats in f32's range with an f32
    expressed type (numpy's float32 cast rounds to nearest even, as ``round_to`` does); None
    otherwise, and the loop decides. Block-wise weights carry 10^5 scales and more."""
    if et.name != "f32" or not flat or set(map(type, flat)) != {float}:
        return None
    a = np.array(flat, dtype=np.float64)
    if np.any((a < et.min_denormal) | (a > et.max_finite)):
        return None   # the loop raises the first bad scale's message
    return a.astype(np.float32).astype(np.float64).tolist()


def _wrapped_ints(flat: tuple, bits: int) -> tuple | None:
    """``_wrap_signed`` of Python ints that fit in int32, vectorized; None otherwise."""
    if not flat or set(map(type, flat)) != {int} or min(flat) < INT32_MIN or max(flat) > INT32_MAX:
        return None
    a = np.array(flat, dtype=np.int64) & ((1 << bits) - 1)
    return tuple((a - ((a >> (bits - 1)) << bits)).tolist())


@_qdataclass
class UniformQuantizedSubChannelType(_UniformBase):
    """Block-wise quantization: ``!quant.uniform<i8:f32:{0:1, 1:2}, {{2.0:10, 3.0:20}}>``.

    ``scales``/``zero_points`` may be given nested (lists, tuples) or as numpy arrays; they
    are held flat with their common ``shape``. ``block_sizes`` is a tuple of
    ``(dimension, block_size)`` pairs (order kept, duplicates allowed as in MLIR).
    Scales are rounded to the expressed type; zero points wrap to the storage width and
    read back signed (``u8`` 255 -> -1), as MLIR's dense attributes do.
    """

    scales: tuple
    zero_points: tuple | None = None
    block_sizes: tuple[tuple[int, int], ...]
    shape: tuple[int, ...] | None = None

    def _verify(self) -> str | None:
        msg = super()._verify()
        if msg:
            return msg
        et = self.expressed_type
        if self.shape is not None and all(not isinstance(s, (list, tuple, np.ndarray)) for s in self.scales):
            flat, shape = tuple(self.scales), tuple(int(d) for d in self.shape)
            if math.prod(shape) != len(flat) or not shape:
                return "sub-channel scales do not match their shape"
        else:
            flat, shape = _nested_to_flat(self.scales, "scales")
        if self.zero_points is None:
            zflat, zshape = (0,) * len(flat), shape
        elif self.shape is not None and all(not isinstance(z, (list, tuple, np.ndarray)) for z in self.zero_points):
            zflat, zshape = tuple(self.zero_points), shape
        else:
            zflat, zshape = _nested_to_flat(self.zero_points, "zero points")
        if zshape != shape or len(zflat) != len(flat):
            return (f"shape of scales and zeroPoints ({'x'.join(map(str, shape))} vs "
                    f"{'x'.join(map(str, zshape))}) does not match")
        rounded = _f32_scales(flat, et)
        if rounded is None:
            rounded = []
            for s in flat:
                s = _check_scale(s, et)
                r = round_to(et.semantics, fval_from_double(s))
                rounded.append(s if math.isnan(s) else to_double(r))
        zps = _wrapped_ints(zflat, self.storage_width)
        if zps is None:
            zps = tuple(_wrap_signed(_check_int(z), self.storage_width) for z in zflat)
        pairs = self.block_sizes.items() if isinstance(self.block_sizes, dict) else self.block_sizes
        blocks = []
        for pair in pairs:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                return f"block_sizes must be (dimension, block size) pairs, got {pair!r}"
            blocks.append((_check_int(pair[0], INT32_MIN, INT32_MAX), _check_int(pair[1])))
        object.__setattr__(self, "scales", tuple(rounded))
        object.__setattr__(self, "zero_points", zps)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "block_sizes", tuple(blocks))
        for d, _ in blocks:
            if d < 0:
                return f"illegal quantized dimension: {d}"
        for _, b in blocks:
            if b <= 0:
                return f"illegal block size: {b}"
        return None

    @property
    def quantized_dimensions(self) -> tuple[int, ...]:
        return tuple(d for d, _ in self.block_sizes)

    def scales_array(self) -> np.ndarray:
        return np.array(self.scales, dtype=np.float64).reshape(self.shape)

    def zero_points_array(self) -> np.ndarray:
        return np.array(self.zero_points, dtype=np.int64).reshape(self.shape)

    def __str__(self) -> str:
        blocks = ", ".join(f"{d}:{b}" for d, b in self.block_sizes)
        return (f"!quant.uniform<{self._storage_str()}:{self.expressed_type}:{{{blocks}}}, "
                f"{self._dense_params_str()}>")

    def _dense_params_str(self) -> str:
        """printDenseQuantizationParameters: nested braces, ``, `` between elements."""
        sem = self.expressed_type.semantics
        shape, rank = self.shape, len(self.shape)
        counter = [0] * rank
        open_brackets = 0
        out = []
        for idx, (s, z) in enumerate(zip(self.scales, self.zero_points)):
            if idx:
                out.append(", ")
            out.append("{" * (rank - open_brackets))
            open_brackets = rank
            out.append(format_apfloat(round_to(sem, fval_from_double(s)), sem))
            if z:
                out.append(f":{z}")
            counter[rank - 1] += 1
            for i in range(rank - 1, 0, -1):
                if counter[i] >= shape[i]:
                    counter[i] = 0
                    counter[i - 1] += 1
                    open_brackets -= 1
                    out.append("}")
        out.append("}" * open_brackets)
        return "".join(out)


@_qdataclass
class CalibratedQuantizedType(QuantizedType):
    """``!quant.calibrated<f32<-1.000000e+00:1.000000e+00>>``: an observed range.

    As in MLIR it is a QuantizedType without storage: ``storage_type`` is ``none`` and the
    storage range is (0, 0).
    """

    min: float
    max: float

    def __post_init__(self):
        object.__setattr__(self, "storage_type", NoneType())
        object.__setattr__(self, "is_signed", False)
        object.__setattr__(self, "storage_min", 0)
        object.__setattr__(self, "storage_max", 0)
        if not isinstance(self.expressed_type, FloatType):
            raise VerifyError("invalid kind of type specified")
        lo, hi = float(self.min), float(self.max)
        object.__setattr__(self, "min", lo)
        object.__setattr__(self, "max", hi)
        if hi <= lo:
            raise VerifyError(f"illegal min and max: ({format_mlir_float_e(lo)}:{format_mlir_float_e(hi)})")

    @property
    def storage_width(self) -> int:
        return 0

    @property
    def default_storage_min(self) -> int:
        return 0

    @property
    def default_storage_max(self) -> int:
        return 0

    @property
    def storage_numpy_dtype(self):
        return None

    def __str__(self) -> str:
        return (f"!quant.calibrated<{self.expressed_type}<{format_mlir_float(self.min)}:"
                f"{format_mlir_float(self.max)}>>")
