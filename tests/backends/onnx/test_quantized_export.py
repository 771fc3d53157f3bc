"""Quantized ONNX export (``backends/onnx/quantized.py``, ``qdq.py``, ``qoperator.py``): small CNNs
built with ``onnx.helper`` are quantized by ``quantir.api.quantize`` on seeded random data,
exported in both formats, run in ONNX Runtime (CPU) and compared with the reference
interpreter (``quantir.runtime.run``, LiteRT integer semantics).

Agreement is counted in steps of the compared tensor's scale (docs/numerics.md §4.6: ONNX
Runtime requantizes with a float32 multiplier and rounds half to even, LiteRT with 31-bit fixed
point and ties away from zero):

- Each integer op run alone, on the interpreter's own input integers, is within 1 step on every
  element, in both formats (``MAX_STEPS_PER_OP``) — the issue's acceptance criterion.
- Whole models: one-step differences of early ops grow through later ops whose output scale is
  finer than their input's (tanh, sigmoid, hard_swish, softmax ...). ``MAX_STEPS_END_TO_END`` holds
  the measured maxima on 1000 samples; the CNN's top-1 class agrees on ≥ 99% of samples (ties
  of the interpreter's 1/256-step probabilities counted as agreement).
"""
from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

from .ort_helpers import FASHION_MNIST, onnx, session
from onnx import TensorProto, helper, numpy_helper

from quantir.api import quantize
from quantir.backends.onnx import save_quantized, to_onnx_quantized
from quantir.backends.onnx.builder import activation_range, is_quantized
from quantir.backends.onnx.quantized import convert
from quantir.errors import QuantirError, UnsupportedOpError
from quantir.ir import Function, Module, OpDef, Operand, Operation, Result, StringAttr, dialects, elements_attr
from quantir.ir.dialects import qnn
from quantir.numerics import quantize_multipliers
from quantir.quantize.config import Config
from quantir.runtime import run
from quantir.types import TensorType, f32, parse_type

F32 = np.float32
MAX_STEPS_PER_OP = 1
# activations: 11 until the quantizer's default bias correction (config.bias_correction="weights");
# 12 since, for both formats and both activation storages (3 of 196000 elements reach 11 or more)
MAX_STEPS_END_TO_END = {"cnn": 2, "activations": 12, "matmul_add": 1, "gemm_2d": 1}
FORMATS = ("qdq", "qoperator")


# -- models -----------------------------------------------------------------------------------------

