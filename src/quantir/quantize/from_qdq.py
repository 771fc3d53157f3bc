"""A model quantized already (ONNX QDQ) as quantir's integer module, with its own parameters.

ONNX Runtime's ``quantize_static``, QAT exports and similar tools write a float graph where every
quantized tensor passes through ``QuantizeLinear -> DequantizeLinear`` and every weight and bias
is ``DequantizeLinear`` of stored integers. Nothing needs calibrating: the file says what each
tensor is. The conversion

1. strips the pairs (``strip``): each activation pair becomes the (scale, zero point) of the float
   value it quantized, each weight's DequantizeLinear a float constant (exactly ``(q - zp) · s``)
   plus the stored integers; what is left is the float graph and a ``Given`` per tensor;
2. annotates the float graph as the static quantizer does (``patterns.annotate``) and builds
   the parameters the lowering takes (``ActParams`` per region value, ``WeightParams`` whose
   ``quantized`` are the file's integers) instead of solving them from calibration ranges, so
   every declared op lowers, runs and exports through the same code;
3. checks the given parameters against what LiteRT's int8 kernels take and repairs a violation
   with the least change (``Repair``): a fixed-output op (softmax, logistic, tanh) is emitted at
   LiteRT's parameters and requantized to the file's; a same-scale op (pooling, reshape, pad,
   concat) reads its inputs requantized to its output's parameters; a weight at -128 is clipped
   to -127 (one step, scales kept); asymmetric or block-wise weights are re-rounded symmetric per
   channel; a bias at another scale than input × weight is re-quantized at that scale. An op the
   model leaves float whose only readers are same-scale ops takes their parameters (no float
   island); a max pool or reshape the model leaves float after a quantized input takes that
   input's parameters (QAT exports quantize only after conv/linear; exact, as the op moves values).
   ``strict=True`` refuses instead, naming the node.

uint8 activations (ONNX Runtime's default ``QUInt8``) are the same real values in int8 with the
zero point minus 128, exactly; int4 weights widen to int8 exactly. Block-wise weights have no
LiteRT int8 form (re-rounded per channel: a repair). int16 activations are refused for now.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import QuantirError
from ..ir import Function, Module, Operation, Value
from ..ir.core import OpResult
from ..ir.dialects import arith, func, nn, qnn
from ..numerics import bias_qparams
from ..passes.fold_constants import make_constant
from ..types import FloatType, IntegerType, TensorType, UniformQuantizedPerAxisType
from .config import Config
from .lower import Lowerer
from .params import ActParams, WeightParams, act_type, region_weights, weight_params
from .patterns import annotate
from .regions import Annotation, Region, constant_array, weighted_input
from .rules import Kind


class QdqError(QuantirError):
    """A QDQ model quantir cannot convert as it is (malformed, or refused under ``strict``)."""


@dataclass(frozen=True, eq=False)
class Given:
    """One tensor's parameters as the model gives them (a Q/DQ pair, or a DequantizeLinear of stored
    integers: ``stored``). ``zero_point`` is already int8's for uint8 storage (minus 128)."""

    scale: np.ndarray          # float32, () per tensor or (C,) per axis, or blocked
    zero_point: np.ndarray     # int64, same shape
    dtype: str                 # the file's storage: int8, uint8, int16, int4, uint4, int32
    axis: int | None           # per-axis dim, None per tensor
    block_size: int            # 0 unless block-wise
    node: str                  # the DequantizeLinear that gives it (errors and repairs name it)
    stored: np.ndarray | None = None   # constants: the file's integers (int8 view for uint8)

    @property
    def per_tensor(self) -> bool:
        return self.scale.ndim == 0

    def act_params(self) -> ActParams:
        s, zp = float(self.scale), int(self.zero_point)
        return ActParams(s, zp, False, (-128 - zp) * s, (127 - zp) * s)


@dataclass
class Repair:
    """A place where the given parameters are not what LiteRT's int8 kernels take (or an op the model
    leaves float), and the least change the conversion made there."""

    node: str          # the ONNX node (or tensor) concerned
    kind: str          # LiteRT op kind of the region
    problem: str
    fix: str
    tensor: str        # the region output where the effect is measured
    inputs: tuple[str, ...] = ()           # the region's activation inputs (the error it starts from)
    # measured against the QDQ model in ONNX Runtime, in the file's steps: at the output, and the
    # largest at the inputs (LiteRT's rounding upstream differs from ONNX Runtime's already)
    max_error_steps: float | None = None
    input_error_steps: float | None = None

    def __str__(self) -> str:
        err = "" if self.max_error_steps is None else (
            f" (measured against ONNX Runtime on the QDQ model: max {self.max_error_steps:g} steps at its output, "
            f"{self.input_error_steps:g} at its inputs)")
        return f"{self.node} ({self.kind}): {self.problem}; {self.fix}{err}"


