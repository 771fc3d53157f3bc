"""GELU, int8 (``GeluPrepare`` + ``LUTPopulate``, docs/numerics.md §2.13), in both resolvers.

LiteRT builds a 256-entry table in Prepare and gathers from it at run time; the table is
the generic LUT recipe of :mod:`._lut` (dequantize in float32, transform, multiply by
``f32(1/s_out)``, round half away, add the zero point, clamp) over one of two float32
transforms:

* ``approximate=False`` — the exact form written with ``erfc`` (no cancellation for large
  negative x): ``y = f32(0.5f·x) · erfcf(f32(x · f32(-1/√2)))``;
* ``approximate=True`` — the tanh form:
  ``y = f32(0.5f·x) · (1 + tanhf(k · (x + ((0.044715f·x)·x)·x)))`` with
  ``k = f32(2/√π · 1/√2) = f32(√(2/π))``, every step in float32.

Older LiteRT sources wrote the exact form as ``0.5f·x·(1 + erf(x·M_SQRT1_2))`` with ``erf``
in double. The two tables differ by one step in rare entries (about 1 parameter set in
25,000 random ones); on those, ai-edge-litert 2.3.0 gives the float32 ``erfc`` table, in
``BUILTIN_REF`` and in the default resolver alike. ``erfcf`` and ``tanhf`` are taken from
float64 rounded to float32, the correctly rounded value, which a libm's float functions
return for all but rare arguments (a possible, unobserved, source of one-step differences).

GELU accepts any input and output parameters (no fixed output scale, unlike LOGISTIC).

int16 (``storage=np.int16``): the same float32 transforms tabulated by
``LUTPopulate<int16_t>`` into 513 entries and read with ``LUTLookup``'s interpolation
(:mod:`._lut16`).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from quantir.runtime.qkernels._common import QKernelError
from quantir.runtime.qkernels._lut import lookup, populate_lut, tanhf
from quantir.runtime.qkernels._lut16 import lut16_lookup, lut16_values, populate_lut16

__all__ = ["prepare_gelu", "gelu", "gelu_transform"]

_F32 = np.float32
_MINUS_SQRT1_2 = _F32(-0.70710678118654752440)           # static_cast<float>(-1/√2)
_SQRT_2_OVER_PI = _F32(1.12837916709551257390 * 0.70710678118654752440)  # (2/√π)·(1/√2) in double, then float
_CUBIC = _F32(0.044715)
_HALF, _ONE = _F32(0.5), _F32(1.0)


def _erfcf(x: np.ndarray) -> np.ndarray:
    return np.array([math.erfc(float(v)) for v in np.ravel(x)], dtype=np.float64).astype(np.float32).reshape(
        np.shape(x))


def _gelu_exact(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return (_HALF * x) * _erfcf(x * _MINUS_SQRT1_2)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    cube = ((_CUBIC * x) * x) * x
    return (_HALF * x) * (_ONE + tanhf(_SQRT_2_OVER_PI * (x + cube)))


def gelu_transform(x: np.ndarray, approximate: bool = False) -> np.ndarray:
    """The float32 function LiteRT tabulates (exact ``erfc`` form, or the tanh form)."""
    return _gelu_tanh(x) if approximate else _gelu_exact(x)


def prepare_gelu(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int, *,
                 approximate: bool = False, storage: Any = np.int8) -> np.ndarray:
    """The int8 lookup table ``GeluPrepare`` builds (``approximate`` is ``GeluOptions.approximate``); with
    ``storage=np.int16`` the interpolated int16 table, returned as its lookup of all 65,536 inputs."""
    if np.dtype(storage) == np.int16:
        return _prepare_gelu_int16(input_scale, input_zero_point, output_scale, output_zero_point, approximate)
    for name, scale in (("input", input_scale), ("output", output_scale)):
        s = np.float32(scale)
        if not (np.isfinite(s) and s > 0):
            raise QKernelError(f"gelu: the {name} scale must be a positive finite float32, found {scale}")
    with np.errstate(over="ignore"):
        inverse = np.float32(1.0) / np.float32(output_scale)
    if not np.isfinite(inverse):
        # f32(1/s_out) overflows: LiteRT's table would round infinities (undefined behaviour in C).
        raise QKernelError(f"gelu: 1/output scale overflows float32 for output scale {output_scale}")
    # Values beyond 2**20 output steps saturate the int8 entry whatever the zero point; LiteRT
    # saturates them too (even past int32, e.g. s_in 30 and s_out 1e-30), so they are clipped
    # before the generic table rounds them to integers.
    bound = np.float32(2.0**20) * np.float32(output_scale)

    def transform(x: np.ndarray) -> np.ndarray:
        y = gelu_transform(x, approximate)
        if np.isnan(y).any():
            raise QKernelError(f"gelu: the float32 GELU of an input step is NaN (input scale {input_scale})")
        return np.clip(y, -bound, bound)

    return populate_lut(transform, input_scale, input_zero_point, output_scale, output_zero_point, "gelu")


def gelu(x: np.ndarray, *, table: np.ndarray) -> np.ndarray:
    """GELU by gathering: ``table[x + 128]`` for int8 (``LookupTable``), the interpolated values for int16;
    any shape, any layout."""
    if np.asarray(x).dtype == np.int16:
        return lut16_lookup(x, table, "gelu")
    return lookup(x, table, "gelu")


def _prepare_gelu_int16(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int,
                        approximate: bool) -> np.ndarray:
    # GeluPrepare checks no zero point for int16: LUTPopulate only moves the output range with it.
    for name, scale in (("input", input_scale), ("output", output_scale)):
        s = np.float32(scale)
        if not (np.isfinite(s) and s > 0):
            raise QKernelError(f"gelu: the {name} scale must be a positive finite float32, found {scale}")
    lut = populate_lut16(lambda x: gelu_transform(x, approximate), input_scale, input_zero_point, output_scale,
                         output_zero_point)
    return lut16_values(lut)
