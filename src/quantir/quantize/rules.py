"""The vocabulary of the LiteRT (TFLite) int8 quantization spec, and the check of one op against its row.

Source: LiteRT ``tflite/g3doc/performance/quantization_spec.md`` and the kernels' Prepare
checks (docs/numerics.md §2-§3). A row (``OpSpec``) says what each operand and the result of
one op kind must look like; each quantized-op declaration (``quantize.ops``) holds its rows,
and ``spec.SPEC`` is the table they make:

- ``ACT``: int8, per-tensor, any zero point in [-128, 127] (asymmetric activations);
- ``WEIGHT(dim)``: int8 symmetric (zero point 0) in the narrow range [-127, 127], per-axis
  along ``dim`` of the *TFLite* layout (conv 0, depthwise 3, fully-connected 0) or per-tensor;
- ``BIAS``: int32, zero point 0, scale = input_scale × weight_scale (per channel);
- ``SAME_AS(i)``: the same scale and zero point as operand ``i`` (data movement);
- ``FIXED(scale, zp)``: the kernel only accepts these output parameters.

The checker works on a format-neutral ``QuantizedOp`` view so the same table validates
quantir's integer IR, ONNX QDQ models and .tflite files; each reader builds the view.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Callable, Sequence

import numpy as np

from ..errors import quote_name


class Kind(Enum):
    ACT = auto()
    WEIGHT = auto()
    BIAS = auto()
    SAME_AS = auto()
    FIXED = auto()
    ANY = auto()        # not constrained by the spec (e.g. an int32 shape operand)


@dataclass(frozen=True)
class Rule:
    kind: Kind
    dim: int | None = None                 # WEIGHT: the per-axis dimension in TFLite layout
    same_as: int | None = None             # SAME_AS: operand index
    fixed: tuple[float, int] | None = None  # FIXED: (scale, zero_point)
    per_tensor_ok: bool = True             # WEIGHT: may it be per-tensor instead of per-axis?


ACT = Rule(Kind.ACT)
BIAS = Rule(Kind.BIAS)
ANY = Rule(Kind.ANY)


def WEIGHT(dim: int) -> Rule:
    return Rule(Kind.WEIGHT, dim=dim)


def SAME_AS(index: int) -> Rule:
    return Rule(Kind.SAME_AS, same_as=index)


def FIXED(scale: float, zero_point: int) -> Rule:
    return Rule(Kind.FIXED, fixed=(scale, zero_point))


@dataclass(frozen=True)
class OpSpec:
    inputs: tuple[Rule, ...]
    output: Rule
    variadic: bool = False   # every input follows inputs[0] (CONCATENATION, MAXIMUM...)
    note: str = ""
    # "same scale" and fixed scales compare with this relative tolerance: LiteRT's SOFTMAX Prepare
    # accepts 0.1 %, LOGISTIC and the same-scale ops want the exact value
    scale_rtol: float = 1e-6
    # what the kernel's Prepare refuses beyond the parameter rules (a message, or None)
    limits: tuple[Callable[["QuantizedOp"], "str | None"], ...] = ()


# The bias rule allows float32 rounding of the product (numerics.md §3.3).
BIAS_RTOL = 1e-6


@dataclass(frozen=True)
class QParams:
    """Quantization parameters of one tensor as a reader found them."""

    dtype: str                       # "int8", "uint8", "int16", "int32", "float32", ...
    scale: np.ndarray | None = None  # shape () per-tensor, (C,) per-axis; None: not quantized
    zero_point: np.ndarray | None = None
    axis: int | None = None          # per-axis dimension (in the reader's layout, mapped to TFLite's)
    values: np.ndarray | None = None  # constant data when known (to check the weight range)

    @property
    def per_axis(self) -> bool:
        return self.scale is not None and np.ndim(self.scale) == 1 and self.axis is not None


@dataclass(frozen=True)
class QuantizedOp:
    kind: str                        # the LiteRT builtin name (a key of spec.SPEC)
    name: str
    inputs: tuple[QParams | None, ...]
    outputs: tuple[QParams, ...]


@dataclass(frozen=True)
class Violation:
    op: str
    kind: str
    where: str                       # "input 1", "output 0"
    message: str

    def __str__(self) -> str:
        # the op's label comes from the file: escaped, it cannot forge a line of `quantir check` output
        return f"{self.kind} {quote_name(self.op)} {self.where}: {self.message}"


@dataclass
class CheckReport:
    checked: int = 0
    unknown: list[str] = field(default_factory=list)     # op kinds the spec does not list
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def _close(a, b, rtol: float) -> bool:
    return bool(np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=0))


_ACTIVATION_KINDS = (Kind.ACT, Kind.SAME_AS, Kind.FIXED)


def is_16x8(op: QuantizedOp, row: OpSpec) -> bool:
    """An op of LiteRT's 16x8 mode: one of its activation operands or results is int16."""
    rules = row.inputs if not row.variadic else (row.inputs[0],) * len(op.inputs)
    tensors = [q for r, q in zip(rules, op.inputs) if r.kind in _ACTIVATION_KINDS]
    if row.output.kind in _ACTIVATION_KINDS:
        tensors += list(op.outputs)
    return any(q is not None and q.dtype == "int16" for q in tensors)


