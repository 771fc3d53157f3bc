"""``DatasetManager``: calibration samples from whatever the user has, checked on the way in.

Adapters: numpy arrays or an ``.npz`` file (axis 0 indexes samples; keys are the model's input
names), any iterable of feed dicts (or, for a one-input model, of arrays: a generator of batches),
and an ONNX Runtime ``CalibrationDataReader`` as is (anything with ``get_next()`` returning dicts
until ``None``). Anything else is a ``CalibrationError`` that lists these forms (``ACCEPTED_FORMS``).
An ``.npz`` is read member by member, each ``.npy`` header checked against the member's size
before its array is allocated, and never unpickled. Batches are streamed, so memory
does not grow with the number of samples. Every batch is validated against the model's
inputs: a wrong name, rank, shape or dtype, or a NaN/Inf value, raises ``CalibrationError``
naming the input and the sample index. A model with dynamic dims takes samples of different
sizes in the iterable forms (an array holds one size, so arrays and ``.npz`` files cannot):
each batch holds samples of one size only (``DatasetManager.batches``).
"""
from __future__ import annotations

import math
import os
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from ..errors import CalibrationError, QuantirError
from ..ir.dialects.nn_base import element_dtype
from ..types import TensorType

Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class InputSpec:
    name: str
    type: TensorType

    @property
    def dtype(self) -> np.dtype:
        # integer inputs (token ids, masks) too: not only float element types have a numpy dtype
        return element_dtype(self.type)


class DatasetManager:
    """Yields validated batches of feeds. Re-iterable when its source is (arrays, npz, lists)."""

    def __init__(self, source: Callable[[], Iterator[Feeds]], description: str, num_samples: int | None = None):
        self._source = source
        self.description = description
        self.num_samples = num_samples   # None when the source cannot say (a reader, a generator)

    def __repr__(self) -> str:
        n = "?" if self.num_samples is None else self.num_samples
        return f"<DatasetManager {self.description}: {n} samples>"

    def batches(self, inputs: Sequence[InputSpec], batch_size: int = 32,
                max_samples: int | None = None) -> Iterator[Feeds]:
        """Validated batches of at most ``batch_size`` samples (axis 0), in order. A model whose
        batch dimension is static (e.g. exported with batch 1) gets batches of exactly that size.

        Samples of different sizes (a model with dynamic dims: text lines of different widths)
        are never stacked together: a batch holds samples of one size, and a sample of another
        size first sends the pending ones as a batch of their own (so at most ``batch_size``
        samples are ever held). With a static batch dimension larger than 1, a group of fewer
        than that many same-size samples cannot be fed and is dropped, as the last one is."""
        static = {i.type.shape[0] for i in inputs if i.type.shape and i.type.shape[0] is not None}
        if static:
            batch_size = min(static)
            if batch_size == 0:   # every batch would be empty: nothing to observe, and no progress
                empty = ", ".join(repr(i.name) for i in inputs if i.type.shape and i.type.shape[0] == 0)
                raise CalibrationError(f"the model's batch dimension is fixed at 0 (input {empty}"
                                       f"): no calibration sample can be fed; give the input a batch of 1 or more")
        seen = fed = 0
        pending: list[Feeds] = []
        pending_n = 0
        pending_size: tuple | None = None
        for feeds in self._source():
            batch = _validate(feeds, inputs, first_sample=seen)
            n = next(iter(batch.values())).shape[0] if batch else 0
            if max_samples is not None and seen + n > max_samples:
                batch = {k: v[: max_samples - seen] for k, v in batch.items()}
                n = max_samples - seen
            seen += n
            size = _sample_size(batch)
            if pending_n and size != pending_size:   # another size: the pending samples go alone
                if not static:
                    yield _stack(pending)
                    fed += pending_n
                pending, pending_n = [], 0
            pending_size = size
            pending.append(batch)
            pending_n += n
            while pending_n >= batch_size:
                merged = _stack(pending)
                yield {k: v[:batch_size] for k, v in merged.items()}
                fed += batch_size
                rest = {k: v[batch_size:] for k, v in merged.items()}
                pending_n -= batch_size
                pending = [rest] if pending_n else []
            if max_samples is not None and seen >= max_samples:
                break
        if pending_n and not static:
            yield _stack(pending)
            fed += pending_n
        elif seen and not fed:
            runs = " in a row of one size" if pending_n < seen else ""   # size changes dropped the rest
            raise CalibrationError(f"the calibration set has {seen} samples but the model's batch dimension "
                                   f"is fixed at {batch_size}: give at least {batch_size} samples{runs}")
        # with a fixed batch dimension a last partial batch is dropped (its samples cannot be fed)
        if seen == 0:
            raise CalibrationError(f"the calibration set ({self.description}) is empty: at least one sample "
                                   f"is needed for every input ({', '.join(i.name for i in inputs)})")


