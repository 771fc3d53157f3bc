"""Float32 ops -> LiteRT float32 builtins: one-op ONNX models, loaded by quantir, exported, run by LiteRT's
BUILTIN_REF kernels and by quantir's interpreter; then the .tflite imported back and run again.

Tolerance: |ours − LiteRT| <= 2e-5 + 2e-5·|LiteRT|. Both compute in float32, but LiteRT's reference
kernels call libm (exp, log, tanh, erf for GELU) where numpy has its own vectorized versions (a few
ulp apart), and reductions, softmax and matrix products sum in their own order (numpy pairwise, LiteRT
left to right): differences of a few ulp of the partial sums, never a different result. Ops that only
move, select or compare values are exact and checked so.
"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from quantir.backends.tflite.export import export_tflite  # noqa: E402
from quantir.backends.tflite.schema import BuiltinOperator as OP  # noqa: E402
from quantir.backends.tflite.schema import TensorType  # noqa: E402
from quantir.errors import UnsupportedOpError  # noqa: E402
from quantir.frontends.onnx import load_onnx  # noqa: E402
from quantir.frontends.tflite import import_tflite  # noqa: E402
from quantir.runtime import input_names, run  # noqa: E402

pytest.importorskip("ai_edge_litert.interpreter")
from quantir.backends.tflite.litert import run_model  # noqa: E402

pytestmark = pytest.mark.oracle
F = np.float32
RTOL = ATOL = 2e-5


def node(op, ins, outs=("y",), **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


def _normal(*shape):
    return lambda rng: rng.standard_normal(shape).astype(F)


def _positive(*shape):
    return lambda rng: (np.abs(rng.standard_normal(shape)) + 0.25).astype(F)


# name: (nodes, inputs [(name, dtype, shape)], output shape, initializers, feeds {name: rng -> array},
#        the builtins the export must hold, exact)
X234 = [("x", F, (2, 3, 4))]
X4D = [("x", F, (2, 3, 5, 6))]
SQRT2 = np.asarray(np.sqrt(2.0), F)
CASES = {
    "add_broadcast": ([node("Add", ["x", "b"])], X234, (2, 3, 4), {"b": np.linspace(-1, 1, 4).astype(F)},
                      {"x": _normal(2, 3, 4)}, {OP.ADD}, False),
    "sub_scalar_first": ([node("Sub", ["c", "x"])], X234, (2, 3, 4), {"c": np.asarray(1.5, F)},
                         {"x": _normal(2, 3, 4)}, {OP.SUB}, False),
    "mul_two_inputs_4d": ([node("Mul", ["x", "z"])], [*X4D, ("z", F, (2, 1, 5, 6))], (2, 3, 5, 6), {},
                          {"x": _normal(2, 3, 5, 6), "z": _normal(2, 1, 5, 6)}, {OP.MUL}, False),
    "div_dynamic_batch": ([node("Div", ["x", "z"])], [("x", F, (None, 4)), ("z", F, (None, 1))], (None, 4), {},
                          {"x": _normal(3, 4), "z": _positive(3, 1)}, {OP.DIV}, False),
    "sqrt": ([node("Sqrt", ["x"])], X234, (2, 3, 4), {}, {"x": _positive(2, 3, 4)}, {OP.SQRT}, False),
    "reciprocal": ([node("Reciprocal", ["x"])], X234, (2, 3, 4), {}, {"x": _positive(2, 3, 4)}, {OP.DIV}, False),
    "exp": ([node("Exp", ["x"])], X234, (2, 3, 4), {}, {"x": _normal(2, 3, 4)}, {OP.EXP}, False),
    "log": ([node("Log", ["x"])], X234, (2, 3, 4), {}, {"x": _positive(2, 3, 4)}, {OP.LOG}, False),
    "relu": ([node("Relu", ["x"])], X234, (2, 3, 4), {}, {"x": _normal(2, 3, 4)}, {OP.RELU}, True),
    "sigmoid": ([node("Sigmoid", ["x"])], X234, (2, 3, 4), {}, {"x": _normal(2, 3, 4)}, {OP.LOGISTIC}, False),
    "tanh": ([node("Tanh", ["x"])], X234, (2, 3, 4), {}, {"x": _normal(2, 3, 4)}, {OP.TANH}, False),
    "abs_neg": ([node("Abs", ["x"], ["a"]), node("Neg", ["a"])], X234, (2, 3, 4), {}, {"x": _normal(2, 3, 4)},
                {OP.ABS, OP.NEG}, True),
    "leaky_relu": ([node("LeakyRelu", ["x"], alpha=0.2)], X234, (2, 3, 4), {}, {"x": _normal(2, 3, 4)},
                   {OP.LEAKY_RELU}, False),
    "hard_swish": ([node("HardSwish", ["x"])], X234, (2, 3, 4), {}, {"x": _normal(2, 3, 4)},
                   {OP.HARD_SWISH}, False),
    "hard_sigmoid": ([node("HardSigmoid", ["x"], alpha=0.25, beta=0.4)], X234, (2, 3, 4), {},
                     {"x": lambda rng: 4 * rng.standard_normal((2, 3, 4)).astype(F)}, {OP.RELU_0_TO_1}, False),
    "pow_square": ([node("Pow", ["x", "two"])], X234, (2, 3, 4), {"two": np.asarray(2.0, F)},
                   {"x": _normal(2, 3, 4)}, {OP.POW}, False),
    "clip_relu6": ([node("Clip", ["x", "lo", "hi"])], X234, (2, 3, 4), {"lo": np.asarray(0, F), "hi": np.asarray(6, F)},
                   {"x": lambda rng: 5 * rng.standard_normal((2, 3, 4)).astype(F)}, {OP.RELU6}, True),
    "clip_bounds": ([node("Clip", ["x", "lo", "hi"])], X234, (2, 3, 4),
                    {"lo": np.asarray(-0.5, F), "hi": np.asarray(0.7, F)}, {"x": _normal(2, 3, 4)},
                    {OP.MAXIMUM, OP.MINIMUM}, True),
    "clip_min_only": ([node("Clip", ["x", "lo"])], X234, (2, 3, 4), {"lo": np.asarray(1e-3, F)},
                      {"x": _normal(2, 3, 4)}, {OP.MAXIMUM}, True),
    "reduce_mean_last": ([node("ReduceMean", ["x"], axes=[-1], keepdims=1)], X234, (2, 3, 1), {},
                         {"x": _normal(2, 3, 4)}, {OP.MEAN}, False),
    "reduce_sum_axis1": ([node("ReduceSum", ["x", "axes"], keepdims=0)], X234, (2, 4),
                         {"axes": np.asarray([1], np.int64)}, {"x": _normal(2, 3, 4)}, {OP.SUM}, False),
    "reduce_max_4d": ([node("ReduceMax", ["x"], axes=[2, 3], keepdims=1)], X4D, (2, 3, 1, 1), {},
                      {"x": _normal(2, 3, 5, 6)}, {OP.REDUCE_MAX}, True),
    "reduce_l2": ([node("ReduceL2", ["x"], axes=[1, 2], keepdims=0)], X234, (2,), {}, {"x": _normal(2, 3, 4)},
                  {OP.SQUARE, OP.SUM, OP.SQRT}, False),
    "softmax_4d": ([node("Softmax", ["x"], axis=-1)], X4D, (2, 3, 5, 6), {}, {"x": _normal(2, 3, 5, 6)},
                   {OP.SOFTMAX}, False),
    "matmul_weights": ([node("MatMul", ["x", "w"])], [("x", F, (None, 5, 8))], (None, 5, 3),
                       {"w": np.random.default_rng(1).standard_normal((8, 3)).astype(F)}, {"x": _normal(2, 5, 8)},
                       {OP.FULLY_CONNECTED}, False),
    "matmul_batch": ([node("MatMul", ["x", "z"])], [("x", F, (2, 3, 5, 8)), ("z", F, (2, 3, 8, 4))], (2, 3, 5, 4),
                     {}, {"x": _normal(2, 3, 5, 8), "z": _normal(2, 3, 8, 4)}, {OP.BATCH_MATMUL}, False),
    "gemm": ([node("Gemm", ["x", "w", "c"], alpha=0.5, beta=2.0, transB=1)], [("x", F, (4, 6))], (4, 3),
             {"w": np.random.default_rng(2).standard_normal((3, 6)).astype(F), "c": np.asarray([1, -1, 0.5], F)},
             {"x": _normal(4, 6)}, {OP.FULLY_CONNECTED}, False),
    "expand_static": ([node("Expand", ["x", "s"])], [("x", F, (3, 1))], (3, 4), {"s": np.asarray([3, 4], np.int64)},
                      {"x": _normal(3, 1)}, {OP.BROADCAST_TO}, True),
    "expand_dynamic": ([node("Expand", ["x", "s"])], [("x", F, (None, 1))], (None, 5),
                       {"s": np.asarray([1, 5], np.int64)}, {"x": _normal(3, 1)}, {OP.MUL}, True),
    "layer_norm": ([node("LayerNormalization", ["x", "g", "b"], axis=-1, epsilon=1e-5)], [("x", F, (2, 5, 8))],
                   (2, 5, 8), {"g": np.linspace(0.5, 1.5, 8).astype(F), "b": np.linspace(-1, 1, 8).astype(F)},
                   {"x": _normal(2, 5, 8)}, {OP.MEAN, OP.SQUARED_DIFFERENCE, OP.RSQRT}, False),
    "gelu_erf_chain": ([node("Div", ["x", "sqrt2"], ["d"]), node("Erf", ["d"], ["e"]), node("Add", ["e", "one"], ["p"]),
                        node("Mul", ["x", "p"], ["m"]), node("Mul", ["m", "half"])], X234, (2, 3, 4),
                       {"sqrt2": SQRT2, "one": np.asarray(1, F), "half": np.asarray(0.5, F)},
                       {"x": lambda rng: 3 * rng.standard_normal((2, 3, 4)).astype(F)}, {OP.GELU}, False),
    "conv_same": ([node("Conv", ["x", "w", "b"], pads=[1, 1, 1, 1])], X4D, (2, 4, 5, 6),
                  {"w": np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype(F),
                   "b": np.asarray([0.1, -0.2, 0.3, 0], F)}, {"x": _normal(2, 3, 5, 6)}, {OP.CONV_2D}, False),
    "conv_explicit_pads": ([node("Conv", ["x", "w"], pads=[0, 2, 1, 0], strides=[2, 1])], X4D, (2, 2, 3, 7),
                           {"w": np.random.default_rng(4).standard_normal((2, 3, 2, 2)).astype(F)},
                           {"x": _normal(2, 3, 5, 6)}, {OP.PAD, OP.CONV_2D}, False),
    "depthwise": ([node("Conv", ["x", "w"], group=3, pads=[1, 1, 1, 1])], X4D, (2, 3, 5, 6),
                  {"w": np.random.default_rng(5).standard_normal((3, 1, 3, 3)).astype(F)}, {"x": _normal(2, 3, 5, 6)},
                  {OP.DEPTHWISE_CONV_2D}, False),
    "pools": ([node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
               node("AveragePool", ["p"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
               node("GlobalAveragePool", ["a"])], [("x", F, (2, 3, 6, 6))], (2, 3, 1, 1), {},
              {"x": _normal(2, 3, 6, 6)}, {OP.MAX_POOL_2D, OP.AVERAGE_POOL_2D, OP.MEAN}, False),
    "arg_max_keepdims": ([node("ArgMax", ["x"], axis=1, keepdims=1)], [("x", F, (None, 10))], (np.int64, (None, 1)), {},
                         {"x": _normal(4, 10)}, {OP.ARG_MAX, OP.EXPAND_DIMS}, True),
    "arg_max": ([node("ArgMax", ["x"], axis=-1, keepdims=0)], X234, (np.int64, (2, 3)), {}, {"x": _normal(2, 3, 4)},
                {OP.ARG_MAX}, True),
    "compare_where": ([node("Less", ["x", "z"], ["lt"]), node("Where", ["lt", "x", "c"], ["w"]),
                       node("Tile", ["w", "reps"], ["t"]), node("Floor", ["t"])], [*X234, ("z", F, (4,))], (4, 3, 4),
                      {"c": np.asarray(-7.5, F), "reps": np.asarray([2, 1, 1], np.int64)},
                      {"x": lambda rng: 4 * rng.standard_normal((2, 3, 4)).astype(F), "z": _normal(4)},
                      {OP.LESS, OP.SELECT_V2, OP.TILE, OP.FLOOR}, True),
    "greater_equal": ([node("GreaterOrEqual", ["x", "z"])], [*X234, ("z", F, (2, 3, 4))], (np.bool_, (2, 3, 4)), {},
                      {"x": lambda rng: rng.integers(-2, 3, (2, 3, 4)).astype(F),
                       "z": lambda rng: rng.integers(-2, 3, (2, 3, 4)).astype(F)}, {OP.GREATER_EQUAL}, True),
    "split": ([node("Split", ["x", "sizes"], ["a", "b"], axis=2), node("Mul", ["a", "b"])], [("x", F, (2, 3, 8))],
              (2, 3, 4), {"sizes": np.asarray([4, 4], np.int64)}, {"x": _normal(2, 3, 8)}, {OP.SPLIT_V, OP.MUL},
              False),
    **{f"resize_{mode}_{cmode}": ([node("Resize", ["x", "", "", "sizes"], mode=mode, **extra,
                                        coordinate_transformation_mode=cmode)], [("x", F, (2, 3, 4, 5))], (2, 3, 7, 9),
                                  {"sizes": np.asarray([2, 3, 7, 9], np.int64)}, {"x": _normal(2, 3, 4, 5)}, {code},
                                  mode == "nearest")
       for mode, cmode, extra, code in (
           ("linear", "half_pixel", {}, OP.RESIZE_BILINEAR), ("linear", "align_corners", {}, OP.RESIZE_BILINEAR),
           ("linear", "asymmetric", {}, OP.RESIZE_BILINEAR),
           ("nearest", "asymmetric", {"nearest_mode": "floor"}, OP.RESIZE_NEAREST_NEIGHBOR),
           ("nearest", "half_pixel", {"nearest_mode": "round_prefer_ceil"}, OP.RESIZE_NEAREST_NEIGHBOR),
           ("nearest", "align_corners", {"nearest_mode": "round_prefer_ceil"}, OP.RESIZE_NEAREST_NEIGHBOR))},
    "resize_dynamic_2x": ([node("Resize", ["x", "", "scales"], mode="nearest", nearest_mode="floor",
                                coordinate_transformation_mode="asymmetric")], [("x", F, (1, 3, None, None))],
                          (1, 3, None, None), {"scales": np.asarray([1, 1, 2, 2], F)}, {"x": _normal(1, 3, 5, 4)},
                          {OP.SHAPE, OP.MUL, OP.RESIZE_NEAREST_NEIGHBOR}, True),
    "space_to_depth": ([node("SpaceToDepth", ["x"], blocksize=2)], [("x", F, (2, 3, 4, 6))], (2, 12, 2, 3), {},
                       {"x": _normal(2, 3, 4, 6)}, {OP.SPACE_TO_DEPTH}, True),
    "conv_prelu": ([node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("PRelu", ["c", "slope"])], X4D,
                   (2, 2, 5, 6), {"w": np.random.default_rng(9).standard_normal((2, 3, 3, 3)).astype(F),
                                  "slope": np.asarray([0.1, -0.3], F).reshape(2, 1, 1)},
                   {"x": _normal(2, 3, 5, 6)}, {OP.CONV_2D, OP.PRELU}, False),
    "prelu_3d": ([node("PRelu", ["x", "slope"])], X234, (2, 3, 4), {"slope": np.linspace(0, 0.3, 4).astype(F)},
                 {"x": _normal(2, 3, 4)}, {OP.PRELU}, True),
    "batch_norm": ([node("Relu", ["x"], ["r"]), node("BatchNormalization", ["r", "s", "b", "m", "v"], epsilon=1e-3)],
                   X4D, (2, 3, 5, 6), {"s": np.asarray([1, 2, 0.5], F), "b": np.asarray([0, 1, -1], F),
                                       "m": np.asarray([0.2, 0.3, 0.1], F), "v": np.asarray([1, 4, 0.25], F)},
                   {"x": _normal(2, 3, 5, 6)}, {OP.MUL, OP.ADD}, False),
    "cast_mask": ([node("Cast", ["m"], to=onnx.TensorProto.FLOAT)], [("m", np.int64, (None, 7))], (None, 7), {},
                  {"m": lambda rng: rng.integers(0, 2, (3, 7))}, {OP.CAST}, True),
    "movement": ([node("Transpose", ["x"], ["t"], perm=[0, 2, 1]), node("Reshape", ["t", "s"], ["r"]),
                  node("Slice", ["r", "st", "en", "ax"], ["sl"]), node("Concat", ["sl", "sl"], axis=1)],
                 X234, (2, 8), {"s": np.asarray([2, 12], np.int64), "st": np.asarray([1], np.int64),
                                "en": np.asarray([5], np.int64), "ax": np.asarray([1], np.int64)},
                 {"x": _normal(2, 3, 4)}, {OP.TRANSPOSE, OP.RESHAPE, OP.STRIDED_SLICE, OP.CONCATENATION}, True),
    "embedding_gather": ([node("Gather", ["table", "ids"], axis=0)], [("ids", np.int64, (None, 5))], (None, 5, 4),
                         {"table": np.random.default_rng(6).standard_normal((10, 4)).astype(F)},
                         {"ids": lambda rng: rng.integers(0, 10, (2, 5))}, {OP.GATHER}, True),
}


def _model(nodes, inputs, out_shape, inits):
    """``out_shape``: the float output's shape, or (dtype, shape)."""
    def vi(name, dtype, shape):
        dims = None if shape is None else [d if d is not None else "N" for d in shape]
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), dims)
    out_type, out_shape = out_shape if out_shape and isinstance(out_shape[0], type) else (F, out_shape)
    graph = helper.make_graph(nodes, "float_op", [vi(*i) for i in inputs], [vi("y", out_type, out_shape)],
                              initializer=[onnx.numpy_helper.from_array(np.asarray(a), n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 17)])
    model.ir_version = 8
    return load_onnx(model)


