"""``activations="uint8"``: the quantized ONNX export with int8 activation tensors re-encoded as
uint8 (same scale, zero point and stored integers + 128; weights int8, bias int32).

It is the same model: every op alone, run by ONNX Runtime on the interpreter's own inputs, is
within one step of the interpreter (as the int8 form is), whole models stay within the int8
form's end-to-end bounds, and the encoding is checked tensor by tensor. ONNX Runtime fuses its
residual branches, which the int8 QDQ form leaves in float on x86.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from .ort_helpers import EFFICIENTNET, onnx, session
from .test_quantized_export import (FORMATS, MAX_STEPS_END_TO_END, MAX_STEPS_PER_OP, MODELS, _consumers,
                                    clone_with_constants, integer_ops, output_scale, steps)
from . import test_quantized_export
from onnx import numpy_helper

from quantir.api import quantize
from quantir.backends.onnx import to_onnx_quantized
from quantir.backends.onnx.quantized import convert, uint8_activations
from quantir.errors import QuantirError, UnsupportedOpError
from quantir.ir import Function, Module, StringAttr, dialects, elements_attr, verify
from quantir.ir.dialects import qnn
from quantir.quantize.config import Config
from quantir.runtime import run
from quantir.types import TensorType, f32, parse_type

quantized = test_quantized_export.quantized   # the fixture: models quantized once per module

F32 = np.float32


def ort_run(model, feeds):
    return session(model).run(None, feeds)


def isolate_float(op):
    """``op`` alone with float interfaces: each non-constant operand arrives as float and is
    quantized to its type (exactly its integers, when fed their dequantized values); the result
    is dequantized."""
    def is_const(v):
        return getattr(v, "op", None) is not None and v.op.opdef in (dialects.arith.CONSTANT, dialects.quant.SCAST)
    args = list(dict.fromkeys(v for v in op.operands if not is_const(v)))
    ftypes = [v.type.clone(element_type=f32) for v in args]
    rtype = op.results[0].type
    fn = Function.create("main", ftypes, [rtype.clone(element_type=f32)],
                         arg_attrs=[{"quantir.name": StringAttr(f"in{i}")} for i in range(len(args))],
                         res_attrs=[{"quantir.name": StringAttr("out")}])
    new = {}
    for i, (v, a) in enumerate(zip(args, fn.arguments)):
        q = fn.body.append(dialects.quant.QCAST.build([a], [v.type])).result
        q.name_hint = f"in{i}__q"
        new[v] = q
    y = clone_with_constants(fn, op, new).results[0]
    out = fn.body.append(dialects.quant.DCAST.build([y], [rtype.clone(element_type=f32)])).result
    fn.body.append(dialects.func.RETURN.build([out], []))
    return Module([fn]), args


def dequantized(ints: np.ndarray, t) -> np.ndarray:
    q = t.element_type
    return ((ints.astype(np.float32) - np.float32(q.zero_point)) * np.float32(q.scale)).astype(F32)


def worst_step_per_op_uint8(module, feeds, fmt) -> dict[str, int]:
    values = run(module, feeds, intermediates="all")
    worst = {}
    for op in integer_ops(module):
        if op.opdef in qnn.DATA_MOVEMENT:
            continue   # moves integers; covered end to end
        one, args = isolate_float(op)
        model = to_onnx_quantized(one, format=fmt, activations="uint8")
        (got,) = ort_run(model, {f"in{i}": dequantized(values[v.name_hint], v.type) for i, v in enumerate(args)})
        r = op.results[0]
        want = values[r.name_hint]
        scale = np.float32(r.type.element_type.scale)
        worst[op.label or op.name] = int(steps(got, dequantized(want, r.type), scale).max())
    return worst


# -- faithfulness --------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(MODELS))
def test_each_op_within_one_step(quantized, name, fmt):
    _, result, feeds = quantized(name)
    worst = worst_step_per_op_uint8(result.module, {"x": feeds["x"][:100]}, fmt)
    assert worst and max(worst.values()) <= MAX_STEPS_PER_OP, worst


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", list(MODELS))
def test_end_to_end_within_the_int8_bounds(quantized, name, fmt):
    _, result, feeds = quantized(name)
    model = to_onnx_quantized(result.module, format=fmt, activations="uint8")
    onnx.checker.check_model(model)
    (got,) = ort_run(model, feeds)
    want = next(iter(run(result.module, feeds).values()))
    assert steps(got, want, output_scale(result)).max() <= MAX_STEPS_END_TO_END[name]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_tensor_is_the_int8_one_plus_128(quantized, fmt):
    """The stored integers of every exported activation tensor, uint8 against int8, in the
    QOperator form (integer kernels throughout): equal after the shift, up to the one-step
    differences of ONNX Runtime's kernels."""
    _, result, feeds = quantized("cnn")
    i8 = to_onnx_quantized(result.module, format=fmt)
    u8 = to_onnx_quantized(result.module, format=fmt, activations="uint8")
    names = [n.output[0] for n in i8.graph.node if n.op_type not in ("DequantizeLinear",)]
    names = [n for n in names if n in {o for m in u8.graph.node for o in m.output}]
    values = {}
    for label, model in (("i8", i8), ("u8", u8)):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        m.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
        values[label] = dict(zip([o.name for o in m.graph.output], ort_run(m, {"x": feeds["x"][:50]})))
    checked = 0
    for n in names:
        a, b = values["i8"][n], values["u8"][n]
        if a.dtype == np.int8:
            assert b.dtype == np.uint8, n
            assert np.abs(b.astype(np.int32) - 128 - a.astype(np.int32)).max() <= 1, n
            checked += 1
    assert checked >= 5


