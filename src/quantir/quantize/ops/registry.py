"""The registry of quantized-op declarations: one ``QuantOp`` per integer op.

A declaration holds, in one place, everything quantir knows about one integer op: the float
patterns that become it (each with its ``check`` and its lowering), the LiteRT builtin it is
and its spec row(s), the solver's rules for its output range (the limits its kernel's Prepare
enforces), the IR checks ``quantir check`` adds, and the interpreter binding. The spec table,
``quantir check``, the annotation, the solver, the lowering and the interpreter read the
registry; the backends keep their own tables keyed by the op's ``OpDef``, and the coverage
test (tests/quantize/test_op_coverage.py) holds every table to the registry, unless the
declaration says, in ``cannot``, why that format cannot express the op.

Adding an op: docs/adding-an-op.md.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Callable, Mapping

from ...ir import Operation
from ...ir.opdef import OpDef
from ...rewrite import Rule
from ..builtins import BuiltinOperator
from ..regions import QuantizerPattern, Region
from ..rules import OpSpec, QuantizedOp


class Format(StrEnum):
    """The places a quantized op must be handled, each by its own table."""

    INTERPRETER = "interpreter"        # quantir's reference interpreter (a kernel)
    CHECK = "check"                    # `quantir check` on quantir's IR (a spec view)
    QDQ = "qdq"                        # ONNX QDQ export (backends.onnx)
    QOPERATOR = "qoperator"            # ONNX QOperator export (QLinear* / com.microsoft)
    TFLITE_EXPORT = "tflite-export"    # .tflite writer (backends.tflite)
    TFLITE_IMPORT = "tflite-import"    # .tflite reader (frontends.tflite)


@dataclass(frozen=True)
class SolverRules:
    """How the solver treats an op's output range beyond the spec row (SAME_AS and FIXED
    outputs come from the row). Each hook encodes a limit of the LiteRT kernel's Prepare."""

    # (lo, hi, input scale) -> the range to use: a range the kernel refuses, widened
    output_range: Callable[[float, float, float], tuple[float, float]] | None = None
    # the scales of the op's non-constant inputs -> the finest output scale its kernel accepts
    finest_output_scale: Callable[[list[float]], "float | None"] | None = None
    # weighted ops: (region, input scale, WeightParams) -> the output scale floor for a zero range
    degenerate_floor: Callable[..., float] | None = None
    # weighted ops: (region, input scale, WeightParams, output ActParams) -> raise if unrepresentable
    check_weights: Callable[..., None] | None = None
    # the lowering requantizes each input to the output's parameters (CONCATENATION): an input
    # with fixed parameters (a softmax's) then stays out of the op's same-scale class
    requantizes_inputs: bool = False
    # every input of the op, constants included, in one same-scale class (the comparisons: the
    # kernel compares in one scale, and a constant outside the activations' range would saturate)
    shared_inputs: bool = False
    # the finest scale the class of the op's inputs accepts (its range is widened up to it)
    finest_input_scale: float | None = None
    # (lo, hi) of the op's input -> the part of it the op's output can tell apart (hard-swish is 0
    # below -3): a value that feeds only such ops is quantized over that part, saturating the rest
    input_range: Callable[[float, float], tuple[float, float]] | None = None
    # the output holds values of the op's constant inputs (a lookup in a constant table): its range
    # covers theirs, not only the part calibration happened to read
    covers_constant_inputs: bool = False
    # finest_output_scale for the op's 16x8 kernel (Config(activations="int16")); None: the int8 rule
    finest_output_scale16: Callable[[list[float]], "float | None"] | None = None


@dataclass(frozen=True)
class Interior:
    """A value inside an op that no tensor of the float graph holds (an LSTM's cell state at every
    step) but whose range sets one of the op's parameters. Calibration feeds ``observe``'s arrays
    to the observers of ``carrier`` (a result of the region's float op standing in for it, so the
    statistics keep it under a name); the solver turns the observed range into ``params``."""

    carrier: Any                                           # ir.Value
    observe: Callable[[Callable[[Any], Any]], Any]         # (value -> its array on the batch) -> array
    params: Callable[[float, float], Any]                  # (lo, hi) -> params.ActParams


@dataclass(frozen=True)
class SampleWeights:
    """Weights an op rounds with the kept calibration samples its own way (an LSTM's gate matrices,
    one scale each). The solver sums ``sums`` over the kept batches of the region's float input and
    hands the totals (None without kept samples) to ``params``, whose ``WeightParams`` the lowering
    reads by weight value; ``hessian`` says whether ``Config.weight_rounding`` asks for GPTQ."""

    sums: Callable[[Region, Any], tuple]                              # (region, float input) -> arrays
    params: Callable[[Region, "tuple | None", bool], Mapping[Any, Any]]   # -> {weight value: WeightParams}


