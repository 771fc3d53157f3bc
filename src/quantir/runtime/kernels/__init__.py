"""The kernel table: ``OpDef -> kernel``, assembled explicitly from one small module per op
(or per op family served by one generic kernel and a table).

A kernel is ``kernel(op, *inputs) -> array | tuple[array, ...]``: it reads attributes
from ``op`` (``op.attr(name)``) and never mutates its inputs. It may return an input
unchanged (identity, reshape views), so callers must not mutate results either.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...ir.opdef import OpDef
from . import (average_pool, batch_norm, concat, constant, constant_of_shape, conv, conv_integer,
               conv_transpose, depth_to_space, dequantize_linear, dynamic_quantize_linear, elementwise, expand,
               gather, gemm, global_pool, hardmax, instance_norm, layer_norm, lp_norm, lrn, matmul, matmul_integer,
               max_pool, pad, qlinear_conv, qlinear_matmul, quantize_linear, range_, reduce, reshape, resize,
               qnn_ops, shape, slice_, softmax, split, tile, transpose)
from . import lstm
from . import cum_sum, einsum, gather_elements, gather_nd, trilu
from . import hybrid_ops

Kernel = Callable[..., "np.ndarray | tuple[np.ndarray, ...]"]

KERNELS: dict[OpDef, Kernel] = {}
_MODULES = (
    constant,
    elementwise,                                            # unary/binary/variadic tables, cast, where ...
    conv, conv_transpose, conv_integer, qlinear_conv,
    gemm, matmul, matmul_integer, qlinear_matmul,
    lstm,
    max_pool, average_pool, global_pool,
    batch_norm, layer_norm, instance_norm, lrn, softmax, hardmax, lp_norm,
    reduce,
    reshape, expand, transpose, tile, depth_to_space, shape, constant_of_shape, range_,
    concat, split, slice_, gather, pad, resize,
    gather_elements, gather_nd, cum_sum, trilu, einsum,
    quantize_linear, dequantize_linear, dynamic_quantize_linear,
    qnn_ops,                                                # integer ops and quant casts (LiteRT semantics)
    hybrid_ops,                                             # dynamic range: f32 activations, int8 weights
)
for _module in _MODULES:
    for _opdef, _kernel in _module.KERNELS.items():
        if _opdef in KERNELS:
            raise RuntimeError(f"two kernels registered for '{_opdef.name}'")
        KERNELS[_opdef] = _kernel


def kernel_for(opdef: OpDef) -> Kernel | None:
    return KERNELS.get(opdef)