@dataclass
class Stripped:
    """The float function left by ``strip`` and the parameters it took off, by value name."""

    fn: Function
    given: dict[str, Given]                 # float value name -> its parameters
    file_tensor: dict[str, str]             # float value name -> the DequantizeLinear output naming it in the file


# -- 1. strip the Q/DQ pairs ------------------------------------------------------------------------

_STORAGE = {np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8", np.dtype(np.int16): "int16",
            np.dtype(np.uint16): "uint16", np.dtype(np.int32): "int32"}


def _storage(v: Value, zp: np.ndarray | None) -> str:
    et = v.type.element_type if isinstance(v.type, TensorType) else None
    name = str(et) if et is not None else ""
    if name in ("i4", "si4"):
        return "int4"
    if name == "ui4":
        return "uint4"
    if zp is not None and zp.dtype in _STORAGE:
        return _STORAGE[zp.dtype]
    return {"i8": "int8", "si8": "int8", "ui8": "uint8", "i16": "int16", "si16": "int16", "i32": "int32",
            "si32": "int32"}.get(name, name)


def _label(op: Operation) -> str:
    return op.label or (op.results[0].name_hint if op.results else None) or op.name


def _given(dq: Operation, stored: np.ndarray | None) -> Given:
    """The parameters of a DequantizeLinear (or QuantizeLinear) with constant scale and zero point."""
    node = _label(dq)
    scale = constant_array(dq.operands[1])
    if scale is None:
        raise QdqError(f"'{node}': its scale is computed at run time; a QDQ model to convert needs constant "
                       f"scales and zero points")
    scale = np.asarray(scale, np.float32)
    if scale.ndim == 1 and scale.size == 1:   # one value: per tensor (as ONNX Runtime reads it)
        scale = scale.reshape(())
    bad = ~(np.isfinite(scale) & (scale > 0))
    if bad.any():
        raise QdqError(f"'{node}': scale {scale[bad].ravel()[0]} is not finite and positive; the model's "
                       f"quantization parameters are corrupt")
    zp_arr = constant_array(dq.operands[2]) if len(dq.operands) > 2 else None
    stored_v = dq.operands[0] if dq.opdef is nn.DEQUANTIZE_LINEAR else dq.results[0]
    dtype = _storage(stored_v, zp_arr)
    zp = np.zeros(scale.shape, np.int64) if zp_arr is None else np.asarray(zp_arr, np.int64).reshape(scale.shape)
    block = int(dq.attr("block_size") or 0)
    rank = len(getattr(stored_v.type, "shape", ()) or ())
    axis = None
    if scale.ndim == 1 and scale.size > 0 and block == 0:
        axis = int(dq.attr("axis") if dq.attr("axis") is not None else 1)
        axis = axis + rank if axis < 0 else axis
    if block == 0 and scale.ndim > 1:
        raise QdqError(f"'{node}': a {scale.ndim}-D scale ({scale.shape}) is block-wise quantization, which needs "
                       f"the block_size attribute; the node has none (give block_size, or a 1-D per-axis scale)")
    if block and scale.ndim != rank:
        raise QdqError(f"'{node}': block_size {block} needs a scale of the weight's rank {rank}, got {scale.shape}")
    if dtype in ("uint8", "uint4"):   # the same real values in the signed type
        shift = 128 if dtype == "uint8" else 8
        zp = zp - shift
        if stored is not None:
            stored = np.asarray(stored, np.int64) - shift
    return Given(scale, zp, dtype, axis, block, node, None if stored is None else np.asarray(stored, np.int64))


