"""Every declared quantized op is handled by every format, or its declaration says why not.

The formats keep their own tables keyed by the op's OpDef (the backends) or by its LiteRT
builtin (the .tflite reader); the registry (``quantir.quantize.ops``) is the list they are held
to. A table that forgets an op fails here, naming the op and the table.
"""
from __future__ import annotations

from quantir.backends.onnx import qdq, qoperator
from quantir.backends.tflite.export import RULES as TFLITE_EXPORT
from quantir.frontends.tflite import CONVERTERS as TFLITE_IMPORT
from quantir.ir.dialects import nn, qnn, quant
from quantir.ir.opdef import OpDef, Operand, Result, TypeConstraint, registered_ops
from quantir.quantize import ops, spec
from quantir.quantize.builtins import BuiltinOperator as OP
from quantir.quantize.ops import Format, QuantOp
from quantir.quantize.rules import ACT, OpSpec
from quantir.runtime import kernel_for

# The 38 ops of LiteRT's int8 quantization spec table, plus the two int8 activations quantir adds.
LITERT_SPEC_OPS = {
    "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED",
    "L2_NORMALIZATION", "LOGISTIC", "MAX_POOL_2D", "MUL", "RESHAPE", "RESIZE_BILINEAR", "SOFTMAX",
    "SPACE_TO_DEPTH", "TANH", "PAD", "GATHER", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "TRANSPOSE", "MEAN",
    "SUB", "SUM", "SQUEEZE", "LOG_SOFTMAX", "MAXIMUM", "ARG_MAX", "MINIMUM", "LESS", "PADV2", "GREATER",
    "GREATER_EQUAL", "LESS_EQUAL", "SLICE", "EQUAL", "NOT_EQUAL", "SHAPE", "QUANTIZE",
}
EXTRA_OPS = {"GELU", "HARD_SWISH"}
# The ONNX exporters' builder turns the quant casts into QuantizeLinear / DequantizeLinear itself
# (backends/onnx/builder.py), for every op's inputs and outputs: no table entry.
ONNX_BUILDER_CASTS = {quant.QCAST, quant.DCAST, quant.SCAST}


def handlers(tables: dict | None = None) -> dict:
    """Format -> does this format handle the declaration? (``tables`` overrides one for the test of the test.)"""
    t = {Format.QDQ: qdq.CONVERT, Format.QOPERATOR: qoperator.CONVERT, Format.TFLITE_EXPORT: TFLITE_EXPORT,
         Format.TFLITE_IMPORT: TFLITE_IMPORT, **(tables or {})}
    return {
        Format.INTERPRETER: lambda d: d.kernel is not None or kernel_for(d.opdef) is not None,
        Format.CHECK: lambda d: all(b.name in spec.SPEC for b in d.all_rows()),
        Format.QDQ: lambda d: d.opdef in t[Format.QDQ] or d.opdef in ONNX_BUILDER_CASTS,
        Format.QOPERATOR: lambda d: d.opdef in t[Format.QOPERATOR] or d.opdef in ONNX_BUILDER_CASTS,
        Format.TFLITE_EXPORT: lambda d: d.opdef in t[Format.TFLITE_EXPORT],
        Format.TFLITE_IMPORT: lambda d: all(b in t[Format.TFLITE_IMPORT] for b in d.all_rows()),
    }


def missing(declarations, checks) -> list[str]:
    found = []
    for d in declarations:
        for fmt, handles in checks.items():
            if fmt not in d.cannot and not handles(d):
                found.append(f"{d.name} ({d.builtin.name}): no {fmt} entry, and its declaration gives no reason")
    return found


def test_every_declared_op_is_handled_by_every_format():
    assert missing(ops.DECLARATIONS.values(), handlers()) == []


def test_every_format_is_checked():
    assert set(handlers()) == set(Format)


def test_a_reason_names_a_format():
    for d in ops.DECLARATIONS.values():
        assert set(d.cannot) <= set(Format), d.name
        assert all(reason.strip() for reason in d.cannot.values()), d.name


