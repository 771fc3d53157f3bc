"""Matrix products: ``nn.gemm``, ``nn.matmul`` (numpy semantics, batch broadcasting) and
their integer forms ``nn.matmul_integer`` (i32 accumulators) and ``nn.qlinear_matmul``."""
from __future__ import annotations

from ...errors import ShapeError
from .nn_base import FLOAT, I32, INT, broadcast_shapes, define, elt, opt, require_float, shape_of, tensor


def matmul_shape(a, b):
    """numpy.matmul's result shape: 1-D operands are promoted then squeezed away."""
    if a is None or b is None:
        return None
    if len(a) == 0 or len(b) == 0:
        raise ShapeError("matmul operands must have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    k1, k2 = a2[-1], b2[-2]
    if k1 is not None and k2 is not None and k1 != k2:
        raise ShapeError(f"matmul contracts dims of different sizes: {a} x {b} ({k1} vs {k2})")
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    out = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _matmul(types, attrs):
    a, b = types[0], types[1]
    if elt(a) != elt(b):
        raise ShapeError(f"matmul operands must share an element type, got '{elt(a)}' and '{elt(b)}'")
    return [tensor(matmul_shape(shape_of(a), shape_of(b)), elt(a))]


def _gemm(types, attrs):
    a, b = types[0], types[1]
    require_float(a, "gemm operand A")
    sa, sb = shape_of(a), shape_of(b)
    if sa is None or sb is None:
        return [tensor((None, None), elt(a))]
    if len(sa) != 2 or len(sb) != 2:
        raise ShapeError(f"gemm needs 2-D operands, got A {sa} and B {sb}")
    m, k1 = sa[::-1] if attrs["trans_a"] else sa
    k2, n = sb[::-1] if attrs["trans_b"] else sb
    if k1 is not None and k2 is not None and k1 != k2:
        raise ShapeError(f"gemm contracts dims of different sizes: A {sa} (trans_a={attrs['trans_a']}) "
                         f"and B {sb} (trans_b={attrs['trans_b']})")
    if len(types) == 3 and shape_of(types[2]) is not None:
        out = broadcast_shapes((m, n), shape_of(types[2]))
        if out is not None and len(out) != 2:
            raise ShapeError(f"gemm bias C {shape_of(types[2])} does not broadcast to ({m}, {n})")
    return [tensor((m, n), elt(a))]


def _matmul_integer(types, attrs):
    return [tensor(matmul_shape(shape_of(types[0]), shape_of(types[1])), I32)]


def _qlinear_matmul(types, attrs):
    return [tensor(matmul_shape(shape_of(types[0]), shape_of(types[3])), elt(types[7]))]


GEMM = define("gemm", ("a", "b", opt("c")), ("y",),
              {"alpha": FLOAT(1.0), "beta": FLOAT(1.0), "trans_a": INT(0), "trans_b": INT(0)}, _gemm,
              summary="alpha * op(A) @ op(B) + beta * C, C broadcast to (M, N).")
MATMUL = define("matmul", ("a", "b"), ("y",), {}, _matmul, summary="numpy.matmul.")
MATMUL_INTEGER = define("matmul_integer", ("a", "b", "a_zero_point", "b_zero_point"), ("y",), {},
                        _matmul_integer, summary="(a - a_zp) @ (b - b_zp) with an i32 result.")
QLINEAR_MATMUL = define(
    "qlinear_matmul", ("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale",
                       "y_zero_point"), ("y",), {}, _qlinear_matmul,
    summary="Quantized matmul: requantize((a - a_zp) @ (b - b_zp), a_scale * b_scale / y_scale) + y_zp.")
