"""The text format: MLIR-compatible printing and parsing of quantir modules.

``print_module`` writes what ``mlir-opt``/``iree-opt`` would print for the same IR (custom
forms for ``func``, ``arith.constant`` and the ``quant`` casts, generic form for every other
op); ``parse_module`` reads it back, and real MLIR text, with MLIR's diagnostics located
``FILE:LINE:COL``.

>>> from quantir.text import parse_module, print_module
>>> text = '''
... func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
...   %0 = "nn.relu"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
...   return %0 : tensor<2xf32>
... }'''
>>> print(print_module(parse_module(text)), end="")
module {
  func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "nn.relu"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
"""
from .numbers import format_float
from .parser import parse_module, parse_source
from .printer import print_function, print_module, print_op

__all__ = ["print_module", "print_op", "print_function", "parse_module", "parse_source", "format_float"]
