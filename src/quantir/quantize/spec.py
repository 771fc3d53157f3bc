"""The LiteRT (TFLite) int8 quantization spec as a table, and the check of a list of ops against it.

The rows come from the quantized-op declarations (``quantize.ops``): each declares the row of
the LiteRT builtin it becomes (and of the other builtins it may become, such as
DEPTHWISE_CONV_2D or PADV2). The vocabulary (``ACT``, ``WEIGHT``, ``SAME_AS``, ``FIXED`` ...)
and the check of one op against its row are in ``rules``. The checker works on a format-neutral
``QuantizedOp`` view, so one table validates quantir's integer IR, ONNX QDQ models and .tflite
files; each reader builds the view.
"""
from __future__ import annotations

from typing import Sequence

from . import ops
from .rules import (ACT, ANY, BIAS, FIXED, SAME_AS, WEIGHT, CheckReport, Kind, OpSpec, QParams,  # noqa: F401
                    QuantizedOp, Rule, Violation, check_op as check_row, is_16x8)

# Rows of the LiteRT spec that no declaration holds yet: quantir checks these ops in files it
# reads but does not produce them.
UNDECLARED: dict[str, OpSpec] = {
    "PRELU": OpSpec((ACT, ACT), ACT),
    "DEQUANTIZE": OpSpec((ACT,), ANY),
    "SPLIT": OpSpec((ANY, ACT), SAME_AS(1)),
    "DEPTH_TO_SPACE": OpSpec((ACT,), SAME_AS(0)),
}


def _table() -> dict[str, OpSpec]:
    table: dict[str, OpSpec] = {}
    for decl in ops.DECLARATIONS.values():
        for builtin, row in decl.all_rows().items():
            table.setdefault(builtin.name, row)
    for name, row in UNDECLARED.items():
        if name in table:
            raise RuntimeError(f"{name} is declared: remove its row from spec.UNDECLARED")
        table[name] = row
    return table


# The table. Keys are LiteRT builtin operator names.
SPEC: dict[str, OpSpec] = _table()

# LiteRT's 16x8 mode (int16 activations): the builtins with an int16 kernel, and the fixed output
# parameters of those that fix them (SOFTMAX, LOGISTIC, TANH: 1/32768, 0)
INT16: dict[str, tuple[float, int] | None] = {
    b.name: d.int16_fixed for d in ops.DECLARATIONS.values() if d.int16 and d.int16_builtin
    for b in d.all_rows()}


def check_op(op: QuantizedOp) -> list[Violation]:
    row = SPEC.get(op.kind)
    if row is None:
        return []
    if op.kind not in INT16 and is_16x8(op, row):
        return [Violation(op.name, op.kind, "output 0", f"int16 activations, but quantir knows no LiteRT 16x8 "
                                                        f"kernel for {op.kind}: keep it int8 between QUANTIZE ops")]
    return check_row(op, row, INT16.get(op.kind))


def check(ops_: Sequence[QuantizedOp]) -> CheckReport:
    """Validate every op against the table; ops the table does not list are reported as unknown."""
    report = CheckReport()
    for op in ops_:
        if op.kind not in SPEC:
            report.unknown.append(op.kind)
            continue
        report.checked += 1
        report.violations.extend(check_op(op))
    return report