def _close(what, ours, theirs, exact):
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (what, ours.shape, theirs.shape, ours.dtype)
    if exact:
        np.testing.assert_array_equal(ours, theirs, err_msg=what)
    else:
        np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL, err_msg=what)


def _export_and_compare(case, module, feeds, exact) -> list:
    """The builtins written, in order, after checking LiteRT against quantir and the import back."""
    rng = np.random.default_rng(0)
    named = {name: feeds[name](rng) for name in input_names(module.main)}
    model = export_tflite(module).model
    written = [OP(model.operator_codes[op.opcode_index].builtin_code) for op in model.subgraphs[0].operators]
    plain = (TensorType.FLOAT32, TensorType.INT32, TensorType.INT64, TensorType.BOOL)   # nothing quantized
    assert all(t.type in plain and t.quantization is None for t in model.subgraphs[0].tensors)
    (theirs,) = run_model(model, list(named.values()))
    (ours,) = run(module, named).values()
    _close(f"{case}: quantir vs LiteRT", ours, theirs, exact)
    (back,) = run(import_tflite(model).module, named).values()
    _close(f"{case}: imported .tflite vs LiteRT", back, theirs, exact)
    return written


@pytest.mark.parametrize("case", list(CASES))
def test_float_op_runs_in_litert_as_in_quantir_and_imports_back(case):
    nodes, inputs, out_shape, inits, feeds, builtins, exact = CASES[case]
    written = _export_and_compare(case, _model(nodes, inputs, out_shape, inits), feeds, exact)
    assert builtins <= set(written), (case, written)


