"""float32 kernels that round exactly as LiteRT's reference (``BUILTIN_REF``) float kernels do.

quantir's default float kernels are numpy's: pairwise or BLAS summation, numpy's own SIMD ``exp``,
a float64 ``erf``. They are accurate, but a dynamic-range .tflite quantizes its activations at run
time, so one ulp of difference in a float op can move a quantized value by one step and grow from
there. ``Interpreter(module, float_arithmetic="litert")`` swaps in these kernels instead, so a .tflite
runs in quantir as LiteRT runs it. What LiteRT's reference kernels do, and what is reproduced here
(each checked bit for bit against LiteRT, tests/runtime/test_litert_float.py):

- BATCH_MATMUL / FULLY_CONNECTED (``nn.matmul``): one float32 accumulator per output, products
  added one k at a time in order, each product rounded before the add (no fused multiply-add);
- MEAN / SUM (``nn.reduce_mean`` / ``nn.reduce_sum``): the reduced elements added in row-major
  order into a float32 accumulator; MEAN then divides by the count in float32;
- SOFTMAX: the max, ``e = expf(x - max)`` with the C library's ``expf``, a sequential float32 sum,
  then ``e / sum``;
- EXP, LOG, TANH: the C library's expf, logf, tanhf; LOGISTIC: 1 / (1 + expf(−x)) between two
  cutoffs (1 above the upper one, expf(x) below −9); HARD_SWISH: ``x · min(6, max(0, x + 3)) / 6``
  in float32, in that order (ONNX's ``x · clip(x/6 + 1/2, 0, 1)`` rounds differently);
- GELU: ``0.5·x · erfc(−x/√2)`` with Eigen's float ``erfc`` (a rational approximation whose
  large-|x| branch calls Eigen's polynomial ``exp``); the tanh form with Eigen's rational
  ``tanh``; every step a float32 multiply and a separate add (LiteRT's x86 build has no FMA).

Every kernel loops only over the reduction axis; the other axes stay vectorized. Operands other
than float32 go to the default kernels.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math

import numpy as np

from ...ir.dialects import nn
from ...ir.dialects.nn_reduce import reduced_axes
from . import elementwise, matmul as _matmul_module, reduce as _reduce_module, softmax as _softmax_module

F32 = np.float32


# -- nn.matmul ------------------------------------------------------------------------------------
def matmul(op, a, b):
    if a.dtype != F32 or b.dtype != F32:
        return _matmul_module.KERNELS[nn.MATMUL](op, a, b)
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    out = _sequential_matmul(a2, b2)
    if b.ndim == 1:
        out = out[..., 0]
    if a.ndim == 1:
        out = out[..., 0, :] if b.ndim > 1 else out[..., 0]
    return out


def _sequential_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` summed over k in order, one rounding per product and one per add."""
    k = a.shape[-1]
    if b.shape[-2] != k:
        return np.matmul(a, b)          # numpy states the mismatch
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    acc = np.zeros(shape, F32)
    tmp = np.empty(shape, F32)
    for i in range(k):
        np.multiply(a[..., :, i:i + 1], b[..., i:i + 1, :], out=tmp)
        acc += tmp
    return acc


# -- nn.reduce_sum / nn.reduce_mean ---------------------------------------------------------------
def _sequential_sum(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """The sum over ``axes`` (keepdims), adding the reduced elements in row-major order."""
    kept = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, kept + list(axes))
    flat = moved.reshape(moved.shape[:len(kept)] + (-1,))
    acc = np.zeros(flat.shape[:-1], F32)
    for j in range(flat.shape[-1]):
        acc += flat[..., j]
    return acc.reshape(tuple(1 if i in axes else n for i, n in enumerate(x.shape)))


def _reducer(kind: str):
    default = _reduce_module.KERNELS[nn.REDUCE[kind]]

    def kernel(op, x):
        if x.dtype != F32:
            return default(op, x)
        axes = reduced_axes(x.ndim, op.opdef.attr_values(op))
        if not axes:
            return x
        total = _sequential_sum(x, axes)
        if kind == "mean":
            count = int(np.prod([x.shape[i] for i in axes]))
            with np.errstate(divide="ignore", invalid="ignore"):
                total = total / F32(count)
        return total if op.attr("keepdims") else np.squeeze(total, axis=axes)
    return kernel


