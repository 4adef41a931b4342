# nht-book: `make book` builds the book into _build/html (every chapter executed at scale cpu, or $NHT_SCALE);
# `make test` runs the library tests and the end-to-end book test (smoke scale, headless Chromium).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
VENV_STAMP := $(VENV)/.nht-installed
NODE_STAMP := node_modules/.nht-installed
BOOK_FLAGS ?= -n -W --keep-going
# OpenMP threads that busy-wait are 10-25x slower when anything else runs on the 2 cores; sleeping waits are not.
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: all venv book test clean distclean

all: book

venv: $(VENV_STAMP) $(NODE_STAMP)

# Python environment: exact pins from requirements.txt, then nhtlib itself (editable, no dependency resolution).
$(VENV_STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -r requirements.txt
	$(PY) -m pip install -e . --no-deps
	touch $@

# MathJax 3 for offline math rendering (served from node_modules/mathjax/es5 by the book build).
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# The book, every chapter executed at the default scale (cpu) unless NHT_SCALE is set in the environment.
book: venv
	$(VENV)/bin/jupyter-book build . $(BOOK_FLAGS)
	@echo "open _build/html/index.html"

test: venv
	$(PY) -m pytest -q --durations=10 tests

clean:
	rm -rf _build .jupyter_cache .pytest_cache
	find . -path ./$(VENV) -prune -o -path ./node_modules -prune -o -name __pycache__ -type d -print0 | xargs -0 rm -rf

# Also the results and run cache, the Python environment and MathJax.
distclean: clean
	rm -rf results $(VENV) node_modules *.egg-info
