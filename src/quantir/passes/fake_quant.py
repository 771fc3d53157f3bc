"""``--convert-fake-quant`` (:class:`ConvertFakeQuant`): the original design's conversion of
simulated quantization into quantized types, after MLIR's old ``ConvertSimulatedQuant`` pass.

Each ``quant.const_fake_quant`` (and ``quant.const_fake_quant_per_axis``) becomes

    %q = quant.qcast %x : tensor<..xf32> to tensor<..x!quant.uniform<...>>
    %y = quant.dcast %q : tensor<..x!quant.uniform<...>> to tensor<..xf32>

whose type holds the grid the op simulates (TensorFlow's ``FakeQuantWithMinMaxArgs``):

* storage ``i<num_bits>`` when ``is_signed`` (``[-2^(n-1), 2^(n-1) - 1]``), else ``u<num_bits>``
  (``[0, 2^n - 1]``); ``narrow_range`` raises the storage minimum by one (``i8<-127:127>``).
* scale and zero point from :func:`quantir.numerics.fake_quant.fake_quant_qparams`: exact
  arithmetic on TensorFlow's unsigned grid, the scale rounded once to float32, the zero point
  rounded half away from zero and clamped (a range that does not contain 0 is nudged to touch it).
* per-axis: one (scale, zero point) per ``min``/``max`` pair, ``quantized_dimension = axis``.

Where this differs from the MLIR fork's ``fakeQuantAttrsToType`` (docs/mlir-quant-spec.md §8.2):
the fork widens ``num_bits`` other than 4/8/16 to the next of those with its full range (6 bits
quantized on 255 steps, not the 63 the op simulates); quantir keeps ``num_bits``. The fork keeps a
double scale and rounds the zero point on the storage grid (signed and unsigned can then give
different grids at a tie, ``[-1, 1]``: ``u8`` zero point 128, ``i8`` -1); quantir's scale is the
float32 a deployed model stores and signed storage is the unsigned grid shifted. A range narrower
than double's epsilon is the fork's special case, kept (scale 1.0, zero point ``qmin``).
``min > max`` never gets here: the ops' verifier refuses it (``illegal min and max``).

What the pair computes (the interpreter: QUANTIZE then DEQUANTIZE) is TensorFlow's fake quant on
the same grid except at ties: TensorFlow rounds ``x / scale`` half up, QUANTIZE half away from zero,
so an input exactly half a step below a negative grid point goes one step lower
(``tests/passes/test_fake_quant.py`` checks equality everywhere else).
"""
from __future__ import annotations

from ..errors import VerifyError
from ..ir.core import Block, Module, Operation
from ..ir.dialects import quant
from ..numerics.fake_quant import fake_quant_qparams, fake_quant_storage_range
from ..types import IntegerType, TensorType, Type, UniformQuantizedPerAxisType, UniformQuantizedType
from . import PassResult

__all__ = ["ConvertFakeQuant", "convert_fake_quant", "fake_quant_type"]

_FAKE_QUANTS = (quant.CONST_FAKE_QUANT, quant.CONST_FAKE_QUANT_PER_AXIS)


def fake_quant_type(op: Operation) -> Type:
    """The ``!quant.uniform`` element type that replaces fake-quant ``op``."""
    bits, narrow, signed = op.attr("num_bits"), bool(op.attr("narrow_range")), bool(op.attr("is_signed"))
    qmin, qmax = fake_quant_storage_range(bits, narrow, signed)
    common = dict(storage_type=IntegerType(bits), expressed_type=op.operands[0].type.element_type,
                  is_signed=signed, storage_min=qmin, storage_max=qmax)
    per_axis = op.opdef is quant.CONST_FAKE_QUANT_PER_AXIS
    ranges = zip(op.attr("min"), op.attr("max")) if per_axis else [(op.attr("min"), op.attr("max"))]
    try:
        params = [fake_quant_qparams(lo, hi, bits, narrow, signed) for lo, hi in ranges]
    except ValueError as e:
        raise VerifyError(f"'{op.name}' op: {e}", op.loc) from None
    if not per_axis:
        return UniformQuantizedType(scale=params[0][0], zero_point=params[0][1], **common)
    return UniformQuantizedPerAxisType(scales=tuple(s for s, _ in params), zero_points=tuple(z for _, z in params),
                                       quantized_dimension=op.attr("axis"), **common)


def _replace(block: Block, op: Operation) -> None:
    x, t = op.operands[0], op.results[0].type
    assert isinstance(t, TensorType)
    q_t = t.clone(element_type=fake_quant_type(op))
    q = block.insert_before(op, Operation(quant.QCAST, [x], [q_t], loc=op.loc)).results[0]
    y = block.insert_before(op, Operation(quant.DCAST, [q], [t], loc=op.loc)).results[0]
    if op.results[0].name_hint:
        y.name_hint = op.results[0].name_hint
    op.results[0].replace_all_uses_with(y)
    block.detach(op)   # compacted once per function (Block.detach)


class ConvertFakeQuant:
    """Every fake-quant op of every function into its qcast/dcast pair (stats: ``convert:<op>``)."""

    name = "convert-fake-quant"
    options = None

    def run(self, module: Module) -> PassResult:
        stats: dict[str, int] = {}
        for fn in module.functions:
            if fn.body is None:
                continue
            found = [op for op in fn.body.ops if op.opdef in _FAKE_QUANTS]
            for op in found:
                _replace(fn.body, op)
                stats["convert:" + op.name] = stats.get("convert:" + op.name, 0) + 1
            if found:
                fn.body.ops[:] = [op for op in fn.body.ops if op.block is fn.body]
        return PassResult(bool(stats), stats)


def convert_fake_quant(module: Module) -> bool:
    """:class:`ConvertFakeQuant` on ``module`` (in place); True when it changed anything."""
    return ConvertFakeQuant().run(module).modified
