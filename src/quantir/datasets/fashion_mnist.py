"""Fashion-MNIST from Debian's ``dataset-fashion-mnist`` package, read with numpy only.

The package installs the four IDX files of Zalando's release, gzip-compressed, under
``/usr/share/datasets/fashion-mnist``::

    train-images-idx3-ubyte.gz   60000 x 28 x 28 uint8
    train-labels-idx1-ubyte.gz   60000 uint8, classes 0..9, 6000 each
    t10k-images-idx3-ubyte.gz    10000 x 28 x 28 uint8
    t10k-labels-idx1-ubyte.gz    10000 uint8, 1000 each

Design notes:

* Pure numpy. The core of quantir must not depend on torch; the training script in
  ``scripts/`` uses this reader too, so the model and its calibration data see the same bytes.
* Compression is recognised by the gzip magic bytes, not by the file name, and both
  ``NAME`` and ``NAME.gz`` are looked for: other distributions ship the files uncompressed.
* An IDX file is parsed strictly: magic, element type, rank, every dimension and the exact
  payload length are checked, so a truncated download fails loudly here rather than as a
  wrong accuracy later.
* The root folder is an explicit argument, never an environment variable.

Example (needs ``apt-get install dataset-fashion-mnist``)::

    >>> from quantir.datasets.fashion_mnist import load_fashion_mnist, to_model_input
    >>> images, labels = load_fashion_mnist("test")      # doctest: +SKIP
    >>> images.shape, images.dtype, labels.dtype         # doctest: +SKIP
    ((10000, 28, 28), dtype('uint8'), dtype('int64'))
    >>> to_model_input(images[:8]).shape                 # doctest: +SKIP
    (8, 1, 28, 28)
"""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from quantir.datasets.errors import DatasetFormatError, DatasetNotFoundError

__all__ = [
    "DEFAULT_ROOT",
    "CLASS_NAMES",
    "MEAN",
    "STD",
    "SPLITS",
    "read_idx",
    "find_split_files",
    "is_available",
    "load_fashion_mnist",
    "to_model_input",
]

DEFAULT_ROOT = Path("/usr/share/datasets/fashion-mnist")
INSTALL_HINT = "install it with `apt-get install dataset-fashion-mnist` (Debian/Ubuntu)"

# Label index -> name, from the data set's README.
CLASS_NAMES: tuple[str, ...] = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)

# Mean and standard deviation of the 60000 training images after scaling to [0, 1]
# (measured: 0.28604, 0.35302). ``to_model_input`` uses them; the committed model
# models/fashion_mnist_cnn.onnx was trained on exactly this normalisation.
MEAN = 0.2860
STD = 0.3530

# split -> (images file stem, labels file stem, number of examples)
SPLITS: dict[str, tuple[str, str, int]] = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", 60000),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 10000),
}

# IDX element type code (third magic byte) -> big-endian numpy dtype.
_IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when they start with the gzip magic."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DatasetNotFoundError(f"{path}: no such file; {INSTALL_HINT}") from None
    if not raw.startswith(_GZIP_MAGIC):
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as exc:
        raise DatasetFormatError(
            f"{path}: corrupt gzip stream ({exc}); reinstall it with "
            "`apt-get install --reinstall dataset-fashion-mnist`"
        ) from None


def read_idx(path: str | Path) -> np.ndarray:
    """Parse one IDX file (gzip-compressed or not) into a native-endian numpy array.

    Layout: 2 zero bytes, a type code, the rank ``r``; then ``r`` big-endian uint32
    dimensions; then the elements, big-endian, row-major. The payload must have exactly
    ``prod(dims)`` elements: a short or long file raises ``DatasetFormatError``.
    """
    path = Path(path)
    data = _read_bytes(path)
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise DatasetFormatError(
            f"{path}: not an IDX file: expected magic 00 00 TT RR, found {data[:4].hex(' ') or 'empty file'}"
        )
    code, rank = data[2], data[3]
    if code not in _IDX_DTYPES:
        known = ", ".join(f"0x{c:02x}" for c in _IDX_DTYPES)
        raise DatasetFormatError(f"{path}: unknown IDX element type 0x{code:02x}; expected one of {known}")
    header = 4 + 4 * rank
    if len(data) < header:
        raise DatasetFormatError(f"{path}: truncated IDX header: rank {rank} needs {header} bytes, "
                                 f"file has {len(data)}")
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=rank, offset=4))
    dtype = _IDX_DTYPES[code]
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    found = len(data) - header
    if found != expected:
        raise DatasetFormatError(
            f"{path}: IDX payload of shape {dims} needs {expected} bytes, found {found}; "
            "the file is truncated or corrupt"
        )
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)
    return array.astype(dtype.newbyteorder("="))