def _model(nodes, inputs, outputs, weights, opset=17):
    graph = helper.make_graph(nodes, "test",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
                              [numpy_helper.from_array(np.asarray(a), n) for n, a in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _w(rng, *shape, scale=0.3):
    return (rng.standard_normal(shape) * scale).astype(F32)


def cnn_model():
    """conv+bias+relu, depthwise conv + relu6 (Clip 0..6), residual add, concat (which the solver
    makes share its parameters with conv1's ReLU output, so that ReLU clamps above -128), maxpool,
    global average pool, flatten, gemm, softmax."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1, 1, 1, 1], group=8, name="dw"),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"], name="relu6"),
        helper.make_node("Add", ["r2", "r1"], ["res"], name="residual"),
        helper.make_node("Conv", ["res", "W3"], ["c3"], name="pw"),
        helper.make_node("Concat", ["c3", "r1"], ["cat"], axis=1, name="concat"),
        helper.make_node("MaxPool", ["cat"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "WF", "BF"], ["logits"], transB=1, name="fc"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1, name="softmax"),
    ]
    weights = {"W1": _w(rng, 8, 3, 3, 3), "B1": _w(rng, 8, scale=0.1), "W2": _w(rng, 8, 1, 3, 3),
               "B2": _w(rng, 8, scale=0.1), "W3": _w(rng, 16, 8, 1, 1), "WF": _w(rng, 10, 24),
               "BF": _w(rng, 10, scale=0.1), "lo": F32(0), "hi": F32(6)}
    return _model(nodes, [("x", ["N", 3, 12, 12])], [("probs", ["N", 10])], weights)


def activations_model():
    """hard_swish, leaky_relu, sigmoid, tanh, mul, sub, average pool, pad, resize and a
    ReduceMean over channels, between convolutions."""
    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("HardSwish", ["c1"], ["hs"], name="hswish"),
        helper.make_node("Conv", ["hs", "W2", "B2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("LeakyRelu", ["c2"], ["lr"], alpha=0.1, name="leaky"),
        helper.make_node("Sigmoid", ["lr"], ["sg"], name="sigmoid"),
        helper.make_node("Tanh", ["lr"], ["th"], name="tanh"),
        helper.make_node("Mul", ["sg", "th"], ["gate"], name="gate"),
        helper.make_node("Sub", ["gate", "lr"], ["diff"], name="sub"),
        helper.make_node("AveragePool", ["diff"], ["ap"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                         name="avgpool"),
        helper.make_node("Pad", ["ap", "pads"], ["pd"], mode="constant", name="pad"),
        helper.make_node("Resize", ["pd", "", "scales"], ["up"], mode="linear",
                         coordinate_transformation_mode="half_pixel", name="resize"),
        helper.make_node("Conv", ["up", "W3", "B3"], ["c3"], name="conv3"),
        helper.make_node("ReduceMean", ["c3"], ["y"], axes=[1], keepdims=1, name="chmean"),
    ]
    weights = {"W1": _w(rng, 6, 2, 3, 3), "B1": _w(rng, 6, scale=0.1), "W2": _w(rng, 6, 6, 3, 3, scale=0.2),
               "B2": _w(rng, 6, scale=0.1), "W3": _w(rng, 4, 6, 1, 1), "B3": _w(rng, 4, scale=0.1),
               "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "scales": np.array([1, 1, 2, 2], F32)}
    return _model(nodes, [("x", ["N", 2, 10, 10])], [("y", ["N", 1, 14, 14])], weights)


def matmul_add_model(rank: int = 3):
    """MatMul + constant Add (PyTorch's Linear) + Relu, then a second MatMul + Add, on a rank-3
    (tokens) or rank-2 input."""
    rng = np.random.default_rng(3)
    lead = ["N", 5] if rank == 3 else ["N"]
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["m1"], name="linear1"),
        helper.make_node("Add", ["m1", "B1"], ["a1"], name="linear1_bias"),
        helper.make_node("Relu", ["a1"], ["h"], name="relu"),
        helper.make_node("MatMul", ["h", "W2"], ["m2"], name="linear2"),
        helper.make_node("Add", ["B2", "m2"], ["y"], name="linear2_bias"),
    ]
    weights = {"W1": _w(rng, 16, 12), "B1": _w(rng, 12, scale=0.1), "W2": _w(rng, 12, 6), "B2": _w(rng, 6)}
    return _model(nodes, [("x", [*lead, 16])], [("y", [*lead, 6])], weights)


MODELS = {"cnn": (cnn_model, (3, 12, 12)), "activations": (activations_model, (2, 10, 10)),
          "matmul_add": (matmul_add_model, (5, 16)), "gemm_2d": (lambda: matmul_add_model(2), (16,))}


@pytest.fixture(scope="module")
def quantized():
    """name -> (float model, quantize Result, evaluation feeds); calibrated on 64 samples."""
    cache = {}

    def get(name):
        if name not in cache:
            build, shape = MODELS[name]
            rng = np.random.default_rng(10)
            calib = rng.standard_normal((64, *shape)).astype(F32)
            model = build()
            result = quantize(model, {"x": calib}, Config(progress=False))
            feeds = {"x": np.random.default_rng(11).standard_normal((1000, *shape)).astype(F32)}
            cache[name] = (model, result, feeds)
        return cache[name]
    return get


def output_scale(result) -> float:
    """The scale of the integer value the function's (only) output dequantizes."""
    ret = result.module.main.return_op()
    dcast = ret.operands[0].op
    assert dcast.opdef is dialects.quant.DCAST
    return float(np.float32(dcast.operands[0].type.element_type.scale))


def steps(a, b, scale) -> np.ndarray:
    return np.rint(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)) / scale)


def ort_run(model, feeds, outputs=None):
    return session(model).run(outputs, feeds)


def with_outputs(model, names):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    return m


# -- both formats: the model checks and runs ----------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(MODELS))
def test_export_checks_and_runs(quantized, name, fmt):
    _, result, feeds = quantized(name)
    model = to_onnx_quantized(result.module, format=fmt)
    onnx.checker.check_model(model)
    domains = {o.domain: o.version for o in model.opset_import}
    assert domains[""] == 21
    (y,) = ort_run(model, {"x": feeds["x"][:4]})
    assert y.dtype == np.float32 and y.shape == run(result.module, {"x": feeds["x"][:4]})[
        result.module.main.res_attrs[0]["quantir.name"].value].shape


# -- one op at a time: within one step (the acceptance criterion) ----------------------------------

def isolate(op):
    """A module running ``op`` alone: its non-constant operands become the function's arguments
    (``in0``, ``in1`` ...), its weights come along, its result is the output ``out``."""
    def is_const(v):
        return getattr(v, "op", None) is not None and v.op.opdef in (dialects.arith.CONSTANT, dialects.quant.SCAST)
    args = list(dict.fromkeys(v for v in op.operands if not is_const(v)))
    fn = Function.create("main", [v.type for v in args], [op.results[0].type],
                         arg_attrs=[{"quantir.name": StringAttr(f"in{i}")} for i in range(len(args))],
                         res_attrs=[{"quantir.name": StringAttr("out")}])
    y = clone_with_constants(fn, op, dict(zip(args, fn.arguments))).results[0]
    fn.body.append(dialects.func.RETURN.build([y], []))
    return Module([fn]), args


def clone_with_constants(fn, op, new):
    """Append to ``fn`` a copy of ``op`` and of the constant producers it reads; ``new`` maps the
    source values already in ``fn`` (its arguments) to theirs, and grows with the copies."""
    def copy(o):
        c = Operation(o.opdef, [new[v] if v in new else copy(v.op).results[0] for v in o.operands],
                      [r.type for r in o.results], dict(o.attributes), o.loc, o.label)
        fn.body.append(c)
        for r, cr in zip(o.results, c.results):
            new[r], cr.name_hint = cr, r.name_hint
        return c
    return copy(op)


def integer_ops(module):
    """The ops computing int8 tensors: qnn ops and the nn data-movement ops on quantized values."""
    return [op for op in module.main.ops if op.opdef.dialect == "qnn" or (
        op.opdef in qnn.DATA_MOVEMENT and op.results and is_quantized(op.results[0]))]


def worst_step_per_op(module, feeds, fmt) -> dict[str, int]:
    """For every integer op: the largest difference, in steps, between ONNX Runtime running the
    op alone on the interpreter's own input integers and the interpreter's result."""
    values = run(module, feeds, intermediates="all")
    worst = {}
    for op in integer_ops(module):
        one, args = isolate(op)
        (got,) = ort_run(to_onnx_quantized(one, format=fmt), {f"in{i}": values[v.name_hint]
                                                              for i, v in enumerate(args)})
        want = values[op.results[0].name_hint]
        assert got.dtype == want.dtype and got.shape == want.shape
        worst[op.label or op.name] = int(np.abs(got.astype(np.int32) - want.astype(np.int32)).max())
    return worst


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(MODELS))
def test_each_op_within_one_step(quantized, name, fmt):
    """Every integer op, run alone in ONNX Runtime on the interpreter's own input integers, gives
    the interpreter's result within one step on every element: the exports differ from LiteRT
    only by ONNX Runtime's float requantization and ties-to-even (docs/numerics.md §4.6)."""
    _, result, feeds = quantized(name)
    worst = worst_step_per_op(result.module, {"x": feeds["x"][:100]}, fmt)
    assert max(worst.values()) <= MAX_STEPS_PER_OP, worst