@dataclass(eq=False)
class QuantOp:
    """One quantized op. ``opdef`` is the integer op (a ``qnn`` op, or a data-movement ``nn`` op
    whose kernel copies stored integers, or a quant cast); ``builtin`` its LiteRT operator."""

    opdef: OpDef
    builtin: BuiltinOperator
    spec: OpSpec
    patterns: tuple[QuantizerPattern, ...] = ()
    # the interpreter binding: kernel(op, *arrays); None when the opdef's float kernel already
    # moves stored integers (data movement) or the quant dialect's cast kernels serve it
    kernel: Callable[..., Any] | None = None
    # more LiteRT builtins this op may become, with their rows (DEPTHWISE_CONV_2D, RELU6, PADV2 ...)
    rows: Mapping[BuiltinOperator, OpSpec] = field(default_factory=dict)
    # the spec view of one op for `quantir check`; default: every operand and result as they are
    view: Callable[[Operation], "QuantizedOp | None"] | None = None
    # what LiteRT refuses in the op's options (softmax beta, leaky alpha): a message or None
    ir_limits: tuple[Callable[[Operation], "str | None"], ...] = ()
    solver: SolverRules = SolverRules()
    # False when the op's result is not quantized (a comparison's bool, ARG_MAX's or SHAPE's
    # integers): the result keeps the float op's type, is neither observed nor given
    # parameters, and the lowering hands it to the float ops after it as it is
    output_quantized: bool = True
    # after calibration: (region, the calibrated (lo, hi) of each input's same-scale class, the output's
    # (lo, hi) or None when it is not quantized) -> why
    # the region must stay float after all (a range the kernel cannot take), or None; the solver
    # returns the refused regions to float before it decides anything
    calibrated_check: Callable[[Region, list[tuple[float, float]], "tuple[float, float] | None"],
                               "str | None"] | None = None
    # the float ops an ONNX QDQ model shows it as (`quantir check model.onnx`)
    qdq_ops: tuple[OpDef, ...] = ()
    # format -> why that format cannot express the op (the coverage test accepts these)
    cannot: Mapping[Format, str] = field(default_factory=dict)
    doc: str = ""
    # the interpreter's kernel has LiteRT's 16x8 path (int16 activations, zero point 0); an op
    # without one stays int8 under Config(activations="int16"), requantized at its boundary
    int16: bool = False
    # False when the 16x8 lowering writes other builtins in place of ``builtin``, which has no int16
    # kernel (HARD_SWISH: ADD, MUL, MUL): the builtin then stays out of the spec's 16x8 table
    int16_builtin: bool = True
    # a FIXED output's (scale, zero point) in int16, where the 16x8 kernel fixes them too
    int16_fixed: tuple[float, int] | None = None
    # (region) -> the values inside the op calibration must observe (``Interior``)
    interior: Callable[[Region], "tuple[Interior, ...]"] | None = None
    # weights rounded from the kept samples outside the conv/FC path (``SampleWeights``)
    sample_weights: SampleWeights | None = None

    @property
    def name(self) -> str:
        return self.opdef.name

    def all_rows(self) -> dict[BuiltinOperator, OpSpec]:
        return {self.builtin: self.spec, **self.rows}


DECLARATIONS: dict[OpDef, QuantOp] = {}
_PATTERNS: list[QuantizerPattern] = []
# Float ops with no LiteRT builtin, rewritten before calibration into float ops that declarations
# quantize (HardSigmoid: MUL, ADD and a clamp). Every interior value is then a value of the float
# graph: observed, given its own parameters, seen by the integer trace and CalibrationInfo.
EXPANSIONS: list[Rule] = []


def declare_expansion(rule: Rule) -> Rule:
    """Register a float rewrite that expands an op no LiteRT builtin computes into ops that some do."""
    if any(r.name == rule.name for r in EXPANSIONS):
        raise RuntimeError(f"expansion '{rule.name}' is declared twice")
    EXPANSIONS.append(rule)
    return rule


def declare(op: QuantOp) -> QuantOp:
    """Register ``op``: its patterns learn their declaration; a second declaration of the same
    OpDef, pattern name or builtin row is a programming error."""
    if op.opdef in DECLARATIONS:
        raise RuntimeError(f"'{op.opdef.name}' is declared twice")
    rows = {b.name for d in DECLARATIONS.values() for b in d.all_rows()}
    for builtin in op.all_rows():
        if builtin.name in rows and op.opdef.name.startswith("qnn."):
            raise RuntimeError(f"LiteRT {builtin.name} already has a row (declaring '{op.opdef.name}')")
    names = {p.name for p in _PATTERNS}
    bound = []
    for p in op.patterns:
        if p.name in names:
            raise RuntimeError(f"pattern '{p.name}' is declared twice")
        bound.append(dataclasses.replace(p, op=op))
    op.patterns = tuple(bound)
    _PATTERNS.extend(bound)
    DECLARATIONS[op.opdef] = op
    return op


def patterns() -> tuple[QuantizerPattern, ...]:
    """Every declared pattern in the order annotation tries them: by priority (a larger fusion
    first), then in declaration order."""
    return tuple(sorted(_PATTERNS, key=lambda p: p.priority))


def declaration_for(opdef: OpDef) -> QuantOp | None:
    return DECLARATIONS.get(opdef)
