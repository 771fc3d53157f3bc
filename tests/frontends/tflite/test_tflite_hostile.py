"""Hostile .tflite files (issue 11, items 3 and 5): what the importer refuses with a typed error
naming the tensor, and what ``quantir check`` flags because LiteRT refuses it or crashes on it —
each such claim checked against the real LiteRT interpreter (BUILTIN_REF) in a child process."""
from __future__ import annotations

import dataclasses as dc
import tempfile

import numpy as np
import pytest

from quantir.backends.tflite import (AddOptions, Conv2DOptions, FullyConnectedOptions, Padding, Pool2DOptions,
                                     ReshapeOptions, SoftmaxOptions, TensorType, TransposeOptions, read_model)
from quantir.backends.tflite import writer
from quantir.backends.tflite.schema import StridedSliceOptions
from quantir.errors import ModelFormatError, QuantirError, UnsupportedOpError
from quantir.frontends.tflite import import_tflite
from quantir.backends.tflite.check import check_tflite, litert_file_violations
from quantir.runtime import input_names, run

from .tfl_graph import OP, Graph

FEED = np.zeros((1, 4, 4, 3), np.int8)


def base_model() -> bytes:
    """A valid int8 chain: CONV_2D, AVERAGE_POOL_2D, ADD, TRANSPOSE, RESHAPE, STRIDED_SLICE,
    FULLY_CONNECTED, SOFTMAX (bit-exact with LiteRT; the mutations below break one thing each)."""
    rng = np.random.default_rng(0)
    g = Graph()
    x = g.input("x", (1, 4, 4, 3), 0.05)
    w_scales = np.array([0.01, 0.02], np.float32)
    w = g.const("filter", rng.integers(-127, 128, (2, 3, 3, 3)).astype(np.int8), w_scales)
    b = g.const("bias", np.array([10, -10], np.int32), np.float32(0.05) * w_scales)
    c = g.act("conv", (1, 4, 4, 2), 0.1)
    g.op(OP.CONV_2D, [x, w, b], [c], Conv2DOptions(padding=Padding.SAME))
    p = g.act("pool", (1, 2, 2, 2), 0.1)
    g.op(OP.AVERAGE_POOL_2D, [c], [p], Pool2DOptions(padding=Padding.VALID, stride_w=2, stride_h=2,
                                                     filter_width=2, filter_height=2))
    a = g.act("sum", (1, 2, 2, 2), 0.2)
    g.op(OP.ADD, [p, p], [a], AddOptions())
    t = g.act("nchw", (1, 2, 2, 2), 0.2)
    g.op(OP.TRANSPOSE, [a, g.const("perm", np.array([0, 3, 1, 2], np.int32))], [t], TransposeOptions())
    r = g.act("flat", (1, 8), 0.2)
    g.op(OP.RESHAPE, [t, g.const("shape", np.array([1, 8], np.int32))], [r], ReshapeOptions(new_shape=(1, 8)))
    s = g.act("sliced", (1, 8), 0.2)
    g.op(OP.STRIDED_SLICE, [r, g.const("begin", np.array([0, 0], np.int32)), g.const("end", np.array([1, 8], np.int32)),
                            g.const("strides", np.array([1, 1], np.int32))], [s], StridedSliceOptions())
    fw = g.const("fc_w", rng.integers(-127, 128, (4, 8)).astype(np.int8), 0.01)
    fb = g.const("fc_b", np.array([1, 2, 3, 4], np.int32), np.float32(0.2) * np.float32(0.01))
    f = g.act("logits", (1, 4), 0.1)
    g.op(OP.FULLY_CONNECTED, [s, fw, fb], [f], FullyConnectedOptions())
    y = g.act("probs", (1, 4), 1 / 256, -128)
    g.op(OP.SOFTMAX, [f], [y], SoftmaxOptions(beta=1.0))
    return g.finish([y])


def write_unchecked(model) -> bytes:
    """The writer refuses inconsistent models; these tests need exactly such files."""
    return writer.write_model(model, check=False)


def mutated(change_op=None, change_tensor=None, change_code=None, **model_fields) -> bytes:
    """``base_model()`` with one operator (by output name), one tensor (by name), one operator code (by
    name) or a model field changed."""
    m = read_model(base_model())
    if change_code is not None:
        name, fn = change_code
        m = dc.replace(m, operator_codes=tuple(fn(c) if c.name == name else c for c in m.operator_codes))
    sg = m.subgraphs[0]
    names = [t.name for t in sg.tensors]
    ops, tensors = list(sg.operators), list(sg.tensors)
    if change_op is not None:
        out, fn = change_op
        k = next(k for k, op in enumerate(ops) if names[op.outputs[0]] == out)
        ops[k] = fn(ops[k], names.index)
    if change_tensor is not None:
        name, fn = change_tensor
        tensors[names.index(name)] = fn(tensors[names.index(name)])
    sg = dc.replace(sg, operators=tuple(ops), tensors=tuple(tensors))
    return write_unchecked(dc.replace(m, subgraphs=(sg,), **model_fields))