def _dequantized(g: Given) -> np.ndarray:
    """``(q - zp) · s`` in float32 (ONNX's DequantizeLinear), per tensor, per axis or per block."""
    q = g.stored.astype(np.int64)
    s, zp = g.scale, g.zero_point
    if g.block_size:
        s = _expand_blocks(s, q.shape, g.block_size)
        zp = _expand_blocks(zp, q.shape, g.block_size)
    elif g.axis is not None:
        shape = [1] * q.ndim
        shape[g.axis] = -1
        s, zp = s.reshape(shape), zp.reshape(shape)
    return ((q - zp).astype(np.float32) * s.astype(np.float32)).astype(np.float32)


def _expand_blocks(a: np.ndarray, shape: tuple, block: int) -> np.ndarray:
    """A blocked scale (one dim shorter by ``block``) repeated to the weight's shape."""
    for d, (n, m) in enumerate(zip(a.shape, shape)):
        if n != m:
            a = np.repeat(a, block, axis=d)[tuple(slice(0, m) if i == d else slice(None) for i in range(a.ndim))]
    return a


def strip(module: Module | Function) -> Stripped:
    """Take the Q/DQ pairs off a QDQ function imported with ``load_onnx(keep_qdq=True, optimize=False)``
    (in place): the float function and each quantized tensor's ``Given``."""
    fn = module.main if isinstance(module, Module) else module
    given: dict[str, Given] = {}
    file_tensor: dict[str, str] = {}
    for op in list(fn.ops):
        if op.opdef is not nn.DEQUANTIZE_LINEAR:
            continue
        src = op.operands[0]
        stored = constant_array(src)
        if stored is not None:   # a weight, bias or constant operand: a float constant + its integers
            g = _given(op, stored)
            const = make_constant(_dequantized(g), like=op.results[0], label=op.label)
            fn.body.insert_before(op, const)
            op.results[0].replace_all_uses_with(const.results[0])
            fn.body.erase(op)
            given[const.results[0].name_hint] = g
            continue
        q = getattr(src, "op", None)
        if q is None or q.opdef is not nn.QUANTIZE_LINEAR:
            raise QdqError(f"'{_label(op)}' dequantizes '{src.name_hint}', which no QuantizeLinear in the model "
                           f"produces (an integer graph input or an integer op); only QuantizeLinear -> "
                           f"DequantizeLinear pairs and constant weights can be converted")
        g, gq = _given(op, None), _given(q, None)
        if not (np.array_equal(g.scale, gq.scale) and np.array_equal(g.zero_point, gq.zero_point)):
            raise QdqError(f"'{_label(q)}' quantizes with ({gq.scale}, {gq.zero_point}) but '{_label(op)}' "
                           f"dequantizes with ({g.scale}, {g.zero_point}): a pair must use one set of parameters")
        if not g.per_tensor:
            raise QdqError(f"'{_label(op)}': per-axis activation quantization has no LiteRT int8 form "
                           f"(activations are per tensor)")
        if g.dtype not in ("int8", "uint8"):
            raise QdqError(f"'{_label(op)}': {g.dtype} activations are not converted yet (int8 and uint8 are)")
        x = q.operands[0]
        if any(u.opdef is func.RETURN for u, _ in op.results[0].uses) and isinstance(x, OpResult):
            x.name_hint = op.results[0].name_hint   # a graph output keeps the file's output name
        if x.name_hint in given and not _same(given[x.name_hint], g):
            raise QdqError(f"'{x.name_hint}' is quantized twice with different parameters ('{given[x.name_hint].node}' "
                           f"and '{_label(op)}')")
        given.setdefault(x.name_hint, g)
        file_tensor.setdefault(x.name_hint, op.results[0].name_hint)
        op.results[0].replace_all_uses_with(x)
        fn.body.erase(op)
    for op in list(fn.ops):
        if op.opdef is nn.QUANTIZE_LINEAR:
            if op.results[0].has_uses:
                raise QdqError(f"'{_label(op)}': its integer output is used without a DequantizeLinear (a graph "
                               f"output or an integer op); only QuantizeLinear -> DequantizeLinear pairs convert")
            fn.body.erase(op)
    _erase_dead_constants(fn)
    fn.update_type()
    return Stripped(fn, given, file_tensor)


def _same(a: Given, b: Given) -> bool:
    return np.array_equal(a.scale, b.scale) and np.array_equal(a.zero_point, b.zero_point)


def _erase_dead_constants(fn: Function) -> None:
    for op in reversed(fn.ops):
        if op.opdef is arith.CONSTANT and not op.results[0].has_uses:
            fn.body.erase(op)


# -- 2. parameters from the file --------------------------------------------------------------------

