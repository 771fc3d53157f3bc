"""Real photos from scikit-image / scikit-learn, EfficientNet-Lite preprocessing, ImageNet names.

Photo tests skip when scikit-image or scikit-learn is missing (``pip install quantir[data]``);
the end-to-end check skips until ``scripts/export_efficientnet_lite0.py`` has written
``.cache/models/efficientnet_lite0.onnx``.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

from quantir.datasets.errors import DatasetFormatError, DatasetNotFoundError
from quantir.datasets.photos import (
    PHOTO_NAMES,
    imagenet_class_names,
    load_efficientnet_batch,
    load_photo,
    load_photos,
    preprocess_efficientnet_lite,
    top_k,
)

SKIMAGE_REASON = "scikit-image not installed: `pip install scikit-image==0.26.0` (or quantir[data])"
SKLEARN_REASON = "scikit-learn not installed: `pip install scikit-learn==1.9.1` (or quantir[data])"


@pytest.fixture
def skimage():
    return pytest.importorskip("skimage", reason=SKIMAGE_REASON)


@pytest.fixture
def all_photos(skimage):
    pytest.importorskip("sklearn", reason=SKLEARN_REASON)
    return load_photos()


# -- loading -------------------------------------------------------------------------------


def test_all_photos_are_real_rgb(all_photos):
    assert [p.name for p in all_photos] == list(PHOTO_NAMES)
    for p in all_photos:
        h, w, c = p.image.shape
        assert p.image.dtype == np.uint8 and c == 3 and min(h, w) >= 300, p.name
        assert p.image.std() > 20, f"{p.name} looks blank"
    sizes = {p.name: p.image.shape[:2] for p in all_photos}
    assert sizes["chelsea"] == (300, 451) and sizes["coffee"] == (400, 600) and sizes["china"] == (427, 640)


def test_unknown_photo_lists_the_known_ones():
    with pytest.raises(KeyError, match="unknown photo 'lena'; expected one of astronaut, chelsea"):
        load_photo("lena")


def test_missing_optional_package_is_explained(monkeypatch):
    monkeypatch.setitem(sys.modules, "skimage.data", None)  # makes `import skimage.data` fail
    with pytest.raises(DatasetNotFoundError, match=r"module 'skimage.data' \(package scikit-image\) is not installed; "
                                                   r"install it with `pip install scikit-image"):
        load_photo("chelsea")


# -- preprocessing -------------------------------------------------------------------------


def test_preprocess_constant_image(skimage):
    image = np.full((300, 400, 3), (0, 127, 255), dtype=np.uint8)
    x = preprocess_efficientnet_lite([image])
    assert x.shape == (1, 3, 224, 224) and x.dtype == np.float32 and x.flags.c_contiguous
    np.testing.assert_allclose(x[0, :, 100, 100], [-127 / 128, 0.0, 1.0], atol=1e-5)
    np.testing.assert_allclose(x[0].reshape(3, -1).std(axis=1), 0.0, atol=1e-4)


def test_preprocess_crops_the_centre_87_5_percent(skimage):
    # A 256x512 image: the crop is the central 224x224 square, so a 16-pixel frame
    # around that square (and everything left and right of it) must not reach the output.
    image = np.zeros((256, 512, 3), dtype=np.uint8)
    image[16:240, 144:368] = 200
    x = preprocess_efficientnet_lite([image])
    np.testing.assert_allclose(x, (200 - 127) / 128, atol=1e-5)


def test_preprocess_rejects_grey_images(skimage):
    with pytest.raises(ValueError, match=r"expected a uint8 RGB image \[H, W, 3\], found uint8 \[28, 28\]"):
        preprocess_efficientnet_lite([np.zeros((28, 28), np.uint8)])


def test_efficientnet_batch(all_photos):
    batch, names = load_efficientnet_batch(["chelsea", "coffee"])
    assert batch.shape == (2, 3, 224, 224) and batch.dtype == np.float32 and names == ("chelsea", "coffee")
    assert -1.0 <= batch.min() < -0.9 and 0.9 < batch.max() <= 1.0
    # Channel order is RGB: coffee's crema is more red than blue.
    r, b = batch[1, 0].mean(), batch[1, 2].mean()
    assert r > b


# -- ImageNet class names and top-k --------------------------------------------------------


def test_imagenet_class_names():
    names = imagenet_class_names()
    assert len(names) == 1000 and len(set(names)) == 999  # "crane" is both a bird (134) and a machine (517)
    assert names[0] == "tench, Tinca tinca"
    assert names[281] == "tabby, tabby cat" and names[967] == "espresso"
    assert names[999] == "toilet tissue, toilet paper, bathroom tissue"


def test_committed_class_names_match(repo_root):
    committed = imagenet_class_names(repo_root / "models" / "imagenet_classes.txt")
    assert committed == imagenet_class_names()


def test_class_names_file_errors(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("tench\ngoldfish\n")
    with pytest.raises(DatasetFormatError, match="expected 1000 non-empty ImageNet class names, found 2"):
        imagenet_class_names(short)
    with pytest.raises(DatasetNotFoundError, match="no such file"):
        imagenet_class_names(tmp_path / "absent.txt")


def test_top_k_softmaxes_logits_and_keeps_probabilities():
    logits = np.array([[0.0, 2.0, 1.0], [5.0, 5.0, -1.0]])
    best = top_k(logits, 2)
    assert [c for c, _ in best[0]] == [1, 2] and [c for c, _ in best[1]] == [0, 1]  # stable ties
    e = np.exp([0.0, 2.0, 1.0])
    assert best[0][0][1] == pytest.approx(e[1] / e.sum())
    probs = np.array([[0.1, 0.7, 0.2]])
    assert top_k(probs, 1) == [[(1, pytest.approx(0.7))]]


# -- end to end: the exported EfficientNet-Lite0 recognises the photos ----------------------


def test_efficientnet_lite0_recognises_photos(all_photos, repo_root):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    model = repo_root / ".cache" / "models" / "efficientnet_lite0.onnx"
    if not model.is_file():
        pytest.skip(f"{model} missing: run `python scripts/export_efficientnet_lite0.py` (needs torch)")
    batch, names = load_efficientnet_batch()
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    best = dict(zip(names, top_k(sess.run(None, {"input": batch})[0], 5)))
    top1 = {name: b[0][0] for name, b in best.items()}
    cats = set(range(281, 286))  # tabby, tiger cat, Persian, Siamese, Egyptian cat
    assert top1["chelsea"] in cats and sum(p for c, p in best["chelsea"] if c in cats) > 0.8
    assert top1["coffee"] == 967 and best["coffee"][0][1] > 0.8      # espresso
    assert top1["motorcycle"] in {665, 670}                            # moped, motor scooter
    assert {657, 744} & {c for c, _ in best["rocket"]}                  # missile, projectile
    assert top1["flower"] == 985                                        # daisy
    assert top1["china"] in {698, 442, 663}                             # palace, bell cote, monastery
