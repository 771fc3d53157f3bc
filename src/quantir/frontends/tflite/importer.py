"""The TFLite importer: one subgraph -> one ``func.func @main`` of ``qnn``/``quant`` ops (and ``nn``
ops for float32 operators).

Design notes
- Operators are converted in file order (TFLite stores them in execution order); each
  converter (``ops_*`` modules) sees an :class:`OpContext` and emits the op(s) for it.
- Layouts are tracked per tensor, never decided globally: a tensor has a *native* IR value
  (the one its producer made, NCHW for conv/pool outputs, the TFLite layout otherwise) and
  further forms are made on demand with one cached ``nn.transpose`` (see :mod:`.layout`).
  A conv -> conv chain therefore stays NCHW, and a transpose appears only where an op needs
  the other layout — a graph output, a reshape of data whose order differs, softmax over
  NHWC channels.
- Constants are materialised per layout at compile time (``arith.constant`` of the stored
  integers + ``quant.scast``, as ``quantize.lower`` does), so weights are transposed once
  in numpy, never at run time.
- Names: an IR value holding a TFLite tensor in the TFLite layout carries the tensor's name
  (made unique and non-empty); other layouts get a suffix (``conv1__nchw``). ``bindings``
  record, per non-constant tensor, the named value and its permutation, which is what
  comparing every intermediate with LiteRT needs.
- Files are represented faithfully: spec violations that the IR can express (asymmetric
  weights, odd bias scales, softmax output parameters) are imported for ``quantir check`` to
  flag; ops quantir does not know, float16/float64 tensors raise ``UnsupportedOpError``;
  inconsistent shapes or missing constant data raise ``ModelFormatError``.
- An operator that computes in float32 (a float32 tensor other than QUANTIZE's input or
  DEQUANTIZE's output) goes to the float converters (``nn`` ops, :mod:`.ops_float`); a hybrid
  one (float32 input, int8 constant weights) to the dynamic-range converters; the rest to the
  int8 converters.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ...backends.tflite.model import Model, Operator, Tensor
from ...backends.tflite.schema import OPERATOR_OPTIONS, ActivationFunctionType, BuiltinOperator
from ...backends.tflite.schema import TensorType as TFLType
from ...errors import ModelFormatError, QuantirError, ShapeError, UnsupportedOpError, VerifyError
from ...ir import Function, Module, Operation, StringAttr, Value, elements_attr, verify_function
from ...ir.dialects import arith, func, nn, quant
from ...ir.opdef import OpDef, from_attr
from ...numerics import quantize_multipliers
from ...types import QuantizedType, TensorType, Type
from . import layout as L
from .tensors import dims, element_type, is_quantized

__all__ = ["Binding", "TFLiteImport", "Importer", "OpContext", "Converter", "fixed_point"]

Converter = Callable[["OpContext"], None]
FLOAT_TYPES = (TFLType.FLOAT32, TFLType.FLOAT16, TFLType.FLOAT64, TFLType.BFLOAT16)
ACTIVATIONS = {ActivationFunctionType.NONE: "NONE", ActivationFunctionType.RELU: "RELU",
               ActivationFunctionType.RELU6: "RELU6", ActivationFunctionType.RELU_N1_TO_1: "RELU_N1_TO_1"}


@dataclass(frozen=True)
class Binding:
    """Where a TFLite tensor lives in the IR: ``np.transpose(run(...)[name], to_tflite)`` is the
    tensor (``to_tflite`` None: same layout)."""

    name: str
    to_tflite: tuple[int, ...] | None


@dataclass
class TFLiteImport:
    """The imported module and, per non-constant tensor index of the subgraph, its binding."""

    module: Module
    bindings: dict[int, Binding]


def fixed_point(real: np.ndarray) -> dict[str, list[int]]:
    """``multiplier``/``shift`` attributes (LiteRT's QuantizeMultiplier) of real multipliers."""
    m, s = quantize_multipliers(real)
    return {"multiplier": m.tolist(), "shift": s.tolist()}


class Importer:
    """Converts one subgraph; ``run()`` returns the :class:`TFLiteImport`. Holds the per-tensor
    layout forms, the constant cache and the name table."""

    def __init__(self, model: Model, subgraph: int, source: str, converters: dict[BuiltinOperator, Converter],
                 hybrid: dict[BuiltinOperator, Converter] | None = None,
                 floats: dict[BuiltinOperator, Converter] | None = None):
        if not 0 <= subgraph < len(model.subgraphs):
            raise ModelFormatError(f"{source}: subgraph {subgraph} does not exist; the model has "
                                   f"{len(model.subgraphs)}")
        self.model = model
        self.sg = model.subgraphs[subgraph]
        self.source = source
        self.converters = converters
        self.hybrid = hybrid or {}   # dynamic-range ops: float input, int8 constant weights
        self.floats = floats or {}   # float32 ops (nn)
        self.names = self._unique_tensor_names()
        self.used: set[str] = set(self.names)
        self.forms: dict[int, dict[L.Perm, Value]] = {}   # non-constant tensors: layout -> value
        self.native: dict[int, L.Perm] = {}
        self.constants: dict[tuple, Value] = {}
        self.named_constants: set[int] = set()
        self.fn: Function

    # -- names --------------------------------------------------------------------------------
    def _unique_tensor_names(self) -> list[str]:
        names: list[str] = []
        seen: set[str] = set()
        for i, t in enumerate(self.sg.tensors):
            name = t.name or f"tensor{i}"
            if name in seen:
                name = f"{name}_{i}"
                while name in seen:
                    name += "_"
            seen.add(name)
            names.append(name)
        return names

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}{k}", k + 1
        self.used.add(name)
        return name

    # -- tensors ------------------------------------------------------------------------------
    def tensor(self, idx: int) -> Tensor:
        return self.sg.tensors[idx]

    def data(self, idx: int) -> np.ndarray | None:
        return self.model.tensor_data(self.tensor(idx))

    def ir_type(self, idx: int, perm: L.Perm, lead: int = 0) -> TensorType:
        """The IR type of tensor ``idx`` in layout ``perm`` (after ``lead`` leading unit dims)."""
        t = self.tensor(idx)
        shape = (1,) * lead + dims(t)
        if len(perm) != len(shape):
            raise ModelFormatError(f"tensor '{t.name}' has rank {len(shape) - lead}, expected {len(perm) - lead}")
        return TensorType(L.ir_shape(shape, perm), element_type(t, lambda a: perm[a + lead]))

    def define(self, idx: int, v: Value, perm: L.Perm) -> None:
        if idx in self.forms or self.data(idx) is not None:
            raise ModelFormatError(f"tensor '{self.names[idx]}' is written twice (by two operators, or it is a "
                                   f"graph input or a constant)")
        v.name_hint = self.names[idx]
        self.forms[idx] = {perm: v}
        self.native[idx] = perm

    def value(self, idx: int, perm: L.Perm, user: str = "an operator") -> Value:
        """Tensor ``idx`` in layout ``perm``: cached, transposed from the native form, or a constant."""
        forms = self.forms.get(idx)
        if forms is None:
            if self.data(idx) is not None:
                return self.constant(idx, perm)
            raise ModelFormatError(f"{user} reads tensor '{self.names[idx]}', which is neither a graph input, "
                                   f"a constant, nor written by an earlier operator")
        if perm in forms:
            return forms[perm]
        src_perm = self.native[idx]
        op = nn.TRANSPOSE.build([forms[src_perm]], [self.ir_type(idx, perm)], perm=L.transpose_perm(src_perm, perm))
        self.fn.body.append(op)
        op.result.name_hint = self.fresh(f"{self.names[idx]}__{L.tag(perm)}")
        forms[perm] = op.result
        return op.result

    def constant(self, idx: int, perm: L.Perm, lead: int = 0, tag: str | None = None) -> Value:
        """A constant tensor in layout ``perm`` (with ``lead`` unit dims prepended), folded in numpy;
        ``tag`` names the layout in the value's name (``filter__oihw``)."""
        key = (idx, perm, lead)
        if key in self.constants:
            return self.constants[key]
        array = self.data(idx)
        if array is None:
            raise ModelFormatError(f"tensor '{self.names[idx]}' must be a constant, but its buffer holds no data")
        t = self.ir_type(idx, perm, lead)
        shape = (1,) * lead + array.shape
        array = np.ascontiguousarray(np.transpose(array.reshape(shape), L.inverse(perm))).reshape(
            tuple(shape[i] for i in L.inverse(perm)))   # (ascontiguousarray makes a scalar 1-D)
        v = self.stored_constant(array, t) if isinstance(t.element_type, QuantizedType) else self.plain_constant(array)
        v.name_hint = self.constant_name(idx, "" if not lead and L.is_identity(perm) else tag or L.tag(perm))
        self.constants[key] = v
        return v

    def constant_name(self, idx: int, suffix: str = "") -> str:
        """The tensor's own name for its first IR constant in the TFLite layout, else a fresh one."""
        if not suffix and idx not in self.named_constants:
            self.named_constants.add(idx)
            return self.names[idx]
        return self.fresh(f"{self.names[idx]}__{suffix or 'copy'}")

    def plain_constant(self, array: np.ndarray) -> Value:
        attr = elements_attr(array)
        return self.fn.body.append(arith.CONSTANT.build([], [attr.type], value=attr)).result

    def stored_constant(self, ints: np.ndarray, qtype: TensorType) -> Value:
        """Storage integers reinterpreted as the quantized type (``quant.scast``), as lowering emits."""
        storage = qtype.element_type.storage_type
        attr = elements_attr(ints, storage)
        c = self.fn.body.append(arith.CONSTANT.build([], [attr.type], value=attr)).result
        return self.fn.body.append(quant.SCAST.build([c], [qtype])).result

    # -- the whole subgraph ---------------------------------------------------------------------
    def _output_shape_ops(self) -> set[int]:
        """The operators that only compute TRANSPOSE_CONV output_shape inputs (SHAPE, MUL, ADD on int32, as
        quantir writes them for a dynamic batch) or resize sizes (``_SIZE_SLOTS``): qnn.transpose_conv
        takes its size from its input, a resize from its factors, so they are not read."""
        users: dict[int, list[tuple[int, int]]] = {}
        for k, op in enumerate(self.sg.operators):
            for slot, idx in enumerate(op.inputs):
                users.setdefault(idx, []).append((k, slot))
        outputs = set(self.sg.outputs)
        skip: set[int] = set()
        for k in reversed(range(len(self.sg.operators))):
            op = self.sg.operators[k]
            code = self.model.operator_codes[op.opcode_index]
            if all(idx not in outputs and users.get(idx) and all(
                    (u in skip) or self._reads_a_size(u, slot) for u, slot in users[idx])
                   for idx in op.outputs):
                if code.builtin_code not in _SIZE_SLOTS:
                    skip.add(k)
        return skip

    def _reads_a_size(self, k: int, slot: int) -> bool:
        """Is input ``slot`` of operator ``k`` a size that its converter takes from elsewhere?"""
        op = self.sg.operators[k]
        code = self.model.operator_codes[op.opcode_index].builtin_code
        if code == BuiltinOperator.RESHAPE and slot == 1 and self._reshape_reads_its_shape(op):
            return False
        return _SIZE_SLOTS.get(code) == slot

    def _reshape_reads_its_shape(self, op: Operator) -> bool:
        """A RESHAPE to a run-time shape with several dynamic dims, not in the form quantir writes
        for ONNX's copied dims (GATHER of the input's SHAPE): its converter reads the shape tensor."""
        out = dims(self.tensor(op.outputs[0]))
        if len(op.inputs) < 2 or op.inputs[1] < 0 or self.data(op.inputs[1]) is not None or \
                sum(d is None for d in out) <= 1:
            return False
        producer = next((o for o in self.sg.operators if op.inputs[1] in o.outputs), None)
        return producer is None or \
            self.model.operator_codes[producer.opcode_index].builtin_code != BuiltinOperator.GATHER

    def run(self) -> TFLiteImport:
        layouts = [L.identity(len(self.tensor(idx).shape)) for idx in self.sg.inputs]
        arg_types = []
        for idx, layout in zip(self.sg.inputs, layouts):
            try:
                arg_types.append(self.ir_type(idx, layout))
            except QuantirError as e:
                raise type(e)(f"{self.source}: graph input '{self.names[idx]}': {e.message}") from None
        self.fn = Function.create("main", arg_types, [],
                                  arg_attrs=[{"quantir.name": StringAttr(self.names[i])} for i in self.sg.inputs])
        for arg, idx, layout in zip(self.fn.arguments, self.sg.inputs, layouts):
            try:
                self.define(idx, arg, layout)
            except ModelFormatError as e:
                raise ModelFormatError(f"{self.source}: graph input: {e.message}") from None
        skip = self._output_shape_ops()
        for k, op in enumerate(self.sg.operators):
            if k not in skip:
                self.convert(k, op)
        outputs = []
        for idx in self.sg.outputs:
            try:
                outputs.append(self.value(idx, L.identity(len(self.tensor(idx).shape)), "the graph outputs"))
            except QuantirError as e:
                raise type(e)(f"{self.source}: graph output '{self.names[idx]}': {e.message}") from None
        self.fn.body.append(func.RETURN.build(outputs, []))
        self.fn.res_attrs = [{"quantir.name": StringAttr(self.names[i])} for i in self.sg.outputs]
        self.fn.update_type()
        bindings = self._finish_names()
        try:
            verify_function(self.fn)
        except VerifyError as e:  # every op was verified when built: this is a quantir bug
            raise VerifyError(f"{self.source}: the imported function does not verify: {e.message}") from None
        return TFLiteImport(Module([self.fn], name=self.sg.name or None), bindings)

    def _finish_names(self) -> dict[int, Binding]:
        """The TFLite-layout form of a tensor gets its plain name; its native form a suffixed one."""
        bindings = {}
        for idx, forms in self.forms.items():
            base, native = self.names[idx], self.native[idx]
            ident = L.identity(len(native))
            if ident in forms and native != ident:
                forms[native].name_hint = self.fresh(f"{base}__{L.tag(native)}")
                forms[ident].name_hint = base
                native = ident
            bindings[idx] = Binding(base, None if L.is_identity(native) else native)
        return bindings

    def convert(self, k: int, op: Operator) -> None:
        code = self.model.operator_codes[op.opcode_index]
        ctx = OpContext(self, k, op, code.custom_code or code.name)
        try:
            try:
                builtin = BuiltinOperator(code.builtin_code) if code.custom_code is None else None
            except ValueError:
                builtin = None
            hybrid = self.hybrid.get(builtin) if builtin is not None and self.is_hybrid(op) else None
            if hybrid is None:
                ctx.check_tensor_types()
            computes_in_float = hybrid is None and ctx.computes_in_float()
            if computes_in_float:
                ctx.check_not_mixed()
            table = self.floats if computes_in_float else self.converters
            convert = hybrid or (table.get(builtin) if builtin is not None else None)
            if convert is None:
                kind = "custom op" if code.custom_code is not None else "op"
                if computes_in_float:
                    raise UnsupportedOpError(
                        f"this is a float {ctx.op_name}, which quantir does not read (its float32 ops: "
                        f"{', '.join(sorted(b.name for b in self.floats))}); keep float models in ONNX and quantize "
                        f"them with quantir")
                raise UnsupportedOpError(f"{kind} {ctx.op_name} is not supported; quantir reads int8 models made of "
                                         f"{', '.join(sorted(b.name for b in self.converters))}")
            if len(op.outputs) != 1 and builtin not in _SEVERAL_OUTPUTS:
                raise ModelFormatError(f"expected 1 output, found {len(op.outputs)}")
            convert(ctx)
        except UnsupportedOpError as e:
            raise UnsupportedOpError(f"{self.source}: {ctx.describe()}: {e.message}") from None
        except (ModelFormatError, VerifyError, ShapeError) as e:
            raise ModelFormatError(f"{self.source}: {ctx.describe()}: {e.message}") from None


    def is_hybrid(self, op: Operator) -> bool:
        """LiteRT's dynamic-range form: an int8 constant (the weights) among the inputs and a float32
        result (FULLY_CONNECTED, conv and BATCH_MATMUL read a float32 activation; EMBEDDING_LOOKUP's
        other input is its ids)."""
        if not op.outputs or op.outputs[0] < 0 or self.tensor(op.outputs[0]).type is not TFLType.FLOAT32:
            return False
        return any(i >= 0 and self.tensor(i).type is TFLType.INT8 and self.data(i) is not None for i in op.inputs)


