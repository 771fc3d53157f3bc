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

import os
import re
import tempfile
from typing import Mapping, Sequence

import numpy as np

from ..errors import QuantirError
from ..ir import Function, Module, Value
from ..ir.dialects import arith, func
from ..types import TensorType, UniformQuantizedType
from .interpreter import FeedError, NamedIO, check_feeds, input_names, output_names

__all__ = ["OrtExecutor", "OrtError", "DEFAULT_SESSION_CONFIG", "NCHWC_MAX_NODES", "nchwc_disabled",
           "OrtIntegerExecutor"]

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


class OrtExecutor(NamedIO):
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


# -- the integer module as ONNX Runtime computes it (Config(target="onnxruntime")) ---------------------
#
# The integer module as ONNX Runtime computes it: its QDQ (or QOperator) export run in ONNX Runtime.
#
# >>> from quantir.runtime.ort import OrtIntegerExecutor
# >>> # ex = OrtIntegerExecutor(result.module, expose=["conv1__q"])   # QDQ export, ORT's arithmetic
# >>> # values = ex.run({"input": x})     # outputs, then conv1__q as int8 in quantir's layout
# >>> # ex.float_computed                 # exposed values ONNX Runtime computes in float, then quantizes
#
# Why run ONNX Runtime rather than emulate it (measured, docs/design.md "Targets"): what ONNX
# Runtime computes depends on graph rewrites, not only on kernels. On x86 its int8-activation QDQ
# model is first rewritten to uint8 (``QDQS8ToU8Transformer``, only for a QuantizeLinear whose
# single consumer is a DequantizeLinear), then DQ → op → Q groups become QLinear kernels in NHWC,
# and a group that cannot be fused stays a float op between DequantizeLinear and QuantizeLinear.
# Which ops fuse therefore depends on their neighbours (fan-out, what feeds them): on the
# Fashion-MNIST CNN 8 of 12 convolutions fuse and 4 run in float; the same model's QOperator
# export runs all 12 as QLinearConv. An emulation would have to reproduce those rewrites version
# by version; running ONNX Runtime is exact by construction and faster than quantir's
# interpreter.
#
# Exposing intermediates without changing them. Adding a quantized tensor as a graph output (or
# giving it a second consumer) stops the S8→U8 rewrite, hence the fusions around it: the
# computed model changes (measured: every layer after the first exposed one). So the executor
# builds one session with ONNX Runtime's default optimizations, lets it write the optimized
# graph, adds the wanted tensors as outputs of *that* graph and runs it with optimizations
# off: the same nodes and kernels, so the same numbers (the tests check the outputs are equal
# to a plain session's). A quantir value ``x__q`` is found in the optimized graph by the names
# the exporter gives nodes (its QuantizeLinear is ``x/quantize``, a fused node keeps the name of
# the float op it replaced, with a ``_token_N`` suffix when ONNX Runtime rebuilt it); a uint8
# tensor is moved back to int8 (zero point − 128, exactly what the rewrite added) and a
# channels-last one back to NCHW. A value ONNX Runtime removed (a requantize that became a
# no-op) cannot be exposed: it is listed in ``unavailable``.
#
# Integer boundaries. A function with int8 arguments or results (a segment of the integer graph,
# as ``quantize.trace.IntegerTrace`` runs) is exported with float boundaries: each int8 argument
# arrives as its dequantized value through a QuantizeLinear, each int8 result leaves through a
# DequantizeLinear, and the executor converts both ways exactly (|q − zp| ≤ 255 survives a
# float32 round trip). ONNX Runtime then sees the Q → DQ pairs a whole model has at that point.

# ONNX Runtime ops that compute on int8/uint8 directly (a fused DQ → op → Q or a dropped Q/DQ pair);
# an exposed tensor made by anything else (QuantizeLinear) was computed in float and quantized.
FLOAT_RUN_OPS = ("QuantizeLinear",)
_ACTIVATIONS = ("Relu", "Clip")   # a fused clamp the QDQ export writes between the op and its Q


