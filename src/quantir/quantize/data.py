"""``DatasetManager``: calibration samples from whatever the user has, checked on the way in.

Adapters: numpy arrays or an ``.npz`` file (axis 0 indexes samples; keys are the model's input
names), any iterable of feed dicts, and an ONNX Runtime ``CalibrationDataReader`` as is
(anything with ``get_next()`` returning dicts until ``None``). Batches are streamed, so memory
does not grow with the number of samples. Every batch is validated against the model's
inputs: a wrong name, rank, shape or dtype, or a NaN/Inf value, raises ``CalibrationError``
naming the input and the sample index.
"""
from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from ..errors import CalibrationError
from ..types import TensorType

Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class InputSpec:
    name: str
    type: TensorType

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.type.element_type.numpy_dtype)


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
        batch dimension is static (e.g. exported with batch 1) gets batches of exactly that size."""
        static = {i.type.shape[0] for i in inputs if i.type.shape and i.type.shape[0] is not None}
        if static:
            batch_size = min(static)
        seen = 0
        pending: list[Feeds] = []
        pending_n = 0
        for feeds in self._source():
            batch = _validate(feeds, inputs, first_sample=seen)
            n = next(iter(batch.values())).shape[0] if batch else 0
            if max_samples is not None and seen + n > max_samples:
                batch = {k: v[: max_samples - seen] for k, v in batch.items()}
                n = max_samples - seen
            seen += n
            pending.append(batch)
            pending_n += n
            while pending_n >= batch_size:
                merged = {k: np.concatenate([p[k] for p in pending]) for k in pending[0]}
                yield {k: v[:batch_size] for k, v in merged.items()}
                rest = {k: v[batch_size:] for k, v in merged.items()}
                pending_n -= batch_size
                pending = [rest] if pending_n else []
            if max_samples is not None and seen >= max_samples:
                break
        if pending_n and not static:
            yield {k: np.concatenate([p[k] for p in pending]) for k in pending[0]}
        elif pending_n and seen == pending_n:
            raise CalibrationError(f"the calibration set has {seen} samples but the model's batch dimension "
                                   f"is fixed at {batch_size}")
        # with a fixed batch dimension a last partial batch is dropped (its samples cannot be fed)
        if seen == 0:
            raise CalibrationError(f"the calibration set ({self.description}) is empty: at least one sample "
                                   f"is needed for every input ({', '.join(i.name for i in inputs)})")


def _validate(feeds: Mapping[str, Any], inputs: Sequence[InputSpec], first_sample: int) -> Feeds:
    if not isinstance(feeds, Mapping):
        raise CalibrationError(f"calibration sample {first_sample}: expected a dict of input name -> array, "
                               f"got {type(feeds).__name__}")
    expected = {i.name: i for i in inputs}
    unknown = sorted(set(feeds) - set(expected))
    missing = sorted(set(expected) - set(feeds))
    if unknown or missing:
        parts = ([f"unknown input(s) {', '.join(unknown)}"] if unknown else []) + \
                ([f"missing input(s) {', '.join(missing)}"] if missing else [])
        raise CalibrationError(f"calibration sample {first_sample}: {'; '.join(parts)} "
                               f"(the model's inputs are {', '.join(expected)})")
    out: Feeds = {}
    count = None
    for name, spec in expected.items():
        a = np.asarray(feeds[name])
        shape = spec.type.shape
        if shape is not None and a.ndim != len(shape):
            raise CalibrationError(f"calibration input '{name}' (samples from {first_sample}) has rank {a.ndim} "
                                   f"{a.shape}, the model expects rank {len(shape)} {_fmt(shape)}")
        if shape is not None:
            for d, (got, want) in enumerate(zip(a.shape, shape)):
                if d > 0 and want is not None and got != want:
                    raise CalibrationError(f"calibration input '{name}' (samples from {first_sample}) has shape "
                                           f"{a.shape}; dim {d} must be {want} {_fmt(shape)}")
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


# -- adapters -----------------------------------------------------------------------------------

def from_numpy(data: Mapping[str, np.ndarray] | np.ndarray | str | os.PathLike,
               input_name: str | None = None) -> DatasetManager:
    """Arrays whose axis 0 indexes samples: a dict keyed by input name, a single array (for a
    one-input model), or the path of an ``.npz`` file."""
    if isinstance(data, (str, os.PathLike)):
        path = os.fspath(data)
        try:
            loaded = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:   # missing, empty, not numpy's format
            raise CalibrationError(f"cannot read calibration data '{path}': {e}") from None
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise CalibrationError(f"calibration data '{path}' is a single .npy array; save an .npz keyed by "
                                   "input name (np.savez(path, input=samples))")
        with loaded as npz:
            arrays = {k: npz[k] for k in npz.files}
        description = path
    elif isinstance(data, np.ndarray):
        arrays = {input_name or "": data}
        description = f"array {data.shape}"
    else:
        arrays = {k: np.asarray(v) for k, v in data.items()}
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


def from_feeds(feeds: Iterable[Mapping[str, np.ndarray]], *, batched: bool = True) -> DatasetManager:
    """Any iterable of feed dicts. ``batched=False`` when each dict is one sample without axis 0."""
    def source() -> Iterator[Feeds]:
        for f in feeds:
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
            yield dict(feeds)
    return DatasetManager(source, f"{type(reader).__name__}", None)


def as_dataset(data: Any, input_names: Sequence[str] = ()) -> DatasetManager:
    """Accept whatever the user passed to ``quantize`` and pick the adapter."""
    if isinstance(data, DatasetManager):
        return data
    if isinstance(data, (str, os.PathLike, Mapping)):
        return from_numpy(data)
    if isinstance(data, np.ndarray):
        if len(input_names) != 1:
            raise CalibrationError(f"a bare array needs a one-input model; this one has inputs {list(input_names)}: "
                                   f"pass a dict keyed by input name")
        return from_numpy(data, input_names[0])
    if callable(getattr(data, "get_next", None)):
        return from_reader(data)
    if isinstance(data, Iterable):
        return from_feeds(data)
    raise CalibrationError(f"cannot use {type(data).__name__} as calibration data: pass arrays, an .npz path, "
                           f"an iterable of feed dicts or a CalibrationDataReader")
