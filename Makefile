# The two commands a new user types: `make up` and `make test`. Everything else is set-up they need.
SHELL := /bin/bash
UV_VERSION := 0.13.8
# uv from PyPI: the one on PATH, else the one pip installs into python3 (see the `uv` target).
UV ?= $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
PYTEST_ARGS ?=

.PHONY: up down test check lint setup uv deps jars browser mosquitto clean

up: setup ## Run the whole platform with a simulated fleet (Ctrl-C stops it)
	$(UV) run hearth up

down: ## Stop a running `make up`
	$(UV) run hearth down

test: setup lint ## Install everything and run every test
	$(UV) run pytest $(PYTEST_ARGS)

check: setup lint ## The inner loop: the lint above and the unit tests (no servers)
	$(UV) run pytest tests/unit -q $(PYTEST_ARGS)

lint: setup ## ruff, mypy (strict on every shipped package and the whole tests tree) and the import-linter contracts
	$(UV) run ruff check .
	$(UV) run mypy
	$(UV) run lint-imports

setup: uv deps jars browser mosquitto

uv:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet "uv==$(UV_VERSION)"

# Bytecode compiled once at install: a Python with PYTHONDONTWRITEBYTECODE set (as on these machines)
# otherwise compiles every import again in every process it starts (measured: importing the query API and
# the actor took 3.4 s of CPU without .pyc files, 1.3 s with), and the tests and `make up` start many.
deps:
	$(UV) sync --frozen --compile-bytecode
	$(UV) run python -m compileall -q -j0 shared/src services/*/src analytics/src cli/src devstack/src simulator/src benchmarks/src sdk/src >/dev/null

jars: ## Kafka (and Spark's Kafka connector) jars from Maven Central, fetched once into .hearth/
	$(UV) run python -c "from hearth_devstack.kafka import ensure_kafka_jars; ensure_kafka_jars()"

mosquitto: ## Debian's Mosquitto (the MQTT broker devices connect to), its clients, and openssl (its TLS certificate)
	@command -v mosquitto >/dev/null || test -x /usr/sbin/mosquitto || (apt-get update && apt-get install -y mosquitto mosquitto-clients openssl)
	@command -v mosquitto_pub >/dev/null || (apt-get update && apt-get install -y mosquitto-clients)
	@command -v openssl >/dev/null || (apt-get update && apt-get install -y openssl)

browser: ## Debian's Chromium for the live page's browser test (Playwright drives it; it never downloads one)
	@command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

clean: ## Remove the local stack's data, logs and caches
	rm -rf .hearth .pytest_cache .mypy_cache .ruff_cache