class OrtIntegerExecutor(NamedIO):
    """``module`` (integer ``qnn`` ops) exported to ``format`` and run by ONNX Runtime's CPU provider.

    ``run`` follows the interpreter's naming contract: outputs by output name, then the exposed
    values by name; integer values come back in quantir's storage (int8, NCHW). Raises
    ``FeedError`` for an unknown name in ``expose`` and ``OrtError`` when ONNX Runtime refuses
    the model.
    """

    def __init__(self, module: Module | Function, *, expose: Sequence[str] = (), format: str = "qdq",
                 intra_op_threads: int | None = None, session_config: Mapping[str, str] | None = None):
        from ..backends.onnx import to_onnx_quantized
        self.fn = module.main if isinstance(module, Module) else module
        self.format = format
        self.inputs = list(zip(input_names(self.fn), self.fn.arguments))
        self.outputs = list(zip(output_names(self.fn), self.fn.outputs))
        model = to_onnx_quantized(Module([self.fn]), format=format)
        self._feed_params = _float_inputs(model, self.inputs)
        self._result_params = _float_outputs(model, self.outputs)
        self._config = {**DEFAULT_SESSION_CONFIG, **(session_config or {})}
        self._threads = intra_op_threads
        names = {o for n in model.graph.node for o in n.output} | {i.name for i in model.graph.input}
        unknown = [n for n in expose if n not in names]
        if unknown:
            raise FeedError(f"no quantized value named {', '.join(map(repr, unknown))} in the {format.upper()} "
                            f"export; expose values by their integer names (x__q)")
        self.exposed: dict[str, tuple[str, bool]] = {}   # name -> (ONNX tensor, channels-last hint)
        self.unavailable: list[str] = []
        self.float_computed: list[str] = []
        if not expose:
            self.session = _integer_session(model, self._threads, self._config, optimize=True)
            return
        with tempfile.TemporaryDirectory(prefix="quantir-ort-") as tmp:
            path = os.path.join(tmp, "optimized.onnx")
            _integer_session(model, self._threads, self._config, optimize=True, save_to=path)
            import onnx
            optimized = onnx.load(path)
        self._shapes = {r.name_hint: r.type.shape for op in self.fn.ops for r in op.results
                        if r.name_hint and isinstance(r.type, TensorType)}
        channels_last = _channels_last_tensors(optimized)
        for name in dict.fromkeys(expose):
            found = _locate(model, optimized, name)
            if found is None:
                self.unavailable.append(name)
                continue
            node, tensor = found
            if node is not None and node.op_type in FLOAT_RUN_OPS:
                self.float_computed.append(name)
            self.exposed[name] = (tensor, tensor in channels_last)
        listed = {o.name for o in optimized.graph.output}
        for tensor, _ in self.exposed.values():
            if tensor not in listed:
                listed.add(tensor)
                optimized.graph.output.append(onnx.ValueInfoProto(name=tensor))
        self.session = _integer_session(optimized, self._threads, self._config, optimize=False)


    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        checked = check_feeds(self.inputs, feeds)
        ort_feeds = {}
        for name, a in checked.items():
            params = self._feed_params.get(name)
            ort_feeds[name] = np.ascontiguousarray(a if params is None else _dequantized(a, *params))
        fetch = list(dict.fromkeys([*self.output_names, *(t for t, _ in self.exposed.values())]))
        try:
            results = dict(zip(fetch, self.session.run(fetch, ort_feeds)))
        except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
            raise OrtError(f"ONNX Runtime failed on the {self.format.upper()} export: {_first_line(e)}") from e
        out: dict[str, np.ndarray] = {}
        for name, _ in self.outputs:
            params = self._result_params.get(name)
            out.setdefault(name, results[name] if params is None else _requantized(results[name], *params))
        for name, (tensor, channels_last) in self.exposed.items():
            out.setdefault(name, _as_stored(results[tensor], self._shapes.get(name), channels_last, name))
        return out


