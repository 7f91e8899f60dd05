# chatseek — `make help` lists the targets.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PACKAGES := libs/chatseek-proto libs/chatseek-core services/ingest services/unitize \
	services/lexical services/embed services/vector services/fusion services/gateway \
	libs/chatseek-testing
TEST_PATHS := libs/chatseek-core/tests services/*/tests tests
MODULES := chatseek_core chatseek_ingest chatseek_unitize chatseek_lexical chatseek_embed \
	chatseek_vector chatseek_fusion chatseek_gateway chatseek_testing
STAMP := $(VENV)/.installed
export CHATSEEK_HOME ?= $(CURDIR)/.chatseek

.DEFAULT_GOAL := help
.PHONY: help install proto proto-check fmt lint typecheck test test-long demo bench \
	bench-full bench-meaning eval train-linker up down e2e run-local embed-native clean ocr

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "}; {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}'

$(STAMP): requirements/lock.txt $(addsuffix /pyproject.toml,$(PACKAGES))
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -r requirements/lock.txt
	$(PIP) install -q --no-deps $(addprefix -e ,$(PACKAGES))
	touch $@

install: $(STAMP) ocr ## Create .venv: torch 2.13.0 (CPU) first, then the lock, then every package editable

ocr: ## Install Tesseract with Russian and English data where the OS allows (best effort)
	@command -v tesseract >/dev/null && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			tesseract-ocr tesseract-ocr-rus tesseract-ocr-eng >/dev/null) \
			|| echo "tesseract could not be installed; OCR tests will skip"; \
	else echo "tesseract not installed (needs root + apt-get); OCR tests will skip"; fi

proto: $(STAMP) ## Regenerate libs/chatseek-proto from proto/
	PYTHON=$(PY) tools/gen_proto.sh

proto-check: proto ## Fail when the committed generated code is stale
	git diff --exit-code -- libs/chatseek-proto

fmt: $(STAMP) ## Format the code
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

lint: $(STAMP) ## ruff check + format check + import contracts
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP) ## mypy --strict over every package, eval and bench
	$(VENV)/bin/mypy $(addprefix -p ,$(MODULES)) -p eval -p bench

test: install ## Run the test suite (no network, no Docker, no model download)
	$(VENV)/bin/pytest -q $(TEST_PATHS)

test-long: install ## Long reliability tests (fault injection, load)
	$(VENV)/bin/pytest -q -m long $(TEST_PATHS)

demo: install ## Bring up the local stack on the sample export and run every kind of search
	$(PY) -m chatseek_gateway.demo

bench: install ## Speed and memory benchmarks at the 100k scale (report under bench/results)
	$(PY) -m bench.run --scale 100k

bench-full: install ## Benchmarks at the 1M scale too
	$(PY) -m bench.run --scale 1m

bench-meaning: install ## A 100k archive on the default model until searchable by meaning (15-50 min)
	$(PY) -m bench.run --only meaning --scale 100k

eval: install ## Retrieval and reconstruction quality on ../shared/eval (report under eval/results)
	$(PY) -m eval.run

train-linker: install ## Fit the conversation-link model on IRC train, choose it on dev, ship its weights
	$(PY) -m eval.train_linker --write

run-local: install ## Start every service as a local process (chatseek stack up)
	$(VENV)/bin/chatseek stack up

up: ## Build and start the container stack
	docker compose up -d --build

down: ## Stop the container stack
	docker compose down

e2e: install ## Build and run the container stack for real, then test it end to end (deploy/e2e)
	VENV=$(VENV) deploy/e2e/run.sh

embed-native: install ## Run the embed service natively on this host (Metal on a Mac)
	CHATSEEK_LISTEN=0.0.0.0:47104 $(PY) -m chatseek_embed

clean: ## Stop the local stack and remove caches (keeps your data)
	-$(VENV)/bin/chatseek stack down
	find . -name __pycache__ -prune -exec rm -rf {} +
	rm -rf .mypy_cache .ruff_cache .pytest_cache