@dataclass
class Converted:
    """The integer module of a QDQ model and what the conversion did."""

    module: Module
    float_function: Function
    annotation: Annotation
    params: dict
    repairs: list[Repair]
    file_tensor: dict[str, str]          # float value name -> the ONNX tensor the file computes there
    given: dict[str, Given] = field(default_factory=dict)
    spec_violations: list[str] = field(default_factory=list)
    measured_on: str = ""                # the samples the repairs' errors were measured on
    _writer: object = field(default=None, repr=False)   # api.convert_qdq sets it: the backends sit above

    def save(self, path, **kwargs):
        """Write the integer module (``.tflite``, ``.mlir``, ``.onnx``), atomically."""
        if self._writer is None:
            raise QuantirError("save this result through quantir.convert_qdq (it knows the file formats)")
        return self._writer(self, path, **kwargs)

    def summary(self) -> str:
        from collections import Counter
        kinds = Counter(r.pattern.name for r in self.annotation.regions)
        lines = [f"converted {sum(kinds.values())} quantized ops with the model's own parameters "
                 f"(nothing recalibrated):"]
        lines += [f"  {n:<14} {k}" for k, n in kinds.most_common()]
        lines.append(f"left float: {len(self.annotation.float_ops)}")
        lines += [f"  {op.label or op.name} ({op.name}): {why}" for op, why in self.annotation.float_ops]
        on = f"; errors measured on {self.measured_on}" if self.measured_on and self.repairs else ""
        lines.append(f"repairs (least changes for LiteRT's int8 kernels): {len(self.repairs)}{on}")
        lines += [f"  {r}" for r in self.repairs]
        lines.append(f"LiteRT int8 spec check: {len(self.spec_violations)} violations")
        lines += [f"  {v}" for v in self.spec_violations]
        return "\n".join(lines)


def _repair(region: Region, node: str, problem: str, fix: str) -> Repair:
    inputs = tuple(v.name_hint for v in region.inputs if constant_array(v) is None)
    return Repair(node, region.pattern.op.builtin.name, problem, fix, region.output.name_hint, inputs)


def _fixed_kind(region: Region) -> tuple[float, int] | None:
    out = region.pattern.op.spec.output
    return out.fixed if out.kind is Kind.FIXED and region.pattern.op.output_quantized else None


def _same_scale(region: Region) -> bool:
    return region.pattern.op.spec.output.kind is Kind.SAME_AS and region.pattern.op.output_quantized


def _weight_axis(region: Region) -> int | None:
    """The dim of the file's weight tensor that is ``region_weights``' output channel (dim 0)."""
    if region.pattern.name.startswith("conv_transpose"):
        return 1
    if region.pattern.name == "conv":
        return 0
    op = region.match.ops["op"]
    if op.opdef is nn.GEMM:
        return 0 if op.attr("trans_b") else 1
    return 1


def _weights(region: Region, g: Given, s_in: float, repairs: list[Repair],
             strict: bool) -> tuple[WeightParams, bool]:
    """The region's ``WeightParams`` from the file, and whether they were re-rounded: its int8
    weights and scales when LiteRT can take them (symmetric, per output channel or per tensor),
    with a -128 clipped to -127 (one step, scales kept), else re-rounded from the float weights."""
    w, b = region_weights(region)
    label, kind = region.label, region.pattern.op.builtin.name
    problem = None
    if g.block_size:
        problem = f"block-wise weights (block {g.block_size}) have no LiteRT int8 form"
    elif np.any(g.zero_point != 0):
        problem = f"asymmetric {g.dtype} weights (zero points up to {int(np.abs(g.zero_point).max())})"
    elif g.axis is not None and g.axis != _weight_axis(region):
        problem = f"weights quantized along dim {g.axis}, not the output channel"
    if problem is None:
        scale = np.float32(g.scale) if g.per_tensor else g.scale.astype(np.float32)
        per_oc = scale.reshape((-1,) + (1,) * (w.ndim - 1)) if scale.ndim else scale
        q = np.rint(w.astype(np.float64) / per_oc).astype(np.int64)
        # the file's integers come back exactly from (q · s) / s: refuse to drift silently if not
        if not np.array_equal((q.astype(np.float32) * per_oc).astype(np.float32), w):
            problem = "weights transformed after dequantizing do not round-trip to the file's integers"
        else:
            low = int((q < -127).sum())
            if low:   # LiteRT's weights are symmetric in [-127, 127]: the least change is one step
                stored = "-128" if g.dtype == "int8" else f"{g.dtype} 0 with zero point 128"
                problem = f"{low} of {q.size} weights at {stored} (LiteRT's weights are in [-127, 127])"
                if strict:
                    raise QdqError(f"'{g.node}' ({label}, {kind}): {problem}; --strict refuses to clip them")
                repairs.append(_repair(region, g.node, problem, "clipped to -127 (one step each), scales kept"))
                q = np.maximum(q, -127)
            return WeightParams(np.asarray(scale, np.float32), b, None, q.astype(np.int8)), False
    if strict:
        raise QdqError(f"'{g.node}' ({label}, {kind}): {problem}; --strict refuses to re-round weights")
    plain = weight_params(w, b, s_in, per_channel=True)
    repairs.append(_repair(region, g.node, problem, "re-rounded symmetric int8 per output channel from the "
                           "dequantized weights" + ("" if b is None else ", the bias re-quantized at the new scales")))
    return plain, True


