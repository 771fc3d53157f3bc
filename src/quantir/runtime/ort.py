"""ONNX Runtime execution of a module: the fast path for calibration and for checking exports.

>>> from quantir.runtime.ort import OrtExecutor
>>> # ex = OrtExecutor(module, expose="all")       # one session, every activation an output
>>> # values = ex.run({"input": x})                  # outputs by name, then the exposed tensors

Design notes
- The module goes through the ONNX backend (``quantir.backends.onnx.export``) once; the
  values to expose are added as extra graph outputs of that one model, and one
  ``InferenceSession`` is built and reused for every ``run``. Observing every activation
  of a network therefore costs one pass, not one pass per tensor: this is what
  calibration uses. (ONNX Runtime cannot fuse an op whose result is exposed — a Conv into
  its Relu, say — so a fully exposed session is somewhat slower than a plain one.)
- The naming contract is the reference interpreter's (``quantir.runtime.run``): feeds are
  keyed by input name, outputs by output name in output order, then the exposed values
  by the names they were asked by (a value's ``name_hint``, the ONNX tensor name for
  imported models). Feeds are checked with the interpreter's rules and messages before
  ONNX Runtime sees them.
- ``expose="all"`` is every named value computed at run time — the results of all ops
  except constants; the interpreter's ``intermediates="all"`` also lists the constants,
  which are in the module already. A constant can still be exposed by name.
- This is the one ``runtime`` module that reaches up into ``backends`` (to export) and
  out to ``onnxruntime``; both are imported inside functions, so ``import quantir.runtime``
  imports neither.
- Sessions are made with ``DEFAULT_SESSION_CONFIG``: pool threads do not spin-wait between
  ops (``session.intra_op.allow_spinning = 0``). An executor runs a few large batches
  (calibration: 32 samples, every activation exposed), where a spinning thread gains nothing
  and, on a machine shared with other jobs, burns the core the next op needs. Measured on a
  loaded 2-core machine (ORT 1.32, default thread count): quantizing the Fashion-MNIST CNN on
  500 images 1.00 s -> 0.61 s (median of 5), EfficientNet-Lite0 on 64 images 8.6 s -> 7.8 s
  (median of 2). Spinning pays off only for long chains of very short ops, where it saves a
  thread wake-up (microseconds) per op. ``session_config`` entries override it.
- ``run`` returns ONNX Runtime's own output buffers as numpy arrays without a copy
  (``InferenceSession.run`` wraps them; checked for 1.32), so I/O binding would save nothing
  here. What an exposed run costs over a plain one is ORT's: outputs that cannot be fused
  into the next op, NCHWc → NCHW reorders of every exposed tensor, and fresh memory for
  outputs the caller still holds (EfficientNet-Lite0, batch 32: ~1.7× a plain run).
- Above ``NCHWC_MAX_NODES`` nodes the session is built without ONNX Runtime's
  ``NchwcTransformer`` (``nchwc_disabled``). That transformer alone makes building a session
  quadratic in the node count: each node it rewrites gets a fresh name from
  ``Graph::GenerateNodeName``, which compares the name against every node of the graph.
  Measured on a Conv/Clip/Conv/Add chain (ORT 1.32, CPU seconds to build the session): 2,000
  nodes 0.11 s with it, 0.05 s without; 16,000 nodes 4.4 s with it, 1.0 s without — it was most
  of the super-linear growth of ``quantize`` on long chains. The price is numerical: Conv and
  pooling then run MLAS's NCHW kernels instead of the NCHWc ones, which sum in another order,
  so the activations of a graph above the threshold differ in their last bits from what the
  NCHWc kernels give (measured with it disabled on the two models below: at most 7e-6 and
  3e-4 absolute), and calibration ranges and scales may differ as much. They are not worse,
  only different, as the interpreter's are. Every graph at or below
  the threshold (EfficientNet-Lite0 exports to 94 nodes, the Fashion-MNIST CNN to 31) keeps
  ONNX Runtime's default optimizations, so its results do not change.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..errors import QuantirError
from ..ir import Function, Module, Value
from ..ir.dialects import arith, func
from .interpreter import FeedError, check_feeds, input_names, output_names

__all__ = ["OrtExecutor", "OrtError", "DEFAULT_SESSION_CONFIG", "NCHWC_MAX_NODES", "nchwc_disabled"]

# ONNX Runtime session configuration every executor starts from (``session_config`` overrides it).
DEFAULT_SESSION_CONFIG: Mapping[str, str] = {"session.intra_op.allow_spinning": "0"}

# Largest graph (ONNX nodes) whose session keeps the NchwcTransformer, quadratic in the node count
# (see the module notes): at 4,096 nodes it costs ~0.25 s, a tenth of quantizing such a graph.
NCHWC_MAX_NODES = 4096


def nchwc_disabled(n_nodes: int, max_nodes: int | None = None) -> list[str]:
    """The ONNX Runtime optimizers to disable for a graph of ``n_nodes`` nodes: none up to
    ``max_nodes`` (``NCHWC_MAX_NODES`` when None), the quadratic NchwcTransformer above."""
    limit = NCHWC_MAX_NODES if max_nodes is None else max_nodes
    return ["NchwcTransformer"] if n_nodes > limit else []


class OrtError(QuantirError):
    """ONNX Runtime refused the exported model or failed while running it."""


class OrtExecutor:
    """A module compiled once into an ONNX Runtime session.

    - ``expose``: values to return besides the outputs — a list of names (output names,
      input names or ``name_hint``s), ``"all"`` (every named op result except constants),
      or None.
    - ``providers``: ONNX Runtime execution providers, in order of preference.
    - ``intra_op_threads``: threads per op (ONNX Runtime's default when None).
    - ``opset``: the ONNX opset of the exported model (the backend's default, 21).
    - ``session_config``: ONNX Runtime session configuration entries, added to (and
      overriding) ``DEFAULT_SESSION_CONFIG``; e.g. ``{"session.intra_op.allow_spinning": "1"}``
      restores ONNX Runtime's spin-waiting.

    Raises ``UnsupportedOpError`` for ops the ONNX backend cannot export, ``FeedError`` for
    an unknown name in ``expose``, and ``OrtError`` when ONNX Runtime rejects the model.
    """

    def __init__(self, module: Module | Function, *, expose: "Sequence[str] | str | None" = None,
                 providers: Sequence[str] = ("CPUExecutionProvider",), intra_op_threads: int | None = None,
                 opset: int | None = None, session_config: Mapping[str, str] | None = None):
        from ..backends.onnx import export
        self.fn = module.main if isinstance(module, Module) else module
        self.inputs: list[tuple[str, Value]] = list(zip(input_names(self.fn), self.fn.arguments))
        self.outputs: list[tuple[str, Value]] = list(zip(output_names(self.fn), self.fn.outputs))
        exposed = self._resolve(expose)
        exported = export(module, opset=opset, extra_outputs=[v for _, v in exposed])
        # (key, ONNX name) in result order: the outputs, then exposed values not already listed.
        keys: dict[str, str] = {}
        for name, v in self.outputs:
            keys.setdefault(name, name)
        for name, v in exposed:
            keys.setdefault(name, exported.names[v])
        self._keys = list(keys.items())
        self._fetch = list(dict.fromkeys(onnx_name for _, onnx_name in self._keys))
        self.exposed = [name for name, _ in exposed]
        # The ModelProto is not kept: the session holds the weights, the module holds them too.
        self.disabled_optimizers = nchwc_disabled(len(exported.model.graph.node))   # what _session disables
        self.session = _session(exported.model, providers, intra_op_threads,
                                {**DEFAULT_SESSION_CONFIG, **(session_config or {})})

    # -- naming ---------------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return [n for n, _ in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [n for n, _ in self.outputs]

    def _resolve(self, expose: "Sequence[str] | str | None") -> list[tuple[str, Value]]:
        ops = [op for op in self.fn.ops if op.opdef is not func.RETURN]
        if expose is None:
            return []
        if isinstance(expose, str):
            if expose != "all":
                raise ValueError(f"expose must be a list of names, 'all' or None, got {expose!r}")
            return [(v.name_hint, v) for op in ops if op.opdef is not arith.CONSTANT
                    for v in op.results if v.name_hint]
        values: dict[str, Value] = {}
        for _, arg in self.inputs:
            if arg.name_hint:
                values.setdefault(arg.name_hint, arg)
        for op in ops:
            for r in op.results:
                if r.name_hint:
                    values.setdefault(r.name_hint, r)
        for name, arg in self.inputs:
            values.setdefault(name, arg)
        outputs = dict(reversed(self.outputs))   # the first output of a name wins
        out = []
        for name in expose:
            v = outputs.get(name) or values.get(name)
            if v is None:
                raise FeedError(f"no value named '{name}'; outputs are {_quoted(self.output_names)} and "
                                f"intermediates are addressed by their tensor names (e.g. "
                                f"{_quoted(list(values)[:5])})")
            out.append((name, v))
        return out

    # -- running --------------------------------------------------------------------------
    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs keyed by name in output order, then the exposed values.

        Raises ``FeedError``, ``FeedTypeError`` and ``ShapeError`` for feeds that do not fit
        (as ``quantir.runtime.run`` does) and ``OrtError`` if ONNX Runtime fails.
        """
        # ONNX Runtime wants C-contiguous arrays; the checks are the interpreter's own
        checked = {name: np.ascontiguousarray(a) for name, a in check_feeds(self.inputs, feeds).items()}
        try:
            results = self.session.run(self._fetch, checked)
        except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
            raise OrtError(f"ONNX Runtime failed: {_first_line(e)}") from e
        by_name = dict(zip(self._fetch, results))
        return {key: by_name[onnx_name] for key, onnx_name in self._keys}


def _session(model, providers: Sequence[str], intra_op_threads: int | None, config: Mapping[str, str]):
    import onnxruntime as ort
    available = ort.get_available_providers()
    missing = [p for p in providers if p not in available]
    if missing or not providers:
        raise OrtError(f"execution providers {_quoted(missing)}: not available in this onnxruntime "
                       f"(it has {_quoted(available)})" if missing else "no execution provider given")
    options = ort.SessionOptions()
    options.log_severity_level = 3   # errors only: no warnings about names or unused initializers
    if intra_op_threads is not None:
        options.intra_op_num_threads = int(intra_op_threads)
    try:
        for key, value in config.items():
            options.add_session_config_entry(str(key), str(value))
        return ort.InferenceSession(model.SerializeToString(), options, providers=list(providers),
                                    disabled_optimizers=nchwc_disabled(len(model.graph.node)) or None)
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise OrtError(f"ONNX Runtime cannot load the exported model: {_first_line(e)}") from e


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _quoted(names) -> str:
    return ", ".join(f"'{n}'" for n in names)