def _run(data: bytes, feed: np.ndarray = FEED) -> dict:
    imp = import_tflite(data)
    return run(imp.module, {input_names(imp.module.main)[0]: feed})


# -- what LiteRT refuses or crashes on: check flags it (claims checked in LiteRT below) -------------
LITERT_CASES = {
    "schema version 0": (
        lambda: mutated(version=0),
        "SCHEMA 'model' version: LiteRT loads schema version 3 only, found 0", "refuses load"),
    "ADD with three inputs": (
        lambda: mutated(change_op=("sum", lambda op, i: dc.replace(op, inputs=op.inputs + (op.inputs[0],)))),
        "ADD 'sum' inputs: LiteRT's ADD takes 2 inputs and refuses the model, found 3", "refuses allocate"),
    "RESHAPE without its shape input": (
        lambda: mutated(change_op=("flat", lambda op, i: dc.replace(op, inputs=(op.inputs[0], -1)))),
        "RESHAPE 'flat' input 1: is omitted (tensor index -1); LiteRT's RESHAPE needs it and crashes "
        "(segmentation fault)", "SIGSEGV"),
    "SOFTMAX without options": (
        lambda: mutated(change_op=("probs", lambda op, i: dc.replace(op, options=None))),
        "SOFTMAX 'probs' options: needs SoftmaxOptions, found none: LiteRT reads zeros and aborts the process "
        "(beta 0)", "SIGABRT"),
    "AVERAGE_POOL_2D without options": (
        lambda: mutated(change_op=("pool", lambda op, i: dc.replace(op, options=None))),
        "AVERAGE_POOL_2D 'pool' options: needs Pool2DOptions, found none: LiteRT reads zeros and refuses it "
        "(stride 0)", "refuses allocate"),
    "int8 CONV_2D without bias": (
        lambda: mutated(change_op=("conv", lambda op, i: dc.replace(op, inputs=op.inputs[:2]))),
        "CONV_2D 'conv' inputs: LiteRT's CONV_2D takes 3 inputs and refuses the model, found 2", "refuses allocate"),
    "CONV_2D with an omitted bias": (
        lambda: mutated(change_op=("conv", lambda op, i: dc.replace(op, inputs=op.inputs[:2] + (-1,)))),
        "CONV_2D 'conv' input 2: is omitted (tensor index -1); LiteRT's CONV_2D needs it and refuses the model",
        "refuses allocate"),
    "TRANSPOSE without its perm": (
        lambda: mutated(change_op=("nchw", lambda op, i: dc.replace(op, inputs=(op.inputs[0], -1)))),
        "TRANSPOSE 'nchw' input 1: is omitted (tensor index -1); LiteRT's TRANSPOSE needs it and crashes "
        "(segmentation fault)", "SIGSEGV"),
    "STRIDED_SLICE without its strides": (
        lambda: mutated(change_op=("sliced", lambda op, i: dc.replace(op, inputs=op.inputs[:3] + (-1,)))),
        "STRIDED_SLICE 'sliced' input 3: is omitted (tensor index -1); LiteRT's STRIDED_SLICE needs it and crashes "
        "(segmentation fault)", "SIGSEGV"),
    "ADD of a version LiteRT does not have": (
        lambda: mutated(change_code=("ADD", lambda c: dc.replace(c, version=99))),
        "ADD 'ADD' operator code: LiteRT's reference kernels have versions 1 to 5 of ADD, found version 99: LiteRT "
        "refuses to load the model", "refuses load"),
    "RESHAPE of version 2": (
        lambda: mutated(change_code=("RESHAPE", lambda c: dc.replace(c, version=2))),
        "RESHAPE 'RESHAPE' operator code: LiteRT's reference kernels have version 1 only of RESHAPE, found version 2: "
        "LiteRT refuses to load the model", "refuses load"),
    "a negative dim in a shape": (
        lambda: mutated(change_tensor=("x", lambda t: dc.replace(t, shape=(-5, 4, 4, 3)))),
        "TENSOR 'x' shape: [-5, 4, 4, 3] has a negative dimension (a dynamic one is -1 in shape_signature, never in "
        "shape): LiteRT refuses to load the model", "refuses load"),
    "a RESHAPE shape nothing gives data to": (
        lambda: mutated(change_tensor=("shape", lambda t: dc.replace(t, buffer=0))),
        "RESHAPE 'flat' input 1: reads 'shape', which is neither a graph input, a constant, nor written by an "
        "earlier operator: LiteRT refuses to run the model (the tensor lacks data)", "refuses invoke"),
    "CONV_2D dilation above int16": (
        lambda: mutated(change_op=("conv", lambda op, i: dc.replace(
            op, options=dc.replace(op.options, dilation_h_factor=1 << 15)))),
        "CONV_2D 'conv' options: dilation_h_factor must be at most 32767, found 32768: LiteRT refuses the model",
        "refuses allocate"),
    "per-tensor quantization along a dimension the tensor lacks": (
        lambda: mutated(change_tensor=("sum", lambda t: dc.replace(
            t, quantization=dc.replace(t.quantization, quantized_dimension=4)))),
        "TENSOR 'sum' quantization: quantized_dimension 4 is outside [0, 4): LiteRT refuses to load the model",
        "refuses load"),
    "a constant whose buffer is too short": (
        lambda: mutated(change_tensor=("shape", lambda t: dc.replace(t, shape=(2, 3)))),
        "TENSOR 'shape' buffer: buffer 4 holds 8 bytes, shape [2, 3] of INT32 needs 24: LiteRT refuses to load the "
        "model", "refuses load"),
}


