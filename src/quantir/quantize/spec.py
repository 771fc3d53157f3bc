"""The LiteRT (TFLite) int8 quantization spec as data, and a checker.

Source: LiteRT ``tflite/g3doc/performance/quantization_spec.md`` and the kernels' Prepare
checks (docs/numerics.md §2-§3). One row per op kind says what each operand and the result
must look like:

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
from typing import Sequence

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


# The table. Keys are TFLite builtin operator names.
SPEC: dict[str, OpSpec] = {
    "CONV_2D": OpSpec((ACT, WEIGHT(0), BIAS), ACT),
    "DEPTHWISE_CONV_2D": OpSpec((ACT, WEIGHT(3), BIAS), ACT),
    "FULLY_CONNECTED": OpSpec((ACT, WEIGHT(0), BIAS), ACT),
    "TRANSPOSE_CONV": OpSpec((ANY, WEIGHT(0), ACT, BIAS), ACT),
    "ADD": OpSpec((ACT, ACT), ACT),
    "SUB": OpSpec((ACT, ACT), ACT),
    "MUL": OpSpec((ACT, ACT), ACT),
    "MEAN": OpSpec((ACT, ANY), ACT),
    "SUM": OpSpec((ACT, ANY), ACT),
    "HARD_SWISH": OpSpec((ACT,), ACT),
    "LEAKY_RELU": OpSpec((ACT,), ACT),
    "RELU": OpSpec((ACT,), ACT),
    "RELU6": OpSpec((ACT,), ACT),
    "PRELU": OpSpec((ACT, ACT), ACT),
    "QUANTIZE": OpSpec((ANY,), ACT),
    "DEQUANTIZE": OpSpec((ACT,), ANY),
    "AVERAGE_POOL_2D": OpSpec((ACT,), SAME_AS(0)),
    "MAX_POOL_2D": OpSpec((ACT,), SAME_AS(0)),
    "CONCATENATION": OpSpec((ACT,), SAME_AS(0), variadic=True,
                            note="every input shares the output's scale and zero point"),
    "RESHAPE": OpSpec((ACT, ANY), SAME_AS(0)),
    "SQUEEZE": OpSpec((ACT,), SAME_AS(0)),
    "EXPAND_DIMS": OpSpec((ACT, ANY), SAME_AS(0)),
    "TRANSPOSE": OpSpec((ACT, ANY), SAME_AS(0)),
    "PAD": OpSpec((ACT, ANY), SAME_AS(0)),
    "PADV2": OpSpec((ACT, ANY, SAME_AS(0)), SAME_AS(0)),
    "SLICE": OpSpec((ACT, ANY, ANY), SAME_AS(0)),
    "STRIDED_SLICE": OpSpec((ACT, ANY, ANY, ANY), SAME_AS(0)),
    "GATHER": OpSpec((ACT, ANY), SAME_AS(0)),
    "SPLIT": OpSpec((ANY, ACT), SAME_AS(1)),
    "SPACE_TO_DEPTH": OpSpec((ACT,), SAME_AS(0)),
    "DEPTH_TO_SPACE": OpSpec((ACT,), SAME_AS(0)),
    "RESIZE_BILINEAR": OpSpec((ACT, ANY), SAME_AS(0)),
    "RESIZE_NEAREST_NEIGHBOR": OpSpec((ACT, ANY), SAME_AS(0)),
    "MAXIMUM": OpSpec((ACT,), SAME_AS(0), variadic=True),
    "MINIMUM": OpSpec((ACT,), SAME_AS(0), variadic=True),
    "SOFTMAX": OpSpec((ACT,), FIXED(1.0 / 256.0, -128)),
    "LOGISTIC": OpSpec((ACT,), FIXED(1.0 / 256.0, -128)),
    "TANH": OpSpec((ACT,), FIXED(1.0 / 128.0, 0)),
    "L2_NORMALIZATION": OpSpec((ACT,), FIXED(1.0 / 128.0, 0)),
    "LOG_SOFTMAX": OpSpec((ACT,), FIXED(16.0 / 256.0, 127)),
}

# Relative tolerance for "same scale" and fixed scales: SOFTMAX's Prepare accepts 0.1 %,
# LOGISTIC and the same-scale ops want the exact value; the bias rule allows float32 rounding
# of the product (numerics.md §3.3).
SCALE_RTOL = {"SOFTMAX": 1e-3}
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
    kind: str                        # a key of SPEC
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


def _check_tensor(rule: Rule, q: QParams | None, op: QuantizedOp, where: str,
                  inputs: Sequence[QParams | None]) -> list[str]:
    if rule.kind is Kind.ANY:
        return []
    if q is None or q.scale is None:
        return [f"must be quantized, found {q.dtype if q else 'nothing'}"]
    errors: list[str] = []
    scale = np.asarray(q.scale, np.float64)
    zp = np.asarray(q.zero_point if q.zero_point is not None else 0, np.int64)
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        errors.append(f"scale must be finite and positive, found {scale.tolist()}")
    if rule.kind in (Kind.ACT, Kind.SAME_AS, Kind.FIXED):
        if q.dtype != "int8":
            errors.append(f"activations must be int8, found {q.dtype}")
        if q.per_axis and scale.size > 1:
            errors.append("activations must be quantized per tensor, found per-axis parameters")
        if np.any(zp < -128) or np.any(zp > 127):
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
        if q.dtype != "int32":
            errors.append(f"bias must be int32, found {q.dtype}")
        if np.any(zp != 0):
            errors.append("bias zero point must be 0")
        x, w = inputs[0], inputs[1]
        if x is not None and w is not None and x.scale is not None and w.scale is not None:
            expected = np.asarray(x.scale, np.float64) * np.asarray(w.scale, np.float64)
            if np.broadcast_shapes(expected.shape, scale.shape) != scale.shape or not _close(scale, expected, BIAS_RTOL):
                errors.append(f"bias scale must equal input_scale × weight_scale "
                              f"({_fmt(expected)}), found {_fmt(scale)}")
    if rule.kind is Kind.SAME_AS:
        ref = inputs[rule.same_as] if rule.same_as is not None and rule.same_as < len(inputs) else None
        if ref is not None and ref.scale is not None:
            rtol = SCALE_RTOL.get(op.kind, 1e-6)
            if not _close(scale, ref.scale, rtol) or not np.array_equal(zp, np.asarray(ref.zero_point or 0)):
                errors.append(f"must have the same scale and zero point as input {rule.same_as} "
                              f"({_fmt(ref.scale)}, {_fmt(ref.zero_point)}), found ({_fmt(scale)}, {_fmt(zp)})")
    if rule.kind is Kind.FIXED and rule.fixed is not None:
        want_scale, want_zp = rule.fixed
        rtol = SCALE_RTOL.get(op.kind, 1e-6)
        if not _close(scale, want_scale, rtol) or np.any(zp != want_zp):
            errors.append(f"output parameters must be ({want_scale:g}, {want_zp}), "
                          f"found ({_fmt(scale)}, {_fmt(zp)})")
    return errors


def _fmt(a) -> str:
    a = np.asarray(a)
    if a.size == 1:
        return f"{a.reshape(()).item():.9g}"
    return "[" + ", ".join(f"{v:.6g}" for v in a.ravel()[:4]) + (", ..." if a.size > 4 else "") + "]"


def _hard_swish_limit(op: QuantizedOp) -> str | None:
    """HARD_SWISH's Prepare takes ``s_in / (128 · s_out)`` as a multiplier below one and refuses
    the model otherwise: an output range much narrower than the input's."""
    x, y = (op.inputs[0] if op.inputs else None), (op.outputs[0] if op.outputs else None)
    if x is None or y is None or x.scale is None or y.scale is None or x.per_axis or y.per_axis:
        return None
    ratio = float(np.float32(x.scale)) / (128.0 * float(np.float32(y.scale)))
    if ratio >= 1.0:
        return (f"input scale / (128 · output scale) = {ratio:.6g} must be below 1 (LiteRT's Prepare refuses it): "
                f"the output scale must be above input scale / 128 = {float(x.scale) / 128:.6g}")
    return None


