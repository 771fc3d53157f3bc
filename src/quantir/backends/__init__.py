"""Backends: serialise quantir modules into other formats (TFLite flatbuffers, ONNX).

Backends sit at the top of the layer stack (docs/design.md) and are the only modules,
together with the frontends, that know a file format. Each backend owns its own schema
layer; none imports a runtime of the target format (LiteRT, ONNX Runtime) at module
level, since those are verification oracles, not dependencies of the core.
"""
