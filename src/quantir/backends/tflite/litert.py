"""Run a TFLite model in the LiteRT interpreter: the oracle for bit-exactness checks.

``ai_edge_litert`` is an optional (``oracle``) dependency: it is imported inside
:func:`run_model`, never at module import, so quantir's core runs without it.

Resolvers (docs/numerics.md §0): ``reference`` = ``BUILTIN_REF`` (the reference kernels,
the golden oracle), ``optimized`` = ``BUILTIN_WITHOUT_DEFAULT_DELEGATES`` (optimized
kernels, no XNNPACK), ``default`` = ``AUTO`` (XNNPACK, float requantization: not
bit-exact, never a golden oracle).
"""
from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

import numpy as np

from quantir.backends.tflite.model import Model
from quantir.backends.tflite.writer import write_model

__all__ = ["Resolver", "LiteRTUnavailableError", "litert_available", "run_model", "run_model_tensors",
           "OracleProcess", "OracleCrash", "OracleRefusal"]


class Resolver(StrEnum):
    REFERENCE = "reference"
    OPTIMIZED = "optimized"
    DEFAULT = "default"


class LiteRTUnavailableError(RuntimeError):
    """``ai_edge_litert`` is not installed (``pip install 'quantir[oracle]'``)."""


def _interpreter_module():
    try:
        from ai_edge_litert import interpreter  # noqa: PLC0415 - optional oracle dependency
    except ImportError as e:
        raise LiteRTUnavailableError(
            "running a .tflite model needs ai_edge_litert; install it with pip install 'quantir[oracle]'") from e
    return interpreter


def litert_available() -> bool:
    try:
        _interpreter_module()
    except LiteRTUnavailableError:
        return False
    return True


def run_model(model: bytes | Model, feeds: Sequence[np.ndarray], resolver: Resolver | str = Resolver.REFERENCE,
              *, num_threads: int = 1) -> list[np.ndarray]:
    """Invoke ``model`` once on ``feeds`` (in subgraph input order); returns every output, copied.

    LiteRT errors at allocation (its Prepare checks) or invocation surface as RuntimeError
    carrying the interpreter's message.
    """
    return _invoke(model, feeds, resolver, num_threads, None)


def run_model_tensors(model: bytes | Model, feeds: Sequence[np.ndarray], indices: Sequence[int],
                      resolver: Resolver | str = Resolver.REFERENCE, *, num_threads: int = 1
                      ) -> tuple[list[np.ndarray], dict[int, np.ndarray]]:
    """As :func:`run_model`, and also the arrays of the tensors ``indices`` (intermediates included:
    the interpreter is told to preserve every tensor instead of reusing their memory)."""
    tensors: dict[int, np.ndarray] = {}
    outputs = _invoke(model, feeds, resolver, num_threads, (indices, tensors))
    return outputs, tensors


def _invoke(model, feeds, resolver, num_threads, wanted, step=lambda phase: None) -> list[np.ndarray]:
    """``step(phase)`` is told before each stage that may crash: load, allocate, invoke."""
    lite = _interpreter_module()
    step("load")
    kinds = {Resolver.REFERENCE: lite.OpResolverType.BUILTIN_REF,
             Resolver.OPTIMIZED: lite.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
             Resolver.DEFAULT: lite.OpResolverType.AUTO}
    content = write_model(model) if isinstance(model, Model) else bytes(model)
    interp = lite.Interpreter(model_content=content, experimental_op_resolver_type=kinds[Resolver(resolver)],
                              num_threads=num_threads, experimental_preserve_all_tensors=wanted is not None)
    inputs = interp.get_input_details()
    if len(inputs) != len(feeds):
        raise ValueError(f"run_model: the model has {len(inputs)} inputs, {len(feeds)} feeds given")
    for detail, value in zip(inputs, feeds):
        value = np.asarray(value)
        if tuple(detail["shape"]) != value.shape:
            interp.resize_tensor_input(detail["index"], value.shape)
    step("allocate")
    interp.allocate_tensors()
    for detail, value in zip(inputs, feeds):
        interp.set_tensor(detail["index"], np.ascontiguousarray(value, dtype=detail["dtype"]))
    step("invoke")
    interp.invoke()
    if wanted is not None:
        indices, into = wanted
        into.update({int(i): interp.get_tensor(int(i)).copy() for i in indices})
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


# -- the oracle in a child process ----------------------------------------------------------------
# LiteRT's kernels trust the file: an omitted RESHAPE shape input segfaults, a SOFTMAX without its
# options aborts. quantir must survive that, so verify runs LiteRT in one child process per run and
# talks to it in lock step: the parent asks for a chunk of samples, the child writes that chunk's
# tensors to an .npz in a shared temporary directory and answers. A crash is the child's exit
# status (a signal), never quantir's.

_PHASES = ("load", "allocate", "invoke")


