# The README's two commands: `make book` and `make test`. Both set everything up themselves.
SHELL := /bin/bash
.DELETE_ON_ERROR:
.PHONY: book test venv lab clean mutation replay

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
MATHJAX_VERSION := 3.2.2
MATHJAX := book/_static/mathjax/tex-mml-chtml.js
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Data: a folder with the official files if one is beside the checkout (as on CI), else the
# loaders' own defaults (~/.cache/ntk_core, download, embedded MNIST subset).
SHARED_DATA := $(abspath ../shared/data)
ifneq ($(wildcard $(SHARED_DATA)/mnist),)
export NTK_CORE_DATA ?= $(SHARED_DATA)
endif
export NTK_BOOK_PROFILE ?= quick
# Experiment results are cached by a hash of config and code; the book keeps its own cache in _build.
export NTK_CORE_CACHE ?= $(CURDIR)/_build/ntk_cache

BOOK_SOURCES := _config.yml _toc.yml $(wildcard book/*.md book/api/*.md book/*.bib book/*.svg book/_ext/*.py) $(wildcard ntk_core/*.py ntk_core/*/*.py ntk_core/*/*/*.py)

## book: build the HTML book, executing every chapter (strict: warnings and cell errors fail)
book: _build/html/index.html
	@echo "The book is built: open $(CURDIR)/_build/html/index.html"

_build/html/index.html: $(STAMP) $(MATHJAX) $(BOOK_SOURCES)
	rm -rf _build/html _build/.doctrees _build/jupyter_execute
	$(VENV)/bin/jupyter-book build . --builder html -W -n --keep-going
	test -f $@ && touch $@

## test: lint and format check (ruff), type-check ntk_core, run the docstrings' examples, then the whole
## test suite (builds the book first: the browser test reads it)
test: $(STAMP) $(CHROMIUM) book
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(PY) -m pytest -q --doctest-modules ntk_core
	$(PY) -m pytest

## replay: re-run one whole unit of every unit class of every medium record and compare it with the record (about
## 1,900 s of recorded compute; `make test` replays the first epochs of the units with per-epoch rows)
replay: $(STAMP)
	NTK_REPLAY_WHOLE=1 $(PY) -m pytest -q -s tests/test_recorded.py -k test_recorded_result_replays

## mutation: plant each bug of mutation/mutants.py in a copy and run the fast tests (slow; not part of `make test`)
mutation: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) mutation/run.py

venv: $(STAMP)

## lab: open the chapters as notebooks in JupyterLab (jupytext), running against the installed ntk_core
# Every book/*.md opens as a notebook on a double click (the overrides make jupytext's viewer the
# default for Markdown and MyST); saving writes the .md back, outputs are not stored in it.
# LAB_DIR is the folder it serves (default: the checkout); LAB_ARGS passes options to `jupyter lab`,
# e.g. make lab LAB_ARGS="--port=8899 --no-browser".
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json
LAB_DIR ?= $(CURDIR)
LAB_ARGS ?=
lab: $(STAMP) $(LAB_OVERRIDES)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir="$(LAB_DIR)" $(if $(SUDO),,--allow-root) $(LAB_ARGS)

$(LAB_OVERRIDES): $(STAMP)
	mkdir -p $(dir $@)
	printf '%s\n' '{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}}}' > $@

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -r requirements.txt
	$(PY) -m pip install --no-deps -e .
	touch $@

# MathJax 3 served from the book itself, so that equations typeset with no network.
$(MATHJAX):
	command -v npm >/dev/null || ($(SUDO) apt-get update && $(SUDO) apt-get install -y npm)
	rm -rf .build/mathjax book/_static/mathjax book/_static/.mathjax.tmp
	mkdir -p .build/mathjax book/_static
	npm install --prefix .build/mathjax --no-save --no-audit --no-fund --loglevel=error mathjax@$(MATHJAX_VERSION)
	cp -r .build/mathjax/node_modules/mathjax/es5 book/_static/.mathjax.tmp
	mv book/_static/.mathjax.tmp book/_static/mathjax

# Headless Chromium for the browser test (Debian package).
$(CHROMIUM):
	$(SUDO) apt-get update
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y chromium

clean:
	rm -rf _build .build book/_static/mathjax .pytest_cache .hypothesis
