# durastate — every target bootstraps what it needs on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
NODE_STAMP := node_modules/.installed

.PHONY: demo test lint typecheck unit bench synth layer local clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[dev,bench]"
	touch $(STAMP)

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

## demo: run the example order workflow on the embedded default (SQLite), through the CLI
demo: $(STAMP)
	$(PY) -m durastate.demo

## test: lint, type-check and run the whole test suite
test: $(STAMP) $(NODE_STAMP) lint typecheck unit

lint: $(STAMP)
	$(VENV)/bin/ruff check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP) $(NODE_STAMP)
	PATH="$(CURDIR)/node_modules/.bin:$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q $(PYTEST_ARGS)

## bench: run the benchmarks and write bench/results/
bench: $(STAMP)
	$(PY) -m bench

## layer: build the Lambda layer (engine + runtime deps for the Lambda platform), cached under layers/build
layer: $(STAMP)
	$(PY) layers/build_layer.py

## synth: synthesize the CDK app (offline)
synth: $(STAMP) $(NODE_STAMP)
	PATH="$(CURDIR)/node_modules/.bin:$(CURDIR)/$(VENV)/bin:$$PATH" npx cdk synth --quiet

## local: the no-Docker local stack (moto server + the three handlers)
local: synth
	$(VENV)/bin/durastate local

clean:
	rm -rf $(VENV) node_modules cdk.out layers/build .mypy_cache .ruff_cache .pytest_cache
