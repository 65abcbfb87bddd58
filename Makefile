# loopwatch — the commands the README names.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python

.PHONY: help lock venv run test test-unit lint typecheck format bench bench-worker kafka-up kafka-down kafka-logs schema clean

help:
	@echo "make run        the live demo: broker, worker and a small simulated fleet"
	@echo "make test       lint, types and the whole test suite (starts a local Kafka when needed)"
	@echo "make bench      the core and scan benchmarks (ops/bench/); make bench-worker needs a broker"
	@echo "make kafka-up | kafka-down | kafka-logs   the local Apache Kafka broker"

# The venv is rebuilt when pyproject.toml or the pinned versions change.
CONSTRAINTS := ops/constraints.txt
$(BIN)/loopwatch: pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c $(CONSTRAINTS) -e '.[dev,rocksdb]'
	@touch $@

# Re-pins every dependency to the newest versions pyproject.toml allows (then run make test).
lock:
	rm -rf .cache/lock-venv
	$(PYTHON) -m venv .cache/lock-venv
	.cache/lock-venv/bin/pip install --quiet --upgrade pip
	.cache/lock-venv/bin/pip install --quiet -e '.[dev,rocksdb]'
	{ sed -n '1,2p' $(CONSTRAINTS); .cache/lock-venv/bin/pip freeze --exclude-editable | grep -v '^-e'; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)
	rm -rf .cache/lock-venv

# mypy checks the package under its installed names (`loopwatch.models`, ...): a tree of
# links in .cache/typecheck, made here and never committed (the repository holds no
# symlink, so that sdists and Windows clones work); pyproject's [tool.mypy] reads it.
TYPECHECK_TREE := .cache/typecheck/loopwatch
$(TYPECHECK_TREE)/__init__.py:
	mkdir -p $(TYPECHECK_TREE)
	ln -sfn ../../../models $(TYPECHECK_TREE)/models
	ln -sfn ../../../streams $(TYPECHECK_TREE)/streams
	ln -sfn ../../../loopwatch/py.typed $(TYPECHECK_TREE)/py.typed
	ln -sfn ../../../loopwatch/__init__.py $@

venv: $(BIN)/loopwatch $(TYPECHECK_TREE)/__init__.py

lint: venv
	$(BIN)/ruff check models streams tests ops examples
	$(BIN)/ruff format --check models streams tests ops examples

typecheck: venv
	$(BIN)/mypy

format: venv
	$(BIN)/ruff format models streams tests ops examples
	$(BIN)/ruff check --fix models streams tests ops examples

test-unit: venv
	$(BIN)/pytest tests/unit

test: lint typecheck
	$(BIN)/pytest

# The main job from one command: broker (unless KAFKA_BOOTSTRAP_SERVERS), worker, fleet.
run: venv
	$(BIN)/loopwatch demo --keep-dashboard

# Benchmarks print figures; they are not tests. The worker bench needs a broker
# (KAFKA_BOOTSTRAP_SERVERS, or `make kafka-up` first).
bench: venv
	$(PY) ops/bench/core_bench.py
	$(PY) ops/bench/scan_bench.py

bench-worker: venv
	KAFKA_BOOTSTRAP_SERVERS=$${KAFKA_BOOTSTRAP_SERVERS:-127.0.0.1:9092} $(PY) ops/bench/worker_bench.py

schema: venv
	$(BIN)/loopwatch schema --out schema

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

# The local single-node Apache Kafka (jars from Maven Central, cached in .cache/kafka).
# KAFKA_PORT picks another port; see ops/kafka/kafka.sh --help.
kafka-up:
	ops/kafka/kafka.sh up

kafka-down:
	ops/kafka/kafka.sh down

kafka-logs:
	ops/kafka/kafka.sh logs
