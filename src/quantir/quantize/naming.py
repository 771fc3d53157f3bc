"""The names the lowering gives integer values, which the API and the exporters read back.

The integer version of a float value ``x`` is ``x__q``; a further copy of it with other
parameters (a ``qnn.requantize``) is ``x__q<k>``. ``Result.layer_errors`` finds each layer's
integer output by this name, and the ONNX exporters strip the suffix to name tensors after
the float model's.
"""
from __future__ import annotations

import re

_SUFFIX = re.compile(r"__q\d*$")


def integer_name(float_name: str | None) -> str:
    """The name of the first integer version of a float value."""
    return f"{float_name}__q"


def requantized_name(float_name: str | None, k: int) -> str:
    """The name of the ``k``-th requantized copy of a float value."""
    return f"{float_name}__q{k}"


def float_name(name: str | None) -> str:
    """The float value's name an integer value was named after (``c1__q`` -> ``c1``); ``t`` if none."""
    return _SUFFIX.sub("", name or "t") or "t"
