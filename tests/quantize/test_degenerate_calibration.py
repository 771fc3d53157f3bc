"""Issue 11 item 9: results that look fine and are not. Degenerate calibration samples, constant
activations and weights that quantize to zeros succeed as before, with a QuantizationWarning that
names the tensor and says what to give instead; normal models on real data get none."""
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper as nh

import quantir as qr
from quantir.errors import QuantizationWarning
from quantir.quantize.health import InputObserver

from .tiny_models import cnn, constant_branch

CFG = qr.Config(progress=False)
SHAPE = (1, 8, 8)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("deg") / "cnn.onnx"
    cnn(path)
    return path


def quantize_warned(model, x, config=CFG, name="x"):
    """Quantize; return the result and the QuantizationWarning messages emitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = qr.quantize(model, {name: x}, config)
    emitted = [str(w.message) for w in caught if issubclass(w.category, QuantizationWarning)]
    assert emitted == r.warnings            # emitted and kept: the same messages, in order
    assert r.summary_dict()["warnings"] == r.warnings
    return r, emitted


def normal(n=32, seed=0):
    return np.random.default_rng(seed).normal(size=(n, *SHAPE)).astype(np.float32)


# -- calibration inputs -------------------------------------------------------------------------

@pytest.mark.parametrize("x, expected", [
    (np.zeros((32, *SHAPE), np.float32), "calibration input 'x' is all zeros in every one of its 32 samples"),
    (np.full((32, *SHAPE), 0.7, np.float32),
     "calibration input 'x' is the constant 0.7 in every one of its 32 samples"),
    (np.repeat(normal(1), 32, axis=0), "calibration input 'x': all 32 samples are identical (each equals the first)"),
    (np.linspace(-1, 1, 32, dtype=np.float32)[:, None, None, None] * np.ones((1, *SHAPE), np.float32),
     "calibration input 'x': every one of its 32 samples is constant within itself (one value per sample, "
     "from -1 to 1)"),
    (normal() * np.float32(1e-8), "calibration input 'x' stays within ±"),
], ids=["zeros", "constant", "identical", "constant-per-sample", "vanishing"])
def test_degenerate_input_warns_naming_it_and_marks_the_sqnr(tiny, x, expected):
    r, emitted = quantize_warned(tiny, x)
    assert len(emitted) == 1 and emitted[0].startswith(expected), emitted
    assert emitted[0].endswith("give real samples (a few hundred representative inputs, preprocessed as at inference)")
    assert r.degenerate_data and r.summary_dict()["sqnr_on_degenerate_data"] is True
    lines = r.summary().splitlines()
    assert lines[0] == f"WARNING: {emitted[0]}"          # shown first
    assert any("of degenerate calibration data: NOT evidence of accuracy" in line for line in lines)
    assert r.spec_report().ok                             # nothing that worked became an error


def test_identical_samples_are_detected_across_batches(tiny):
    """Batches of 32 (Config.batch_size): the sample kept from the first batch is compared with later ones;
    one differing sample in the last batch clears the warning."""
    x = np.repeat(normal(1), 100, axis=0)
    r, emitted = quantize_warned(tiny, x)
    assert emitted[0].startswith("calibration input 'x': all 100 samples are identical")
    x[99] += 1.0
    r, emitted = quantize_warned(tiny, x)
    assert emitted == [] and not r.degenerate_data


def test_few_samples_get_a_softer_warning(tiny):
    r, emitted = quantize_warned(tiny, normal(4))
    assert emitted == ["only 4 calibration samples: ranges from fewer than 16 inputs are a guess; give real "
                       "samples (a few hundred representative inputs, preprocessed as at inference)"]
    assert not r.degenerate_data                          # the SQNR is measured on those 4, not marked
    assert "degenerate" not in r.summary()


def test_input_observer_ignores_integer_inputs_and_single_samples():
    ids = InputObserver("token_ids")
    ids.update(np.zeros((8, 5), np.int64))                # a mask or type ids are constant legitimately
    assert ids.problem() is None
    one = InputObserver("x")
    one.update(normal(1))                                 # one sample is not "all identical" (too few is)
    assert one.problem() is None


# -- activations --------------------------------------------------------------------------------

def test_constant_activation_is_named_when_the_inputs_vary(tmp_path):
    path = tmp_path / "const.onnx"
    constant_branch(path)                                 # z = x * 0 feeds a conv: 0 on every sample
    r, emitted = quantize_warned(path, normal())
    assert len(emitted) == 1, emitted
    assert emitted[0].startswith("2 activation tensors are constant on every calibration sample although the "
                                 "inputs vary: 'z' (output of 'times_zero') = 0, 'c' (output of 'conv_on_zero') = 0. "
                                 "A dead ReLU or a constant branch")
    assert not r.degenerate_data


def test_relu_outputs_zero_in_some_channels_do_not_warn(tmp_path):
    """A ReLU that is dead in half its channels is normal: only whole tensors count."""
    w = np.ones((4, 1, 1, 1), np.float32)
    w[:2] = -1.0                                          # channels 0, 1: relu(-|x|) = 0 on every sample
    path = tmp_path / "halfdead.onnx"
    save_conv(path, w, relu=True)
    r, emitted = quantize_warned(path, np.abs(normal()))
    assert emitted == []


# -- weights ------------------------------------------------------------------------------------

def save_conv(path, w, b=None, relu=False):
    """x -> Conv(w, b) [-> Relu] -> probs, 1x1 kernels on (1, 8, 8)."""
    arrays = {"W": w} | ({} if b is None else {"B": b})
    nodes = [h.make_node("Conv", ["x", "W"] + (["B"] if b is not None else []), ["c" if relu else "probs"],
                         name="conv")]
    if relu:
        nodes.append(h.make_node("Relu", ["c"], ["probs"], name="relu"))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, ["N", *SHAPE])],
                     [h.make_tensor_value_info("probs", TP.FLOAT, ["N", w.shape[0], 8, 8])],
                     [nh.from_array(a, n) for n, a in arrays.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


@pytest.mark.parametrize("w, why", [
    (np.zeros((4, 1, 1, 1), np.float32), "it is all zeros in the model"),
    (np.full((4, 1, 1, 1), 1e-40, np.float32), "its values are all subnormal (|w| < 1.2e-38)"),
    (np.full((4, 1, 1, 1), 1e-10, np.float32), "its values (|w| <= 1e-10) are below half an int8 step"),
], ids=["zeros", "subnormal", "vanishing"])
def test_weights_that_quantize_to_zeros_warn_naming_them(tmp_path, w, why):
    path = tmp_path / "w.onnx"
    save_conv(path, w, b=np.array([0.5, -0.5, 1.0, 0.0], np.float32))
    r, emitted = quantize_warned(path, normal())
    assert emitted == [f"weight 'W' of 'conv' (CONV_2D) quantizes to all zeros (4 of 4 output channels): {why}, "
                       "so the layer computes only its bias. Check the model's weights (a failed export or "
                       "training run?)"]
    assert not r.degenerate_data


def test_channels_lost_to_a_per_tensor_scale_are_counted(tmp_path):
    w = np.ones((8, 1, 1, 1), np.float32)
    w[5] = 1e-3                                           # below half a step of 1/127
    path = tmp_path / "w.onnx"
    save_conv(path, w)
    _, emitted = quantize_warned(path, normal(), qr.Config(progress=False, per_channel=False))
    assert emitted == ["weight 'W' of 'conv' (CONV_2D): 1 of 8 output channels (12%) quantize to all zeros although "
                       "they are not negligible in the model; one scale for the whole tensor is too coarse for them: "
                       "quantize per channel (drop --per-tensor)"]
    _, emitted = quantize_warned(path, normal())          # per channel, the same channel keeps its values
    assert emitted == []


def test_channels_below_the_smallest_step_per_channel(tmp_path):
    w = np.full((4, 1, 1, 1), 1e-8, np.float32)
    w[1] = 1e-9                                           # below half of the 3.9e-9 floor of the scale
    path = tmp_path / "w.onnx"
    save_conv(path, w)
    _, emitted = quantize_warned(path, normal())
    assert emitted == ["1 activation tensor stays below int8's smallest range (1e-6) on every sample, so it quantizes "
                       "to zeros: 'probs' (output of 'conv') within ±3.9e-08. Check the weights upstream (vanishing or "
                       "subnormal) or the input scaling",
                       "weight 'W' of 'conv' (CONV_2D): 1 of 4 output channels (25%) quantize to all zeros although "
                       "they are not negligible in the model; their values are below int8's smallest step (2e-9); "
                       "check the model's weights"]


def test_negligible_channels_do_not_warn(tmp_path):
    """A channel 1e-10 of the tensor's largest (EfficientNet-Lite0 has them, from batch norm) is as good as
    zero: it quantizes to zeros with no warning, with or without a bias that raises its scale."""
    w = np.ones((4, 1, 1, 1), np.float32)
    w[1] = 1e-10
    path = tmp_path / "w.onnx"
    save_conv(path, w, b=np.array([0.0, -1.2, 0.0, 0.0], np.float32))
    _, emitted = quantize_warned(path, normal())
    assert emitted == []


def test_a_pruned_channel_does_not_warn(tmp_path):
    """A channel that is zero in the model loses nothing (tiny_models.cnn zero_channel)."""
    path = tmp_path / "pruned.onnx"
    rng = cnn(path, zero_channel=True)
    _, emitted = quantize_warned(path, rng.normal(size=(32, *SHAPE)).astype(np.float32))
    assert emitted == []


# -- no false positives -------------------------------------------------------------------------

def test_tiny_model_on_random_normal_data_gives_no_warning(tiny):
    r, emitted = quantize_warned(tiny, normal(96))
    assert emitted == [] and not r.degenerate_data
    assert r.summary().startswith("quantized ")
    assert r.summary_dict()["sqnr_on_degenerate_data"] is False


def test_fashion_model_on_real_samples_gives_no_warning(repo_root):
    fashion = pytest.importorskip("quantir.datasets.fashion_mnist")
    if not fashion.is_available():
        pytest.skip("Fashion-MNIST is not installed (apt install dataset-fashion-mnist)")
    images, _ = fashion.load_fashion_mnist("test")
    x = fashion.to_model_input(images[:300])
    r, emitted = quantize_warned(repo_root / "models" / "fashion_mnist_cnn.onnx", x, name="input")
    assert emitted == [] and not r.degenerate_data
    # and the same model calibrated on zeros says so, naming the input
    _, emitted = quantize_warned(repo_root / "models" / "fashion_mnist_cnn.onnx", np.zeros_like(x[:64]),
                                 name="input")
    assert [m.split(":")[0] for m in emitted] == [
        "calibration input 'input' is all zeros in every one of its 64 samples"]


def test_channels_lost_to_a_scale_raised_for_the_bias(tmp_path):
    """Inputs of range ~1e-4: a bias of 1000 needs a weight scale of ~3e-3 to fit int32, so a channel
    of 1e-3 rounds to zeros; the warning says why and what to give."""
    w = np.full((4, 1, 1, 1), 1e-3, np.float32)
    path = tmp_path / "w.onnx"
    save_conv(path, w, b=np.array([1000.0, 0.0, 0.0, 0.0], np.float32))
    _, emitted = quantize_warned(path, normal() * np.float32(3e-5))
    assert emitted == ["weight 'W' of 'conv' (CONV_2D): 1 of 4 output channels (25%) quantize to all zeros although "
                       "they are not negligible in the model; their scale was raised to keep the bias within int32, "
                       "because the input's scale is tiny: calibrate with real samples whose range at this layer's "
                       "input is not near zero"]


def test_cli_prints_the_warnings_to_stderr_even_when_quiet(tiny, tmp_path, capsys):
    from quantir.cli.main import main
    data = tmp_path / "zeros.npz"
    np.savez(data, x=np.zeros((32, *SHAPE), np.float32))
    assert main(["quantize", str(tiny), "--data", str(data), "-o", str(tmp_path / "q.mlir"), "-q"]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("quantir quantize: warning: calibration input 'x' is all zeros in every one of its 32 samples: the "
                   "ranges, and the SQNR of the summary, describe this data, not real inputs; give real samples (a few "
                   "hundred representative inputs, preprocessed as at inference)\n")
    assert (tmp_path / "q.mlir").exists()                 # a warning, not an error: exit 0 and the model written
    summary = tmp_path / "s.json"
    assert main(["quantize", str(tiny), "--data", str(data), "-o", str(tmp_path / "q2.mlir"), "--summary",
                 str(summary)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("WARNING: calibration input 'x' is all zeros")
    assert "\nquantir quantize: warning: calibration input 'x' is all zeros" in "\n" + err.split("\r")[-1]
    import json
    s = json.loads(summary.read_text())
    assert s["warnings"][0].startswith("calibration input 'x' is all zeros") and s["sqnr_on_degenerate_data"] is True


def test_a_zero_calibrated_range_is_named(tiny):
    """A callback that collapses one range to (0, 0) while the values vary: everything there becomes 0."""
    from quantir.quantize.methods import Range

    def collapse(info):
        return Range(0.0, 0.0) if info.region.output.name_hint == "r1" else info.output_range()
    r, emitted = quantize_warned(tiny, normal(), qr.Config(progress=False, callback=collapse))
    assert len(emitted) == 1 and emitted[0].startswith(
        "1 activation tensor got a zero range from a calibration callback although the values vary: 'r1' (output of "
        "'relu1') from 0 to "), emitted
    assert emitted[0].endswith("Everything there quantizes to zero: check the callback")


def test_a_narrow_range_away_from_zero_is_not_collapsed(tiny):
    """int8 ranges include zero: [4.92922e-4, 4.92956e-4] quantizes over [0, 4.93e-4], 255 steps, so
    it is no zero range (DenseNet's constant-weight light model has such tensors; they warned)."""
    from quantir.quantize.methods import Range

    def narrow(info):
        return Range(4.92922e-4, 4.92956e-4) if info.region.output.name_hint == "r1" else info.output_range()
    _, emitted = quantize_warned(tiny, normal(), qr.Config(progress=False, callback=narrow))
    assert emitted == []


def test_summary_tells_minus_infinity_from_infinity(tiny):
    """SQNR -inf (float all zeros, integer not) and +inf (equal) are both None in JSON; the text keeps the sign."""
    from quantir.report.layers import LayerError
    r, _ = quantize_warned(tiny, normal())
    r._layers = [LayerError("dead", "CONV_2D", float("-inf"), 0.0, 0.5, 0.1),
                 LayerError("exact", "ADD", float("inf"), 1.0, 0.0, 0.1)]
    assert [e["sqnr_db"] for e in r.summary_dict()["worst_layers"]] == [None, None]
    lines = r.summary().splitlines()
    assert lines[-2].startswith("     -inf  cos 0.00000") and lines[-2].endswith("dead (CONV_2D)")
    assert lines[-1].startswith("      inf  cos 1.00000") and lines[-1].endswith("exact (ADD)")
