"""Fuzz quantir with mutated model files: nothing may escape but a typed ``QuantirError``.

    .venv/bin/python bench/fuzz_models.py --format onnx|tflite|all --n 20000 [--jobs 2] [--seed S]

A format is a plugin module beside this file (``_fuzz_onnx.py``, ``_fuzz_tflite.py``) with
``seeds() -> list[bytes]``, ``mutate(data, rng) -> bytes`` and ``exercise(path, workdir)``
(load, show, check, quantize, ... whatever quantir does with such a file). The parent makes
each input (a mutant of a random seed), writes it to a temp file and hands it to a pool of
long-lived worker processes; each worker runs ``exercise`` under:

- a time limit (``--timeout``, 10 s): past it the worker is killed and the input is a *hang*;
- an address-space cap of ``--mem-mb`` (1 GB) above the worker's own baseline
  (``RLIMIT_AS``), so an allocation above it raises ``MemoryError``: *allocation*;
- a worker that dies by a signal (or exits) is a *crash*; it is restarted.

Outcomes: ``ok``, ``typed`` (a ``QuantirError``), ``untyped`` (grouped by the innermost
``src/quantir`` frame and the exception type), ``crash``, ``hang``, ``allocation``, and
``modified`` (the input file changed). All but ``ok``/``typed`` are findings: their
reproducers go to ``bench/results/fuzz_models/``, the counts to
``bench/results/fuzz_models.json``; the exit code is 1 when there is any finding.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import importlib
import json
import multiprocessing as mp
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import wait
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(BENCH))

FORMATS = {"onnx": "_fuzz_onnx", "tflite": "_fuzz_tflite"}
FINDINGS = ("untyped", "crash", "hang", "allocation", "modified")
QUANTIR_SRC = str(ROOT / "src" / "quantir") + os.sep
REPRODUCERS_PER_GROUP = 3


def plugin(fmt: str):
    return importlib.import_module(FORMATS[fmt])


# -- worker ---------------------------------------------------------------------------------------

def _vm_size() -> int:
    """This process's virtual memory size in bytes (VmSize)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def innermost_quantir_frame(tb) -> str:
    """``file:line`` of the innermost frame in src/quantir (the place to fix), else the innermost one."""
    frames = traceback.extract_tb(tb)
    ours = [f for f in frames if f.filename.startswith(QUANTIR_SRC)]
    f = (ours or frames)[-1]
    name = os.path.relpath(f.filename, ROOT) if f.filename.startswith(str(ROOT)) else f.filename
    return f"{name}:{f.lineno}"


def classify(exercise, path: str, workdir: str) -> dict:
    from quantir.errors import QuantirError
    try:
        exercise(path, workdir)
    except QuantirError as e:
        return {"kind": "typed", "type": type(e).__name__, "message": str(e)[:300]}
    except MemoryError as e:
        return {"kind": "allocation", "type": type(e).__name__, "where": innermost_quantir_frame(e.__traceback__),
                "message": str(e)[:300]}
    except (Exception, RecursionError) as e:  # noqa: BLE001 - that is what we look for
        return {"kind": "untyped", "type": type(e).__name__, "where": innermost_quantir_frame(e.__traceback__),
                "message": str(e)[:300]}
    return {"kind": "ok"}


def worker_main(conn, formats: list[str], mem_bytes: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    plugins = {fmt: plugin(fmt) for fmt in formats}
    for p in plugins.values():
        if hasattr(p, "warm_up"):
            p.warm_up()
    baseline = _vm_size()
    resource.setrlimit(resource.RLIMIT_AS, (baseline + mem_bytes, resource.RLIM_INFINITY))
    devnull = open(os.devnull, "w")
    sys.stdout = sys.stderr = devnull    # show prints the IR, quantize a progress bar
    conn.send(("ready", baseline))
    while True:
        task = conn.recv()
        if task is None:
            return
        task_id, fmt, path, workdir = task
        result = classify(plugins[fmt].exercise, path, workdir)
        conn.send((task_id, result))


class Worker:
    def __init__(self, ctx, formats: list[str], mem_bytes: int, max_tasks: int):
        self.ctx, self.formats, self.mem_bytes, self.max_tasks = ctx, formats, mem_bytes, max_tasks
        self.task = None
        self.started = 0.0
        self.start()

    def start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=worker_main, args=(child, self.formats, self.mem_bytes), daemon=True)
        self.proc.start()
        child.close()
        self.done = 0
        message = self.conn.recv()
        assert message[0] == "ready", message

    def submit(self, task) -> None:
        self.task = task
        self.started = time.monotonic()
        self.conn.send(task)

    def kill(self) -> None:
        if self.proc.is_alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.join()
        self.conn.close()

    def restart(self) -> None:
        self.kill()
        self.start()

    def finish(self) -> None:
        """Recycle the process now and then, so a slow leak never reaches the memory cap."""
        self.task = None
        self.done += 1
        if self.done >= self.max_tasks:
            self.conn.send(None)
            self.proc.join(5)
            self.kill()
            self.start()

    def death(self) -> str:
        self.proc.join(1)
        code = self.proc.exitcode
        if code is not None and code < 0:
            return f"signal {signal.Signals(-code).name}"
        return f"exit code {code}"


# -- parent ---------------------------------------------------------------------------------------

def make_inputs(fmt: str, n: int, rng: random.Random):
    p = plugin(fmt)
    seeds = p.seeds()
    if not seeds:
        raise SystemExit(f"fuzz_models: the {fmt} plugin has no seeds")
    for _ in range(n):
        yield p.mutate(rng.choice(seeds), rng)