# -- the test of the test: a forgotten table fails ------------------------------------------------------

def _new_op() -> QuantOp:
    q = TypeConstraint("anything", lambda t: True)
    opdef = OpDef("qnn.test_only_op", operands=(Operand("x", q),), results=(Result("y", q),))   # not registered
    return QuantOp(opdef, OP.ELU if hasattr(OP, "ELU") else OP.ABS, OpSpec((ACT,), ACT))


def test_a_declared_op_that_no_table_knows_fails_every_format():
    problems = missing([_new_op()], handlers())
    assert len(problems) == len(Format)
    assert problems[0] == "qnn.test_only_op (ABS): no interpreter entry, and its declaration gives no reason"


def test_a_table_that_forgets_one_op_fails_naming_it():
    forgetful = {k: v for k, v in qdq.CONVERT.items() if k is not qnn.TANH}
    assert missing(ops.DECLARATIONS.values(), handlers({Format.QDQ: forgetful})) == [
        "qnn.tanh (TANH): no qdq entry, and its declaration gives no reason"]
    no_reshape = {k: v for k, v in TFLITE_IMPORT.items() if k is not OP.RESHAPE}
    assert missing(ops.DECLARATIONS.values(), handlers({Format.TFLITE_IMPORT: no_reshape})) == [
        "nn.reshape (RESHAPE): no tflite-import entry, and its declaration gives no reason",
        "nn.flatten (RESHAPE): no tflite-import entry, and its declaration gives no reason"]


def test_a_reason_in_the_declaration_excuses_a_format():
    op = _new_op()
    op.cannot = {f: "the test says so" for f in Format}
    assert missing([op], handlers()) == []


# -- the LiteRT spec table, op by op -----------------------------------------------------------------------

def _declared_everywhere() -> set[str]:
    checks = handlers()
    out = set()
    for d in ops.DECLARATIONS.values():
        if all(fmt in d.cannot or handles(d) for fmt, handles in checks.items()):
            out.update(b.name for b in d.all_rows())
    return out


def test_every_op_of_the_litert_spec_table_plus_gelu_and_hard_swish_is_covered_by_every_backend():
    assert len(LITERT_SPEC_OPS) == 38
    assert (LITERT_SPEC_OPS | EXTRA_OPS) - _declared_everywhere() == set()


def test_the_spec_table_has_no_row_left_without_a_declaration_but_those_listed():
    # rows quantir checks in files it reads but never produces (TRANSPOSE_CONV, PRELU, ...)
    assert not set(spec.UNDECLARED) & (LITERT_SPEC_OPS | EXTRA_OPS)


def test_every_integer_op_has_a_declaration():
    # a qnn op that no declaration names would escape every table above
    undeclared = [d.name for d in registered_ops() if d.name.startswith("qnn.") and ops.declaration_for(d) is None]
    assert undeclared == []


def test_data_movement_ops_have_declarations_or_are_listed():
    # the nn ops whose kernels copy stored integers and that a pattern quantizes are declared
    for opdef in (nn.RESHAPE, nn.FLATTEN, nn.TRANSPOSE, nn.SQUEEZE, nn.UNSQUEEZE, nn.SLICE):
        assert ops.declaration_for(opdef) is not None, opdef.name


def test_every_op_with_a_16x8_kernel_has_an_integer_qoperator_form():
    """A declaration with ``int16=True`` (LiteRT has its 16x8 kernel) needs a converter in the QOperator
    export's int16 table (``qoperator.WIDE``: sixteen.py, a 65,536-entry table, or data movement) that
    is not the QDQ form, or a promoted model's QOperator export quantizes again after it."""
    from quantir.backends.onnx import tables
    forgotten = [d.name for d in ops.DECLARATIONS.values()
                 if getattr(d, "int16", False) and d.opdef not in ONNX_BUILDER_CASTS
                 and qoperator.WIDE.get(d.opdef, qdq.CONVERT.get(d.opdef)) is qdq.CONVERT.get(d.opdef)]
    assert forgotten == []
    assert qoperator.WIDE[qnn.LOGISTIC] is tables.lookup
