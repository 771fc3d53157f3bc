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


def round_robin(sessions: dict, feed: dict, rounds: int, budget_s: float, min_rounds: int = 5) -> dict[str, list]:
    """Milliseconds per run of each ONNX Runtime session, in turn, round after round (after one
    warm-up run each), so load on the machine falls on all of them alike; stops after ``rounds``
    rounds, or earlier once ``budget_s`` is spent and ``min_rounds`` are done."""
    import time
    for s in sessions.values():
        s.run(None, feed)
    times: dict[str, list] = {k: [] for k in sessions}
    start = time.perf_counter()
    for r in range(rounds):
        for k, s in sessions.items():
            t = time.perf_counter()
            s.run(None, feed)
            times[k].append((time.perf_counter() - t) * 1000)
        if r + 1 >= min_rounds and time.perf_counter() - start > budget_s:
            break
    return times


def session(path: Path, threads: int = 1):
    """An ONNX Runtime CPU session for timing: ``threads`` intra-op threads that do not spin between
    runs (a spinning thread would steal the core the models measured round-robin share)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