# -- nn.softmax -----------------------------------------------------------------------------------
@functools.cache
def _libm(name: str):
    """The C library's float function ``name`` (expf, logf, tanhf) as a numpy ufunc (one call per
    element: exact, about 0.3 µs each)."""
    fn = getattr(ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6"), name)
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return np.frompyfunc(fn, 1, 1)


def libm(name: str, x: np.ndarray) -> np.ndarray:
    return np.asarray(_libm(name)(x), dtype=F32).reshape(x.shape)


# glibc's expf is within 0.502 ulp of exp(x) (its documented bound), and float64 exp rounded to
# float32 is exp(x) correctly rounded unless exp(x) lies within ~2^-29 ulp of a rounding midpoint;
# so the two agree wherever exp(x) is farther than 0.002 ulp from a midpoint. Elements within
# _NEAR_MIDPOINT ulp of one (a few percent) are sent to libm itself.
_NEAR_MIDPOINT = 0.02


def expf(x: np.ndarray) -> np.ndarray:
    """The C library's ``expf`` on every element of a float32 array."""
    with np.errstate(invalid="ignore", over="ignore"):
        wide = np.exp(x.astype(np.float64))
        out = wide.astype(F32)
        ulp = np.spacing(np.abs(out)).astype(np.float64)
        frac = (wide - out.astype(np.float64)) / ulp
        near = np.abs(np.abs(frac) - 0.5) < _NEAR_MIDPOINT
    near &= np.isfinite(wide)
    if near.any():
        out[near] = libm("expf", x[near])
    return out


def softmax(op, x):
    if x.dtype != F32:
        return _softmax_module.softmax(op, x)
    axis = op.attr("axis") % x.ndim
    moved = np.moveaxis(x, axis, -1)
    e = expf(moved - moved.max(axis=-1, keepdims=True))
    total = np.zeros(e.shape[:-1] + (1,), F32)
    for j in range(e.shape[-1]):
        total += e[..., j:j + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.moveaxis(e / total, -1, axis)


# -- nn.gelu --------------------------------------------------------------------------------------
def _madd(a, b, c):
    """Eigen's pmadd on a target without FMA: a rounded product, then a rounded add."""
    return (a * b).astype(F32) + c


def _horner(x, coefficients):
    p = np.full_like(x, F32(coefficients[0]))
    for c in coefficients[1:]:
        p = _madd(p, x, F32(c))
    return p


# Eigen's float exp (GenericPacketMathFunctions pexp_float): x = m·ln2 + r, a degree-6 polynomial
# in r evaluated as even and odd halves, times 2^m.
_EXP_LN2_HI, _EXP_LN2_LO = F32(-0.693359375), F32(2.12194440e-4)
_EXP_P = [F32(v) for v in (0.49999988079071044921875, 0.16666518151760101318359375,
                           4.166965186595916748046875e-2, 8.36894474923610687255859375e-3,
                           1.37449637986719608306884765625e-3)]


def eigen_exp(x: np.ndarray) -> np.ndarray:
    p2, p3, p4, p5, p6 = _EXP_P
    clamped = np.minimum(x, F32(88.723))
    m = np.floor(_madd(clamped, F32(1.44269504088896341), F32(0.5)))
    r = _madd(m, _EXP_LN2_HI, clamped)
    r = _madd(m, _EXP_LN2_LO, r)
    r2 = r * r
    even = _madd(r2, _madd(r2, p6, p4), p2)
    odd = _madd(r2, p5, p3)
    y = _madd(r2, _madd(r, odd, even), r + F32(1))
    # y·2^m: exact in float64, one rounding to float32 (as Eigen's pldexp, subnormals included)
    with np.errstate(over="ignore"):
        scaled = (y.astype(np.float64) * np.exp2(m.astype(np.float64))).astype(F32)
    return np.where(x < F32(-104), F32(0), np.maximum(scaled, x))


# Eigen's float erfc (SpecialFunctionsImpl generic_fast_erfc<float>): |x| <= 1: 1 + x·S(x²);
# beyond: exp(−x²)·P(1/x²)/(x·Q(1/x²)), plus 2 for negative x.
_ERFC_SMALL = (5.61802298761904239654541015625e-04, -4.91381669417023658752441406250e-03,
               2.67075151205062866210937500000e-02, -1.12800106406211853027343750000e-01,
               3.76122951507568359375000000000e-01, -1.12837910652160644531250000000e+00)
_ERFC_NUM = (1.0208116471767425537109375e-01, 4.2920666933059692382812500e-01,
             3.2379078865051269531250000e-01, 5.3971976041793823242187500e-02)
_ERFC_DEN = (1.7251677811145782470703125e-02, 3.9137163758277893066406250e-01, 1.0,
             6.2173241376876831054687500e-01, 9.5662862062454223632812500e-02)


def eigen_erfc(x_in: np.ndarray) -> np.ndarray:
    x = np.clip(x_in, F32(-11), F32(11))
    x2 = x * x
    small = _madd(x, _horner(x2, _ERFC_SMALL), F32(1))
    x2_lo = (x.astype(np.float64) * x - x2).astype(F32)     # x·x − x2, exact (Eigen's twoprod_low)
    e = eigen_exp(-x2)
    z = e - (e * x2_lo).astype(F32)                          # e·(1 − x2_lo) ≈ exp(−x²) to the last bits
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q2 = F32(1) / x2
        ratio = _horner(q2, _ERFC_NUM) / (x * _horner(q2, _ERFC_DEN))
        large = _madd(z, ratio, np.where(x < 0, F32(2), F32(0)))
    return np.where(x2 > F32(1), large, small)


# Eigen's float tanh with EIGEN_FAST_MATH (MathFunctionsImpl ptanh_float): an odd 9/8 rational,
# the input clamped where the rational reaches 1 (the clamp of a build without FMA).
_TANH_NUM = (1.394553628e-8, 2.102733560e-5, 3.520756727e-3, 1.340216100e-1)
_TANH_DEN = (8.015776984e-7, 3.326951409e-4, 2.597254514e-2, 4.673548340e-1, 1.0)
_TANH_CLAMP = F32(7.90738964080810547)


def eigen_tanh(x_in: np.ndarray) -> np.ndarray:
    x = np.clip(x_in, -_TANH_CLAMP, _TANH_CLAMP)
    x2 = x * x
    return _madd(x2 * x, _horner(x2, _TANH_NUM), x) / _horner(x2, _TANH_DEN)


_SQRT_2_OVER_PI = F32(math.sqrt(2 / math.pi))


def gelu(op, x):
    if x.dtype != F32:
        return elementwise.KERNELS[nn.UNARY["gelu"]](op, x)
    with np.errstate(over="ignore", invalid="ignore"):
        if op.attr("approximate") == "tanh":     # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
            inner = _SQRT_2_OVER_PI * (x + F32(0.044715) * ((x * x) * x))
            return (F32(0.5) * x) * (F32(1) + eigen_tanh(inner))
        return (F32(0.5) * x) * eigen_erfc(x * F32(-0.7071067811865476))


# -- element-wise: EXP, LOG, TANH, LOGISTIC ---------------------------------------------------------
def _elementwise(name: str, fn):
    default = elementwise.KERNELS[nn.UNARY[name]]

    def kernel(op, x):
        if x.dtype != F32:
            return default(op, x)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return fn(x)
    return kernel


def _logistic(x: np.ndarray) -> np.ndarray:
    """LiteRT's reference LOGISTIC: 1 above its upper cutoff, expf(x) below −9, else 1 / (1 + expf(−x))."""
    mid = F32(1) / (F32(1) + expf(-x))
    return np.where(x > F32(16.619047164916992188), F32(1), np.where(x < F32(-9), expf(x), mid))


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return (x * np.clip(x + F32(3), F32(0), F32(6))) / F32(6)


KERNELS = {
    nn.UNARY["hard_swish"]: _elementwise("hard_swish", _hard_swish),
    nn.UNARY["exp"]: _elementwise("exp", expf),
    nn.UNARY["log"]: _elementwise("log", lambda x: libm("logf", x)),
    nn.UNARY["tanh"]: _elementwise("tanh", lambda x: libm("tanhf", x)),
    nn.UNARY["sigmoid"]: _elementwise("sigmoid", _logistic),
    nn.MATMUL: matmul,
    nn.REDUCE["sum"]: _reducer("sum"),
    nn.REDUCE_MEAN: _reducer("mean"),
    nn.SOFTMAX: softmax,
    nn.UNARY["gelu"]: gelu,
}

FLOAT_ARITHMETIC = ("numpy", "litert")


def kernel_for(opdef, float_arithmetic: str):
    """The LiteRT-order kernel of ``opdef`` when ``float_arithmetic`` is "litert", else None."""
    return KERNELS.get(opdef) if float_arithmetic == "litert" else None
