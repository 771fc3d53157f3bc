"""Execution: the numpy reference interpreter and its kernels.

>>> from quantir.runtime import run
>>> # outputs = run(module, {"input": x})             # keyed by output name
>>> # acts = run(module, feeds, intermediates="all")  # plus every named intermediate

Kernels (``runtime/kernels/``) are registered explicitly in ``kernels.KERNELS``, keyed by
op definition; the integer ops' kernels are bound in their declarations (``quantir.quantize.ops``),
and ``kernel_for`` looks in both. ``runtime`` imports neither ``onnx`` nor ``onnxruntime``.
"""
from .interpreter import FeedError, FeedTypeError, Interpreter, input_names, kernel_for, output_names, run
from .kernels import KERNELS

__all__ = ["run", "Interpreter", "FeedError", "FeedTypeError", "KERNELS", "kernel_for", "input_names",
           "output_names"]
