"""Shared Prepare of AVERAGE_POOL_2D and MAX_POOL_2D: same parameters in and out, fused clamp."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from quantir.runtime.qkernels._common import (
    Activation,
    KernelParams,
    QKernelError,
    activation_range,
    check_zero_point,
    storage_limits,
)


@dataclass(frozen=True)
class PoolParams(KernelParams):
    act_min: int
    act_max: int


def prepare_pool(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int,
                 activation: Activation = "none", *, op: str = "pool", storage: Any = np.int8) -> PoolParams:
    """Pooling works on raw q, so input and output must share scale and zero point.

    (LiteRT only ``DCHECK``s this for int8, i.e. not at all in release builds, and checks
    nothing for int16; it would silently mis-scale, so quantir refuses.) ``storage=np.int16``
    prepares the 16x8 kernel: LiteRT's int16 pools check no zero point, and the fused clamp is
    ``CalculateActivationRangeQuantized`` over the int16 range.
    """
    lo, hi = storage_limits(storage, op)
    zp_in = check_zero_point(input_zero_point, op, "input zero point", lo, hi)
    zp_out = check_zero_point(output_zero_point, op, "output zero point", lo, hi)
    if np.float32(input_scale) != np.float32(output_scale) or zp_in != zp_out:
        raise QKernelError(f"{op}: input (scale {input_scale}, zp {zp_in}) and output (scale {output_scale}, "
                           f"zp {zp_out}) quantization must be equal; insert a requantize")
    return PoolParams(*activation_range(activation, output_scale, zp_out, storage, op))