def _check_bias(region: Region, wp: WeightParams, s_in: float, given: dict[str, Given],
                repairs: list[Repair], strict: bool) -> np.ndarray | None:
    """The file's int32 bias when LiteRT can take it as it is (scale ``s_in · s_w``, zero point 0,
    the region's bias its DequantizeLinear unchanged), else None: a repair, the lowering
    re-quantizes the float bias at that scale."""
    b_value = region.match.values.get("b")
    g = given.get(b_value.name_hint) if b_value is not None else None
    if g is None or wp.bias is None:
        return None
    want, _ = bias_qparams(s_in, wp.scale)
    want = np.broadcast_to(np.asarray(want, np.float32), wp.bias.shape)
    have = np.broadcast_to(np.asarray(g.scale, np.float32), wp.bias.shape)
    if g.stored.size != wp.bias.size:
        return None   # a bias broadcast from fewer values: the lowering quantizes the float one
    stored = g.stored.reshape(-1)
    # kept only when the region's float bias is exactly the file's dequantized integers (a large
    # bias, past float32's 2^24, would not survive a second rounding from float)
    unchanged = np.array_equal((stored.astype(np.float32) * have).astype(np.float32), wp.bias)
    if np.array_equal(want, have) and np.all(g.zero_point == 0) and unchanged:
        return stored
    if not np.array_equal(want, have):
        problem = f"bias scale {_fmt(have)} is not input scale x weight scale {_fmt(want)}"
    elif np.any(g.zero_point != 0):
        problem = "bias with a zero point"
    else:
        problem = "bias changed after dequantizing (folded into another constant)"
    if strict:
        raise QdqError(f"'{g.node}' ({region.label}, {region.pattern.op.builtin.name}): {problem}; "
                       f"--strict refuses to re-quantize it")
    repairs.append(_repair(region, g.node, problem,
                           "re-quantized at input scale x weight scale from the dequantized bias"))
    return None


def _fmt(a: np.ndarray) -> str:
    a = np.asarray(a).ravel()
    return f"{a[0]:.6g}" if a.size == 1 or np.all(a == a[0]) else f"[{a[0]:.6g}, ...]"


def parameters(stripped: Stripped, annotation: Annotation, strict: bool = False):
    """``(params, produced, same_scale, repairs, bias_ints)``: the lowering's parameters from the file.

    ``produced``: region outputs emitted at other parameters than the file's (LiteRT's fixed ones),
    requantized to the file's after; ``same_scale``: regions whose inputs are read at their
    output's parameters; ``bias_ints``: the file's int32 biases by region. A region with a value
    the file leaves float goes back to float."""
    given = stripped.given
    params: dict = {}
    produced: dict[Value, ActParams] = {}
    same_scale: set[int] = set()
    repairs: list[Repair] = []
    bias_ints: dict[int, np.ndarray] = {}   # id(region) -> the file's int32 bias, kept as it is

    if not strict:
        given = {**given, **_through_same_scale(annotation, given, repairs)}
        carried = _from_same_scale_input(annotation, given, repairs)
        given = {**given, **carried}
        for name in carried:   # the float value the file computes there: measured against it
            stripped.file_tensor.setdefault(name, name)

    def act(v: Value) -> ActParams | None:
        g = given.get(v.name_hint)
        return g.act_params() if g is not None and g.per_tensor else None

    for region in list(annotation.regions):
        values = [v for v in region.inputs if constant_array(v) is None or v.name_hint in given]
        if region.pattern.op.output_quantized:
            values.append(region.output)
        missing = [v.name_hint for v in values if act(v) is None and constant_array(v) is None]
        if missing:
            annotation.demote(region, f"the model leaves '{missing[0]}' float (no QuantizeLinear -> "
                                      f"DequantizeLinear pair)")
            continue
        if region.pattern.weighted and region.match.values["w"].name_hint not in given:
            annotation.demote(region, f"the model leaves its weights '{region.match.values['w'].name_hint}' float")
            continue
        for v in region.inputs:
            if constant_array(v) is not None and v.name_hint not in given and not region.pattern.weighted:
                annotation.demote(region, f"its constant operand '{v.name_hint}' has no quantization parameters "
                                          f"in the model")
                break
        else:
            _region_params(region, act, params, produced, same_scale, repairs, stripped, strict, bias_ints)
    return params, produced, same_scale, repairs, bias_ints


