# Two commands a fresh machine needs (see README.md):
#   make test                 install into .venv (CPU torch) and run the tests
#   make parse TEXT="..."     print the dependency tree of a sentence
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
TEXT ?= A man wearing a helmet jumps on his bike near a beach.

.PHONY: install test lint parse bench-parse score-parser train-parser

$(BIN)/groundsearch: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# the CPU wheel first, so nothing pulls a CUDA build
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/groundsearch

test: install
	$(BIN)/ruff check .
	$(BIN)/pytest -q

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

parse: install
	$(BIN)/groundsearch parse "$(TEXT)"

train-parser: install
	$(BIN)/groundsearch train-parser

score-parser: install
	$(BIN)/groundsearch score-parser

bench-parse: install
	$(BIN)/python bench/parse_throughput.py
