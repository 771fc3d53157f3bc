"""SUB, int8 (``reference_ops::Sub`` / ``BroadcastQuantSubSlow``, docs/numerics.md §2.4).

The ADD arithmetic with a difference: ``out = clamp(MBQM<1(a' - b', Mo, sho) + zp_out)``.

``sub.cc`` Prepare accepts an output multiplier above 1 (very narrow output ranges) and
quantizes it with ``QuantizeMultiplierGreaterThanOne``, but the int8 reference kernel then
applies it with ``MultiplyByQuantizedMultiplierSmallerThanOneExp`` — a
``RoundingDivideByPOT`` by a negative exponent, undefined behaviour in C. There is no
reference result to match, so :func:`prepare_sub` rejects ``mo >= 1`` with
:class:`QKernelError`.
"""
from __future__ import annotations

import numpy as np

from quantir.runtime.qkernels._common import Activation
from quantir.runtime.qkernels.add import AddParams, AddPotParams, add_sub, add_sub_pot, prepare_add_sub

__all__ = ["SubParams", "prepare_sub", "sub"]

SubParams = AddParams


def prepare_sub(input1_scale: float, input2_scale: float, output_scale: float, output_zero_point: int,
                activation: Activation = "none", **int16_options) -> SubParams | AddPotParams:
    """``int16_options`` as for :func:`~quantir.runtime.qkernels.add.prepare_add`: int16 SUB chooses
    between the general and the power-of-two kernel exactly as ADD does."""
    return prepare_add_sub("sub", input1_scale, input2_scale, output_scale, output_zero_point, activation,
                           **int16_options)


def sub(a: np.ndarray, b: np.ndarray, **params) -> np.ndarray:
    """Element-wise ``a - b`` with broadcasting; ``params`` as ``prepare_sub(...).as_kwargs()`` plus zero points.
    Unlike ADD's, LiteRT's power-of-two int16 SUB broadcasts (``BroadcastSub16POTSlow``)."""
    if "pot_input1_shift" in params:
        return add_sub_pot("sub", -1, a, b, **params)
    return add_sub("sub", -1, a, b, **params)
