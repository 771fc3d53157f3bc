"""What LiteRT's interpreter refuses in a .tflite file, or crashes on (``quantir check model.tflite``).

The file-level facts (operator versions, input counts, omitted inputs, options) are checked on
the parsed flatbuffer; then the spec table on the imported IR (``quantize.check``).
"""
from __future__ import annotations

import numpy as np

from ...errors import QuantirError
from ...frontends.tflite import CONVERTERS, FLOAT_CONVERTERS, HYBRID_CONVERTERS
from ...frontends.tflite.importer import Importer
from ...quantize import spec
from ...quantize.check import check_module
from .reader import load_model
from .schema import NUMPY_DTYPES, OPERATOR_OPTIONS, SCHEMA_VERSION, BuiltinOperator


# -- what LiteRT's interpreter refuses in a .tflite file, or crashes on ----------------------------
# Measured with ai-edge-litert 2.3 (BUILTIN_REF) on one-op models per supported op: LiteRT loads schema
# version 3 only, no tensor with a negative dim in its shape, and the operator versions in
# _MAX_VERSION; it refuses to run an operator reading a tensor nothing gives data to; each kernel's
# Prepare checks its input count; an omitted input (-1) is refused
# ("was optional but was expected") except FULLY_CONNECTED's bias and PADV2's pad value, and makes
# SQUEEZE, STRIDED_SLICE, TRANSPOSE and a two-input RESHAPE segfault; ops whose options are missing
# (or of another type: LiteRT then reads none) get zeros, which SOFTMAX aborts on (beta 0) and the
# conv and pool kernels refuse (stride 0). quantir imports such files (it ignores extra inputs and
# defaults missing options), so `quantir check` must say it.
_ARITY: dict[str, tuple[int, int]] = {
    **{k: (1, 1) for k in ("AVERAGE_POOL_2D", "MAX_POOL_2D", "DEQUANTIZE", "QUANTIZE", "HARD_SWISH", "LEAKY_RELU",
                           "LOGISTIC", "RELU", "RELU6", "RELU_N1_TO_1", "SOFTMAX", "SQUEEZE", "TANH")},
    **{k: (2, 2) for k in ("ADD", "SUB", "MUL", "EXPAND_DIMS", "MEAN", "TRANSPOSE", "RESIZE_BILINEAR",
                           "RESIZE_NEAREST_NEIGHBOR")},
    "SLICE": (3, 3), "STRIDED_SLICE": (4, 4), "PAD": (2, 3), "PADV2": (2, 3), "FULLY_CONNECTED": (2, 3),
    "CONV_2D": (3, 3),   # int8 CONV_2D needs its bias (conv.cc: has_bias); DEPTHWISE_CONV_2D does not
    "DEPTHWISE_CONV_2D": (2, 3), "RESHAPE": (1, 2), "CONCATENATION": (1, 1 << 30),
    "BATCH_MATMUL": (2, 2), "EMBEDDING_LOOKUP": (2, 2),   # (the dynamic-range forms' Prepare too)
    "UNIDIRECTIONAL_SEQUENCE_LSTM": (20, 24), "REVERSE_V2": (2, 2),
}
# the LSTM's optional inputs (lstm_shared.h): the input gate (CIFG), peepholes, projection, layer norm
_LSTM_OPTIONAL = (1, 5, 9, 10, 11, 12, 16, 17, 20, 21, 22, 23)
_MAY_OMIT = {("FULLY_CONNECTED", 2), ("PADV2", 2), *(("UNIDIRECTIONAL_SEQUENCE_LSTM", i) for i in _LSTM_OPTIONAL)}
_INT16_MAX = (1 << 15) - 1   # the conv kernels' bound on strides and dilations
# The operator versions BUILTIN_REF registers (ai-edge-litert 2.3, measured): LiteRT refuses to load
# a model with a higher version ("Didn't find op for builtin opcode").
_MAX_VERSION = {
    "ADD": 5, "AVERAGE_POOL_2D": 3, "CONCATENATION": 7, "CONV_2D": 8, "DEPTHWISE_CONV_2D": 6, "DEQUANTIZE": 9,
    "EXPAND_DIMS": 1, "FULLY_CONNECTED": 14, "HARD_SWISH": 1, "LEAKY_RELU": 2, "LOGISTIC": 3, "MAX_POOL_2D": 3,
    "MEAN": 3, "MUL": 7, "PAD": 6, "PADV2": 6, "QUANTIZE": 6, "RELU": 3, "RELU6": 3, "RELU_N1_TO_1": 1,
    "RESHAPE": 1, "RESIZE_BILINEAR": 4, "RESIZE_NEAREST_NEIGHBOR": 4, "SLICE": 8, "SOFTMAX": 3, "SQUEEZE": 1,
    "STRIDED_SLICE": 4, "SUB": 5, "TANH": 3, "TRANSPOSE": 8, "BATCH_MATMUL": 4, "EMBEDDING_LOOKUP": 5,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": 3, "REVERSE_V2": 3,
}
_OMIT_CRASHES = {"SQUEEZE", "STRIDED_SLICE", "TRANSPOSE", "RESHAPE"}
_NEEDS_OPTIONS = {"SOFTMAX": "aborts the process (beta 0)", "AVERAGE_POOL_2D": "refuses it (stride 0)",
                  "MAX_POOL_2D": "refuses it (stride 0)", "CONV_2D": "refuses it (stride 0)",
                  "DEPTHWISE_CONV_2D": "refuses it (dilation 0)"}