# -- the whole model: errors accumulate along the chain ---------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(MODELS))
def test_end_to_end(quantized, name, fmt):
    """Output against the interpreter, in steps of the output scale. One-step differences of
    early ops are amplified by later ones whose output scale is finer than their input's (tanh,
    sigmoid, hard_swish, softmax): the bounds are the measured maxima (``MAX_STEPS_END_TO_END``)."""
    _, result, feeds = quantized(name)
    (got,) = ort_run(to_onnx_quantized(result.module, format=fmt), feeds)
    want = next(iter(run(result.module, feeds).values()))
    diff = steps(got, want, output_scale(result))
    assert diff.max() <= MAX_STEPS_END_TO_END[name], f"{name}: max {diff.max()} steps"
    if name == "cnn":
        # the interpreter's probabilities are multiples of 1/256, so ~7% of samples tie for the
        # top class; ORT's class must be one of the interpreter's top classes
        tie_aware = (want[np.arange(len(want)), got.argmax(-1)] == want.max(-1)).mean()
        assert tie_aware >= 0.99
        assert (got.argmax(-1) == want.argmax(-1)).mean() >= 0.97


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("config", [Config(progress=False, per_channel=False),
                                    Config(progress=False, exclude=("gap", "softmax"))],
                         ids=["per_tensor", "float_ops"])