# -- structure ----------------------------------------------------------------------------------------

def test_qdq_structure(quantized):
    """Activations uint8 with zero points + 128; weights int8 (zero point 0), bias int32."""
    _, result, _ = quantized("cnn")
    i8 = to_onnx_quantized(result.module, format="qdq")
    u8 = to_onnx_quantized(result.module, format="qdq", activations="uint8")
    assert [n.op_type for n in i8.graph.node] == [n.op_type for n in u8.graph.node]
    init8 = {t.name: numpy_helper.to_array(t) for t in i8.graph.initializer}
    init_u = {t.name: numpy_helper.to_array(t) for t in u8.graph.initializer}
    kinds = Counter()
    for a, b in zip(i8.graph.node, u8.graph.node):
        if a.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        np.testing.assert_array_equal(init8[a.input[1]], init_u[b.input[1]])          # same scales
        zp8, zpu = init8[a.input[2]], init_u[b.input[2]]
        if a.input[0] in init8:                                                      # weights, bias
            assert b.input[0] in init_u and zpu.dtype == zp8.dtype and zpu.dtype in (np.int8, np.int32)
            np.testing.assert_array_equal(init8[a.input[0]], init_u[b.input[0]])
            kinds[zpu.dtype.name] += 1
        else:
            assert (zp8.dtype, zpu.dtype) == (np.int8, np.uint8)
            assert int(zpu) == int(zp8) + 128
            kinds["activation"] += 1
    assert kinds["int8"] == 4 and kinds["int32"] >= 3 and kinds["activation"] >= 10, kinds
    assert u8.doc_string.endswith("uint8 activations")


