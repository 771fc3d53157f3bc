"""The reference interpreter: runs a function op by op with numpy kernels.

Design notes
- Planning is separate from running (``Interpreter(module)`` then ``.run(feeds)``): the
  plan resolves every op's kernel up front — so an op without a kernel fails before any
  work is done — and computes each value's last use, as torch.fx's interpreter does, so a
  value is freed right after the op that reads it last. Peak memory is the live set, not
  the whole graph.
- Values are addressed by name: inputs and outputs by their ``quantir.name`` argument /
  result attributes (``arg{i}`` / ``out{i}`` when absent), intermediates by ``name_hint``
  (the ONNX tensor name for imported models).
- Only the ops that the requested values depend on run.
- Every kernel result is checked against its op's result type (dtype and static dims): a
  mismatch is a quantir bug and is reported with the op and its label.
- BLAS threads: CNN layers are many small GEMMs, and multi-threaded OpenBLAS spin-waits; on
  a busy 2-core machine that made EfficientNet-Lite0 3x slower than one thread. ``run``
  therefore limits BLAS to ``blas_threads`` (default 1) while it runs, through
  ``threadpoolctl`` when that package is installed (it is not required; without it the BLAS
  default stays). ``blas_threads=None`` leaves the setting alone.
- Many samples: ``run_all`` runs independent feeds on a few threads, one sample each. The time is
  in numpy passes, BLAS and the compiled loops, which release the GIL; so threads, not processes
  (no copy of the module or its weights): ddddocr's detector, 8 scenes, 2.40 s on one thread,
  1.46 s on two. The BLAS cap is set once around the pool (``threadpoolctl``'s limits are
  process-wide: threads setting and restoring them would race), and each thread has its own
  tensor limit (a context variable).
- Sizes come from the model file, so they are checked before memory is spent
  (``kernels.limits``): a result whose static type is over ``max_tensor_bytes`` (default
  4 GiB) is refused with a ``ResourceError`` before its kernel runs, and kernels whose sizes
  depend on values (``nn.range``) or that need scratch (conv padding, im2col) check theirs.
"""
from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Mapping, Sequence

import numpy as np

from ..errors import QuantirError, ResourceError, ShapeError, UnsupportedOpError
from ..ir import Function, Module, Operation, Value
from ..ir.names import input_names, output_names  # noqa: F401  (part of this module's API)
from ..ir.dialects import func, nn
from ..ir.dialects.nn_base import element_dtype
from ..types import TensorType
from .kernels import kernel_for as float_kernel_for
from .kernels.limits import DEFAULT_MAX_TENSOR_BYTES, check_allocation, result_what, tensor_limit
from .kernels.litert_float import FLOAT_ARITHMETIC, kernel_for as litert_kernel_for


class FeedError(QuantirError, KeyError):
    """Feeds that do not match the function's inputs by name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return QuantirError.__str__(self)


class FeedTypeError(QuantirError, TypeError):
    """A feed whose dtype differs from the input's element type."""


def kernel_for(opdef):
    """The kernel of ``opdef``: the float and quant-cast kernels' table, then the quantized ops'
    declarations (each holds its integer kernel binding)."""
    kernel = float_kernel_for(opdef)
    if kernel is None:
        from ..quantize import ops   # the declarations import the kernel adapters below this layer
        kernel = ops.kernel_for(opdef)
    return kernel


