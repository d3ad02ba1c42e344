# The two commands a new user types: `make up` and `make test`. Everything else is set-up they need.
SHELL := /bin/bash
UV_VERSION := 0.13.8
# uv from PyPI: the one on PATH, else the one pip installs into python3 (see the `uv` target).
UV ?= $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
PYTEST_ARGS ?=
# pytest-xdist workers for `make test` (0: one process). Each worker has its own servers (about 2 GB of
# memory); the Spark, browser and chaos tests keep to one worker each (tests/support/distribution.py).
# Measured on this 2-core machine, fresh clones, quiet: one process 19 min 59 s (dcffc5d, cores 53 %
# busy: the tests mostly wait); 2 workers 12 min 5 s (1,277 passed; c1-only JIT for the tests' JVMs,
# tests/conftest.py; cores 79 % busy), where the same 2 workers took 13 min 30 s before that JIT change;
# 11 min 34 s, 11 min 38 s and 11 min 28 s (1,285 passed, 020f22a, 0ff4af8 twice; cores 79 % busy) after
# waits that poll less often, the tests' Spark without generated code and shorter steady stretches in the
# chaos tests. On the Intel Xeon host of 2026-11-30 (fresh clones, pytest's own time): 19 min 49 s and
# 21 min 6 s (1,338 passed); 16 min 37 s with test_archive_s3 in the shared Spark session (1e552a1); 13 min
# 44 s (1,339 passed, 7c52e14) once an idle device actor stopped fetching every 20 ms (the tests' brokers
# 460 -> 307 CPU-s over the run, the device actors 209 -> 93), with 2 workers, the cores 82 % busy; with 3
# workers 11 min 20 s and 11 min 12 s (1,339 passed, cores 93 % busy; the tests take a fifth longer each, and the
# waits between their steps overlap): 3 from then on.
WORKERS ?= 3

.PHONY: up down test check lint setup uv deps jars s3a-jars browser mosquitto clean

up: setup ## Run the whole platform with a simulated fleet (Ctrl-C stops it)
	$(UV) run hearth up

down: ## Stop a running `make up`
	$(UV) run hearth down

test: setup s3a-jars lint ## Install everything and run every test, in parallel (WORKERS pytest-xdist workers)
	$(UV) run pytest -n $(WORKERS) $(PYTEST_ARGS)

check: setup lint ## The inner loop: the lint above and the unit tests (no servers)
	$(UV) run pytest tests/unit -q -n 2 $(PYTEST_ARGS)

lint: setup ## ruff (lint and format), mypy (strict on every shipped package and the whole tests tree) and the import-linter contracts
	$(UV) run ruff check .
	$(UV) run ruff format --check .
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

jars: ## Kafka's jars (and its class-data archive) and Spark's Kafka connector, fetched once into .hearth/
	$(UV) run python -c "from hearth_devstack.servers.kafka import prepare_broker; prepare_broker()"
	$(UV) run python -c "from hearth_analytics.settings import AnalyticsSettings; from hearth_analytics.spark import ensure_kafka_connector; ensure_kafka_connector(AnalyticsSettings())"

s3a-jars: ## Spark's s3a connector (hadoop-aws and the AWS SDK, about 690 MB) for the tests' Spark session, once into .hearth/
	$(UV) run python -c "from hearth_analytics.settings import AnalyticsSettings; from hearth_analytics.spark import ensure_s3a_connector; ensure_s3a_connector(AnalyticsSettings())"

mosquitto: ## Debian's Mosquitto (the MQTT broker devices connect to), its clients, and openssl (its TLS certificate)
	@command -v mosquitto >/dev/null || test -x /usr/sbin/mosquitto || (apt-get update && apt-get install -y mosquitto mosquitto-clients openssl)
	@command -v mosquitto_pub >/dev/null || (apt-get update && apt-get install -y mosquitto-clients)
	@command -v openssl >/dev/null || (apt-get update && apt-get install -y openssl)

browser: ## Debian's Chromium for the live page's browser test (Playwright drives it; it never downloads one)
	@command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)

clean: ## Remove the local stack's data, logs and caches
	rm -rf .hearth .pytest_cache .mypy_cache .ruff_cache