# -- float boundaries --------------------------------------------------------------------------------

def _params(v) -> tuple[float, int] | None:
    t = v.type
    if isinstance(t, TensorType) and isinstance(t.element_type, UniformQuantizedType):
        return float(t.element_type.scale), int(t.element_type.zero_point)
    return None


def _dequantized(q: np.ndarray, scale: float, zp: int) -> np.ndarray:
    return ((q.astype(np.int32) - zp).astype(np.float32) * np.float32(scale)).astype(np.float32)


def _requantized(x: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """The int8 a DequantizeLinear output came from: exact, since |q - zp| <= 255 survives float32."""
    return np.clip(np.rint(x.astype(np.float64) / np.float32(scale)) + zp, -128, 127).astype(np.int8)


def _float_inputs(model, inputs) -> dict[str, tuple[float, int]]:
    """Each int8 graph input becomes a float input feeding a QuantizeLinear that rebuilds it."""
    from onnx import TensorProto, helper, numpy_helper
    out: dict[str, tuple[float, int]] = {}
    nodes = []
    for name, arg in inputs:
        p = _params(arg)
        if p is None:
            continue
        graph_input = next(i for i in model.graph.input if i.name == name)
        if graph_input.type.tensor_type.elem_type != TensorProto.INT8:
            continue
        carrier = f"{name}__ort_float"
        for node in model.graph.node:
            node.input[:] = [carrier if i == name else i for i in node.input]
        model.graph.initializer.extend([numpy_helper.from_array(np.array(p[0], np.float32), f"{carrier}_scale"),
                                        numpy_helper.from_array(np.array(p[1], np.int8), f"{carrier}_zp")])
        nodes.append(helper.make_node("QuantizeLinear", [name, f"{carrier}_scale", f"{carrier}_zp"], [carrier],
                                      name=f"{carrier}/quantize"))
        graph_input.type.tensor_type.elem_type = TensorProto.FLOAT
        out[name] = p
    for i, node in enumerate(nodes):
        model.graph.node.insert(i, node)
    return out


def _float_outputs(model, outputs) -> dict[str, tuple[float, int]]:
    """Each int8 graph output leaves through a DequantizeLinear (as a whole model's would)."""
    from onnx import TensorProto, helper, numpy_helper
    out: dict[str, tuple[float, int]] = {}
    for name, v in outputs:
        p = _params(v)
        graph_output = next((o for o in model.graph.output if o.name == name), None)
        if p is None or graph_output is None or graph_output.type.tensor_type.elem_type != TensorProto.INT8:
            continue
        inner = f"{name}__ort_int8"
        for node in model.graph.node:
            node.output[:] = [inner if o == name else o for o in node.output]
            node.input[:] = [inner if i == name else i for i in node.input]
        model.graph.initializer.extend([numpy_helper.from_array(np.array(p[0], np.float32), f"{inner}_scale"),
                                        numpy_helper.from_array(np.array(p[1], np.int8), f"{inner}_zp")])
        model.graph.node.append(helper.make_node("DequantizeLinear", [inner, f"{inner}_scale", f"{inner}_zp"],
                                                 [name], name=f"{inner}/dequantize"))
        graph_output.type.tensor_type.elem_type = TensorProto.FLOAT
        out[name] = p
    return out


# -- finding a value in the optimized graph ----------------------------------------------------------

def _candidates(model, tensor: str) -> list[str]:
    """Node names that may carry ``tensor`` after ONNX Runtime's rewrites: its producer, and for a
    QuantizeLinear the float op it quantizes (through a fused Relu/Clip), which a fusion replaces."""
    producer = {o: n for n in model.graph.node for o in n.output}
    node = producer.get(tensor)
    names: list[str] = []
    while node is not None:
        names.append(node.name)
        if node.op_type not in ("QuantizeLinear", *_ACTIVATIONS) or not node.input:
            break
        node = producer.get(node.input[0])
    return [n for n in names if n]


def _locate(model, optimized, tensor: str):
    """(optimized node or None, tensor name) holding ``tensor`` in the optimized graph, or None."""
    producer = {o: n for n in optimized.graph.node for o in n.output}
    if tensor in producer:
        return producer[tensor], tensor
    if tensor in {i.name for i in optimized.graph.input}:
        return None, tensor
    by_name: dict[str, object] = {}
    for n in optimized.graph.node:
        by_name.setdefault(re.sub(r"_token_\d+$", "", n.name), n)
    for name in _candidates(model, tensor):
        node = by_name.get(name)
        if node is not None and node.output:
            return node, node.output[0]
    return None


def _channels_last_tensors(optimized) -> set[str]:
    """The tensors ONNX Runtime's layout pass keeps channels-last: made by an NHWC kernel (a
    ``channels_last`` attribute, an ``Nhwc*`` op) or by a Transpose to NHWC, and carried through
    the layout-agnostic ops after them (QLinearAdd, Q/DQ, element-wise float ops) until a
    Transpose back. The node list of an ONNX graph is in topological order."""
    last: set[str] = set()
    for n in optimized.graph.node:
        if n.op_type == "Transpose":
            perm = next((list(a.ints) for a in n.attribute if a.name == "perm"), [])
            # at rank 3 the way to NWC and the way back are both (0, 2, 1): from a channels-last
            # tensor (a Conv1D's NHWC output squeezed to N, W, C) it goes back to channels first
            back = len(perm) >= 3 and perm == [0, len(perm) - 1, *range(1, len(perm) - 1)] and n.input[0] in last
            made = not back and len(perm) >= 3 and perm == [0, *range(2, len(perm)), 1]
        else:
            made = any(a.name == "channels_last" and a.i == 1 for a in n.attribute) or n.op_type.startswith("Nhwc") \
                or "nhwc" in n.domain.lower() or any(i in last for i in n.input)
        if made:
            last.update(o for o in n.output if o)
    return last


def _as_stored(a: np.ndarray, shape, channels_last: bool, name: str) -> np.ndarray:
    """ONNX Runtime's tensor in quantir's storage: int8 (or int16, 16x8), channels first."""
    if a.dtype == np.uint8:   # QDQS8ToU8Transformer added 128 to the zero point and the values
        a = (a.astype(np.int16) - 128).astype(np.int8)
    elif a.dtype not in (np.int8, np.int16):
        raise OrtError(f"'{name}' is {a.dtype} in ONNX Runtime's optimized graph, not an integer tensor "
                       f"(a quantir bug: the value was located at the wrong node)")
    def fits(b: np.ndarray) -> bool:
        return shape is None or (len(shape) == b.ndim and all(d is None or d == e for d, e in zip(shape, b.shape)))
    moved = np.moveaxis(a, -1, 1) if a.ndim >= 3 else a
    hinted, other = (moved, a) if channels_last else (a, moved)
    # the hint follows Transposes; ONNX Runtime's transpose optimizer may cancel a Transpose of the
    # model against its own (a Conv1D's NWC output that the model transposes to N, W, C anyway):
    # the static dims decide when only the other reading fits them
    if not fits(hinted) and fits(other):
        hinted = other
    if not fits(hinted):
        raise OrtError(f"'{name}' has shape {a.shape} in ONNX Runtime's optimized graph, expected {shape} "
                       f"(a quantir bug: its layout was read wrong)")
    return np.ascontiguousarray(hinted)


def _integer_session(model, threads: int | None, config: Mapping[str, str], *, optimize: bool,
                     save_to: str | None = None):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads is not None:
        options.intra_op_num_threads = int(threads)
    if not optimize:   # the graph is ONNX Runtime's own optimized one: rewriting it again changes nothing
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if save_to is not None:
        options.optimized_model_filepath = save_to
    try:
        for key, value in config.items():
            options.add_session_config_entry(str(key), str(value))
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise OrtError(f"ONNX Runtime cannot load the exported model: {_first_line(e)}") from e
