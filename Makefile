# Set-up is part of every target: each creates .venv when missing and installs the pinned
# dependencies, so `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: venv demo test bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,oracle,data]'
	@touch $(STAMP)

venv: $(STAMP)

demo: venv
	$(PY) demo/demo.py

test: venv
	$(PY) -m pytest -q -m "not slow"

bench: venv
	$(PY) -m pytest -q -m slow
	$(PY) bench/fuzz_types.py --n 100000
	$(PY) bench/fuzz_text.py --n 100000

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis bench/results
