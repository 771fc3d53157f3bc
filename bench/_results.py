"""Writing a bench's results: JSON under bench/results/, atomically (a partial file never replaces a good one)."""
from __future__ import annotations

import json
import os
import platform
import tempfile
from pathlib import Path


def machine() -> dict:
    """What ran the bench: CPU count, platform, and the load average when it ended (the machine may be shared)."""
    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "loadavg_at_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


def write_json(result: dict, path: Path, root: Path) -> None:
    """``result`` as indented JSON at ``path`` (created with its folder), then a line naming it relative to ``root``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
    print(f"wrote {path.relative_to(root)}")