def _through_same_scale(annotation: Annotation, given: dict[str, Given], repairs: list[Repair]) -> dict[str, Given]:
    """Parameters for region outputs the model leaves float but whose every reader is a same-scale
    region with parameters (ONNX Runtime keeps ReduceMean float before a quantized Reshape): its
    reader's, which the same-scale op would impose anyway; the op then runs in int8 instead of
    as a float island between a DEQUANTIZE and a QUANTIZE. Each is listed as a repair."""
    by_op = {id(op): r for r in annotation.regions for op in r.ops}
    found: dict[str, Given] = {}
    for region in reversed(annotation.regions):
        out = region.output
        if not region.pattern.op.output_quantized or out.name_hint in given or out.name_hint in found:
            continue
        readers = [by_op.get(id(op)) for op, _ in out.uses]
        if not readers or any(r is None or not _same_scale(r) for r in readers):
            continue
        if any(constant_array(v) is None and v.name_hint not in given for v in region.inputs):
            continue   # an input the model leaves float keeps the op float: parameters for it change nothing
        params = [given.get(r.output.name_hint) or found.get(r.output.name_hint) for r in readers]
        if any(p is None for p in params) or any(not _same(p, params[0]) for p in params):
            continue
        found[out.name_hint] = params[0]
        repair = _repair(region, region.label, "the model leaves its output float, read only by same-scale "
                         f"'{readers[0].label}' ({readers[0].pattern.op.builtin.name})",
                         "quantized with that reader's parameters, so no float island is left")
        repair.tensor = readers[0].output.name_hint   # the first tensor the model quantizes after it
        repairs.append(repair)
    return found


# same-scale ops whose output is exactly a selection or rearrangement of their input's values
_INEXACT_SAME_SCALE = frozenset({"AVERAGE_POOL_2D", "RESIZE_BILINEAR"})


def _from_same_scale_input(annotation: Annotation, given: dict[str, Given], repairs: list[Repair]) -> dict[str, Given]:
    """Parameters for same-scale region outputs the model leaves float but whose one activation input
    it quantizes: the input's. A QAT export (torch.ao eager) quantizes after conv/linear only; a
    MaxPool or Flatten after it runs on the quantized tensor and keeps its parameters, so the file
    has no pair there. Only ops that select or move values: their output lies on the input's grid,
    so these parameters represent the file's float tensor exactly (averaging ops stay float)."""
    found: dict[str, Given] = {}
    for region in annotation.regions:
        out = region.output
        if (not _same_scale(region) or region.pattern.op.builtin.name in _INEXACT_SAME_SCALE
                or out.name_hint in given or out.name_hint in found):
            continue
        acts = [v for v in region.inputs if constant_array(v) is None]
        g = (given.get(acts[0].name_hint) or found.get(acts[0].name_hint)) if len(acts) == 1 else None
        if g is None or not g.per_tensor:
            continue
        found[out.name_hint] = g
        repairs.append(_repair(region, region.label,
                               f"the model leaves its output float after quantized '{acts[0].name_hint}'",
                               "quantized with its input's parameters (exact: the op keeps its input's values)"))
    return found