def _sample_size(batch: Feeds) -> tuple:
    """The size of one sample of every input (the shape past axis 0): samples stack only if equal."""
    return tuple((k, v.shape[1:]) for k, v in batch.items())


def _stack(parts: list[Feeds]) -> Feeds:
    return parts[0] if len(parts) == 1 else {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _validate(feeds: Mapping[str, Any], inputs: Sequence[InputSpec], first_sample: int) -> Feeds:
    if not isinstance(feeds, Mapping):
        raise CalibrationError(f"calibration sample {first_sample}: expected a dict of input name -> array, "
                               f"got {type(feeds).__name__}")
    expected = {i.name: i for i in inputs}
    unknown = sorted(repr(k) if not isinstance(k, str) else k for k in set(feeds) - set(expected))
    missing = sorted(set(expected) - set(feeds))
    if unknown or missing:
        parts = ([f"unknown input(s) {', '.join(unknown)}"] if unknown else []) + \
                ([f"missing input(s) {', '.join(missing)}"] if missing else [])
        raise CalibrationError(f"calibration sample {first_sample}: {'; '.join(parts)} "
                               f"(the model's inputs are {', '.join(expected)})")
    out: Feeds = {}
    count = None
    for name, spec in expected.items():
        try:
            a = np.asarray(feeds[name])
        except (ValueError, TypeError) as e:   # ragged nested lists
            raise CalibrationError(f"calibration input '{name}' (samples from {first_sample}) is not an array: "
                                   f"{_short(e)}") from None
        if a.ndim == 0:
            raise CalibrationError(f"calibration input '{name}' (samples from {first_sample}) is a scalar; "
                                   f"axis 0 of an input's array indexes samples")
        shape = spec.type.shape
        if shape is not None and a.ndim != len(shape):
            raise CalibrationError(f"calibration input '{name}' (samples from {first_sample}) has rank {a.ndim} "
                                   f"{a.shape}, the model expects rank {len(shape)} {_fmt(shape)}")
        if shape is not None:
            for d, (got, want) in enumerate(zip(a.shape, shape)):
                if d > 0 and want is not None and got != want:
                    last = first_sample + a.shape[0] - 1
                    which = f"sample {first_sample}" if last <= first_sample else f"samples {first_sample}-{last}"
                    raise CalibrationError(f"calibration input '{name}', {which}: shape {a.shape}; dim {d} must be "
                                           f"{want}, as in the model's {_fmt(shape)} (only the dims shown as ? are "
                                           f"dynamic and take any size)")
        if a.dtype != spec.dtype:
            if not (np.issubdtype(a.dtype, np.floating) and np.issubdtype(spec.dtype, np.floating)):
                raise CalibrationError(f"calibration input '{name}' has dtype {a.dtype}, the model expects "
                                       f"{spec.dtype}")
            a = a.astype(spec.dtype)
        if np.issubdtype(a.dtype, np.floating) and not np.all(np.isfinite(a)):
            bad = np.argwhere(~np.isfinite(a.reshape(a.shape[0], -1)).all(axis=1)).ravel()
            raise CalibrationError(f"calibration input '{name}' has NaN or Inf values in sample(s) "
                                   f"{', '.join(str(first_sample + int(i)) for i in bad[:5])}"
                                   f"{' ...' if len(bad) > 5 else ''}: remove or fix them")
        if count is not None and a.shape[0] != count:
            raise CalibrationError(f"calibration inputs disagree on the number of samples in a batch "
                                   f"({count} vs {a.shape[0]} for '{name}')")
        count = a.shape[0]
        out[name] = a
    return out


def _fmt(shape) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


# -- .npz files ------------------------------------------------------------------------------------
# Every member is checked before anything is allocated: numpy's read_array allocates the shape its
# header claims, so a 100-byte member claiming 13 TiB must be refused from its header and its size.

_DEFLATE_MAX_RATIO = 1032   # deflate expands at most ~1032:1; a member claiming more is corrupt


def read_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file (``np.savez``) by key; ``CalibrationError`` naming the file and
    the member for anything else: not a zip, a bare ``.npy``, a member that is not ``.npy``, a
    corrupt or object-dtype header, a header whose shape does not match the member's size."""
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:   # missing, empty, not numpy's format
        raise CalibrationError(f"cannot read calibration data '{path}': {e}") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise CalibrationError(f"calibration data '{path}' is a single .npy array; save an .npz keyed by "
                               "input name (np.savez(path, input=samples))")
    with loaded as npz:
        return read_npz_members(npz, path)


def read_npz_members(npz: np.lib.npyio.NpzFile, path: str, error: type[QuantirError] = CalibrationError,
                     what: str = "calibration") -> dict[str, np.ndarray]:
    """The members of an open ``.npz``, each checked before it is allocated; ``error`` (naming
    ``what`` data, the file and the key) for any member that is not a sound numeric ``.npy``.
    ``quantir run --inputs`` reads its feeds through here too."""
    return {info.filename[:-4]: _read_member(npz.zip, info, path, error, what) for info in npz.zip.infolist()}


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str, error: type[QuantirError],
                 what: str) -> np.ndarray:
    name = info.filename
    if not name.endswith(".npy"):
        raise error(f"'{path}' holds '{name}', which is not a .npy array: an .npz of {what} data holds one .npy "
                    f"array per input (np.savez(path, input=samples))")
    where = f"{what} array '{name[:-4]}' in '{path}'"
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise error(f"{where} uses zip compression method {info.compress_type}; np.savez and "
                    f"np.savez_compressed write stored or deflated members")
    if (info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size) or \
            info.file_size > _DEFLATE_MAX_RATIO * info.compress_size + 1024:
        raise error(f"{where}: the zip entry claims {info.file_size} bytes from {info.compress_size} "
                    f"stored bytes; the archive is corrupt")
    try:
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise error(f"{where} is a .npy array of format version {version[0]}.{version[1]}; "
                            f"quantir reads versions 1.0 and 2.0 (np.save of numeric arrays)")
            data_offset = f.tell()
    except QuantirError:
        raise
    except Exception as e:   # numpy parses the header with literal_eval, then tokenize: ValueError,
        # SyntaxError, tokenize.TokenError, TypeError...; and the zip layer adds its own
        raise error(f"{where} has a corrupt .npy header: {_short(e)}") from None
    if dtype.hasobject:
        raise error(f"{where} is an array of Python objects ({dtype}); quantir does not unpickle "
                    f"data: save numeric arrays (np.asarray(samples, np.float32))")
    claimed = math.prod(shape) * dtype.itemsize
    held = info.file_size - data_offset
    if claimed != held:
        raise error(f"{where}: its .npy header claims shape {shape} of {dtype} ({claimed} bytes) but "
                    f"the member holds {held} bytes of data; the file is truncated or corrupt")
    try:
        with zf.open(info) as f:   # the size is now known to be the member's own: safe to allocate
            return np.lib.format.read_array(f, allow_pickle=False)
    except (ValueError, EOFError, OSError, zipfile.BadZipFile, zlib.error) as e:
        raise error(f"{where} cannot be read: {_short(e)}") from None