def test_per_tensor_weights_and_float_ops(quantized, fmt, config):
    """Per-tensor weights, and ops left float by the configuration: the float ops are exported as
    they are, between the module's own dcast and qcast."""
    model, _, feeds = quantized("cnn")
    calib = np.random.default_rng(10).standard_normal((64, 3, 12, 12)).astype(F32)
    result = quantize(model, {"x": calib}, config)
    exported = to_onnx_quantized(result.module, format=fmt)
    onnx.checker.check_model(exported)
    sub = {"x": feeds["x"][:100]}
    worst = worst_step_per_op(result.module, sub, fmt)
    assert max(worst.values()) <= MAX_STEPS_PER_OP, worst
    (got,) = ort_run(exported, sub)
    assert np.abs(got - run(result.module, sub)["probs"]).max() <= 2 / 256
    if config.exclude:
        producers = _producers(exported)
        for float_op in ("GlobalAveragePool", "Softmax"):
            node = next(n for n in exported.graph.node if n.op_type == float_op)
            assert producers[node.input[0]].op_type == "DequantizeLinear"


# -- structure --------------------------------------------------------------------------------------

def _producers(model):
    return {o: n for n in model.graph.node for o in n.output}


def _consumers(model):
    out: dict[str, list] = {}
    for n in model.graph.node:
        for i in n.input:
            out.setdefault(i, []).append(n)
    return out


def test_qdq_structure(quantized):
    """One Q at the input, one DQ at the output, one Q and one DQ per quantized tensor, int8
    per-channel weights and int32 bias behind DQ, every float op between DQs and a Q."""
    _, result, _ = quantized("cnn")
    model = to_onnx_quantized(result.module, format="qdq")
    ops = Counter(n.op_type for n in model.graph.node)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    producers, consumers = _producers(model), _consumers(model)
    activations = [n for n in model.graph.node if n.op_type == "QuantizeLinear"]
    # the input: exactly one QuantizeLinear reads it; the output: a DequantizeLinear makes it
    assert [n.op_type for n in consumers["x"]] == ["QuantizeLinear"]
    assert producers["probs"].op_type == "DequantizeLinear"
    # every quantized activation has one Q and exactly one DQ
    for q in activations:
        assert inits[q.input[2]].dtype == np.int8
        assert [n.op_type for n in consumers.get(q.output[0], [])] == ["DequantizeLinear"], q.output[0]
    weight_dqs = [n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in inits]
    assert ops["DequantizeLinear"] == len(activations) + len(weight_dqs)
    # 4 weights (conv1, dw, pw, fc), 4 biases (conv1, dw, fc, and pw's from the quantizer's default
    # bias correction, which gives a bias-less conv one; 3 with Config(bias_correction="off"))
    kinds = Counter(inits[n.input[0]].dtype.name for n in weight_dqs)
    assert kinds == {"int8": 4, "int32": 4}
    for n in weight_dqs:
        w, s = inits[n.input[0]], inits[n.input[1]]
        assert s.shape == (w.shape[0],) and {a.name: a.i for a in n.attribute} == {"axis": 0}
    # float ops read DequantizeLinear outputs (or constants) and feed one QuantizeLinear, through
    # the fused activation's Relu/Clip when it clamps more than int8 does
    for n in model.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear", "Relu", "Clip"):
            continue
        assert all(i in inits or producers[i].op_type == "DequantizeLinear" for i in n.input if i), n.name
        users = consumers[n.output[0]]
        if users[0].op_type in ("Relu", "Clip"):
            users = consumers[users[0].output[0]]
        assert [c.op_type for c in users] == ["QuantizeLinear"], n.name
    quantized_tensors = [r for op in result.module.main.ops if op.opdef is not dialects.quant.SCAST
                         for r in op.results if is_quantized(r)]
    assert ops["QuantizeLinear"] == len(quantized_tensors)
    clamps = [op for op in integer_ops(result.module) if activation_range(op) is not None]
    assert {k: v for k, v in ops.items() if k not in ("QuantizeLinear", "DequantizeLinear")} == {
        "Conv": 3, "Add": 1, "Concat": 1, "MaxPool": 1, "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1,
        "Softmax": 1, "Relu": len(clamps)}


