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

# Python environment: the lock (every package, exact version, sha256-checked; README "The environment and its
# lock"), then nhtlib itself, editable, resolving nothing, built with the locked setuptools (no unpinned download).
# The lock is compiled for Python >= 3.11.5 (its soupsieve needs 3.11.5): an older interpreter is refused up front.
$(VENV_STAMP): requirements.lock pyproject.toml
	test -x $(PY) || { $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11, 5))' \
	  || { echo "error: $(PYTHON) is $$($(PYTHON) -V 2>&1); requirements.lock needs 3.11.5 or later" \
	       "(choose another: make PYTHON=python3.11 ...)" >&2; exit 1; }; \
	  $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install --require-hashes -r requirements.lock
	$(PY) -m pip install -e . --no-deps --no-build-isolation
	touch $@

# MathJax 3 for offline math rendering (served from node_modules/mathjax/es5 by the book build).
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# The book, every chapter executed at the default scale (cpu) unless NHT_SCALE is set in the environment: the
# chapters one at a time with progress (chapters whose page would not change are skipped), a table of wall time per
# chapter, then the site from the executed notebooks (nhtlib/cli/build.py).
book: venv
	$(PY) -m nhtlib build --sphinx-flags "$(BOOK_FLAGS)"

# Every chapter at smoke scale as nbval items (one per cell: a failure names the chapter and the cell), then the
# library tests and the end-to-end book test, which builds the site from those executions (conftest.py).
test: venv
	$(PY) -m pytest -q --durations=10 --nbval-lax --nbval-current-env notebooks tests

clean:
	rm -rf _build .jupyter_cache .pytest_cache
	find . -path ./$(VENV) -prune -o -path ./node_modules -prune -o -name __pycache__ -type d -print0 | xargs -0 rm -rf

# Also the results and run cache, the Python environment and MathJax.
distclean: clean
	rm -rf results $(VENV) node_modules *.egg-info
