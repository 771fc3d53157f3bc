"""Fashion-MNIST reader: the IDX parser on hand-made files, then the real Debian data set.

The parser tests always run (they write small IDX files to a temp dir). Tests on the real
data skip, with the install command as the reason, when ``dataset-fashion-mnist`` is absent.
"""
from __future__ import annotations

import gzip
import json
import struct

import numpy as np
import pytest

from quantir.datasets.errors import DatasetFormatError, DatasetNotFoundError
from quantir.datasets.fashion_mnist import (
    CLASS_NAMES,
    MEAN,
    STD,
    find_split_files,
    is_available,
    load_fashion_mnist,
    read_idx,
    to_model_input,
)
from quantir.errors import ParseError, QuantirError

needs_data = pytest.mark.skipif(
    not is_available(),
    reason="Fashion-MNIST not installed: run `apt-get install dataset-fashion-mnist` "
    "(files land in /usr/share/datasets/fashion-mnist)",
)


def idx_bytes(array: np.ndarray, code: int = 0x08) -> bytes:
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


# -- the IDX parser ------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_round_trip(tmp_path, compress):
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    data = idx_bytes(images)
    path = tmp_path / "x-idx3-ubyte"
    path.write_bytes(gzip.compress(data) if compress else data)
    got = read_idx(path)
    assert got.dtype == np.uint8 and got.shape == (2, 3, 4)
    np.testing.assert_array_equal(got, images)


def test_read_idx_big_endian_int32(tmp_path):
    values = np.array([1, -2, 70000], dtype=np.int32)
    path = tmp_path / "v.idx"
    path.write_bytes(idx_bytes(values, code=0x0C))
    got = read_idx(path)
    assert got.dtype == np.dtype("int32") and got.dtype.isnative
    np.testing.assert_array_equal(got, values)


def test_truncated_payload_names_sizes(tmp_path):
    path = tmp_path / "short.idx"
    path.write_bytes(idx_bytes(np.zeros((10, 28, 28), np.uint8))[:-5])
    with pytest.raises(DatasetFormatError) as err:
        read_idx(path)
    msg = str(err.value)
    assert str(path) in msg and "needs 7840 bytes, found 7835" in msg and "truncated" in msg
    assert isinstance(err.value, ParseError) and isinstance(err.value, QuantirError)


def test_bad_magic(tmp_path):
    path = tmp_path / "notidx"
    path.write_bytes(b"PK\x03\x04 not an idx file")
    with pytest.raises(DatasetFormatError, match=r"not an IDX file: expected magic 00 00 TT RR, found 50 4b 03 04"):
        read_idx(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    with pytest.raises(DatasetFormatError, match="found empty file"):
        read_idx(path)


def test_unknown_element_type(tmp_path):
    path = tmp_path / "t.idx"
    path.write_bytes(bytes([0, 0, 0x42, 1, 0, 0, 0, 0]))
    with pytest.raises(DatasetFormatError, match="unknown IDX element type 0x42"):
        read_idx(path)


def test_corrupt_gzip(tmp_path):
    path = tmp_path / "c.gz"
    path.write_bytes(gzip.compress(idx_bytes(np.zeros((4, 4), np.uint8)))[:-12])
    with pytest.raises(DatasetFormatError, match="corrupt gzip stream"):
        read_idx(path)


def test_missing_file_says_how_to_install(tmp_path):
    with pytest.raises(DatasetNotFoundError,
                       match=r"no such file; install it with `apt-get install dataset-fashion-mnist`"):
        read_idx(tmp_path / "absent.gz")


def test_missing_root_says_how_to_install(tmp_path):
    assert not is_available(tmp_path)
    with pytest.raises(DatasetNotFoundError) as err:
        load_fashion_mnist("test", root=tmp_path)
    msg = str(err.value)
    assert "t10k-images-idx3-ubyte[.gz] not found" in msg and "apt-get install dataset-fashion-mnist" in msg


def test_wrong_shape_in_valid_idx(tmp_path):
    # Well-formed IDX files, but not Fashion-MNIST's shapes: rejected by the loader.
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(idx_bytes(np.zeros((3, 28, 28), np.uint8)))
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(idx_bytes(np.zeros(3, np.uint8)))
    assert is_available(tmp_path) is False  # train files absent
    with pytest.raises(DatasetFormatError,
                       match=r"expected uint8 images of shape \(10000, 28, 28\), found uint8 \(3, 28, 28\)"):
        load_fashion_mnist("test", root=tmp_path)


def test_unknown_split():
    with pytest.raises(ValueError, match="unknown Fashion-MNIST split 'val'"):
        find_split_files("val")


def test_to_model_input_normalisation():
    images = np.array([[[0, 255] * 14] * 28], dtype=np.uint8)
    x = to_model_input(images)
    assert x.shape == (1, 1, 28, 28) and x.dtype == np.float32
    np.testing.assert_allclose(x[0, 0, 0, :2], [(0 - MEAN) / STD, (1 - MEAN) / STD], rtol=1e-6)
    assert to_model_input(images[0]).shape == (1, 1, 28, 28)
    with pytest.raises(TypeError, match="expected uint8"):
        to_model_input(images.astype(np.float32))


# -- the real data set ---------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize("split, count", [("train", 60000), ("test", 10000)])
def test_real_split_shapes_and_balanced_labels(split, count):
    images, labels = load_fashion_mnist(split)
    assert images.shape == (count, 28, 28) and images.dtype == np.uint8
    assert labels.shape == (count,) and labels.dtype == np.int64
    assert labels.min() == 0 and labels.max() == 9 and len(CLASS_NAMES) == 10
    np.testing.assert_array_equal(np.bincount(labels, minlength=10), np.full(10, count // 10))
    assert images.min() == 0 and images.max() == 255
    assert labels[0] == 9  # both splits open with an ankle boot


@needs_data
def test_real_train_statistics_match_constants():
    images, _ = load_fashion_mnist("train")
    x = to_model_input(images)
    assert abs(float(x.mean())) < 1e-3 and abs(float(x.std()) - 1.0) < 1e-3


@needs_data
def test_committed_model_accuracy(repo_root):
    """models/fashion_mnist_cnn.onnx reproduces the fp32 accuracy recorded beside it."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
    model = repo_root / "models" / "fashion_mnist_cnn.onnx"
    meta = json.loads(model.with_suffix(".json").read_text())
    images, labels = load_fashion_mnist("test")
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    x = to_model_input(images)
    probs = np.concatenate([sess.run(["probs"], {"input": x[i:i + 2500]})[0] for i in range(0, len(x), 2500)])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-4)
    correct = int((probs.argmax(axis=1) == labels).sum())
    assert abs(correct - meta["fp32_test_correct"]) <= 2  # float reassociation may flip a tie
    assert correct >= 9000