# The operators whose size input (slot) the converters do not read: TRANSPOSE_CONV's output_shape
# (its size follows from its input), a resize's size (constant, the declared output, or quantir's
# SHAPE → STRIDED_SLICE → MUL of dynamic H, W, which frontends.tflite.ops_window reads as factors)
_SIZE_SLOTS = {BuiltinOperator.TRANSPOSE_CONV: 0, BuiltinOperator.RESIZE_BILINEAR: 1,
               BuiltinOperator.RESIZE_NEAREST_NEIGHBOR: 1,
               # a run-time target: the declared dims, or quantir's SHAPE → CONCATENATION → GATHER
               BuiltinOperator.RESHAPE: 1}


_SEVERAL_OUTPUTS = (BuiltinOperator.SPLIT, BuiltinOperator.SPLIT_V)   # their converters define each output


class OpContext:
    """One operator as its converter sees it: tensors, constants, layouts, and an ``emit``."""

    def __init__(self, importer: Importer, index: int, op: Operator, op_name: str):
        self.imp = importer
        self.index = index
        self.op = op
        self.op_name = op_name

    def describe(self) -> str:
        outs = ", ".join(f"'{self.imp.names[i]}'" for i in self.op.outputs if 0 <= i < len(self.imp.names))
        return f"operator {self.index} ({self.op_name} -> {outs or 'no output'})"

    @property
    def options(self) -> Any:
        """The operator's options table (its defaults when the file has none)."""
        cls = OPERATOR_OPTIONS.get(BuiltinOperator(self.imp.model.operator_codes[self.op.opcode_index].builtin_code))
        if cls is None:
            return None
        if self.op.options is None:
            return cls()
        if not isinstance(self.op.options, cls):
            raise ModelFormatError(f"expected {cls.__name__}, found {type(self.op.options).__name__}")
        return self.op.options

    def activation(self, fused: ActivationFunctionType) -> str:
        if fused not in ACTIVATIONS:
            raise UnsupportedOpError(f"fused activation {fused.name} is not supported "
                                     f"(supported: {', '.join(ACTIVATIONS.values())})")
        return ACTIVATIONS[fused]

    # -- inputs -------------------------------------------------------------------------------
    def has(self, i: int) -> bool:
        return i < len(self.op.inputs) and self.op.inputs[i] >= 0

    def idx(self, i: int) -> int:
        if not self.has(i):
            raise ModelFormatError(f"input {i} is missing ({len(self.op.inputs)} inputs given)")
        return self.op.inputs[i]

    def tensor(self, i: int) -> Tensor:
        return self.imp.tensor(self.idx(i))

    def dims(self, i: int) -> tuple[int | None, ...]:
        return dims(self.tensor(i))

    def rank(self, i: int) -> int:
        return len(self.tensor(i).shape)

    def is_const(self, i: int) -> bool:
        return self.idx(i) not in self.imp.forms and self.imp.data(self.idx(i)) is not None

    def const(self, i: int, what: str = "") -> np.ndarray:
        array = self.imp.data(self.idx(i)) if self.idx(i) not in self.imp.forms else None
        if array is None:
            raise ModelFormatError(f"input {i} ('{self.imp.names[self.idx(i)]}'{', the ' + what if what else ''}) "
                                   f"must be a constant tensor, but it has no data")
        return array

    def const_ints(self, i: int, what: str = "") -> tuple[int, ...]:
        return tuple(int(v) for v in self.const(i, what).reshape(-1))

    def const_vector(self, i: int, what: str) -> tuple[int, ...]:
        """``const_ints`` of an input LiteRT's Prepare requires to be 1-D (begin, size, perm...)."""
        if self.rank(i) != 1:
            raise ModelFormatError(f"input {i} ('{self.imp.names[self.idx(i)]}', the {what}) must be 1-D, found "
                                   f"shape {list(self.tensor(i).shape)}")
        return self.const_ints(i, what)

    def native(self, i: int) -> L.Perm | None:
        """The layout of the value the producer of input ``i`` made (None for a constant)."""
        return self.imp.native.get(self.idx(i))

    def native_or_identity(self, i: int) -> L.Perm:
        return self.native(i) or L.identity(self.rank(i))

    def input(self, i: int, perm: L.Perm) -> Value:
        return self.imp.value(self.idx(i), tuple(perm), self.describe())

    def constant(self, i: int, perm: L.Perm, lead: int = 0, tag: str | None = None) -> Value:
        return self.imp.constant(self.idx(i), tuple(perm), lead, tag)

    # -- outputs ------------------------------------------------------------------------------
    @property
    def out(self) -> int:
        return self.op.outputs[0]

    @property
    def out_tensor(self) -> Tensor:
        return self.imp.tensor(self.out)

    @property
    def out_rank(self) -> int:
        return len(self.out_tensor.shape)

    def result_type(self, perm: L.Perm) -> TensorType:
        return self.imp.ir_type(self.out, tuple(perm))

    def emit(self, opdef: OpDef, operands: list[Value], layout: L.Perm, result_type: Type | None = None,
             **attrs) -> Value:
        """Build, verify and append the op computing the output tensor in ``layout``."""
        rt = result_type or self.result_type(layout)
        op = Operation(opdef, operands, [rt], opdef.make_attrs(attrs), label=self.imp.names[self.out])
        self._check(op)
        self.imp.fn.body.append(op)
        self.imp.define(self.out, op.result, tuple(layout))
        return op.result

    def helper(self, opdef: OpDef, operands: list[Value], what: str, **attrs) -> Value:
        """An auxiliary op (reshape, unsqueeze, transpose) whose result type its type rule gives."""
        op = opdef.build(operands, None, label=self.imp.names[self.out], **attrs)
        self._check(op)
        self.imp.fn.body.append(op)
        op.result.name_hint = self.imp.fresh(f"{self.imp.names[self.out]}__{what}")
        return op.result

    def _check(self, op: Operation) -> None:
        op.opdef.verify_op(op)
        if op.opdef.infer is None:
            return
        # nn ops (data movement) have a type rule; the declared output shape must agree with it
        values = {k: (from_attr(s.kind, op.attributes[k]) if k in op.attributes else s.default)
                  for k, s in op.opdef.attributes.items()}
        want = op.opdef.infer([v.type for v in op.operands], values)[0]   # (max_pool also types its indices)
        got = op.results[0].type
        if isinstance(want, TensorType) and want.shape != got.shape:
            raise ModelFormatError(f"tensor '{self.imp.names[self.out]}' is declared with shape "
                                   f"{_fmt(got.shape)} (IR layout) but the operator computes {_fmt(want.shape)}")

    # -- validation -----------------------------------------------------------------------------
    def _tensors(self):
        for role, indices in (("input", self.op.inputs), ("output", self.op.outputs)):
            for idx in indices:
                if idx >= 0:
                    yield role, idx, self.imp.tensor(idx)

    def computes_in_float(self) -> bool:
        """A float32 tensor other than QUANTIZE's input or DEQUANTIZE's output (the int8 boundary)."""
        boundary = {("QUANTIZE", "input"), ("DEQUANTIZE", "output")}
        return any(t.type is TFLType.FLOAT32 and (self.op_name, role) not in boundary for role, _, t in self._tensors())

    def check_not_mixed(self) -> None:
        """A float32 operator reads and writes plain tensors: a quantized one beside float32 (an int8
        weight on an op quantir has no dynamic-range converter for, a float bias on an int8 op) is refused."""
        for role, idx, t in self._tensors():
            if is_quantized(t):
                raise UnsupportedOpError(
                    f"{role} '{self.imp.names[idx]}' is quantized {t.type.name} on an operator that computes in "
                    f"float32: quantir reads {self.op_name} as an int8 op, a float32 op"
                    f"{' or a dynamic-range op' if self.op_name in {b.name for b in self.imp.hybrid} else ''}, "
                    f"not with these tensor types")

    def check_tensor_types(self) -> None:
        """Refuse float types other than float32 (float16 weights, float64) and quantized uint8 / int4."""
        code = self.op_name
        for role, idx, t in self._tensors():
            if t.type in FLOAT_TYPES and t.type is not TFLType.FLOAT32:
                raise UnsupportedOpError(
                    f"{role} '{self.imp.names[idx]}' is {t.type.name}: this is a {t.type.name} {code}, and quantir "
                    f"reads int8 and float32 TFLite models; convert the model with float32 tensors")
            if t.type is TFLType.INT4 and code == "DEQUANTIZE" and role == "input" and \
                    self.imp.data(idx) is not None:
                continue   # a weight-only int4 constant: unpacked to int8 values in [-8, 7] at read
            if t.type in (TFLType.UINT8, TFLType.INT4) and is_quantized(t):
                raise UnsupportedOpError(f"{role} '{self.imp.names[idx]}' is quantized {t.type.name}; quantir "
                                         f"reads int8 and int16 (16x8) activations and int8 weights only")


def _fmt(shape) -> str:
    return "x".join("?" if d is None else str(d) for d in shape) if shape is not None else "*"
