#!/usr/bin/env python3
"""Write the MiniLM calibration and evaluation sentences as .npz files for `quantir quantize --data`.

Sentences come from Python's help texts (``quantir.datasets.sentences``), tokenized by the pure-Python
WordPiece (``quantir.datasets.wordpiece``) with the model's ``vocab.txt``. Every sentence stays at
its own token length, without padding: one .npz per length (``len_008.npz`` ...), each holding
``input_ids``, ``attention_mask`` (all ones) and ``token_type_ids`` as int64 ``[n, length]`` (an
.npz holds one sample size, and `quantir quantize` takes several files for a model with dynamic
dims). Beside them, ``sentences.json`` maps each file's rows back to the sentences.

    python scripts/minilm_data.py                       # -> .cache/minilm_data/{calibration,evaluation}/
    quantir quantize .cache/models/minilm_l6.onnx --data .cache/minilm_data/calibration/*.npz -o out/minilm.onnx
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from quantir.datasets import sentences as S  # noqa: E402
from quantir.datasets.wordpiece import WordPiece, batches_by_length  # noqa: E402


def write_split(tokenizer: WordPiece, texts: tuple[str, ...], out: Path, max_length: int) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("len_*.npz"):   # a rerun with other sentences must not leave stale lengths
        old.unlink()
    index: dict[str, list[str]] = {}
    paths = []
    for idx, feeds in batches_by_length(tokenizer, texts, max_length):
        path = out / f"len_{feeds['input_ids'].shape[1]:03d}.npz"
        np.savez(path, **feeds)
        index[path.name] = [texts[i] for i in idx]
        paths.append(path)
    (out / "sentences.json").write_text(json.dumps(index, indent=1, ensure_ascii=False) + "\n")
    return paths


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vocab", type=Path, default=REPO / ".cache/models/minilm_l6.vocab.txt")
    p.add_argument("--out", type=Path, default=REPO / ".cache/minilm_data")
    p.add_argument("--max-length", type=int, default=128, help="tokens per sentence, [CLS] and [SEP] included")
    args = p.parse_args()
    tokenizer = WordPiece.from_file(args.vocab)
    for name, texts in (("calibration", S.calibration_sentences()), ("evaluation", S.evaluation_sentences())):
        paths = write_split(tokenizer, texts, args.out / name, args.max_length)
        print(f"{name}: {len(texts)} sentences in {len(paths)} files (one per token length) under {args.out / name}")


if __name__ == "__main__":
    main()
