"""Calibration data read from files: unreadable ones get a CalibrationError naming the file."""
import numpy as np
import pytest

from quantir.errors import CalibrationError
from quantir.quantize.data import from_numpy


def test_an_npz_is_read_by_input_name(tmp_path):
    np.savez(tmp_path / "calib.npz", input=np.ones((3, 2), np.float32))
    assert from_numpy(tmp_path / "calib.npz").num_samples == 3


@pytest.mark.parametrize("content, message", [
    (b"", "No data left"),                         # empty file
    (b"PK\x03\x04 not really a zip", "cannot read calibration data"),
    (None, "cannot read calibration data"),        # missing
])
def test_unreadable_files(tmp_path, content, message):
    path = tmp_path / "calib.npz"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(CalibrationError, match=message) as e:
        from_numpy(path)
    assert str(path) in str(e.value)


def test_a_bare_npy_array_is_refused_with_a_hint(tmp_path):
    np.save(tmp_path / "calib.npy", np.zeros((3, 2), np.float32))
    with pytest.raises(CalibrationError, match="single .npy array.*np.savez"):
        from_numpy(tmp_path / "calib.npy")