@pytest.mark.parametrize("case", sorted(LITERT_CASES))
def test_check_flags_what_litert_refuses_or_crashes_on(case):
    make, expected, _ = LITERT_CASES[case]
    found = [str(v) for v in litert_file_violations(read_model(make()))]
    assert found == [expected]


def test_check_flags_nothing_in_a_valid_model_nor_an_omitted_fully_connected_bias():
    assert litert_file_violations(read_model(base_model())) == []
    no_bias = mutated(change_op=("logits", lambda op, i: dc.replace(op, inputs=op.inputs[:2] + (-1,))))
    assert litert_file_violations(read_model(no_bias)) == []


@pytest.mark.parametrize("case", ["schema version 0", "ADD with three inputs", "RESHAPE without its shape input",
                                  "SOFTMAX without options", "int8 CONV_2D without bias",
                                  "ADD of a version LiteRT does not have", "a RESHAPE shape nothing gives data to"])
def test_cli_check_reports_it_although_quantir_runs_the_model(case, tmp_path):
    make, expected, _ = LITERT_CASES[case]
    path = tmp_path / "m.tflite"
    path.write_bytes(make())
    _run(path.read_bytes())   # quantir imports and runs it: only check can tell
    report = check_tflite(str(path))
    assert [str(v) for v in report.violations] == [expected]


@pytest.mark.oracle
@pytest.mark.parametrize("case", sorted(LITERT_CASES))
def test_litert_does_refuse_or_crash_as_check_claims(case):
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.backends.tflite.litert import OracleCrash, OracleProcess, OracleRefusal
    make, _, outcome = LITERT_CASES[case]
    with tempfile.TemporaryDirectory() as d, OracleProcess(make(), "reference", d) as oracle:
        if outcome.startswith("SIG"):
            with pytest.raises(OracleCrash) as e:
                oracle.chunk([FEED], [])
            assert e.value.how == f"crashed with {outcome}"
        else:
            with pytest.raises(OracleRefusal) as e:
                oracle.chunk([FEED], [])
            assert e.value.phase == outcome.split()[1]


@pytest.mark.oracle
def test_litert_runs_the_valid_model_and_an_omitted_fully_connected_bias():
    pytest.importorskip("ai_edge_litert.interpreter")
    from quantir.backends.tflite.litert import OracleProcess
    no_bias = mutated(change_op=("logits", lambda op, i: dc.replace(op, inputs=op.inputs[:2] + (-1,))))
    for data in (base_model(), no_bias):
        with tempfile.TemporaryDirectory() as d, OracleProcess(data, "reference", d) as oracle:
            (out,), _ = oracle.chunk([FEED], [])
        assert np.array_equal(out, _run(data)["probs"])


# -- item 5: typed errors naming the tensor --------------------------------------------------------
@pytest.mark.parametrize("ttype", [TensorType.RESOURCE, TensorType.STRING, TensorType.COMPLEX64, TensorType.VARIANT])
def test_constant_of_a_type_without_data_layout_is_an_unsupported_op_error(ttype):
    data = mutated(change_tensor=("filter", lambda t: dc.replace(t, type=ttype)))
    with pytest.raises(UnsupportedOpError, match=rf"tensor 'filter' has type {ttype.name}, whose data quantir "
                                                 rf"cannot read; quantir reads int8 models"):
        import_tflite(data)