def _tensor_refusals(model, t) -> list[tuple[str, str]]:
    """What LiteRT's InterpreterBuilder refuses in one tensor: its shape, its quantization, its buffer."""
    found = []
    if any(d < 0 for d in t.shape):
        found.append(("shape", f"{list(t.shape)} has a negative dimension (a dynamic one is -1 in "
                               f"shape_signature, never in shape)"))
    q = t.quantization
    if q is not None and q.scale:
        axis, rank = q.quantized_dimension, len(t.shape)
        if axis < 0 or (rank and axis >= rank):
            found.append(("quantization", f"quantized_dimension {axis} is outside [0, {rank})"))
    data = model.buffers[t.buffer] if 0 <= t.buffer < len(model.buffers) else b""
    if data and t.type in NUMPY_DTYPES and not any(d < 0 for d in t.shape):
        need = int(np.prod(t.shape, dtype=np.float64)) * NUMPY_DTYPES[t.type].itemsize
        if len(data) < need:
            found.append(("buffer", f"buffer {t.buffer} holds {len(data)} bytes, shape {list(t.shape)} of "
                                    f"{t.type.name} needs {need}"))
    return found


def litert_file_violations(model) -> list[spec.Violation]:
    """What LiteRT refuses to load or crashes on in a parsed .tflite ``model``
    (:class:`~quantir.backends.tflite.model.Model`), in the file's own terms."""
    found: list[spec.Violation] = []
    if model.version != SCHEMA_VERSION:
        found.append(spec.Violation("model", "SCHEMA", "version",
                                    f"LiteRT loads schema version {SCHEMA_VERSION} only, found {model.version}"))
    for code in model.operator_codes:
        top = _MAX_VERSION.get(code.name)
        if code.version < 1 or (top is not None and code.version > top):
            have = "version 1 only" if top == 1 else f"versions 1 to {top}" if top else "versions from 1"
            found.append(spec.Violation(code.name, code.name, "operator code",
                                        f"LiteRT's reference kernels have {have} of {code.name}, found version "
                                        f"{code.version}: LiteRT refuses to load the model"))
    for sg in model.subgraphs[:1]:
        for t in sg.tensors:
            for where, message in _tensor_refusals(model, t):
                found.append(spec.Violation(t.name, "TENSOR", where, message + ": LiteRT refuses to load the model"))
        # a tensor an operator reads must be a graph input, a constant, or written by an earlier operator
        # (a tensor of no elements, e.g. the empty shape of a RESHAPE to a scalar, has no data to lack)
        available = set(sg.inputs) | {i for i, t in enumerate(sg.tensors) if t.is_variable
                                      or (0 <= t.buffer < len(model.buffers) and model.buffers[t.buffer])
                                      or (len(t.shape) > 0 and 0 in t.shape and not t.shape_signature)}
        for op in sg.operators:
            kind = model.operator_name(op)
            out = sg.tensors[op.outputs[0]].name if op.outputs and 0 <= op.outputs[0] < len(sg.tensors) else kind
            for i, idx in enumerate(op.inputs):
                if 0 <= idx < len(sg.tensors) and idx not in available:
                    found.append(spec.Violation(out, kind, f"input {i}",
                                                f"reads '{sg.tensors[idx].name}', which is neither a graph input, a "
                                                f"constant, nor written by an earlier operator: LiteRT refuses to run "
                                                f"the model (the tensor lacks data)"))
            available.update(op.outputs)
        for op in sg.operators:
            kind = model.operator_name(op)
            out = sg.tensors[op.outputs[0]].name if op.outputs and 0 <= op.outputs[0] < len(sg.tensors) else kind

            def flag(where: str, message: str) -> None:
                found.append(spec.Violation(out, kind, where, message))

            lo, hi = _ARITY.get(kind, (0, 1 << 30))
            n = len(op.inputs)
            if not lo <= n <= hi:
                want = f"{lo}" if lo == hi else f"{lo} or {hi}" if hi == lo + 1 else f"at least {lo}"
                flag("inputs", f"LiteRT's {kind} takes {want} inputs and refuses the model, found {n}")
            for i, idx in enumerate(op.inputs):
                if idx < 0 and (kind, i) not in _MAY_OMIT:
                    effect = ("crashes (segmentation fault)" if kind in _OMIT_CRASHES else "refuses the model")
                    flag(f"input {i}", f"is omitted (tensor index {idx}); LiteRT's {kind} needs it and {effect}")
            try:
                expected = OPERATOR_OPTIONS.get(BuiltinOperator(model.operator_codes[op.opcode_index].builtin_code))
            except ValueError:
                expected = None
            if kind in ("CONV_2D", "DEPTHWISE_CONV_2D") and expected is not None and isinstance(op.options, expected):
                for field in ("stride_h", "stride_w", "dilation_h_factor", "dilation_w_factor"):
                    if getattr(op.options, field) > _INT16_MAX:   # conv.cc / depthwise_conv.cc Prepare
                        flag("options", f"{field} must be at most {_INT16_MAX}, found {getattr(op.options, field)}: "
                                        f"LiteRT refuses the model")
            if kind in _NEEDS_OPTIONS and expected is not None and not isinstance(op.options, expected):
                found_text = "none" if op.options is None else type(op.options).__name__
                flag("options", f"needs {expected.__name__}, found {found_text}: LiteRT reads zeros and "
                                f"{_NEEDS_OPTIONS[kind]}")
    return found


def check_tflite(path: str) -> spec.CheckReport:
    """``quantir check`` on a .tflite file: the file's own LiteRT refusals, then the spec table on
    the imported IR (whose import refuses what quantir cannot represent, with a typed error)."""
    model = load_model(path)
    file_level = litert_file_violations(model)
    try:
        imported = Importer(model, 0, str(path), CONVERTERS, HYBRID_CONVERTERS, FLOAT_CONVERTERS).run()
        report = check_module(imported.module)
    except QuantirError as e:
        if not file_level:
            raise
        # say what LiteRT would do with the file, and why quantir cannot read it either
        report = spec.CheckReport(violations=[spec.Violation("model", "IMPORT", "quantir", e.message)])
    report.violations[:0] = file_level
    return report