def test_qoperator_clamps_and_pads_move_with_the_zero_point(quantized):
    _, result, _ = quantized("cnn")
    u8 = to_onnx_quantized(result.module, format="qoperator", activations="uint8")
    i8 = to_onnx_quantized(result.module, format="qoperator")
    for model, dtype, shift in ((i8, np.int8, 0), (u8, np.uint8, 128)):
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        clip = next(n for n in model.graph.node if n.op_type == "Clip")
        lo, hi = (inits[i] for i in clip.input[1:])
        assert lo.dtype == hi.dtype == dtype
        if shift == 0:
            bounds = (int(lo), int(hi))
        else:
            assert (int(lo) - 128, int(hi) - 128) == bounds
        conv = next(n for n in model.graph.node if n.op_type == "QLinearConv")
        assert inits[conv.input[2]].dtype == dtype and inits[conv.input[5]].dtype == np.int8
    _, result, _ = quantized("activations")
    pads = []
    for act in ("int8", "uint8"):
        model = to_onnx_quantized(result.module, format="qoperator", activations=act)
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        pads.append(inits[next(n for n in model.graph.node if n.op_type == "Pad").input[2]])
    assert (pads[0].dtype, pads[1].dtype) == (np.int8, np.uint8) and int(pads[1]) == int(pads[0]) + 128


def test_per_tensor_weights_stay_int8(quantized):
    model, _, feeds = quantized("cnn")
    calib = np.random.default_rng(10).standard_normal((64, 3, 12, 12)).astype(F32)
    result = quantize(model, {"x": calib}, Config(progress=False, per_channel=False))
    u8 = to_onnx_quantized(result.module, format="qdq", activations="uint8")
    inits = {t.name: numpy_helper.to_array(t) for t in u8.graph.initializer}
    consumers = _consumers(u8)
    for n in u8.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in inits:
            assert inits[n.input[0]].dtype in (np.int8, np.int32), n.name
            if inits[n.input[0]].dtype == np.int8:
                assert consumers[n.output[0]][0].op_type in ("Conv", "Gemm", "MatMul")
    (got,) = ort_run(u8, {"x": feeds["x"][:100]})
    want = run(result.module, {"x": feeds["x"][:100]})["probs"]
    assert steps(got, want, output_scale(result)).max() <= MAX_STEPS_END_TO_END["cnn"]


def _constant_operand_module():
    """x -> qcast -> qnn.add(x, int8 constant) -> dcast: a stored constant that is an activation."""
    ft = TensorType((None, 4), f32)
    qt = TensorType((None, 4), parse_type("!quant.uniform<i8:f32, 0.05:-3>"))
    ct = TensorType((4,), parse_type("!quant.uniform<i8:f32, 0.02:5>"))
    ot = TensorType((None, 4), parse_type("!quant.uniform<i8:f32, 0.06:-10>"))
    fn = Function.create("main", [ft], [ft], arg_attrs=[{"quantir.name": StringAttr("x")}],
                         res_attrs=[{"quantir.name": StringAttr("y")}])
    q = fn.body.append(dialects.quant.QCAST.build(fn.arguments, [qt])).result
    q.name_hint = "x__q"
    attr = elements_attr(np.array([-128, -1, 0, 127], np.int8))
    c = fn.body.append(dialects.arith.CONSTANT.build([], [attr.type], value=attr)).result
    k = fn.body.append(dialects.quant.SCAST.build([c], [ct])).result
    k.name_hint = "k"
    y = fn.body.append(qnn.ADD.build([q, k], [ot], label="add")).result
    y.name_hint = "y__q"
    out = fn.body.append(dialects.quant.DCAST.build([y], [ft])).result
    fn.body.append(dialects.func.RETURN.build([out], []))
    return Module([fn])


@pytest.mark.parametrize("fmt", FORMATS)
def test_constant_activation_is_shifted(fmt):
    module = _constant_operand_module()
    copy = uint8_activations(module.main)
    scast = next(op for op in copy.ops if op.opdef is dialects.quant.SCAST)
    assert list(np.asarray(scast.operands[0].op.attributes["value"].array)) == [0, 127, 128, 255]
    assert scast.results[0].type.element_type.zero_point == 5 + 128
    model = to_onnx_quantized(module, format=fmt, activations="uint8")
    onnx.checker.check_model(model)
    x = np.random.default_rng(0).uniform(-6, 6, (64, 4)).astype(F32)
    (got,) = ort_run(model, {"x": x})
    want = run(module, {"x": x})["y"]
    assert steps(got, want, 0.06).max() <= 1


