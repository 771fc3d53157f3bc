"""``quantir check`` on quantir's integer IR: each op's spec view, checked against the table.

Every op that carries quantized tensors must be declared (``quantize.ops``): a declared op is
viewed by its declaration (its LiteRT kind, weight axes in TFLite's terms) and checked against
its spec row and its declared IR limits; an op with quantized tensors that no declaration knows
is reported as one quantir cannot check, never skipped. The quant casts are checked through
the ops around them (a ``quant.qcast`` is LiteRT's QUANTIZE).
"""
from __future__ import annotations

from ..ir import Function, Module, Operation
from ..ir.dialects import func, nn, quant
from ..ir.dialects.hybrid import HYBRID_OPS
from ..types import QuantizedType
from . import ops, spec
from .check_hybrid import hybrid_rows
from .check_weight_only import weight_only_rows
from .views import plain_view, qparams_of  # noqa: F401  (the IR's spec views)

# casts the spec has no row for (a scast reinterprets storage, a dcast is LiteRT's DEQUANTIZE of
# a tensor its producer's row already checked), an identity (the .tflite reader's, no op in LiteRT:
# its type is its input's), and the return of the function's results
_THROUGH_NEIGHBOURS = (quant.SCAST, quant.DCAST, nn.IDENTITY, func.RETURN)


def _carries_quantized(op: Operation) -> bool:
    return any(isinstance(getattr(v.type, "element_type", None), QuantizedType) or
               isinstance(v.type, QuantizedType) for v in [*op.operands, *op.results])


def view(op: Operation) -> spec.QuantizedOp | None:
    """The spec view of ``op`` (None: no declaration, or an op on float tensors only — a
    data-movement or SHAPE op in the float part of a mixed module — which is nothing to check)."""
    decl = ops.declaration_for(op.opdef)
    if decl is None or not _carries_quantized(op):
        return None
    if decl.view is not None:
        return decl.view(op)
    return plain_view(op, decl.builtin.name)


def check_module(module: Module | Function) -> spec.CheckReport:
    fn = module.main if isinstance(module, Module) else module
    report = spec.check([v for v in (view(op) for op in fn.ops) if v is not None])
    for op in fn.ops:
        decl = ops.declaration_for(op.opdef)
        if decl is None:
            if _carries_quantized(op) and op.opdef not in _THROUGH_NEIGHBOURS and op.opdef not in HYBRID_OPS:
                report.unknown.append(op.name)   # quantized tensors quantir has no rule for
            continue
        for limit in decl.ir_limits:
            message = limit(op)
            if message:
                report.violations.append(spec.Violation(op.label or op.name, decl.builtin.name, "options", message))
    # dynamic-range ops: float32 activations, int8 symmetric weights (check_hybrid); weight-only storage
    # dequantized to float (check_weight_only)
    for rows in (hybrid_rows, weight_only_rows):
        checked, violations = rows(fn)
        report.checked += checked
        report.violations.extend(violations)
    return report