def _region_params(region, act, params, produced, same_scale, repairs, stripped, strict, bias_ints) -> None:
    kind, label = region.pattern.op.builtin.name, region.label
    for v in region.inputs:
        p = act(v)
        if p is not None:
            params[v] = p
    out = region.output
    if region.pattern.op.output_quantized:
        params[out] = act(out)
        fixed = _fixed_kind(region)
        if fixed is not None:
            s, zp = float(np.float32(fixed[0])), int(fixed[1])
            p = params[out]
            if not (np.isclose(p.scale, s, rtol=region.pattern.op.spec.scale_rtol, atol=0) and p.zero_point == zp):
                problem = f"output at ({p.scale:.6g}, {p.zero_point}), LiteRT's {kind} writes ({s:.6g}, {zp})"
                if strict:
                    raise QdqError(f"'{label}' ({kind}): {problem}; --strict refuses to requantize it")
                produced[out] = ActParams(s, zp, True, p.rmin, p.rmax)
                repairs.append(_repair(region, label, problem, "emitted at LiteRT's parameters and requantized "
                                       "to the model's after"))
        if _same_scale(region):
            differ = [v for v in region.inputs if v in params and constant_array(v) is None
                      and (params[v].scale, params[v].zero_point) != (params[out].scale, params[out].zero_point)]
            if differ:
                problem = (f"input '{differ[0].name_hint}' at ({params[differ[0]].scale:.6g}, "
                           f"{params[differ[0]].zero_point}), output at ({params[out].scale:.6g}, "
                           f"{params[out].zero_point}): LiteRT's {kind} keeps one scale")
                if strict:
                    raise QdqError(f"'{label}' ({kind}): {problem}; --strict refuses to requantize its inputs")
                repairs.append(_repair(region, label, problem + (f" ({len(differ)} inputs)" if len(differ) > 1 else ""),
                                       "inputs requantized to the output's parameters"))
            same_scale.add(id(region))
    x = weighted_input(region)
    if x is not None:
        w_value = region.match.values["w"]
        g = stripped.given[w_value.name_hint]   # (``parameters`` returned a region with float weights to float)
        s_in = params[x].scale
        wp, rerounded = _weights(region, g, s_in, repairs, strict)
        if not rerounded:   # re-rounded weights take their bias along (one repair)
            ints = _check_bias(region, wp, s_in, stripped.given, repairs, strict)
            if ints is not None:
                bias_ints[id(region)] = ints
        params[w_value] = wp


# -- 3. lowering with given parameters ---------------------------------------------------------------

class GivenLowerer(Lowerer):
    """``Lowerer`` with the repairs: a region output in ``produced`` is emitted at those parameters
    (its readers and a graph output get a requantize to the file's); a same-scale region reads its
    inputs at its output's parameters."""

    def __init__(self, fn, annotation, params, config, produced: dict, same_scale: set[int],
                 bias_ints: dict[int, np.ndarray] | None = None):
        super().__init__(fn, annotation, params, config)
        self.produced, self.same_scale, self.bias_ints = produced, same_scale, bias_ints or {}
        self._region: Region | None = None

    def bias(self, b, x: Value, w: Value, channels: int):
        """The file's int32 bias as it is, where ``parameters`` kept it (its scale is input x weight)."""
        ints = self.bias_ints.get(id(self._region)) if self._region is not None else None
        if ints is None or b is None:
            return super().bias(b, x, w, channels)
        s_w = np.broadcast_to(np.float32(qnn.scales_of(w.type)), (channels,))
        scale, _ = bias_qparams(np.float32(qnn.scales_of(x.type)), s_w)
        qt = UniformQuantizedPerAxisType(storage_type=IntegerType(32), expressed_type=FloatType("f32"),
                                         scales=tuple(float(s) for s in np.atleast_1d(scale)),
                                         zero_points=(0,) * channels, quantized_dimension=0)
        return self.stored_constant(ints, IntegerType(32), TensorType((channels,), qt))

    def lower_region(self, region: Region) -> Value:
        self._region = region
        try:
            return super().lower_region(region)
        finally:
            self._region = None

    def input(self, v: Value) -> Value:
        r = self._region
        if r is not None and id(r) in self.same_scale:
            return self.quantized(v, self.params[r.output])
        return super().input(v)

    def out_type(self, region: Region) -> TensorType:
        p = self.produced.get(region.output)
        return act_type(p, region.output.type) if p is not None else super().out_type(region)

    def floating(self, v: Value) -> Value:
        if v in self.produced and self.floats.lookup_or_none(v) is None:
            from ..ir.dialects import quant
            q = self.quantized(v, self.params[v])   # the model's parameters, then its float value
            out = self.emit(quant.DCAST.build([q], [v.type])).result
            out.name_hint = v.name_hint
            return self.floats.map(v, out)
        return super().floating(v)


