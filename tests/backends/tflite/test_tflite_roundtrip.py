"""Writer/reader round trips, cross-reading with LiteRT's generated code, and corrupt input."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quantir.backends.tflite import (
    ActivationFunctionType,
    AddOptions,
    BuiltinOperator,
    Conv2DOptions,
    DepthwiseConv2DOptions,
    FullyConnectedOptions,
    Model,
    ModelBuilder,
    Padding,
    Pool2DOptions,
    Quantization,
    ReducerOptions,
    ReshapeOptions,
    ResizeBilinearOptions,
    SoftmaxOptions,
    TensorType,
    read_model,
    write_model,
)
from quantir.backends.tflite.reader import load_model
from quantir.errors import ModelFormatError, VerifyError

FAST = settings(max_examples=60, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))

_OPS = [
    (BuiltinOperator.CONV_2D, st.builds(Conv2DOptions, padding=st.sampled_from(Padding),
                                        stride_w=st.integers(1, 4), stride_h=st.integers(1, 4),
                                        fused_activation_function=st.sampled_from(ActivationFunctionType),
                                        dilation_w_factor=st.integers(1, 3), dilation_h_factor=st.integers(1, 3))),
    (BuiltinOperator.DEPTHWISE_CONV_2D, st.builds(DepthwiseConv2DOptions, depth_multiplier=st.integers(1, 4),
                                                  stride_w=st.integers(0, 3))),
    (BuiltinOperator.AVERAGE_POOL_2D, st.builds(Pool2DOptions, filter_width=st.integers(1, 7),
                                                filter_height=st.integers(1, 7))),
    (BuiltinOperator.FULLY_CONNECTED, st.builds(FullyConnectedOptions, keep_num_dims=st.booleans())),
    (BuiltinOperator.SOFTMAX, st.builds(SoftmaxOptions, beta=st.floats(0.01, 10.0))),
    (BuiltinOperator.ADD, st.builds(AddOptions, pot_scale_int16=st.booleans())),
    (BuiltinOperator.MEAN, st.builds(ReducerOptions, keep_dims=st.booleans())),
    (BuiltinOperator.RESHAPE, st.builds(ReshapeOptions, new_shape=st.lists(st.integers(-1, 9), max_size=4))),
    (BuiltinOperator.RESIZE_BILINEAR, st.builds(ResizeBilinearOptions, align_corners=st.booleans(),
                                                half_pixel_centers=st.booleans())),
    (BuiltinOperator.LOGISTIC, st.none()),
    (BuiltinOperator.GELU, st.none()),  # a code above 127: deprecated_builtin_code is the placeholder
]


@st.composite
def models(draw):
    b = ModelBuilder(description=draw(st.text(max_size=12)))
    n_tensors = draw(st.integers(1, 6))
    for i in range(n_tensors):
        shape = tuple(draw(st.lists(st.integers(0, 5), max_size=4)))
        dtype = draw(st.sampled_from([np.int8, np.int32, np.float32, np.uint8, np.int16]))
        quant = None
        if draw(st.booleans()):
            per_axis = draw(st.booleans()) and len(shape) > 0 and shape[0] > 1
            n = shape[0] if per_axis else 1
            scales = draw(st.lists(st.floats(2.0**-20, 8.0, width=32), min_size=n, max_size=n))
            zps = draw(st.lists(st.integers(-128, 127), min_size=n, max_size=n))
            quant = Quantization(scales, zps, 0)
        if draw(st.booleans()):
            data = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
            b.add_constant(draw(st.text(max_size=8)) or f"c{i}", data, quant)
        else:
            b.add_tensor(draw(st.text(max_size=8)), shape, dtype, quant)
    for _ in range(draw(st.integers(0, 4))):
        code, opts = draw(st.sampled_from(_OPS))
        ins = draw(st.lists(st.integers(-1, n_tensors - 1), max_size=3))
        outs = draw(st.lists(st.integers(0, n_tensors - 1), min_size=1, max_size=2))
        b.add_operator(code, ins, outs, draw(opts), version=draw(st.integers(1, 5)))
    b.set_io(draw(st.lists(st.integers(0, n_tensors - 1), max_size=2)),
             draw(st.lists(st.integers(0, n_tensors - 1), max_size=2)))
    return b.build()


@FAST
@given(model=models())
def test_reader_round_trips_what_the_writer_wrote(model):
    data = write_model(model)
    assert data[4:8] == b"TFL3"
    back = read_model(data)
    assert back == model
    assert write_model(back) == data  # deterministic bytes


@pytest.mark.oracle
@FAST
@given(model=models())
def test_litert_generated_code_reads_what_the_writer_wrote(model):
    gen = pytest.importorskip("ai_edge_litert.schema_py_generated")
    m = gen.ModelT.InitFromPackedBuf(write_model(model), 0)
    assert m.version == 3
    codes = [(max(c.builtinCode, c.deprecatedBuiltinCode), c.version) for c in m.operatorCodes]
    assert codes == [(oc.builtin_code, oc.version) for oc in model.operator_codes]
    assert all(c.deprecatedBuiltinCode == min(c.builtinCode, 127) for c in m.operatorCodes)
    sg, ours = m.subgraphs[0], model.subgraphs[0]
    for t, u in zip(sg.tensors, ours.tensors, strict=True):
        assert t.name.decode() == u.name and t.type == u.type and t.buffer == u.buffer
        assert list(t.shape if t.shape is not None else []) == list(u.shape)
        if u.quantization is None:
            assert t.quantization is None
        else:
            assert list(np.float32(t.quantization.scale)) == list(np.float32(u.quantization.scale))
            assert list(t.quantization.zeroPoint) == list(u.quantization.zero_point)
    for o, u in zip(sg.operators or [], ours.operators, strict=True):
        assert list(o.inputs) == list(u.inputs) and list(o.outputs) == list(u.outputs)
        if u.options is not None:
            assert o.builtinOptionsType == type(u.options).OPTIONS_TYPE
            for name in ("stride_w", "padding", "depth_multiplier", "keep_dims", "beta", "half_pixel_centers"):
                if hasattr(u.options, name):
                    camel = name.split("_")[0] + "".join(p.title() for p in name.split("_")[1:])
                    assert np.float32(getattr(o.builtinOptions, camel)) == np.float32(getattr(u.options, name))
    for i, buf in enumerate(model.buffers):
        got = m.buffers[i].data
        assert (bytes(np.asarray(got, np.uint8)) if got is not None else b"") == buf


@pytest.mark.oracle
def test_reader_parses_a_model_written_by_litert_generated_code():
    gen = pytest.importorskip("ai_edge_litert.schema_py_generated")
    import flatbuffers

    m = gen.ModelT()
    m.version = 3
    m.description = "foreign"
    b0, b1 = gen.BufferT(), gen.BufferT()
    b1.data = list(np.arange(6, dtype=np.int8).view(np.uint8))
    m.buffers = [b0, b1]
    t = gen.TensorT()
    t.name, t.shape, t.type, t.buffer = "w", [2, 3], gen.TensorType.INT8, 1
    q = gen.QuantizationParametersT()
    q.scale, q.zeroPoint, q.quantizedDimension = [0.5, 0.25], [0, 0], 0
    t.quantization = q
    x = gen.TensorT()
    x.name, x.shape, x.type, x.buffer = "x", [1, 3], gen.TensorType.INT8, 0
    y = gen.TensorT()
    y.name, y.shape, y.type, y.buffer = "y", [1, 2], gen.TensorType.INT8, 0
    op = gen.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [1, 0, -1], [2]
    op.builtinOptionsType = gen.BuiltinOptions.FullyConnectedOptions
    op.builtinOptions = gen.FullyConnectedOptionsT()
    op.builtinOptions.fusedActivationFunction = gen.ActivationFunctionType.RELU6
    sg = gen.SubGraphT()
    sg.tensors, sg.operators, sg.inputs, sg.outputs = [t, x, y], [op], [1], [2]
    oc = gen.OperatorCodeT()
    oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = 9, 9, 4
    m.operatorCodes, m.subgraphs = [oc], [sg]
    fb = flatbuffers.Builder(256)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    model = read_model(bytes(fb.Output()))
    assert model.description == "foreign"
    (w, _, _) = model.subgraphs[0].tensors
    assert w.quantization == Quantization((0.5, 0.25), (0, 0), 0)
    np.testing.assert_array_equal(model.tensor_data(w), np.arange(6, dtype=np.int8).reshape(2, 3))
    (o,) = model.subgraphs[0].operators
    assert o.inputs == (1, 0, -1) and o.options == FullyConnectedOptions(
        fused_activation_function=ActivationFunctionType.RELU6)
    assert model.operator_name(o) == "FULLY_CONNECTED"


def _small_model() -> bytes:
    b = ModelBuilder()
    x = b.add_tensor("x", (1, 4, 4, 2), np.int8, Quantization([0.1], [3]))
    w = b.add_constant("w", np.ones((3, 1, 1, 2), np.int8), Quantization([0.1, 0.2, 0.3], [0, 0, 0]))
    bias = b.add_constant("b", np.arange(3, dtype=np.int32), Quantization([0.01, 0.02, 0.03], [0, 0, 0]))
    y = b.add_tensor("y", (1, 4, 4, 3), np.int8, Quantization([0.2], [-1]))
    b.add_operator(BuiltinOperator.CONV_2D, [x, w, bias], [y], Conv2DOptions())
    b.set_io([x], [y])
    return b.finish()


def test_every_truncation_raises_model_format_error():
    data = _small_model()
    for n in range(len(data)):
        with pytest.raises(ModelFormatError):
            read_model(data[:n])


@settings(max_examples=300, derandomize=True, deadline=None, database=None)
@given(st.data())
def test_corrupt_bytes_raise_model_format_error_or_parse(data):
    raw = bytearray(_small_model())
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    try:
        model = read_model(bytes(raw))
    except ModelFormatError as e:
        assert "TFLite" in str(e)
    else:
        assert isinstance(model, Model)


@settings(max_examples=100, derandomize=True, deadline=None, database=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_model_format_error(blob):
    with pytest.raises(ModelFormatError):
        read_model(b"\x10\x00\x00\x00TFL3" + blob if len(blob) % 2 else blob)


def test_wrong_identifier_and_unreadable_file(tmp_path):
    data = bytearray(_small_model())
    data[4:8] = b"ONNX"
    with pytest.raises(ModelFormatError, match="not a TFLite model"):
        read_model(bytes(data))
    with pytest.raises(ModelFormatError, match="cannot read"):
        load_model(tmp_path / "missing.tflite")
    path = tmp_path / "m.tflite"
    path.write_bytes(_small_model())
    assert load_model(path).subgraphs[0].tensors[0].name == "x"


def test_writer_validates_indices_sizes_and_option_types():
    b = ModelBuilder()
    x = b.add_tensor("x", (2,), np.int8)
    b.add_operator(BuiltinOperator.RELU, [x], [5])
    with pytest.raises(VerifyError, match="output tensor 5"):
        b.finish()
    b = ModelBuilder()
    b.add_tensor("c", (3,), np.int32, buffer=b.add_buffer(np.zeros(2, np.int32)))
    with pytest.raises(VerifyError, match="needs 12 bytes"):
        b.finish()
    b = ModelBuilder()
    x = b.add_tensor("x", (2,), np.int8)
    b.add_operator(BuiltinOperator.ADD, [x, x], [x], SoftmaxOptions())
    with pytest.raises(VerifyError, match="takes AddOptions"):
        b.finish()
    b = ModelBuilder()
    b.add_tensor("x", (2, 3), np.int8, Quantization([0.1, 0.2], [0, 0], 1))
    with pytest.raises(VerifyError, match="per-axis"):
        b.finish()


def test_builder_deduplicates_operator_codes_and_defaults_versions():
    b = ModelBuilder()
    x = b.add_tensor("x", (1, 2), np.int8)
    for _ in range(3):
        b.add_operator(BuiltinOperator.ADD, [x, x], [x])
    b.add_operator(BuiltinOperator.ADD, [x, x], [x], version=1)
    model = b.build()
    assert [(c.builtin_code, c.version) for c in model.operator_codes] == [(0, 2), (0, 1)]
    assert model.subgraphs[0].operators[0].options == AddOptions()
    assert model.subgraphs[0].tensors[0].type == TensorType.INT8


def test_the_backend_and_kernels_do_not_import_litert():
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "import quantir.backends.tflite as t, quantir.runtime.qkernels as qk\n"
            "b = t.ModelBuilder(); x = b.add_tensor('x', (1,), np.int8); b.set_io([x], [x]); b.finish()\n"
            "assert 'ai_edge_litert' not in sys.modules and 'tflite_runtime' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)