class NamedIO:
    """An executor's feed and result names: ``inputs`` and ``outputs`` are (name, value) pairs."""

    inputs: list
    outputs: list

    @property
    def input_names(self) -> list[str]:
        return [n for n, _ in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [n for n, _ in self.outputs]


class Interpreter(NamedIO):
    """A planned function. ``Interpreter(module).run(feeds)`` is ``quantir.runtime.run``."""

    def __init__(self, module: Module | Function, *, max_tensor_bytes: int | None = DEFAULT_MAX_TENSOR_BYTES,
                 float_arithmetic: str = "numpy"):
        """``max_tensor_bytes``: the largest tensor (result or kernel scratch) a run may make;
        None for no limit. ``float_arithmetic``: "numpy" (the default kernels) or "litert" (float32
        matmul, sum, mean, softmax, GELU, exp, log, tanh and sigmoid rounded as LiteRT's reference
        kernels round them; see ``kernels.litert_float``)."""
        if float_arithmetic not in FLOAT_ARITHMETIC:
            raise QuantirError(f"float_arithmetic must be one of {_quoted(FLOAT_ARITHMETIC)}, got "
                               f"{float_arithmetic!r}")
        self.float_arithmetic = float_arithmetic
        self.max_tensor_bytes = max_tensor_bytes
        self._fits: set[tuple[Operation, tuple]] = set()
        self.fn = module.main if isinstance(module, Module) else module
        self.inputs = list(zip(input_names(self.fn), self.fn.arguments))
        self.outputs = list(zip(output_names(self.fn), self.fn.outputs))
        self.ops = [op for op in self.fn.ops if op.opdef is not func.RETURN]
        self.kernels = {}
        for op in self.ops:
            kernel = litert_kernel_for(op.opdef, float_arithmetic) or kernel_for(op.opdef)
            if kernel is None:
                raise UnsupportedOpError(_no_kernel_message(op))
            self.kernels[op] = kernel
        self.values: dict[str, Value] = {}
        for _, arg in self.inputs:
            if arg.name_hint:
                self.values.setdefault(arg.name_hint, arg)
        for op in self.ops:
            for r in op.results:
                if r.name_hint:
                    self.values.setdefault(r.name_hint, r)
        for name, arg in self.inputs:
            self.values.setdefault(name, arg)


    def value(self, name: str) -> Value:
        """The value an output name or a name hint refers to."""
        for n, v in self.outputs:
            if n == name:
                return v
        if name in self.values:
            return self.values[name]
        raise FeedError(f"no value named '{name}'; outputs are {_quoted(self.output_names)} and intermediates "
                        f"are addressed by their tensor names (e.g. {_quoted(list(self.values)[:5])})")

    # -- running --------------------------------------------------------------------------
    def run(self, feeds: Mapping[str, np.ndarray], *, outputs: Sequence[str] | None = None,
            intermediates: Sequence[str] | str | None = None,
            blas_threads: int | None = 1) -> dict[str, np.ndarray]:
        with _blas_limit(blas_threads), tensor_limit(self.max_tensor_bytes):
            return self._run(feeds, outputs, intermediates)

    def run_all(self, feeds: Iterable[Mapping[str, np.ndarray]], *, outputs: Sequence[str] | None = None,
                intermediates: Sequence[str] | str | None = None, workers: int | None = None,
                blas_threads: int | None = 1) -> list[dict[str, np.ndarray]]:
        """``run`` on each feed dict, ``workers`` samples at a time on threads (None: every CPU this
        process may use, ``available_cpus``); the results in the feeds' order. The first error
        (in that order) is raised, as a loop of ``run`` would raise it."""
        batch = list(feeds)
        workers = available_cpus() if workers is None else workers
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise QuantirError(f"workers must be a whole number of at least 1 (or None: every CPU), got {workers!r}")

        def one(f):
            with tensor_limit(self.max_tensor_bytes):
                return self._run(f, outputs, intermediates)
        with _blas_limit(blas_threads):
            if workers == 1 or len(batch) < 2:
                return [one(f) for f in batch]
            with ThreadPoolExecutor(min(workers, len(batch)), thread_name_prefix="quantir-run") as pool:
                return list(pool.map(one, batch))

    def _run(self, feeds, outputs, intermediates) -> dict[str, np.ndarray]:
        checked = check_feeds(self.inputs, feeds)
        env: dict[Value, np.ndarray] = {arg: checked[name] for name, arg in self.inputs}
        wanted = [(n, self.value(n)) for n in outputs] if outputs is not None else list(self.outputs)
        if intermediates == "all":
            extra = [(v.name_hint, v) for op in self.ops for v in op.results if v.name_hint]
        else:
            extra = [(n, self.value(n)) for n in (intermediates or ())]
        keep = {v for _, v in wanted} | {v for _, v in extra}
        schedule = self._schedule(keep)
        last_use = self._last_uses(schedule, keep)
        for i, op in enumerate(schedule):
            args = [env[v] for v in op.operands]
            if self.max_tensor_bytes is not None:
                key = (op, tuple(a.shape for a in args))
                if key not in self._fits:        # checked once per op and operand shapes
                    _check_results_before(op, args, self.max_tensor_bytes)
                    self._fits.add(key)
            try:
                out = self.kernels[op](op, *args)
            except ResourceError as e:   # scratch refused inside a kernel: say which op
                if f"'{op.name}'" in e.message:
                    raise
                raise ResourceError(f"{op.describe()}: {e.message}") from None
            except MemoryError as e:     # under the limit, but more than the machine has
                raise ResourceError(f"{op.describe()} ran out of memory ({e}); lower "
                                    f"max_tensor_bytes below what this machine can hold, or run it on "
                                    f"a larger one") from None
            results = out if isinstance(out, tuple) else (out,)
            if len(results) != len(op.results):
                raise ShapeError(f"kernel of {op.describe()} returned {len(results)} values for "
                                 f"{len(op.results)} results (a quantir bug)")
            for r, a in zip(op.results, results):
                env[r] = _check_result(op, r, np.asarray(a))
            for v in last_use.get(i, ()):
                env.pop(v, None)
        out: dict[str, np.ndarray] = {}
        for name, v in wanted + extra:
            out.setdefault(name, env[v])
        return out

    def _schedule(self, keep: set[Value]) -> list[Operation]:
        """The ops the kept values depend on, in program order."""
        needed: set[Operation] = set()
        stack = [v.op for v in keep if hasattr(v, "op")]
        while stack:
            op = stack.pop()
            if op in needed:
                continue
            needed.add(op)
            stack.extend(v.op for v in op.operands if hasattr(v, "op"))
        return [op for op in self.ops if op in needed]

    @staticmethod
    def _last_uses(schedule: list[Operation], keep: set[Value]) -> dict[int, list[Value]]:
        last: dict[Value, int] = {}
        for i, op in enumerate(schedule):
            for v in op.operands:
                last[v] = i
            for r in op.results:
                last.setdefault(r, i)   # results nobody reads die right away
        by_op: dict[int, list[Value]] = {}
        for v, i in last.items():
            if v not in keep:
                by_op.setdefault(i, []).append(v)
        return by_op


def run(module: Module | Function, feeds: Mapping[str, np.ndarray], *, outputs: Sequence[str] | None = None,
        intermediates: Sequence[str] | str | None = None, blas_threads: int | None = 1,
        max_tensor_bytes: int | None = DEFAULT_MAX_TENSOR_BYTES,
        float_arithmetic: str = "numpy") -> dict[str, np.ndarray]:
    """Run ``module``'s main function on ``feeds`` (keyed by input name).

    Returns the outputs keyed by name in output order (or the values named in ``outputs``),
    followed by the requested ``intermediates`` (tensor names, or ``"all"``).

    ``blas_threads`` caps BLAS threads during the run (None: unchanged; see the module notes).
    ``max_tensor_bytes`` caps every tensor the run makes (None: no limit).
    ``float_arithmetic="litert"`` rounds float32 matmul, sum, mean, softmax, GELU, exp, log, tanh
    and sigmoid as LiteRT's reference kernels do (for a .tflite: bit-exact with LiteRT); "numpy"
    (default) uses numpy's.

    Raises ``FeedError`` for unknown or missing input names, ``FeedTypeError`` for a wrong
    dtype, ``ShapeError`` for a wrong rank or dim, ``UnsupportedOpError`` for an op
    without a kernel (such as an opaque ``nn.onnx_op``) and ``ResourceError`` for a tensor
    over ``max_tensor_bytes``.
    """
    interpreter = Interpreter(module, max_tensor_bytes=max_tensor_bytes, float_arithmetic=float_arithmetic)
    return interpreter.run(feeds, outputs=outputs, intermediates=intermediates, blas_threads=blas_threads)


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # macOS, Windows
        return max(1, os.cpu_count() or 1)


def _blas_limit(threads: int | None):
    if threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(threads, user_api="blas")


def _check_results_before(op: Operation, args: Sequence[np.ndarray], limit: int | None) -> None:
    """Refuse, before the kernel runs, a result over ``limit``: by its static type, or, when a
    dim is dynamic, by the op's type rule applied to the actual operand shapes."""
    if limit is None:
        return
    types = [r.type for r in op.results]
    if any(isinstance(t, TensorType) and not t.has_static_shape for t in types) and op.opdef.infer is not None:
        try:
            concrete = [TensorType(tuple(a.shape), v.type.element_type) if isinstance(v.type, TensorType) else v.type
                        for a, v in zip(args, op.operands)]
            types = op.opdef.infer(concrete, op.opdef.attr_values(op))
        except (QuantirError, ValueError, TypeError, IndexError):
            pass       # the kernel reports what is wrong with the operands
    for i, t in enumerate(types[:len(op.results)]):
        if isinstance(t, TensorType) and t.has_static_shape:
            try:
                dtype = element_dtype(t)
            except UnsupportedOpError:
                continue   # _check_result reports it after the kernel
            check_allocation(result_what(op, i), t.shape, dtype, limit)


def _check_result(op: Operation, r: Value, a: np.ndarray) -> np.ndarray:
    t = r.type
    if isinstance(t, TensorType):
        want = element_dtype(t)
        if a.dtype != want:
            raise ShapeError(f"kernel of {op.describe()} produced dtype {a.dtype} for a result of type "
                             f"{t} (a quantir bug)")
        if t.shape is not None and (a.ndim != len(t.shape) or any(
                d is not None and d != n for d, n in zip(t.shape, a.shape))):
            raise ShapeError(f"kernel of {op.describe()} produced shape {a.shape} for a result of type "
                             f"{t} (a quantir bug)")
    return a


def _no_kernel_message(op: Operation) -> str:
    if op.opdef is nn.ONNX_OP:
        return (f"ONNX op '{op.attr('op_type')}'{_label(op)} was imported as an opaque 'nn.onnx_op' "
                f"(keep_unsupported=True); the reference interpreter cannot run it — use the ONNX Runtime "
                f"executor, or import without keep_unsupported to see why it is unsupported")
    return f"the reference interpreter has no kernel for {op.describe()}"


def _label(op: Operation) -> str:
    return f" (node '{op.label}')" if op.label else ""


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def check_feeds(inputs: Sequence[tuple[str, Value]], feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Match feeds to the model's inputs by name and check each one's dtype and shape.

    Shared by every executor so that they refuse bad feeds with the same messages.
    Raises ``FeedError`` (unknown or missing names), ``FeedTypeError`` (dtype) and
    ``ShapeError`` (rank or a static dim).
    """
    expected = dict(inputs)
    unknown = [k for k in feeds if k not in expected]
    missing = [n for n in expected if n not in feeds]
    if unknown or missing:
        parts = []
        if unknown:
            parts.append(f"unknown input{'s' if len(unknown) > 1 else ''} {_quoted(unknown)}")
        if missing:
            parts.append(f"missing input{'s' if len(missing) > 1 else ''} {_quoted(missing)}")
        sig = ", ".join(f"'{n}': {v.type}" for n, v in inputs)
        raise FeedError(f"{' and '.join(parts)}; the model expects {{{sig}}}")
    return {name: _check_feed(name, arg, feeds[name]) for name, arg in inputs}


def _check_feed(name: str, arg: Value, a) -> np.ndarray:
    if not isinstance(a, np.ndarray):
        a = np.asarray(a)
    t = arg.type
    if not isinstance(t, TensorType):
        return a
    want = element_dtype(t)
    if a.dtype != want:
        raise FeedTypeError(f"input '{name}' expects dtype {want} ({t}), got {a.dtype}; "
                            f"convert it with .astype(np.{want.name})")
    if t.shape is not None:
        if a.ndim != len(t.shape):
            raise ShapeError(f"input '{name}' expects rank {len(t.shape)} ({t}), got rank {a.ndim} "
                             f"with shape {a.shape}")
        for i, (d, n) in enumerate(zip(t.shape, a.shape)):
            if d is not None and d != n:
                raise ShapeError(f"input '{name}' expects dim {i} to be {d} ({t}), got {n} "
                                 f"(shape {a.shape})")
    return a