def test_the_source_module_is_untouched_and_the_copy_verifies(quantized):
    from quantir.text import print_module
    _, result, _ = quantized("activations")
    before = print_module(result.module, large_elements="elide")
    verify(Module([uint8_activations(result.module.main)]))
    for fmt in FORMATS:
        verify(convert(result.module, format=fmt, activations="uint8"))
    assert print_module(result.module, large_elements="elide") == before


def test_integer_interfaces_and_unknown_storage_are_refused(quantized):
    qt = TensorType((2, 3), parse_type("!quant.uniform<i8:f32, 0.5:1>"))
    fn = Function.create("main", [qt], [qt], arg_attrs=[{"quantir.name": StringAttr("x")}],
                         res_attrs=[{"quantir.name": StringAttr("y")}])
    fn.body.append(dialects.func.RETURN.build(list(fn.arguments), []))
    with pytest.raises(UnsupportedOpError, match="uint8 activations need float inputs and outputs"):
        to_onnx_quantized(Module([fn]), activations="uint8")
    assert to_onnx_quantized(Module([fn])).graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT8
    _, result, _ = quantized("gemm_2d")
    with pytest.raises(QuantirError, match="unknown activation storage 'int4'"):
        to_onnx_quantized(result.module, activations="int4")


# -- what it is for: ONNX Runtime fuses every group --------------------------------------------------

def _optimized_ops(model) -> Counter:
    import tempfile
    import onnxruntime as ort
    with tempfile.TemporaryDirectory() as d:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = f"{d}/opt.onnx"
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return Counter(n.op_type for n in onnx.load(f"{d}/opt.onnx").graph.node)


def test_onnx_runtime_fuses_the_residual_branch(quantized):
    """The cnn model's residual add (its input, conv1's ReLU output, feeds two ops): with int8
    activations ONNX Runtime on x86 runs the add, its producers and the concat in float; with
    uint8 they are integer kernels. (conv1 itself stays float in both, a FusedConv: its ReLU
    clamps more than the int8 range and is exported as a float Relu before the QuantizeLinear.)"""
    _, result, _ = quantized("cnn")
    i8 = _optimized_ops(to_onnx_quantized(result.module, format="qdq"))
    u8 = _optimized_ops(to_onnx_quantized(result.module, format="qdq", activations="uint8"))
    assert i8["Conv"] + i8["Add"] + i8["Concat"] >= 3, i8
    assert u8["QLinearConv"] == 2 and u8["QLinearAdd"] == 1 and u8["QLinearConcat"] == 1, u8
    assert u8["Conv"] == u8["Add"] == u8["Concat"] == 0 and u8["FusedConv"] == 1, u8
    assert u8["QuantizeLinear"] + u8["DequantizeLinear"] < i8["QuantizeLinear"] + i8["DequantizeLinear"]


@pytest.mark.slow
@pytest.mark.skipif(not EFFICIENTNET.exists(), reason="EfficientNet-Lite0 is not exported (make models)")
def test_efficientnet_is_all_integer_kernels():
    """EfficientNet-Lite0: int8 activations leave 14 convs and the 9 residual adds in float in
    ONNX Runtime; uint8 fuses all 49 convs and 9 adds."""
    from quantir.datasets import photos
    result = quantize(str(EFFICIENTNET), {"input": photos.calibration_crops(8)}, Config(progress=False, budget=None))
    i8 = _optimized_ops(to_onnx_quantized(result.module, format="qdq"))
    u8 = _optimized_ops(to_onnx_quantized(result.module, format="qdq", activations="uint8"))
    assert u8["QLinearConv"] == 49 and u8["QLinearAdd"] == 9 and u8["Conv"] == 0 and u8["Add"] == 0, u8
    assert i8["Conv"] > 0, i8