def test_int4_weights_are_an_unsupported_op_error():
    data = mutated(change_tensor=("filter", lambda t: dc.replace(t, type=TensorType.INT4)))
    with pytest.raises(UnsupportedOpError, match="input 'filter' is quantized INT4; quantir reads int8"):
        import_tflite(data)


@pytest.mark.parametrize("tensor", ["conv", "filter", "bias"])
@pytest.mark.parametrize("scale", [float("nan"), float("inf"), 0.0, -0.5])
def test_a_scale_that_is_not_finite_and_positive_is_refused_at_import(tensor, scale):
    def bad(t):
        q = t.quantization
        return dc.replace(t, quantization=dc.replace(q, scale=(scale,) + q.scale[1:]))
    with pytest.raises(ModelFormatError, match=rf"tensor '{tensor}': scale {scale:g} must be finite and positive"):
        import_tflite(mutated(change_tensor=(tensor, bad)))


def test_a_huge_scale_is_flagged_by_check_and_refused_by_run_with_a_typed_error(tmp_path):
    path = tmp_path / "huge.tflite"
    path.write_bytes(mutated(change_tensor=("conv", lambda t: dc.replace(
        t, quantization=dc.replace(t.quantization, scale=(1e38,))))))
    assert [str(v) for v in check_tflite(str(path)).violations] == [
        "AVERAGE_POOL_2D 'pool' output 0: must have the same scale and zero point as input 0 (9.99999968e+37, 0), "
        "found (0.100000001, 0)"]
    with pytest.raises(QuantirError, match=r"average_pool2d: input \(scale 9.99999968\d*e\+37, zp 0\) and output "
                                           r"\(scale 0.1000000014\d*, zp 0\) quantization must be equal"):
        _run(path.read_bytes())


def test_a_tiny_output_scale_that_overflows_the_left_shift_is_a_typed_error():
    data = mutated(change_tensor=("conv", lambda t: dc.replace(t, quantization=dc.replace(t.quantization,
                                                                                          scale=(1e-11,)))))
    x = np.random.default_rng(0).integers(-128, 128, FEED.shape).astype(np.int8)
    with pytest.raises(QuantirError, match=r"multiply_by_quantized_multiplier: x·2\*\*shift = -?\d+ overflows int32 "
                                           r"\(undefined behaviour in LiteRT\)"):
        _run(data, x)


@pytest.mark.parametrize("beta", [0.0, float("nan"), -1.0])
def test_softmax_beta_litert_aborts_on_is_flagged_by_check_and_refused_by_run(beta, tmp_path):
    path = tmp_path / "beta.tflite"
    path.write_bytes(mutated(change_op=("probs", lambda op, i: dc.replace(op, options=SoftmaxOptions(beta=beta)))))
    report = check_tflite(str(path))
    assert [str(v) for v in report.violations] == [
        f"SOFTMAX 'probs' options: beta × input scale × 2**26 must be above 1, found beta {beta:g} and input scale "
        f"0.1: LiteRT's SOFTMAX aborts the process on it and quantir cannot run it (a softmax has beta 1)"]
    with pytest.raises(QuantirError, match=rf"softmax: beta × input scale × 2\*\*26 must be above 1, found beta "
                                           rf"{beta:g} and input scale 0.1 "):
        _run(path.read_bytes())


@pytest.mark.parametrize("operand", [0, 1])
def test_add_whose_operand_is_a_per_axis_bias_is_refused(operand):
    def wire_bias(op, index):
        ins = list(op.inputs)
        ins[operand] = index("bias")
        return dc.replace(op, inputs=tuple(ins))
    data = mutated(change_op=("sum", wire_bias))
    with pytest.raises(UnsupportedOpError, match=rf"operator 2 \(ADD -> 'sum'\): the input {operand} \('bias'\) of "
                                                 rf"ADD must be int8 or int16 quantized per tensor, found tensor<"):
        import_tflite(data)


@pytest.mark.parametrize("output", ["conv", "logits"])
def test_a_per_axis_output_of_a_conv_or_fully_connected_is_refused(output):
    from quantir.backends.tflite import Quantization
    channels = {"conv": 2, "logits": 4}[output]
    data = mutated(change_tensor=(output, lambda t: dc.replace(
        t, quantization=Quantization((0.1,) * channels, (0,) * channels, len(t.shape) - 1))))
    with pytest.raises(UnsupportedOpError, match=rf"the output '{output}' must be int8 quantized per tensor, found "
                                                 rf"{channels} per-axis scales"):
        import_tflite(data)