class OracleCrash(Exception):
    """The LiteRT child died: ``signal`` (e.g. ``SIGSEGV``) or exit code, in ``phase``; ``stderr``
    is the end of what it printed (LiteRT's own reason, when it gave one)."""

    def __init__(self, how: str, phase: str, stderr: str):
        super().__init__(f"LiteRT {how} while {_PHASE_TEXT.get(phase, phase)}")
        self.how, self.phase, self.stderr = how, phase, stderr


class OracleRefusal(Exception):
    """LiteRT raised an error (it refused the model or the inputs); the message is LiteRT's."""

    def __init__(self, phase: str, message: str):
        super().__init__(message)
        self.phase, self.message = phase, message


_PHASE_TEXT = {"start": "starting", "load": "loading the model", "allocate": "preparing the model's operators",
               "invoke": "invoking the model", "write": "writing the results"}


class OracleProcess:
    """One LiteRT child for a run: ``chunk(feeds, indices)`` -> ``(outputs, tensors)`` as
    :func:`run_model_tensors` returns them, computed in the child. Use as a context manager."""

    def __init__(self, model: bytes, resolver: Resolver | str, workdir: str, *, num_threads: int = 1):
        import os
        import subprocess
        import sys
        from pathlib import Path

        self.dir = Path(workdir)
        (self.dir / "model.tflite").write_bytes(bytes(model))
        self.stderr_path = self.dir / "stderr.txt"
        package_root = str(Path(__file__).resolve().parents[3])   # the directory holding quantir/
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([package_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "quantir.backends.tflite.litert", str(self.dir), str(Resolver(resolver)),
             str(num_threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env, text=True)
        self.count = 0

    def __enter__(self) -> OracleProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except Exception:   # noqa: BLE001 - a child that does not stop is killed
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()

    def chunk(self, feeds: Sequence[np.ndarray], indices: Sequence[int]
              ) -> tuple[list[np.ndarray], dict[int, np.ndarray]]:
        k = self.count
        self.count += 1
        np.savez(self.dir / f"in{k}.npz", *[np.asarray(f) for f in feeds],
                 indices=np.asarray(list(indices), np.int64))
        phase = "start"
        try:
            self.proc.stdin.write(f"{k}\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._died(phase)
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self._died(phase)
            word, _, rest = line.rstrip("\n").partition(" ")
            if word == "phase":
                phase = rest
            elif word == "error":
                import json
                raise OracleRefusal(phase, json.loads(rest))
            elif word == "ok":
                break
        (self.dir / f"in{k}.npz").unlink(missing_ok=True)
        out_path = self.dir / f"out{k}.npz"
        with np.load(out_path, allow_pickle=False) as npz:
            outputs = [npz[f"o{j}"] for j in range(int(npz["n_outputs"]))]
            tensors = {int(i): npz[f"t{int(i)}"] for i in indices}
        out_path.unlink(missing_ok=True)
        return outputs, tensors

    def _died(self, phase: str):
        import signal

        code = self.proc.wait()
        self._stderr.flush()
        tail = self.stderr_path.read_bytes()[-2000:].decode("utf-8", "replace").strip()
        if code < 0:
            try:
                how = f"crashed with {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        raise OracleCrash(how, phase, tail)


def _serve(workdir: str, resolver: str, num_threads: int) -> int:
    """The child's loop: one chunk per line on stdin; phases and answers on a private copy of
    stdout (fd 1 itself goes to stderr, so nothing LiteRT prints can garble the answers)."""
    import json
    import os
    import sys
    from pathlib import Path

    try:   # die with the parent (a fuzzer killing a worker must not leave LiteRT running); Linux only
        import ctypes
        import signal
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    answer = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    d = Path(workdir)
    content = (d / "model.tflite").read_bytes()

    def step(phase: str) -> None:   # line-buffered: the parent knows the phase even if the next call crashes
        answer.write(f"phase {phase}\n")

    for line in sys.stdin:
        k = int(line)
        with np.load(d / f"in{k}.npz", allow_pickle=False) as npz:
            indices = [int(i) for i in npz["indices"]]
            feeds = [npz[f"arr_{j}"] for j in range(len(npz.files) - 1)]
        tensors: dict[int, np.ndarray] = {}
        try:
            outputs = _invoke(content, feeds, resolver, num_threads, (indices, tensors), step)
        except Exception as e:   # noqa: BLE001 - LiteRT's errors are ValueError/RuntimeError: pass the text on
            answer.write(f"error {json.dumps(f'{type(e).__name__}: {e}'.strip())}\n")
            continue
        step("write")
        np.savez(d / f"out{k}.npz", n_outputs=len(outputs), **{f"o{j}": a for j, a in enumerate(outputs)},
                 **{f"t{i}": a for i, a in tensors.items()})
        answer.write("ok\n")
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(_serve(sys.argv[1], sys.argv[2], int(sys.argv[3])))