def convert(module: Module, *, strict: bool = False, config: Config | None = None) -> Converted:
    """A QDQ module (``load_onnx(keep_qdq=True, optimize=False)``) as an integer module with the
    model's own parameters; raises ``QdqError`` for what cannot convert (or under ``strict``, for
    what would need a repair)."""
    from .check import check_module
    from .calibrate import ensure_names
    config = config or Config()
    stripped = strip(module)
    fn = stripped.fn
    ensure_names(fn)
    annotation = annotate(fn, config)
    if not annotation.regions:
        raise QdqError("nothing quantized in this model: no op reads DequantizeLinear outputs and feeds a "
                       "QuantizeLinear that quantir can lower")
    params, produced, same_scale, repairs, bias_ints = parameters(stripped, annotation, strict)
    int_fn = GivenLowerer(fn, annotation, params, config, produced, same_scale, bias_ints).run()
    out = Module([int_fn])
    report = check_module(out)
    if strict and report.violations:   # what no repair above covers (a kernel's own limits)
        raise QdqError(f"{report.violations[0]}; --strict refuses a model LiteRT's int8 spec does not accept "
                       f"({len(report.violations)} violations)")
    return Converted(out, fn, annotation, params, repairs, stripped.file_tensor, stripped.given,
                     [str(v) for v in report.violations])



def measure(converted: Converted, reference, integer, feeds: list[dict]) -> None:
    """Fill each repair's ``max_error_steps`` and ``input_error_steps``: the converted module against
    the QDQ model as written, at the repaired op's output and inputs, in steps of the file's scale
    there. ``reference(names)`` and ``integer(names)`` make runners (feeds -> outputs) exposing the
    file's tensor names and the integer module's value names."""
    from .naming import integer_name
    by_name = {v.name_hint: v for v in converted.params if isinstance(v, Value)}
    tensors = sorted({t for r in converted.repairs for t in (r.tensor, *r.inputs)
                      if t in by_name and t in converted.file_tensor})
    if not tensors:
        return
    run_ref = reference([converted.file_tensor[t] for t in tensors])
    run_int = integer([integer_name(t) for t in tensors])
    typed = {t: _typed_params(converted.module.main, integer_name(t)) for t in tensors}
    worst = dict.fromkeys(tensors, 0.0)
    for batch in feeds:
        ref, got = run_ref(batch), run_int(batch)
        for t in tensors:
            scale, zp = typed[t]
            deq = (np.asarray(got[integer_name(t)], np.int64) - zp) * np.float64(np.float32(scale))
            err = np.abs(deq - np.asarray(ref[converted.file_tensor[t]], np.float64)).max(initial=0.0)
            worst[t] = max(worst[t], float(err) / converted.params[by_name[t]].scale)
    for r in converted.repairs:
        if r.tensor in worst:
            r.max_error_steps = round(worst[r.tensor], 3)
            r.input_error_steps = round(max((worst[t] for t in r.inputs if t in worst), default=0.0), 3)


def _typed_params(fn: Function, name: str) -> tuple[float, int]:
    for op in fn.ops:
        for v in op.results:
            if v.name_hint == name:
                return float(qnn.scales_of(v.type)), int(np.asarray(qnn.zero_points_of(v.type)).ravel()[0])
    raise KeyError(name)


def random_feeds(given: dict[str, Given], fn: Function, n: int = 8, seed: int = 0) -> list[dict]:
    """``n`` samples per input, uniform over the input's quantized range (the model's own
    parameters), for measuring repairs when the caller gives no data."""
    from ..ir.names import input_names
    rng = np.random.default_rng(seed)
    feed = {}
    for name, arg in zip(input_names(fn), fn.arguments):
        g = given.get(arg.name_hint) or given.get(name)
        p = g.act_params() if g is not None else ActParams(1.0, 0, False, -1.0, 1.0)
        shape = [n if i == 0 and d is None else (1 if d is None else d) for i, d in enumerate(arg.type.shape)]
        feed[name] = rng.uniform(p.rmin, p.rmax, shape).astype(np.float32)
    return [feed]