def save_reproducer(out_dir: Path, fmt: str, kind: str, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()[:12]
    path = out_dir / f"{fmt}_{kind}_{digest}.{fmt}"
    path.write_bytes(data)
    return os.path.relpath(path, ROOT)


def run_campaign(formats: list[str], args) -> dict:
    rng = random.Random(args.seed)
    ctx = mp.get_context("fork")
    workers = [Worker(ctx, formats, args.mem_mb << 20, args.max_tasks) for _ in range(args.jobs)]
    out_dir = Path(args.reproducers)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    tmp = Path(tempfile.mkdtemp(prefix="quantir_fuzz_"))
    counts = {fmt: collections.Counter() for fmt in formats}
    typed = {fmt: collections.Counter() for fmt in formats}
    groups: dict[tuple, dict] = {}
    pending = ((fmt, i, data) for fmt in formats
               for i, data in enumerate(make_inputs(fmt, args.n, rng)))
    inputs: dict[int, tuple] = {}
    next_id = 0
    t0 = time.monotonic()

    def record(task_id: int, result: dict) -> None:
        fmt, data, path, digest, workdir = inputs.pop(task_id)
        kind = result["kind"]
        if kind in ("ok", "typed") and hashlib.sha256(Path(path).read_bytes()).digest() != digest:
            kind, result = "modified", {"kind": "modified", "type": "", "where": "", "message": "input changed"}
        counts[fmt][kind] += 1
        if kind == "typed":
            typed[fmt][result["type"]] += 1
        if kind in FINDINGS:
            key = (fmt, kind, result.get("type", ""), result.get("where", ""))
            g = groups.setdefault(key, {"format": fmt, "kind": kind, "type": key[2], "where": key[3], "count": 0,
                                        "message": result.get("message", ""), "reproducers": []})
            g["count"] += 1
            if len(g["reproducers"]) < REPRODUCERS_PER_GROUP:
                g["reproducers"].append(save_reproducer(out_dir, fmt, kind, data))
        os.unlink(path)
        shutil.rmtree(workdir, ignore_errors=True)

    def feed(w: Worker) -> bool:
        nonlocal next_id
        item = next(pending, None)
        if item is None:
            return False
        fmt, _, data = item
        task_id, next_id = next_id, next_id + 1
        path = tmp / f"in{task_id}.{fmt}"
        path.write_bytes(data)
        workdir = tmp / f"work{task_id}"
        workdir.mkdir()
        inputs[task_id] = (fmt, data, str(path), hashlib.sha256(data).digest(), str(workdir))
        w.submit((task_id, fmt, str(path), str(workdir)))
        return True

    try:
        busy = [w for w in workers if feed(w)]
        while busy:
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=0.5)
            now = time.monotonic()
            for w in list(busy):
                task_id = w.task[0]
                if w.conn in ready:
                    try:
                        got_id, result = w.conn.recv()
                    except (EOFError, OSError):
                        got_id, result = task_id, {"kind": "crash", "type": w.death(), "where": ""}
                        w.restart()
                    else:
                        w.finish()
                    record(got_id, result)
                elif w.proc.sentinel in ready or not w.proc.is_alive():
                    record(task_id, {"kind": "crash", "type": w.death(), "where": ""})
                    w.restart()
                elif now - w.started > args.timeout:
                    record(task_id, {"kind": "hang", "type": f"over {args.timeout:g} s", "where": ""})
                    w.restart()
                else:
                    continue
                if not feed(w):
                    busy.remove(w)
    finally:
        for w in workers:
            w.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - t0
    total = sum(sum(c.values()) for c in counts.values())
    return {
        "n_per_format": args.n, "seed": args.seed, "jobs": args.jobs, "timeout_s": args.timeout,
        "memory_cap_mb": args.mem_mb, "elapsed_s": round(elapsed, 1),
        "inputs_per_s": round(total / elapsed, 1) if elapsed else None,
        "counts": {fmt: {k: c.get(k, 0) for k in ("ok", "typed", *FINDINGS)} for fmt, c in counts.items()},
        "typed_errors": {fmt: dict(c.most_common()) for fmt, c in typed.items()},
        "findings": sorted(groups.values(), key=lambda g: -g["count"]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--format", choices=[*FORMATS, "all"], default="all")
    ap.add_argument("--n", type=int, default=20000, help="inputs per format")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per input before it counts as a hang")
    ap.add_argument("--mem-mb", type=int, default=1024, help="address space a worker may add to its baseline")
    ap.add_argument("--max-tasks", type=int, default=2000, help="inputs a worker runs before it is recycled")
    ap.add_argument("--out", default=str(BENCH / "results" / "fuzz_models.json"))
    ap.add_argument("--reproducers", default=str(BENCH / "results" / "fuzz_models"))
    args = ap.parse_args(argv)
    if args.n < 1 or args.jobs < 1:
        ap.error("--n and --jobs must be at least 1")
    formats = list(FORMATS) if args.format == "all" else [args.format]
    available = []
    for fmt in formats:
        try:
            plugin(fmt)
            available.append(fmt)
        except ModuleNotFoundError as e:
            if args.format != "all" or e.name != FORMATS[fmt]:
                raise
            print(f"fuzz_models: no {FORMATS[fmt]}.py plugin, {fmt} skipped", file=sys.stderr)
    summary = run_campaign(available, args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
    for fmt, c in summary["counts"].items():
        print(f"{fmt}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    print(f"{summary['elapsed_s']} s, {summary['inputs_per_s']} inputs/s with {args.jobs} workers")
    for g in summary["findings"]:
        print(f"  {g['format']} {g['kind']} x{g['count']}: {g['type']} at {g['where']}: {g['message'][:120]!r} "
              f"-> {g['reproducers'][0]}")
    return 1 if summary["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