def test_fused_activations_follow_the_clamp(quantized):
    """A fused clamp is exported only when it clamps more than int8 saturation does: conv1's ReLU
    output shares the concat's parameters (zero point above -128), so it clamps; the depthwise
    conv's ReLU6 output has zero point -128 and Q(6) >= 127, so its clamp is the QuantizeLinear's
    (QDQ) or the op's (QOperator) saturation."""
    _, result, _ = quantized("cnn")
    convs = {op.label: op for op in result.module.main.ops if op.opdef is qnn.CONV}
    assert {k: op.attr("activation") for k, op in convs.items()} == {"conv1": "RELU", "dw": "RELU6", "pw": "NONE"}
    assert activation_range(convs["conv1"]) is not None and activation_range(convs["dw"]) is None
    qdq = {n.name: n.op_type for n in to_onnx_quantized(result.module, format="qdq").graph.node}
    qop = {n.name: n.op_type for n in to_onnx_quantized(result.module, format="qoperator").graph.node}
    assert qdq["conv1/relu"] == "Relu" and "dw/clip" not in qdq and "dw/relu" not in qdq
    assert qop["conv1/clip"] == "Clip" and "dw/clip" not in qop


def test_qoperator_structure(quantized):
    _, result, _ = quantized("cnn")
    model = to_onnx_quantized(result.module, format="qoperator")
    assert [(n.domain or "", n.op_type) for n in model.graph.node] == [
        ("", "QuantizeLinear"), ("", "QLinearConv"), ("", "Clip"), ("", "QLinearConv"),
        ("com.microsoft", "QLinearAdd"), ("", "QLinearConv"), ("com.microsoft", "QLinearConcat"), ("", "MaxPool"),
        ("com.microsoft", "QLinearGlobalAveragePool"), ("", "Flatten"), ("com.microsoft", "QGemm"),
        ("com.microsoft", "QLinearSoftmax"), ("", "DequantizeLinear")]
    assert {o.domain: o.version for o in model.opset_import} == {"": 21, "com.microsoft": 1}
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "QLinearConv":
            w, ws, wz = (inits[i] for i in n.input[3:6])
            assert w.dtype == np.int8 and ws.shape == wz.shape == (w.shape[0],) and not wz.any()
            if len(n.input) == 9:
                assert inits[n.input[8]].dtype == np.int32


def test_qoperator_fallbacks(quantized):
    """Ops without an exact int8 ONNX Runtime kernel: the elementwise ones (hard_swish, leaky_relu,
    tanh, sub) are lookup tables (GatherElements, backends/onnx/tables.py), a mean over channels is
    QLinearGlobalAveragePool; bilinear Resize keeps the QDQ form inside the QOperator model."""
    _, result, _ = quantized("activations")
    requantized: list = []
    model = to_onnx_quantized(result.module, format="qoperator", requantized=requantized)
    ops = Counter(n.op_type for n in model.graph.node)
    # the export says which op it computes in float, and why: every QuantizeLinear but the input's
    assert [(op, why) for _, op, why in requantized] == [
        ("qnn.resize_bilinear", "ONNX Runtime's int8 Resize(linear) does not round as LiteRT does (up to 2 steps off)")]
    assert len(requantized) == ops["QuantizeLinear"] - 1
    for op in ("HardSwish", "Tanh", "Sub", "ReduceMean", "QLinearLeakyRelu"):
        assert ops[op] == 0, op
    assert ops["GatherElements"] == 4 and ops["Resize"] == 1 and ops["QuantizeLinear"] == 2, ops
    for op in ("QLinearSigmoid", "QLinearMul", "QLinearAveragePool", "QLinearGlobalAveragePool", "Pad"):
        assert ops[op] == 1, op
    producers = _producers(model)
    for n in model.graph.node:
        if n.op_type == "Resize":
            assert producers[n.input[0]].op_type == "DequantizeLinear"
    pad = next(n for n in model.graph.node if n.op_type == "Pad")
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert inits[pad.input[2]].dtype == np.int8      # pads int8 with the zero point, no DQ/Q


