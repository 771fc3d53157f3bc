#!/usr/bin/env python3
"""Write models/imagenet_classes.txt: the 1000 ImageNet-1k class names, one a line, index order.

Source: the ``timm`` wheel, which ships ``timm/data/_info/imagenet_synsets.txt`` (the 1000
WordNet ids in the order every ImageNet-1k classifier uses) and
``imagenet_synset_to_lemma.txt`` (id -> "tabby, tabby cat"). timm is read as files, not
imported (importing it needs torchvision), so ``pip install --no-deps timm==1.0.29`` is enough.
No other installed package (torch, the efficientnet packages, scikit-learn, ...) ships the
names. ``quantir.datasets.photos.imagenet_class_names`` reads timm's files when timm is
installed and this committed copy otherwise. Takes under a second.

    python scripts/make_imagenet_classes.py [OUT]     # default models/imagenet_classes.txt
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from quantir.datasets.photos import _names_from_timm, _timm_info_dir  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", nargs="?", type=Path, default=REPO / "models" / "imagenet_classes.txt")
    args = p.parse_args(argv)
    info = _timm_info_dir()
    if info is None:
        sys.exit("timm is not installed; `pip install --no-deps timm==1.0.29` ships the ImageNet class names")
    names = _names_from_timm(info)
    if len(names) != 1000:
        sys.exit(f"{info}: expected 1000 ImageNet-1k classes, found {len(names)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text("".join(n + "\n" for n in names), encoding="utf-8")
    os.replace(tmp, args.out)
    print(f"wrote {args.out}: {len(names)} names from {info}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