def _short(e: Exception) -> str:
    """numpy quotes the whole padded header: one line, at most 200 characters."""
    text = " ".join(str(e).split())
    return text if len(text) <= 200 else text[:197] + "..."


# -- adapters -----------------------------------------------------------------------------------

def from_numpy(data: Mapping[str, np.ndarray] | np.ndarray | str | os.PathLike,
               input_name: str | None = None) -> DatasetManager:
    """Arrays whose axis 0 indexes samples: a dict keyed by input name, a single array (for a
    one-input model), or the path of an ``.npz`` file."""
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        arrays = read_npz(path)
        description = path
    elif isinstance(data, np.ndarray):
        arrays = {input_name or "": data}
        description = f"array {data.shape}"
    else:
        bad = [k for k in data if not isinstance(k, str)]
        if bad:
            raise CalibrationError(f"calibration data keyed by {bad[0]!r} ({type(bad[0]).__name__}): the keys are the "
                                   f"model's input names; {ACCEPTED_FORMS}")
        try:
            arrays = {k: np.asarray(v) for k, v in data.items()}
        except (ValueError, TypeError) as e:   # ragged nested lists
            raise CalibrationError(f"calibration data is not a dict of arrays: {_short(e)}; samples of different "
                                   f"sizes go as a list of feed dicts (for a one-input model, a list of arrays), "
                                   f"each item of one size (an .npz cannot hold them either)") from None
        description = "arrays " + ", ".join(f"{k}{v.shape}" for k, v in arrays.items())
    lengths = {k: (v.shape[0] if v.ndim else 0) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise CalibrationError(f"calibration arrays have different numbers of samples: {lengths}")
    n = next(iter(lengths.values()), 0)

    def source() -> Iterator[Feeds]:
        step = 256
        for i in range(0, n, step):
            yield {k: v[i:i + step] for k, v in arrays.items()}
    return DatasetManager(source, description, n)


def from_npz_files(paths: Sequence[str | os.PathLike]) -> DatasetManager:
    """Several ``.npz`` files read one after another, each as ``from_numpy`` reads one: an ``.npz``
    holds samples of one size, so a model with dynamic dims calibrates on several sizes this way
    (``quantir quantize --data a.npz b.npz``). One file's arrays are held at a time."""
    paths = [os.fspath(p) for p in paths]

    def source() -> Iterator[Feeds]:
        for path in paths:
            yield from from_numpy(path)._source()
    return DatasetManager(source, ", ".join(paths), None)


def from_feeds(feeds: Iterable[Any], *, batched: bool = True, input_names: Sequence[str] = ()) -> DatasetManager:
    """Any iterable of feed dicts (a list, a generator, a ``torch`` DataLoader yielding dicts).
    ``batched=False`` when each dict is one sample without axis 0. For a one-input model (its
    name in ``input_names``) an item may also be a bare array: that input's batch."""
    only = input_names[0] if len(input_names) == 1 else None

    def source() -> Iterator[Feeds]:
        for i, f in enumerate(feeds):
            if isinstance(f, np.ndarray) and only is not None:
                f = {only: f}
            elif not isinstance(f, Mapping):
                raise CalibrationError(f"calibration item #{i} is a {type(f).__name__}: an iterable of calibration "
                                       f"data yields dicts of input name -> array"
                                       f"{' (or arrays, for a one-input model)' if only is None else ''}; "
                                       f"{ACCEPTED_FORMS}")
            yield dict(f) if batched else {k: np.asarray(v)[None] for k, v in f.items()}
    n = len(feeds) if isinstance(feeds, Sequence) and not batched else None
    return DatasetManager(source, f"{type(feeds).__name__} of feeds", n)


def from_reader(reader: Any) -> DatasetManager:
    """An ONNX Runtime ``CalibrationDataReader`` (``get_next()`` until ``None``, optional ``rewind()``)."""
    if not callable(getattr(reader, "get_next", None)):
        raise CalibrationError(f"{type(reader).__name__} has no get_next(): not a CalibrationDataReader")

    def source() -> Iterator[Feeds]:
        if callable(getattr(reader, "rewind", None)):
            reader.rewind()
        while (feeds := reader.get_next()) is not None:
            yield dict(feeds) if isinstance(feeds, Mapping) else feeds   # _validate says what is wrong
    return DatasetManager(source, f"{type(reader).__name__}", None)


ACCEPTED_FORMS = ("calibration data is a dict of input name -> array (axis 0 indexes samples), the path of an .npz "
                  "saved that way (or a list of such paths), an iterable of such dicts, a CalibrationDataReader, or, "
                  "for a one-input model, an array or an iterable of arrays")


def as_dataset(data: Any, input_names: Sequence[str] = ()) -> DatasetManager:
    """Accept whatever the user passed to ``quantize`` and pick the adapter (see ``ACCEPTED_FORMS``).

    A generator is read once, as it yields; its arrays (one-input models) or dicts are batches
    whose axis 0 indexes samples."""
    if isinstance(data, DatasetManager):
        return data
    if isinstance(data, (str, os.PathLike, Mapping)):
        return from_numpy(data)
    if isinstance(data, (list, tuple)) and data and all(isinstance(d, (str, os.PathLike)) for d in data):
        return from_npz_files(data)
    if isinstance(data, np.ndarray):
        if len(input_names) != 1:
            raise CalibrationError(f"a bare array needs a one-input model; this one has inputs {list(input_names)}: "
                                   f"pass a dict keyed by input name")
        return from_numpy(data, input_names[0])
    if callable(getattr(data, "get_next", None)):
        return from_reader(data)
    if isinstance(data, Iterable) and not isinstance(data, (bytes, bytearray)):
        return from_feeds(data, input_names=input_names)
    raise CalibrationError(f"cannot use {type(data).__name__} as calibration data: {ACCEPTED_FORMS}")
