"""``quantir run MODEL --inputs IN.npz --outputs OUT.npz [--engine interpreter|ort]``.

* ``MODEL``: an ``.onnx`` file (imported as ``load_onnx`` does, folded), ``.mlir`` text or an
  int8 ``.tflite`` model (read by quantir's TFLite frontend; feeds and outputs keep TFLite's names
  and layout).
* ``IN.npz``: one array per model input, keyed by input name (``np.savez(path, **feeds)``).
* ``OUT.npz``: one array per model output, keyed by output name, in the model's output
  order; written atomically (a temporary file in the same directory, then ``os.replace``).
* ``--engine``: the numpy reference interpreter (default) or ONNX Runtime.

Every failure — an unreadable or truncated model, an archive that is not ``.npz``, a missing
or unknown input name, a wrong dtype or shape — exits 1 with one line on stderr. Imports of
the compiler are deferred to :func:`run`.
"""
from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="model to run: .onnx, .mlir or .tflite")
    parser.add_argument("--inputs", required=True, metavar="IN.npz", help="input arrays keyed by input name")
    parser.add_argument("--outputs", required=True, metavar="OUT.npz", help="where to write the outputs")
    parser.add_argument("--engine", choices=("interpreter", "ort"), default="interpreter",
                        help="numpy reference interpreter (default) or ONNX Runtime")


def run(args: argparse.Namespace) -> int:
    from ..fileio import check_outputs
    with one_line_errors():
        check_outputs({"--outputs": args.outputs}, {"input model": args.model, "input arrays": args.inputs})
        module = load_model(args.model)
        feeds = read_npz(args.inputs)
        if args.engine == "ort":
            from ..runtime.ort import OrtExecutor
            results = OrtExecutor(module).run(feeds)
        else:
            from ..runtime import run as interpret
            results = interpret(module, feeds)
        write_npz(args.outputs, results)
    summary = ", ".join(f"'{k}' {tuple(v.shape)} {v.dtype}" for k, v in results.items())
    print(f"{args.outputs}: {summary}")
    return 0


# -- shared with ``quantir show`` -------------------------------------------------------------

@contextlib.contextmanager
def one_line_errors():
    """Re-raise any ``QuantirError`` with its message on one line (stderr gets one line)."""
    from ..errors import QuantirError
    try:
        yield
    except QuantirError as e:
        e.message = " ".join(e.message.split())
        raise


def load_model(path: str):
    """A ``Module`` from an ``.onnx`` model or ``.mlir`` text; ``QuantirError`` when it cannot be read."""
    from ..errors import ParseError
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".onnx":
        from ..frontends.onnx import load_onnx
        return load_onnx(p)
    if suffix == ".mlir":
        from ..text.files import read_ir_file
        from ..text.parser import parse_module
        return parse_module(read_ir_file(p), str(path))
    if suffix == ".tflite":
        from ..frontends.tflite import load_tflite
        return load_tflite(p)
    raise ParseError(f"{path}: unknown model format '{p.suffix or '(no suffix)'}'; expected an .onnx model, "
                     f".mlir IR text or an int8 .tflite model")


def read_npz(path: str) -> dict:
    """The arrays of an ``.npz`` archive by key (no pickles)."""
    import zipfile

    import numpy as np

    from ..errors import ParseError
    if not os.path.isfile(path):
        raise ParseError(f"{path}: no such file")
    unreadable = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile)
    try:
        loaded = np.load(path, allow_pickle=False)
    except unreadable as e:
        raise ParseError(f"{path}: not a readable .npz archive ({e})") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise ParseError(f"{path}: expected an .npz archive of named arrays (np.savez), got a single array")
    from ..quantize.data import read_npz_members
    with loaded:   # each member checked before it is allocated (a header may claim 13 TiB)
        return read_npz_members(loaded, path, ParseError, "input")


def write_npz(path: str, arrays: dict) -> None:
    """Write ``arrays`` as an uncompressed ``.npz`` in their order, atomically (``fileio``).

    Written member by member (``np.save`` format inside a zip, as ``np.savez`` does) so
    that any key works, including ``file`` and names with ``/``.
    """
    import zipfile

    import numpy as np

    from ..fileio import atomic_output
    with atomic_output(path) as f:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for key, value in arrays.items():
                with zf.open(f"{key}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
