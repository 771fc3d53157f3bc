"""Careless or hostile calibration data (issue 11, item 7): each case is a CalibrationError that names
the file, the member or the key and says what is accepted; nothing is unpickled, and a header's
claimed size is never allocated unless the member holds it."""
from __future__ import annotations

import io
import tracemalloc
import zipfile

import numpy as np
import pytest

import quantir as qr
from quantir.errors import CalibrationError
from quantir.quantize.config import Config
from quantir.quantize.data import ACCEPTED_FORMS, as_dataset, from_numpy
from quantir.text import print_module

from .tiny_models import cnn

X = np.random.default_rng(0).random((4, 1, 8, 8)).astype(np.float32)


def npy_bytes(array=None, header: dict | None = None, payload: bytes = b"") -> bytes:
    buf = io.BytesIO()
    if header is None:
        np.save(buf, array)
    else:
        np.lib.format.write_array_header_1_0(buf, header)
        buf.write(payload)
    return buf.getvalue()


def npz_of(tmp_path, members: dict[str, bytes], compression=zipfile.ZIP_STORED):
    path = tmp_path / "calib.npz"
    with zipfile.ZipFile(path, "w", compression=compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def calibration_error(source) -> str:
    with pytest.raises(CalibrationError) as info:
        from_numpy(source)
    return str(info.value)


def test_an_object_array_is_refused_by_name_without_unpickling(tmp_path):
    path = tmp_path / "calib.npz"
    np.savez(path, x=np.array([1, "a", None], dtype=object))
    assert calibration_error(path) == (
        f"calibration array 'x' in '{path}' is an array of Python objects (object); quantir does not unpickle "
        "data: save numeric arrays (np.asarray(samples, np.float32))")


def test_a_member_that_is_not_npy(tmp_path):
    path = npz_of(tmp_path, {"x.npy": npy_bytes(X), "readme.txt": b"hello"})
    assert calibration_error(path) == (
        f"'{path}' holds 'readme.txt', which is not a .npy array: an .npz of calibration data holds one .npy "
        "array per input (np.savez(path, input=samples))")


def test_a_corrupt_npy_header(tmp_path):
    data = bytearray(npy_bytes(X))
    data[10:20] = b"garbage!!!"
    message = calibration_error(npz_of(tmp_path, {"x.npy": bytes(data)}))
    assert message.startswith(f"calibration array 'x' in '{tmp_path / 'calib.npz'}' has a corrupt .npy header: ")
    assert "\n" not in message and len(message) < 300


def test_a_member_without_the_npy_magic(tmp_path):
    message = calibration_error(npz_of(tmp_path, {"x.npy": b"not an array at all"}))
    assert message.startswith(f"calibration array 'x' in '{tmp_path / 'calib.npz'}' has a corrupt .npy header: ")


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_header_claiming_13_tib_is_refused_before_any_allocation(tmp_path, compression):
    header = {"descr": "<f4", "fortran_order": False, "shape": (1 << 42, 1)}   # 16 TiB of float32
    path = npz_of(tmp_path, {"x.npy": npy_bytes(header=header, payload=b"\0" * 64)}, compression)
    tracemalloc.start()
    try:
        message = calibration_error(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert message == (f"calibration array 'x' in '{path}': its .npy header claims shape (4398046511104, 1) of "
                       "float32 (17592186044416 bytes) but the member holds 64 bytes of data; the file is "
                       "truncated or corrupt")
    assert peak < 10 << 20


def test_a_zip_entry_claiming_more_than_it_stores(tmp_path):
    path = npz_of(tmp_path, {"x.npy": npy_bytes(X)})
    raw = bytearray(path.read_bytes())
    # the central directory's uncompressed size of the only (stored) member: 4 GiB - 1
    cd = raw.rindex(b"PK\x01\x02")
    raw[cd + 24:cd + 28] = (0xFFFFFFFE).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    assert "the zip entry claims 4294967294 bytes from" in calibration_error(path)


def test_a_truncated_payload(tmp_path):
    data = npy_bytes(X)
    path = npz_of(tmp_path, {"x.npy": data[:-16]})
    assert calibration_error(path) == (
        f"calibration array 'x' in '{path}': its .npy header claims shape (4, 1, 8, 8) of float32 (1024 bytes) "
        "but the member holds 1008 bytes of data; the file is truncated or corrupt")


def test_good_archives_still_read(tmp_path):
    for save in (np.savez, np.savez_compressed):
        path = tmp_path / f"{save.__name__}.npz"
        save(path, x=X, y=np.arange(4, dtype=np.int64))
        ds = from_numpy(path)
        assert ds.num_samples == 4
        batch = next(ds._source())
        np.testing.assert_array_equal(batch["x"], X)


# -- the Python API ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "cnn.onnx"
    cnn(path)
    return str(path)


def quantize(model, calibration, **options):
    return qr.quantize(model, calibration, Config(progress=False, engine="interpreter", **options))


def test_integer_keys_say_what_is_accepted(model):
    with pytest.raises(CalibrationError) as info:
        quantize(model, {0: X})
    assert str(info.value) == ("calibration data keyed by 0 (int): the keys are the model's input names; "
                               f"{ACCEPTED_FORMS}")


def test_a_generator_of_arrays_feeds_a_one_input_model(model):
    from_generator = quantize(model, (X[i:i + 2] for i in range(0, 4, 2)))
    from_dict = quantize(model, {"x": X})
    assert from_generator.statistics.num_samples == from_dict.statistics.num_samples == 4
    assert print_module(from_generator.module) == print_module(from_dict.module)   # same scales everywhere


def test_a_generator_of_arrays_needs_a_one_input_model():
    ds = as_dataset(iter([X]), ["a", "b"])
    with pytest.raises(CalibrationError) as info:
        next(ds._source())
    assert str(info.value) == ("calibration item #0 is a ndarray: an iterable of calibration data yields dicts of "
                               f"input name -> array (or arrays, for a one-input model); {ACCEPTED_FORMS}")


def test_an_iterable_of_other_things(model):
    with pytest.raises(CalibrationError) as info:
        quantize(model, iter(["x"]))
    assert str(info.value).startswith("calibration item #0 is a str: an iterable of calibration data yields dicts")


def test_ragged_lists_and_scalars(model):
    with pytest.raises(CalibrationError, match="^calibration data is not a dict of arrays: "):
        quantize(model, {"x": [[1.0], [1.0, 2.0]]})
    with pytest.raises(CalibrationError) as info:
        quantize(model, [{"x": np.float32(1)}])
    assert str(info.value) == ("calibration input 'x' (samples from 0) is a scalar; axis 0 of an input's array "
                               "indexes samples")


@pytest.mark.parametrize("bad", [-5, 0, 2.5, True])
def test_max_samples_must_be_at_least_one(bad):
    with pytest.raises(CalibrationError) as info:
        Config(max_samples=bad)
    assert str(info.value) == (f"max_samples (--max-samples) must be a whole number of at least 1, got {bad!r}: it is "
                               "how many calibration samples to use at most; leave it unset to use them all")
    assert Config(max_samples=np.int64(3)).max_samples == 3


def test_cli_max_samples_minus_five_is_one_line(model, tmp_path, capsys):
    from quantir.cli.main import main
    np.savez(tmp_path / "c.npz", x=X)
    code = main(["quantize", model, "--data", str(tmp_path / "c.npz"), "-o", str(tmp_path / "q.mlir"),
                 "--max-samples", "-5", "-q", "--engine", "interpreter"])
    assert code == 1
    assert capsys.readouterr().err == ("quantir quantize: max_samples (--max-samples) must be a whole number of at "
                                       "least 1, got -5: it is how many calibration samples to use at most; leave "
                                       "it unset to use them all\n")
    assert not (tmp_path / "q.mlir").exists()


def test_cli_object_array_in_data_is_one_line(model, tmp_path, capsys):
    from quantir.cli.main import main
    np.savez(tmp_path / "c.npz", x=np.array([None, 1], dtype=object))
    assert main(["quantize", model, "--data", str(tmp_path / "c.npz"), "-o", str(tmp_path / "q.mlir"), "-q"]) == 1
    err = capsys.readouterr().err
    assert err == (f"quantir quantize: calibration array 'x' in '{tmp_path / 'c.npz'}' is an array of Python objects "
                   "(object); quantir does not unpickle data: save numeric arrays (np.asarray(samples, np.float32))\n")


def test_run_inputs_go_through_the_same_checks(tmp_path, capsys):
    # `quantir run --inputs` reads its feeds with the same member checks (a ParseError there)
    from quantir.cli.main import main
    model = tmp_path / "m.mlir"
    model.write_text('func.func @main(%arg0: tensor<2xf32> {quantir.name = "x"}) -> tensor<2xf32> {\n'
                     '  return %arg0 : tensor<2xf32>\n}\n')
    header = {"descr": "<f4", "fortran_order": False, "shape": (1 << 42,)}
    inputs = npz_of(tmp_path, {"x.npy": npy_bytes(header=header, payload=b"\0" * 64)})
    assert main(["run", str(model), "--inputs", str(inputs), "--outputs", str(tmp_path / "o.npz")]) == 1
    assert capsys.readouterr().err == (
        f"quantir run: input array 'x' in '{inputs}': its .npy header claims shape (4398046511104,) of float32 "
        "(17592186044416 bytes) but the member holds 64 bytes of data; the file is truncated or corrupt\n")
