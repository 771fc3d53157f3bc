"""Run a TFLite model in the LiteRT interpreter: the oracle for bit-exactness checks.

``ai_edge_litert`` is an optional (``oracle``) dependency: it is imported inside
:func:`run_model`, never at module import, so quantir's core runs without it.

Resolvers (docs/numerics.md §0): ``reference`` = ``BUILTIN_REF`` (the reference kernels,
the golden oracle), ``optimized`` = ``BUILTIN_WITHOUT_DEFAULT_DELEGATES`` (optimized
kernels, no XNNPACK), ``default`` = ``AUTO`` (XNNPACK, float requantization: not
bit-exact, never a golden oracle).
"""
from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

import numpy as np

from quantir.backends.tflite.model import Model
from quantir.backends.tflite.writer import write_model

__all__ = ["Resolver", "LiteRTUnavailableError", "litert_available", "run_model", "run_model_tensors"]


class Resolver(StrEnum):
    REFERENCE = "reference"
    OPTIMIZED = "optimized"
    DEFAULT = "default"


class LiteRTUnavailableError(RuntimeError):
    """``ai_edge_litert`` is not installed (``pip install 'quantir[oracle]'``)."""


def _interpreter_module():
    try:
        from ai_edge_litert import interpreter  # noqa: PLC0415 - optional oracle dependency
    except ImportError as e:
        raise LiteRTUnavailableError(
            "running a .tflite model needs ai_edge_litert; install it with pip install 'quantir[oracle]'") from e
    return interpreter


def litert_available() -> bool:
    try:
        _interpreter_module()
    except LiteRTUnavailableError:
        return False
    return True


def run_model(model: bytes | Model, feeds: Sequence[np.ndarray], resolver: Resolver | str = Resolver.REFERENCE,
              *, num_threads: int = 1) -> list[np.ndarray]:
    """Invoke ``model`` once on ``feeds`` (in subgraph input order); returns every output, copied.

    LiteRT errors at allocation (its Prepare checks) or invocation surface as RuntimeError
    carrying the interpreter's message.
    """
    return _invoke(model, feeds, resolver, num_threads, None)


def run_model_tensors(model: bytes | Model, feeds: Sequence[np.ndarray], indices: Sequence[int],
                      resolver: Resolver | str = Resolver.REFERENCE, *, num_threads: int = 1
                      ) -> tuple[list[np.ndarray], dict[int, np.ndarray]]:
    """As :func:`run_model`, and also the arrays of the tensors ``indices`` (intermediates included:
    the interpreter is told to preserve every tensor instead of reusing their memory)."""
    tensors: dict[int, np.ndarray] = {}
    outputs = _invoke(model, feeds, resolver, num_threads, (indices, tensors))
    return outputs, tensors


def _invoke(model, feeds, resolver, num_threads, wanted) -> list[np.ndarray]:
    lite = _interpreter_module()
    kinds = {Resolver.REFERENCE: lite.OpResolverType.BUILTIN_REF,
             Resolver.OPTIMIZED: lite.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
             Resolver.DEFAULT: lite.OpResolverType.AUTO}
    content = write_model(model) if isinstance(model, Model) else bytes(model)
    interp = lite.Interpreter(model_content=content, experimental_op_resolver_type=kinds[Resolver(resolver)],
                              num_threads=num_threads, experimental_preserve_all_tensors=wanted is not None)
    inputs = interp.get_input_details()
    if len(inputs) != len(feeds):
        raise ValueError(f"run_model: the model has {len(inputs)} inputs, {len(feeds)} feeds given")
    for detail, value in zip(inputs, feeds):
        value = np.asarray(value)
        if tuple(detail["shape"]) != value.shape:
            interp.resize_tensor_input(detail["index"], value.shape)
    interp.allocate_tensors()
    for detail, value in zip(inputs, feeds):
        interp.set_tensor(detail["index"], np.ascontiguousarray(value, dtype=detail["dtype"]))
    interp.invoke()
    if wanted is not None:
        indices, into = wanted
        into.update({int(i): interp.get_tensor(int(i)).copy() for i in indices})
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]
