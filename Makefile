# tidemark: `make demo` runs the main job, `make test` runs the tests.
# Both create .venv and install the package on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST := $(BIN)/python -m pytest

.PHONY: test demo lint test-slow test-flink bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

test: $(STAMP)
	$(PYTEST) -q -m "not slow and not flink"

test-slow: $(STAMP)
	$(PYTEST) -q -m "slow"

test-flink: $(STAMP)
	bash tools/flinkref/setup.sh
	$(PYTEST) -q -m "flink" tests/flink

demo: $(STAMP)
	$(BIN)/tidemark demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/engine_throughput.py

clean:
	rm -rf $(VENV) build dist *.egg-info
