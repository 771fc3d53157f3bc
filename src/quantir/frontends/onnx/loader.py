"""Reading ONNX files: protobuf decoding, external data, sanity checks, opset upgrade.

Every failure here is a ``ModelFormatError`` that names the file and says what was wrong:
a truncated or non-ONNX file fails protobuf decoding (or decodes to something with no
graph), a missing external-data file is named, and a model older than opset 13 that
ONNX's version converter cannot upgrade is reported with the converter's message.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from ...errors import ModelFormatError, UnsupportedOpError, quote_name
from .validate import validate_model

MIN_OPSET = 13


@dataclass
class LoadedModel:
    model: onnx.ModelProto
    source: str          # file name for messages ("<ModelProto>" for in-memory models)
    opset: int           # default-domain opset after any upgrade
    original_opset: int


def default_opset(model: onnx.ModelProto) -> int | None:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return None


def read_model(model: "str | os.PathLike | bytes | onnx.ModelProto") -> LoadedModel:
    if isinstance(model, onnx.ModelProto):
        source = "<ModelProto>"
        proto = model
        base_dir = None
    elif isinstance(model, (bytes, bytearray)):
        source = "<bytes>"
        proto = _decode(bytes(model), source)
        base_dir = None
    else:
        path = Path(model)
        source = str(path)
        if not path.is_file():
            raise ModelFormatError(f"{source}: no such file")
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ModelFormatError(f"{source}: cannot read the model: {e.strerror or e}") from None
        proto = _decode(data, source)
        base_dir = str(path.parent)
    _check_structure(proto, source)
    if base_dir is not None and _uses_external_data(proto):
        _load_external_data(proto, base_dir, source)
    opset = default_opset(proto)
    original = opset
    validate_model(proto, source, opset)   # before the version converter, which assumes a sound model
    if opset < MIN_OPSET:
        proto = _upgrade(proto, opset, source)
        opset = default_opset(proto)
    return LoadedModel(proto, source, opset, original)


def _decode(data: bytes, source: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    if not data:
        raise ModelFormatError(f"{source}: the file is empty, not an ONNX model")
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise ModelFormatError(f"{source}: not a valid ONNX model: protobuf decoding of its {len(data)} bytes "
                               f"failed ({e}); the file is truncated or corrupt") from e
    return proto


def _check_structure(proto: onnx.ModelProto, source: str) -> None:
    problems = []
    if proto.ir_version <= 0:
        problems.append("no ir_version")
    if not proto.opset_import:
        problems.append("no opset_import")
    if not proto.HasField("graph"):
        problems.append("no graph")
    elif not proto.graph.output:
        problems.append("a graph without outputs")
    if problems:
        raise ModelFormatError(f"{source}: not a valid ONNX model: it decodes as protobuf but has "
                               f"{', '.join(problems)}; the file is truncated, corrupt or not ONNX")
    if default_opset(proto) is None:
        domains = ", ".join(sorted(quote_name(o.domain) for o in proto.opset_import))
        raise UnsupportedOpError(f"{source}: the model imports only the domains {domains}; quantir imports models "
                                 f"of the default ONNX domain (ai.onnx)")


def _uses_external_data(proto: onnx.ModelProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer)


def _load_external_data(proto: onnx.ModelProto, base_dir: str, source: str) -> None:
    for t in proto.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location", "")
        if not isinstance(location, str) or not isinstance(t.name, str):
            raise ModelFormatError(f"{source}: initializer {quote_name(t.name)} names its external data file "
                                   f"{quote_name(location)}; a name that is not valid UTF-8 (the file is corrupt)")
        path = Path(base_dir) / location
        if not location or not path.is_file():
            raise ModelFormatError(f"{source}: initializer {quote_name(t.name)} keeps its data in external file "
                                   f"{quote_name(location)}, which does not exist next to the model "
                                   f"({quote_name(str(path))})")
    try:
        onnx.load_external_data_for_model(proto, base_dir)
    except Exception as e:  # noqa: BLE001 - onnx raises several kinds here
        raise ModelFormatError(f"{source}: cannot read external data: {e}") from e


def _raise_for_unknown_ops(proto: onnx.ModelProto, opset: int, source: str) -> None:
    """A failed upgrade is often an op ONNX itself no longer knows: name it as unsupported."""
    from .importer import describe
    from .ops import SUPPORTED_OPS
    for node in proto.graph.node:
        if node.op_type not in SUPPORTED_OPS and not onnx.defs.has(node.op_type, node.domain):
            raise UnsupportedOpError(f"{source}: {describe(node)}: op {quote_name(node.op_type)} is not supported "
                                     f"(it has no "
                                     f"schema in the installed onnx, so the opset {opset} model cannot be upgraded)")


def _upgrade(proto: onnx.ModelProto, opset: int, source: str) -> onnx.ModelProto:
    from onnx import version_converter
    try:
        return version_converter.convert_version(proto, MIN_OPSET)
    except Exception as e:  # noqa: BLE001 - the converter raises RuntimeError, ValidationError, ...
        _raise_for_unknown_ops(proto, opset, source)
        message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelFormatError(f"{source}: the model uses opset {opset}; quantir imports opset {MIN_OPSET} and "
                               f"newer, and ONNX's version converter failed to upgrade it: {message}") from e
