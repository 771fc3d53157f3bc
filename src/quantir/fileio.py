"""Output files: checked before any work is done, written atomically, never over an input.

* :func:`check_outputs` -- what a command calls first, before loading or calibrating anything:
  no output may be one of the inputs (the same file, through a hard link or a symlink too), no
  two outputs may be one file, and each output must be writable (:func:`check_output`).
* :func:`atomic_output` / :func:`atomic_write` -- a temporary file beside the destination, then
  ``os.replace``: the destination is the old file or the complete new one, never a partial one.
  On any exception -- ``KeyboardInterrupt`` and the CLI's SIGTERM (``cli.main``) included -- the
  temporary file is removed. The new file gets the mode of the file it replaces, or
  ``0o666 & ~umask`` (``mkstemp`` alone would leave 0600). A symlink destination is written
  through (its target is replaced, the link stays), as ``cp`` does.

Every failure is an :class:`~quantir.errors.OutputError` naming the path and the reason; the
destination's parent directory is created only when the caller asks (``make_parents=True``).
"""
from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import signal
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from .errors import OutputError


def check_outputs(outputs: Mapping[str, str | os.PathLike[str] | None],
                  inputs: Mapping[str, str | os.PathLike[str] | None], *, make_parents: bool = False) -> None:
    """Refuse outputs that would destroy an input or each other, or cannot be written.

    ``outputs`` maps a flag to a path (``{"-o": "m.int8.onnx", "--summary": None}``), ``inputs``
    a description to a path (``{"input model": "m.onnx"}``); ``None`` and ``-`` (stdout/stdin)
    are skipped.
    """
    outs = [(flag, path) for flag, path in outputs.items() if path is not None and str(path) != "-"]
    ins = [(what, path) for what, path in inputs.items() if path is not None and str(path) != "-"]
    for _, out in outs:
        for what, inp in ins:
            if same_file(out, inp):
                raise OutputError(f"output {_shown(out)} is the {what} {_shown(inp)}; refusing to overwrite it")
    for (flag_a, a), (flag_b, b) in itertools.combinations(outs, 2):
        if same_file(a, b):
            raise OutputError(f"outputs {_shown(a)} ({flag_a}) and {_shown(b)} ({flag_b}) are the same file; "
                              f"give each its own path")
    for _, out in outs:
        check_output(out, make_parents=make_parents)


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name one file: same device and inode when both exist (hard links,
    symlinks), else the same resolved path (two outputs that do not exist yet)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_output(path: str | os.PathLike[str], *, make_parents: bool = False) -> Path:
    """The file that writing ``path`` will replace (a symlink's target), after checking it can be
    written: it is not a directory, and its parent is a writable directory -- or, with
    ``make_parents``, the nearest existing ancestor is."""
    shown = Path(path)
    dest = _destination(shown)
    if dest.is_dir():
        raise OutputError(f"cannot write {_shown(shown)}: it is a directory")
    parent = dest.parent
    ancestor = parent
    while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputError(f"cannot write {_shown(shown)}: {_shown(ancestor)} is not a directory")
    if ancestor != parent and not make_parents:
        raise OutputError(f"cannot write {_shown(shown)}: directory {_shown(parent)} does not exist; create it first")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {_shown(shown)}: directory {_shown(ancestor)} is not writable")
    return dest


def prepare_output(path: str | os.PathLike[str], *, make_parents: bool = False) -> Path:
    """:func:`check_output`, then create the missing parent directories if ``make_parents``."""
    dest = check_output(path, make_parents=make_parents)
    if make_parents:
        with _as_output_error(path):
            dest.parent.mkdir(parents=True, exist_ok=True)
    return dest


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], *, make_parents: bool = False) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into; it replaces ``path`` when the block ends
    without an exception and is removed otherwise. ``OSError`` becomes ``OutputError``."""
    dest = prepare_output(path, make_parents=make_parents)
    if dest.exists() and not dest.is_file():  # a device or FIFO (-o /dev/null): nothing to replace
        with _as_output_error(path), open(dest, "wb") as f:
            yield f
        return
    tmp = None
    try:
        with _as_output_error(path):
            mode = _mode_for(dest)
            with _signals_deferred():  # so that an interrupt cannot land between creating and naming it
                fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
                _pending.add(tmp)
        with _as_output_error(path), os.fdopen(fd, "wb") as f:  # ENOSPC in the caller's writes too
            yield f
            f.flush()
            if hasattr(os, "fchmod"):  # POSIX; elsewhere mkstemp's file has the default permissions
                os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        with _as_output_error(path):
            os.replace(tmp, dest)
        _pending.discard(tmp)
    except BaseException:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            _pending.discard(tmp)
        raise


def atomic_write(path: str | os.PathLike[str], data: bytes, *, make_parents: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_output`)."""
    with atomic_output(path, make_parents=make_parents) as f:
        f.write(data)


# -- helpers ----------------------------------------------------------------------------------

# Temporaries not yet renamed or removed. An interrupt that lands inside contextlib's own frames
# (between the ``with`` body and the generator) skips the generator's cleanup, and finalizing it
# at interpreter shutdown may find ``os`` torn down already; so exit removes what is left.
_pending: set[str] = set()


@atexit.register
def _remove_pending() -> None:
    for tmp in list(_pending):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _pending.discard(tmp)


def _destination(path: Path) -> Path:
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _mode_for(dest: Path) -> int:
    """The permission bits of the file being replaced, or those a new file gets under the umask."""
    try:
        return stat.S_IMODE(os.stat(dest).st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    try:  # Linux: read it without changing it (os.umask can only set)
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _as_output_error(path) -> Iterator[None]:
    try:
        yield
    except OSError as e:
        raise OutputError(f"cannot write {_shown(path)}: {e.strerror or e}") from None


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM for the duration (their handlers run, and may raise, right after)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _shown(path) -> str:
    """A path as echoed in a one-line message: control characters escaped."""
    s = os.fspath(path)
    return s if s.isprintable() else repr(s)