def test_matmul_rank3_forms(quantized):
    _, result, _ = quantized("matmul_add")
    qop = to_onnx_quantized(result.module, format="qoperator")
    assert Counter(n.op_type for n in qop.graph.node)["QGemm"] == 2
    assert Counter(n.op_type for n in qop.graph.node)["Reshape"] == 4
    qdq = to_onnx_quantized(result.module, format="qdq")
    inits = {t.name: numpy_helper.to_array(t) for t in qdq.graph.initializer}
    matmuls = [n for n in qdq.graph.node if n.op_type == "MatMul"]
    assert len(matmuls) == 2
    producers = _producers(qdq)
    for n in matmuls:
        dq = producers[n.input[1]]
        assert {a.name: a.i for a in dq.attribute} == {"axis": 1}
        assert inits[dq.input[0]].shape in ((16, 12), (12, 6))


# -- fused activations that do clamp ----------------------------------------------------------------

def _clamping_module():
    """x -> qcast -> qnn.conv (RELU6 whose output range is wider than 0..6) -> dcast."""
    xt = TensorType((None, 1, 4, 4), f32)
    qx = TensorType((None, 1, 4, 4), parse_type("!quant.uniform<i8:f32, 0.05:3>"))
    qy_type = parse_type("!quant.uniform<i8:f32, 0.1:-20>")      # represents -10.8 .. 14.7
    qy = TensorType((None, 2, 4, 4), qy_type)
    wq = TensorType((2, 1, 1, 1), parse_type("!quant.uniform<i8<-127:127>:f32:0, {0.02,0.03}>"))
    fn = Function.create("main", [xt], [TensorType((None, 2, 4, 4), f32)],
                         arg_attrs=[{"quantir.name": StringAttr("x")}], res_attrs=[{"quantir.name": StringAttr("y")}])
    body = fn.body
    q = body.append(dialects.quant.QCAST.build(fn.arguments, [qx])).result
    q.name_hint = "x__q"
    attr = elements_attr(np.array([100, -90], np.int8).reshape(2, 1, 1, 1))
    c = body.append(dialects.arith.CONSTANT.build([], [attr.type], value=attr)).result
    w = body.append(dialects.quant.SCAST.build([c], [wq])).result
    m, s = quantize_multipliers(qnn.conv_real_multipliers(qx, wq, qy))
    y = body.append(qnn.CONV.build([q, w], [qy], label="conv", strides=(1, 1), pads=(0, 0, 0, 0),
                                   dilations=(1, 1), group=1, activation="RELU6", multiplier=m.tolist(),
                                   shift=s.tolist())).result
    y.name_hint = "y__q"
    out = body.append(dialects.quant.DCAST.build([y], [TensorType((None, 2, 4, 4), f32)])).result
    body.append(dialects.func.RETURN.build([out], []))
    return Module([fn])


@pytest.mark.parametrize("fmt", FORMATS)
def test_fused_activation_that_clamps(fmt):
    """RELU6 on an output whose range is wider than 0..6: QDQ clamps in float before the
    QuantizeLinear, QOperator clamps the integers to LiteRT's range after QLinearConv."""
    module = _clamping_module()
    model = to_onnx_quantized(module, format=fmt)
    onnx.checker.check_model(model)
    clips = [n for n in model.graph.node if n.op_type == "Clip"]
    assert len(clips) == 1
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    lo, hi = (inits[i] for i in clips[0].input[1:])
    if fmt == "qdq":
        assert (lo.dtype, float(lo), float(hi)) == (np.float32, 0.0, 6.0)
    else:                                   # the integer range: Q(0) = -20, Q(6) = -20 + 60
        assert (lo.dtype, int(lo), int(hi)) == (np.int8, -20, 40)
    x = np.random.default_rng(0).uniform(-6, 6, (64, 1, 4, 4)).astype(F32)
    (got,) = ort_run(model, {"x": x})
    want = run(module, {"x": x})["y"]
    assert want.min() == 0.0 and np.isclose(want.max(), 4.0 + 2.0, atol=0.1)
    assert steps(got, want, 0.1).max() <= 1


# -- requantize and standalone clamps -------------------------------------------------------------

