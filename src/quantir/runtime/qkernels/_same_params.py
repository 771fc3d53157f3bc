"""The same-scale rule of the data-movement and selection ops (docs/numerics.md §2.20).

GATHER, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, MAXIMUM and MINIMUM move or
select stored values without rescaling, so the output means what the inputs mean only when
every tensor carries the output's scale and zero point. LiteRT's Prepare enforces this for
BATCH_TO_SPACE_ND and SPACE_TO_BATCH_ND (``TF_LITE_ENSURE_EQ`` on the float32 scale and the
zero point); for the others the LiteRT int8 spec requires it and the kernel silently
compares or copies raw q. Scales are compared as float32, as the file stores them.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from quantir.runtime.qkernels._common import QKernelError

__all__ = ["check_same_params"]


def check_same_params(op: str, inputs: Sequence[tuple[float, int]], output: tuple[float, int]) -> None:
    """Raise :class:`QKernelError` unless every ``(scale, zero_point)`` of ``inputs`` equals ``output``."""
    out_scale, out_zp = output
    for i, (scale, zp) in enumerate(inputs):
        if np.float32(scale) != np.float32(out_scale) or int(zp) != int(out_zp):
            raise QKernelError(f"{op}: input {i} has scale {scale} and zero point {zp}, the output {out_scale} "
                               f"and {out_zp}; int8 {op.upper()} moves stored values without rescaling, so they "
                               "must be equal (requantize the input first)")