# What LiteRT's kernels refuse at Prepare beyond the table's parameter rules, per kind.
KERNEL_LIMITS = {"HARD_SWISH": _hard_swish_limit}


def check_op(op: QuantizedOp) -> list[Violation]:
    spec = SPEC.get(op.kind)
    if spec is None:
        return []
    found: list[Violation] = []
    rules = spec.inputs if not spec.variadic else (spec.inputs[0],) * len(op.inputs)
    for i, (rule, q) in enumerate(zip(rules, op.inputs)):
        for message in _check_tensor(rule, q, op, f"input {i}", op.inputs):
            found.append(Violation(op.name, op.kind, f"input {i}", message))
    if spec.variadic and op.outputs:
        # every input shares the output's parameters: check each against the output
        out = op.outputs[0]
        for i, q in enumerate(op.inputs):
            if q is None or q.scale is None or out.scale is None:
                continue
            if not _close(q.scale, out.scale, 1e-6) or not np.array_equal(np.asarray(q.zero_point), np.asarray(out.zero_point)):
                found.append(Violation(op.name, op.kind, f"input {i}",
                                       f"must share the output's scale and zero point ({_fmt(out.scale)}, "
                                       f"{_fmt(out.zero_point)}), found ({_fmt(q.scale)}, {_fmt(q.zero_point)})"))
    for j, q in enumerate(op.outputs):
        rule = spec.output if not (spec.variadic and spec.output.kind is Kind.SAME_AS) else ACT
        for message in _check_tensor(rule, q, op, f"output {j}", op.inputs):
            found.append(Violation(op.name, op.kind, f"output {j}", message))
    limit = KERNEL_LIMITS.get(op.kind)
    message = limit(op) if limit is not None else None
    if message:
        found.append(Violation(op.name, op.kind, "output 0", message))
    return found


def check(ops: Sequence[QuantizedOp]) -> CheckReport:
    """Validate every op against the table; ops the table does not list are reported as unknown."""
    report = CheckReport()
    for op in ops:
        if op.kind not in SPEC:
            report.unknown.append(op.kind)
            continue
        report.checked += 1
        report.violations.extend(check_op(op))
    return report