def _rescale_module():
    """qcast -> requantize -> clamp RELU6 (same parameters) -> clamp RELU (rescaling, Q(0) = -100)
    -> clamp NONE (a plain rescale) -> dcast."""
    shape = (None, 3, 8)
    ft = TensorType(shape, f32)
    t = {k: TensorType(shape, parse_type(f"!quant.uniform<i8:f32, {v}>"))
         for k, v in {"in": "0.05:3", "rq": "0.04:-10", "relu": "0.03:-100", "out": "0.06:0"}.items()}
    fn = Function.create("main", [ft], [ft], arg_attrs=[{"quantir.name": StringAttr("x")}],
                         res_attrs=[{"quantir.name": StringAttr("y")}])

    def add(op, name):
        fn.body.append(op).results[0].name_hint = name
        return op.results[0]
    x = add(dialects.quant.QCAST.build(fn.arguments, [t["in"]]), "x__q")
    m, sh = quantize_multipliers(qnn.requantize_real_multiplier(t["in"], t["rq"]))
    x = add(qnn.REQUANTIZE.build([x], [t["rq"]], label="rq", multiplier=m.tolist(), shift=sh.tolist()), "rq__q")
    x = add(qnn.CLAMP.build([x], [t["rq"]], label="relu6", activation="RELU6"), "relu6__q")
    x = add(qnn.CLAMP.build([x], [t["relu"]], label="relu", activation="RELU"), "relu__q")
    x = add(qnn.CLAMP.build([x], [t["out"]], label="rescale", activation="NONE"), "y__q")
    y = add(dialects.quant.DCAST.build([x], [ft]), "y")
    fn.body.append(dialects.func.RETURN.build([y], []))
    return Module([fn])


@pytest.mark.parametrize("fmt", FORMATS)
def test_requantize_and_clamps(fmt):
    module = _rescale_module()
    model = to_onnx_quantized(module, format=fmt)
    onnx.checker.check_model(model, full_check=True)
    nodes = [(n.name, n.op_type) for n in model.graph.node]
    if fmt == "qoperator":   # the equal-parameter clamp is an int8 Clip, the rescales lookup tables (tables.py)
        lookup = ["Cast", "Reshape", "GatherElements", "Reshape"]
        assert [o for _, o in nodes] == ["QuantizeLinear", *lookup, "Clip", *lookup, *lookup, "DequantizeLinear"]
    else:
        assert [o for _, o in nodes] == ["QuantizeLinear", "DequantizeLinear", "QuantizeLinear", "DequantizeLinear",
                                         "Clip", "QuantizeLinear", "DequantizeLinear", "Relu", "QuantizeLinear",
                                         "DequantizeLinear", "QuantizeLinear", "DequantizeLinear"]
    x = np.random.default_rng(5).uniform(-8, 8, (500, 3, 8)).astype(F32)
    names = ["x__q", "rq__q", "relu6__q", "relu__q", "y__q"]
    worst = worst_step_per_op(module, {"x": x}, fmt)
    assert max(worst.values()) <= MAX_STEPS_PER_OP, worst
    values = run(module, {"x": x}, intermediates=names)
    # the chain: a one-step difference of the requantize becomes up to 2 after the 0.04 -> 0.03 rescale
    got = dict(zip(names[1:], ort_run(with_outputs(model, names[1:]), {"x": x})[1:]))
    for n in names[1:]:
        assert np.abs(got[n].astype(np.int32) - values[n].astype(np.int32)).max() <= 2, n
        if fmt == "qoperator":   # the tables hold the interpreter's integers
            np.testing.assert_array_equal(got[n], values[n])
    # the clamps: RELU6 on (0.04, -10) is [-10, 140 -> 127]; RELU on (0.03, -100) starts at -100
    assert got["relu6__q"].min() == values["relu6__q"].min() == -10
    assert got["relu__q"].min() == values["relu__q"].min() == -100


# -- errors and files -------------------------------------------------------------------------------

def _module_with(opdef: OpDef) -> Module:
    qt = TensorType((2, 3), parse_type("!quant.uniform<i8:f32, 0.5:1>"))
    ft = TensorType((2, 3), f32)
    fn = Function.create("main", [ft], [ft], arg_attrs=[{"quantir.name": StringAttr("x")}],
                         res_attrs=[{"quantir.name": StringAttr("y")}])
    q = fn.body.append(dialects.quant.QCAST.build(fn.arguments, [qt])).result
    r = fn.body.append(opdef.build([q], [qt], label="mystery")).result
    y = fn.body.append(dialects.quant.DCAST.build([r], [ft])).result
    fn.body.append(dialects.func.RETURN.build([y], []))
    return Module([fn])


# an op of the qnn dialect that no export table knows (not registered: tests leave the registry alone)
L2_NORM = OpDef("qnn.l2_normalization", operands=(Operand("x", qnn.Q_TENSOR),), results=(Result("y", qnn.Q_TENSOR),))