W85 = np.random.default_rng(7).standard_normal((8, 5)).astype(F)
X38 = ([("x", F, (None, 3, 8))], {"x": lambda rng: rng.standard_normal((2, 3, 8)).astype(F) + 0.1})
X4 = ([("x", F, (None, 3, 5, 5))], {"x": lambda rng: 2 * rng.standard_normal((2, 3, 5, 5)).astype(F)})
W3 = np.random.default_rng(8).standard_normal((4, 3, 3, 3)).astype(F)
FUSED = {   # nodes, (inputs, feeds), output shape, initializers, the builtins written in order (NCHW I/O:
           # a TRANSPOSE each way around the NHWC convolutions)
    "matmul_plus_bias": ([node("MatMul", ["x", "w"], ["m"]), node("Add", ["bias", "m"])], X38, (None, 3, 5),
                         {"w": W85, "bias": np.linspace(-1, 1, 5).astype(F)}, [OP.FULLY_CONNECTED]),
    "bias_along_rows_stays_an_add": ([node("MatMul", ["x", "w"], ["m"]), node("Add", ["m", "bias"])], X38,
                                     (None, 3, 5), {"w": W85, "bias": np.linspace(-1, 1, 3).astype(F).reshape(3, 1)},
                                     [OP.FULLY_CONNECTED, OP.ADD]),
    "rsqrt": ([node("Abs", ["x"], ["a"]), node("Sqrt", ["a"], ["s"]), node("Reciprocal", ["s"])], X38, (None, 3, 8),
              {}, [OP.ABS, OP.RSQRT]),
    "conv_relu6": ([node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Clip", ["c", "lo", "hi"])], X4,
                   (None, 4, 5, 5), {"w": W3, "lo": np.asarray(0, F), "hi": np.asarray(6, F)},
                   [OP.TRANSPOSE, OP.CONV_2D, OP.TRANSPOSE]),
    "depthwise_relu": ([node("Conv", ["x", "w"], ["c"], group=3), node("Relu", ["c"])], X4, (None, 3, 3, 3),
                       {"w": W3[:3, :1]}, [OP.TRANSPOSE, OP.DEPTHWISE_CONV_2D, OP.TRANSPOSE]),
    "conv_other_clip_stays": ([node("Conv", ["x", "w"], ["c"]), node("Clip", ["c", "lo", "hi"])], X4, (None, 4, 3, 3),
                              {"w": W3, "lo": np.asarray(-0.5, F), "hi": np.asarray(0.5, F)},
                              [OP.TRANSPOSE, OP.CONV_2D, OP.MAXIMUM, OP.MINIMUM, OP.TRANSPOSE]),
}


@pytest.mark.parametrize("case", list(FUSED))
def test_chains_one_builtin_computes_are_written_as_it(case):
    """What TF's converter writes as one builtin: matmul + constant bias (FULLY_CONNECTED with its bias),
    1/√x (RSQRT), a convolution's RELU / RELU6 (its fused activation); other bounds stay separate ops."""
    nodes, (inputs, feeds), out_shape, inits, builtins = FUSED[case]
    written = _export_and_compare(case, _model(nodes, inputs, out_shape, inits), feeds, exact=False)
    assert written == builtins


def test_a_float_op_without_a_tflite_form_is_refused_by_name():
    module = _model([node("Erf", ["x"])], X234, (2, 3, 4), {})
    with pytest.raises(UnsupportedOpError, match=r"nn.erf.*still float.*no float32 form"):
        export_tflite(module)


def test_a_softmax_over_another_axis_is_refused():
    module = _model([node("Softmax", ["x"], axis=1)], X234, (2, 3, 4), {})
    with pytest.raises(UnsupportedOpError, match=r"softmax over axis 1.*last axis"):
        export_tflite(module)


def test_a_chain_that_is_not_gelu_stays_element_wise():
    """x·½·(1 + erf(x/2)): the quantizer's GELU check refuses the constant 2, so no GELU is written."""
    nodes = [node("Div", ["x", "two"], ["d"]), node("Erf", ["d"], ["e"]), node("Add", ["e", "one"], ["p"]),
             node("Mul", ["x", "p"], ["m"]), node("Mul", ["m", "half"])]
    module = _model(nodes, X234, (2, 3, 4), {"two": np.asarray(2, F), "one": np.asarray(1, F),
                                             "half": np.asarray(0.5, F)})
    with pytest.raises(UnsupportedOpError, match="nn.erf"):
        export_tflite(module)


def test_minilm_expanded_float_ir_in_litert_matches_onnx_runtime_and_imports_back(minilm_path, minilm_tokenizer_files):
    """all-MiniLM-L6-v2's float IR after the quantizer's expansions (LayerNorm, mean pooling written
    out) as a float32 .tflite: LiteRT's sentence embeddings against ONNX Runtime's float model, and the
    same file imported back into quantir's interpreter against LiteRT (the tolerance above)."""
    ort = pytest.importorskip("onnxruntime")
    import quantir as qr
    from quantir.datasets import sentences
    from quantir.datasets.wordpiece import WordPiece
    from quantir.quantize.calibrate import ensure_names
    from quantir.quantize.config import Config
    from quantir.quantize.expand import expand
    module = qr.load(minilm_path)
    ensure_names(module.main)
    expand(module.main, Config())
    model = export_tflite(module).model
    counts = {}
    for op in model.subgraphs[0].operators:
        code = model.operator_codes[op.opcode_index].builtin_code
        counts[code] = counts.get(code, 0) + 1
    assert counts[OP.GELU] == 6 and counts[OP.FULLY_CONNECTED] == 36 and OP.CUSTOM not in counts
    tok = WordPiece.from_file(minilm_tokenizer_files["vocab.txt"])
    feeds = tok(list(sentences.evaluation_sentences()[:8]), max_length=64)
    names = input_names(module.main)
    (lite,) = run_model(model, [feeds[n] for n in names])
    (reference,) = ort.InferenceSession(str(minilm_path)).run(None, {n: feeds[n] for n in names})
    cosine = (lite * reference).sum(-1) / np.linalg.norm(lite, axis=-1) / np.linalg.norm(reference, axis=-1)
    assert lite.shape == (8, 384) and cosine.min() >= 0.9999, cosine
    (back,) = run(import_tflite(model).module, {n: feeds[n] for n in names}).values()
    _close("MiniLM imported back vs LiteRT", back, lite, exact=False)