@pytest.mark.parametrize("alpha", [float("nan"), float("inf")])
def test_leaky_relu_with_a_non_finite_alpha_is_flagged_by_check_and_refused_by_run(alpha):
    from quantir.backends.tflite import LeakyReluOptions
    from quantir.quantize.check import check_module
    g = Graph()
    x = g.input("x", (1, 4), 0.05)
    y = g.act("y", (1, 4), 0.05)
    g.op(OP.LEAKY_RELU, [x], [y], LeakyReluOptions(alpha=alpha))
    imp = import_tflite(g.finish([y]))
    assert [str(v) for v in check_module(imp.module).violations] == [
        f"LEAKY_RELU 'y' options: alpha must be finite, found {alpha}: LiteRT's multiplier is undefined with it"]
    with pytest.raises(QuantirError, match=rf"leaky_relu: alpha must be finite, found {alpha}"):
        run(imp.module, {"x": np.zeros((1, 4), np.int8)})


def test_check_reports_what_litert_would_do_even_when_quantir_cannot_import_the_file(tmp_path):
    path = tmp_path / "m.tflite"
    path.write_bytes(LITERT_CASES["TRANSPOSE without its perm"][0]())
    report = check_tflite(str(path))
    assert [str(v) for v in report.violations] == [
        LITERT_CASES["TRANSPOSE without its perm"][1],
        f"IMPORT 'model' quantir: {path}: operator 3 (TRANSPOSE -> 'nchw'): input 1 is missing (2 inputs given)"]
    assert report.checked == 0


def test_check_raises_the_import_error_when_litert_has_nothing_to_say(tmp_path):
    path = tmp_path / "m.tflite"
    path.write_bytes(mutated(change_tensor=("filter", lambda t: dc.replace(t, type=TensorType.STRING))))
    with pytest.raises(UnsupportedOpError, match="tensor 'filter' has type STRING"):
        check_tflite(str(path))


@pytest.mark.parametrize("tensor, op, index", [("begin", "STRIDED_SLICE -> 'sliced'", 1),
                                               ("perm", "TRANSPOSE -> 'nchw'", 1)])
def test_an_index_vector_that_is_not_1d_is_refused_as_litert_does(tensor, op, index):
    n = {"begin": 2, "perm": 4}[tensor]
    data = mutated(change_tensor=(tensor, lambda t: dc.replace(t, shape=(n, 1))))
    with pytest.raises(ModelFormatError, match=rf"\({op}\): input {index} \('{tensor}', the {tensor}\) must be 1-D, "
                                               rf"found shape \[{n}, 1\]"):
        import_tflite(data)


def test_a_conv_whose_input_is_quantized_per_axis_is_refused_naming_the_operator():
    """Found by fuzz_models: 3 input scales against 2 weight scales broadcast in numpy (ValueError)."""
    g = Graph()
    x = g.act("x", (1, 4, 4, 3), np.array([0.05, 0.1, 0.2], np.float32), axis=3)
    g.inputs.append(x)
    w_scales = np.array([0.01, 0.02], np.float32)
    w = g.const("filter", np.ones((2, 3, 3, 3), np.int8), w_scales)
    b = g.const("bias", np.zeros(2, np.int32), np.float32(0.05) * w_scales)
    c = g.act("conv", (1, 4, 4, 2), 0.1)
    g.op(OP.CONV_2D, [x, w, b], [c], Conv2DOptions(padding=Padding.SAME))
    with pytest.raises(QuantirError, match=r"CONV_2D -> 'conv'\): a conv/fully-connected input must be quantized "
                                           r"per tensor, got 3 scales"):
        import_tflite(g.finish([c]))


def test_parameters_no_table_can_hold_are_a_typed_error_naming_the_op():
    """Found by fuzz_models: TANH from scale 1 to an output scale of 1e-30 makes LUT entries of
    1e30 steps (LiteRT casts them to int32: undefined); run says which op, not numerics' ValueError."""
    from quantir.runtime.qkernels import QKernelError

    g = Graph()
    x = g.input("x", (1, 4), 1.0)
    y = g.act("y", (1, 4), 1e-30)
    g.op(OP.TANH, [x], [y])
    imp = import_tflite(g.finish([y]))
    with pytest.raises(QKernelError, match=r"\(qnn.tanh\): its quantization parameters cannot be prepared: "
                                           r"round_half_away: \|x\| must be below 2\*\*63"):
        run(imp.module, {input_names(imp.module.main)[0]: np.zeros((1, 4), np.int8)})