@pytest.mark.parametrize("fmt", FORMATS)
def test_unsupported_op_is_named(fmt):
    with pytest.raises(UnsupportedOpError, match=r"'qnn\.l2_normalization' \(node 'mystery'\) has no .* ONNX export"):
        to_onnx_quantized(_module_with(L2_NORM), format=fmt)


def test_unknown_format(quantized):
    _, result, _ = quantized("gemm_2d")
    with pytest.raises(QuantirError, match="unknown quantized ONNX format 'tflite'"):
        to_onnx_quantized(result.module, format="tflite")


def test_save_is_atomic(tmp_path, quantized):
    _, result, feeds = quantized("gemm_2d")
    path = tmp_path / "m.onnx"
    path.write_bytes(b"old")
    with pytest.raises(UnsupportedOpError):
        save_quantized(_module_with(L2_NORM), path)
    assert path.read_bytes() == b"old"                        # a failed export leaves the old file
    assert save_quantized(result.module, path, format="qoperator") == path
    assert os.listdir(tmp_path) == ["m.onnx"]                 # no temporary file left behind
    onnx.checker.check_model(onnx.load(str(path)))
    (got,) = ort_run(str(path), {"x": feeds["x"][:3]})
    assert got.shape == (3, 6)
    missing = tmp_path / "new.onnx"
    with pytest.raises(UnsupportedOpError):
        save_quantized(_module_with(L2_NORM), missing, format="qdq")
    assert not missing.exists() and sorted(os.listdir(tmp_path)) == ["m.onnx"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_result_save(tmp_path, quantized, fmt):
    _, result, feeds = quantized("cnn")
    path = result.save(tmp_path / f"cnn.{fmt}.onnx", format=fmt)
    (got,) = ort_run(str(path), {"x": feeds["x"][:8]})
    want = run(result.module, {"x": feeds["x"][:8]})["probs"]
    assert steps(got, want, output_scale(result)).max() <= MAX_STEPS_END_TO_END["cnn"]


def test_convert_is_a_verified_module(quantized):
    """The ONNX-shaped intermediate module verifies and leaves the source module untouched."""
    from quantir.ir import verify
    from quantir.text import print_module
    _, result, _ = quantized("cnn")
    before = print_module(result.module, large_elements="elide")
    for fmt in FORMATS:
        verify(convert(result.module, format=fmt))
    assert print_module(result.module, large_elements="elide") == before


# -- the real model ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fashion_mnist():
    """The trained Fashion-MNIST CNN quantized on 500 training images, and 2000 test images with
    labels (seeded random images when the dataset package is not installed)."""
    if not FASHION_MNIST.exists():
        pytest.skip("models/fashion_mnist_cnn.onnx is not present")
    from quantir.datasets import fashion_mnist as fm
    model = onnx.load(str(FASHION_MNIST))
    if fm.is_available():
        train, _ = fm.load_fashion_mnist("train")
        test, labels = fm.load_fashion_mnist("test")
        train, test, labels = train[:500], test[:2000], labels[:2000]
    else:
        rng = np.random.default_rng(0)
        train, test, labels = (rng.integers(0, 256, (500, 28, 28), dtype=np.uint8),
                               rng.integers(0, 256, (2000, 28, 28), dtype=np.uint8), None)
    calib, x = fm.to_model_input(train), fm.to_model_input(test)
    result = quantize(model, {"input": calib}, Config(progress=False))
    return result, x, labels, run(result.module, {"input": x})["probs"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_fashion_mnist_cnn(fashion_mnist, fmt):
    """The real model (convs, depthwise + ReLU6, hard_swish, residual adds, concat, global
    average pool, gemm, softmax): ONNX Runtime's top-1 is the interpreter's on >= 99% of the test
    images and its accuracy within 0.5 points. (Measured on the 10000 test images: 99.7% top-1
    agreement, accuracy 91.95% for both formats against 91.93% for the interpreter and 92.1% in
    float; the probabilities differ by up to 17 steps of 1/256 after the 24 integer ops, while
    every op alone stays within one step.)"""
    result, x, labels, want = fashion_mnist
    exported = to_onnx_quantized(result.module, format=fmt)
    onnx.checker.check_model(exported)
    (got,) = ort_run(exported, {"input": x})
    assert (got.argmax(-1) == want.argmax(-1)).mean() >= 0.99
    if labels is not None:
        assert abs((got.argmax(-1) == labels).mean() - (want.argmax(-1) == labels).mean()) <= 0.005