def _check_tensor(rule: Rule, q: QParams | None, rtol: float, inputs: Sequence[QParams | None],
                  fixed16: tuple[float, int] | None = None, wide: bool = False) -> list[str]:
    """``wide``: the op runs LiteRT's 16x8 kernel (activations int16 with zero point 0, a FIXED
    output takes ``fixed16``, the bias may be int64)."""
    if rule.kind is Kind.ANY:
        return []
    if q is None or q.scale is None:
        return [f"must be quantized, found {q.dtype if q else 'nothing'}"]
    errors: list[str] = []
    scale = np.asarray(q.scale, np.float64)
    zp = np.asarray(q.zero_point if q.zero_point is not None else 0, np.int64)
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        errors.append(f"scale must be finite and positive, found {scale.tolist()}")
    if rule.kind in _ACTIVATION_KINDS:
        if q.dtype != ("int16" if wide else "int8"):
            errors.append(f"activations must be {'int16 (16x8 op)' if wide else 'int8'}, found {q.dtype}")
        if q.per_axis and scale.size > 1:
            errors.append("activations must be quantized per tensor, found per-axis parameters")
        if wide and np.any(zp != 0):
            errors.append(f"16x8 activations must be symmetric (zero point 0), found {zp.tolist()}")
        if not wide and (np.any(zp < -128) or np.any(zp > 127)):
            errors.append(f"zero point {zp.tolist()} outside [-128, 127]")
    if rule.kind is Kind.WEIGHT:
        if q.dtype != "int8":
            errors.append(f"weights must be int8, found {q.dtype}")
        if np.any(zp != 0):
            errors.append(f"weights must be symmetric (zero point 0), found zero point {np.unique(zp).tolist()}")
        if q.per_axis and scale.size > 1 and q.axis != rule.dim:
            errors.append(f"per-axis weights must be quantized along dimension {rule.dim}, found {q.axis}")
        if q.values is not None and np.any(np.asarray(q.values) == -128):
            errors.append("weights must lie in the narrow range [-127, 127], found -128")
    if rule.kind is Kind.BIAS:
        if q.dtype not in (("int32", "int64") if wide else ("int32",)):
            errors.append(f"bias must be {'int32 or int64' if wide else 'int32'}, found {q.dtype}")
        if np.any(zp != 0):
            errors.append("bias zero point must be 0")
        x, w = inputs[0], inputs[1]
        if x is not None and w is not None and x.scale is not None and w.scale is not None:
            expected = np.asarray(x.scale, np.float64) * np.asarray(w.scale, np.float64)
            if (np.broadcast_shapes(expected.shape, scale.shape) != scale.shape
                    or not _close(scale, expected, BIAS_RTOL)):
                errors.append(f"bias scale must equal input_scale × weight_scale "
                              f"({_fmt(expected)}), found {_fmt(scale)}")
    if rule.kind is Kind.SAME_AS:
        ref = inputs[rule.same_as] if rule.same_as is not None and rule.same_as < len(inputs) else None
        if ref is not None and ref.scale is not None:
            if not _close(scale, ref.scale, rtol) or not np.array_equal(zp, np.asarray(ref.zero_point or 0)):
                errors.append(f"must have the same scale and zero point as input {rule.same_as} "
                              f"({_fmt(ref.scale)}, {_fmt(ref.zero_point)}), found ({_fmt(scale)}, {_fmt(zp)})")
    if rule.kind is Kind.FIXED and rule.fixed is not None and (fixed16 is not None or not wide):
        want_scale, want_zp = fixed16 if wide else rule.fixed
        if not _close(scale, want_scale, rtol) or np.any(zp != want_zp):
            errors.append(f"output parameters must be ({want_scale:g}, {want_zp}), "
                          f"found ({_fmt(scale)}, {_fmt(zp)})")
    return errors


def _fmt(a) -> str:
    a = np.asarray(a)
    if a.size == 1:
        return f"{a.reshape(()).item():.9g}"
    return "[" + ", ".join(f"{v:.6g}" for v in a.ravel()[:4]) + (", ..." if a.size > 4 else "") + "]"


def check_op(op: QuantizedOp, row: OpSpec, fixed16: tuple[float, int] | None = None) -> list[Violation]:
    """Every way ``op`` breaks its spec ``row``: operand and result rules, then the kernel's limits.
    An op with int16 activations is checked by the 16x8 rules (``fixed16``: its FIXED output's)."""
    found: list[Violation] = []
    wide = is_16x8(op, row)
    rules = row.inputs if not row.variadic else (row.inputs[0],) * len(op.inputs)
    for i, (rule, q) in enumerate(zip(rules, op.inputs)):
        for message in _check_tensor(rule, q, row.scale_rtol, op.inputs, fixed16, wide):
            found.append(Violation(op.name, op.kind, f"input {i}", message))
    if row.variadic and op.outputs:
        # every input shares the output's parameters: check each against the output
        out = op.outputs[0]
        for i, q in enumerate(op.inputs):
            if q is None or q.scale is None or out.scale is None:
                continue
            if not _close(q.scale, out.scale, 1e-6) or \
                    not np.array_equal(np.asarray(q.zero_point), np.asarray(out.zero_point)):
                found.append(Violation(op.name, op.kind, f"input {i}",
                                       f"must share the output's scale and zero point ({_fmt(out.scale)}, "
                                       f"{_fmt(out.zero_point)}), found ({_fmt(q.scale)}, {_fmt(q.zero_point)})"))
    for j, q in enumerate(op.outputs):
        rule = row.output if not (row.variadic and row.output.kind is Kind.SAME_AS) else ACT
        for message in _check_tensor(rule, q, row.scale_rtol, op.inputs, fixed16, wide):
            found.append(Violation(op.name, op.kind, f"output {j}", message))
    for limit in row.limits:
        message = limit(op)
        if message:
            found.append(Violation(op.name, op.kind, "output 0", message))
    return found