def _find(root: Path, stem: str) -> Path | None:
    for name in (stem + ".gz", stem):
        if (root / name).is_file():
            return root / name
    return None


def find_split_files(split: str, root: str | Path | None = None) -> tuple[Path, Path]:
    """Paths of the (images, labels) IDX files of ``split``; raises when one is missing."""
    if split not in SPLITS:
        raise ValueError(f"unknown Fashion-MNIST split {split!r}; expected one of {sorted(SPLITS)}")
    root = DEFAULT_ROOT if root is None else Path(root)
    images_stem, labels_stem, _ = SPLITS[split]
    found = []
    for stem in (images_stem, labels_stem):
        path = _find(root, stem)
        if path is None:
            raise DatasetNotFoundError(f"Fashion-MNIST {split} file {root / stem}[.gz] not found; {INSTALL_HINT}")
        found.append(path)
    return found[0], found[1]


def is_available(root: str | Path | None = None) -> bool:
    """True when all four IDX files are present (it does not parse them)."""
    try:
        for split in SPLITS:
            find_split_files(split, root)
    except DatasetNotFoundError:
        return False
    return True


def load_fashion_mnist(split: str = "train", root: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images ``uint8 [N, 28, 28]`` and labels ``int64 [N]`` of ``split`` ("train" or "test").

    ``root`` defaults to where the Debian package installs the files. Raises
    ``DatasetNotFoundError`` when a file is missing and ``DatasetFormatError`` when one is
    corrupt or does not match the split's expected shape.
    """
    images_path, labels_path = find_split_files(split, root)
    _, _, count = SPLITS[split]
    images = read_idx(images_path)
    labels = read_idx(labels_path)
    if images.dtype != np.uint8 or images.shape != (count, 28, 28):
        raise DatasetFormatError(
            f"{images_path}: expected uint8 images of shape ({count}, 28, 28), found {images.dtype} {images.shape}"
        )
    if labels.dtype != np.uint8 or labels.shape != (count,):
        raise DatasetFormatError(f"{labels_path}: expected {count} uint8 labels, found {labels.dtype} {labels.shape}")
    if labels.max() >= len(CLASS_NAMES):
        raise DatasetFormatError(f"{labels_path}: label {int(labels.max())} out of range 0..{len(CLASS_NAMES) - 1}")
    return images, labels.astype(np.int64)


def to_model_input(images: np.ndarray) -> np.ndarray:
    """uint8 ``[N, 28, 28]`` (or one ``[28, 28]`` image) -> float32 ``[N, 1, 28, 28]``.

    Normalisation: ``x = (pixel / 255 - MEAN) / STD``, so 0 maps to -0.810 and 255 to 2.023.
    This is the input the committed ``models/fashion_mnist_cnn.onnx`` expects.
    """
    images = np.asarray(images)
    if images.dtype != np.uint8:
        raise TypeError(f"expected uint8 images, found {images.dtype}")
    if images.ndim == 2:
        images = images[None]
    if images.ndim != 3 or images.shape[1:] != (28, 28):
        raise ValueError(f"expected images of shape [N, 28, 28], found {list(images.shape)}")
    x = images.astype(np.float32) / np.float32(255.0)
    x = (x - np.float32(MEAN)) / np.float32(STD)
    return x[:, None, :, :]
