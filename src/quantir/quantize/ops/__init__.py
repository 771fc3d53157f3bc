"""The quantized ops, one declaration each, by family (see ``registry``).

Importing this package declares them all. The order of the families is the order in which
annotation tries patterns of equal priority: convolutions and fully-connected layers first
(a MatMul + bias Add must be claimed before the Add pattern sees it), then element-wise
arithmetic, data movement, windows, resizing and activations.
"""
from __future__ import annotations

from . import conv, binary, shape, pool, resize, activation, movement, reduce, normalization  # noqa: F401  (declaration order matters)
from . import matmul  # noqa: F401  (MatMul of two activations: after conv's MatMul with weights)
from . import transpose_conv  # noqa: F401  (its bias-Add form has priority -1: before binary's Add)
from . import select, shape_of  # noqa: F401  (selection, comparisons and SHAPE: tried last)
from . import split  # noqa: F401  (an expansion: Split as Slices)
from . import cast  # noqa: F401  (an integer input stored in int8)
from . import pooling  # noqa: F401  (an expansion: masked mean pooling without SUM or DIV)
from . import squared_difference  # noqa: F401  (its patterns have priority -1: before binary's Mul)
from . import recurrent  # noqa: F401  (LSTM, and the expansion splitting a bidirectional one)
from .registry import (DECLARATIONS, EXPANSIONS, Format, QuantOp, SolverRules, declaration_for, declare,
                       declare_expansion, patterns)

PATTERNS = patterns()


def kernel_for(opdef):
    """The interpreter binding of a declared op, or None."""
    decl = DECLARATIONS.get(opdef)
    return None if decl is None else decl.kernel


__all__ = ["DECLARATIONS", "EXPANSIONS", "PATTERNS", "Format", "QuantOp", "SolverRules", "declaration_for",
           "declare", "declare_expansion", "kernel_for"]
