"""All three modes on a Spark Connect session, as a script (a Connect client and a classic
session do not share a process well): BATCH and replay on random differential scenarios,
a stream written by batch id through ``write_outputs`` on a session left with Spark's
default state store, windows chained on a stream, and a bounded replay whose outputs
are read from one kept run and written by ``write_outputs``, and a Dataflow-triggered
window's panes in BATCH, a replay and a stream, real data's values (NaN, keys:
``value_cases``) in a session zone that is not UTC, and the newer window functions
(``aggregate_vectorized``, dynamic-gap sessions keeping all their elements). Prints one
JSON line: the failures found (an empty list when all modes equal the engine harness).

Run by tests/spark/runtime/test_connect.py; by hand: ``python tests/support/connect_check.py <workdir>``.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import search_path  # noqa: E402

search_path.put_on_path()  # the test modules this script imports, by name

import differential as d  # noqa: E402


def connect_session() -> Any:
    from pyspark.sql import SparkSession

    from tidemark.spark.runtime._java import ensure_java

    ensure_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # The local Connect server's Python processes (the workers, and the driver-side runner
    # a transformWithStateInPandas query starts) unpickle the functions of the test
    # modules by reference: they need the tests' folders on their path, as a user's own
    # modules do (docs/deploying.md).
    search_path.put_on_path()
    return (
        SparkSession.builder.remote("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )


def bounded(spark: Any, seed: int, count: int) -> list[str]:
    failures = []
    chosen = [d.random_scenario(random.Random(seed), i) for i in range(count)]
    for replay in (False, True):
        reference = d.reference_replay if replay else d.reference_batch
        for scenario, got in zip(chosen, d.run_spark(spark, chosen, replay)):
            diff = d.describe_difference(scenario, reference(scenario), got)
            if diff:
                failures.append(("replay " if replay else "BATCH ") + diff)
    return failures


def _parquet_sink(root: str, name: str) -> Any:
    def sink(df: Any, batch_id: int) -> None:  # runs next to the server, not here
        df.write.mode("overwrite").parquet(f"{root}/{name}/batch={batch_id}")

    return sink


def _read(spark: Any, path: Path) -> list[Any]:
    return spark.read.parquet(str(path)).collect() if path.exists() else []


def streaming(spark: Any, workdir: Path, seed: int) -> list[str]:
    """One pipeline with a late-data side output, sinks written by batch id."""
    from tidemark.spark.runtime.preflight import STATE_STORE_PROVIDER

    rng = random.Random(seed)
    scenario: dict[str, Any] = {}
    while not scenario.get("side_output") or scenario["function"] != "process":
        [scenario], batches = d.random_streaming_scenarios(rng, 1)
    input_dir, out = workdir / "in", workdir / "out"
    input_dir.mkdir(parents=True)
    provider = spark.conf.get(STATE_STORE_PROVIDER, None)
    df = spark.readStream.schema(d.SCHEMA).option("maxFilesPerTrigger", 1).json(str(input_dir))
    result = d.spark_pipeline(scenario, df, replay=False)
    sinks = {
        "main": _parquet_sink(str(out), "main"),
        d.LATE: _parquet_sink(str(out), "late"),
        "__late_records_dropped": _parquet_sink(str(out), "dropped"),
    }
    query = result.write_outputs(sinks, str(workdir / "checkpoint"))
    try:
        for index, rows in enumerate(batches):
            d._write_batch_file(input_dir, index, rows)
            query.processAllAvailable()
        records_in = _records_in(query.recentProgress)
    finally:
        query.stop()
    want = d.reference_streaming(scenario, batches)
    got = {
        "main": Counter(r["result"] for r in _read(spark, out / "main")),
        "late": Counter(d.normal(list(r)[:5]) for r in _read(spark, out / "late")),
        "dropped": sum(r[0] for r in _read(spark, out / "dropped")),
    }
    expected = {
        "main": Counter(v for (v, _, _), n in want["main"].items() for _ in range(n)),
        "late": Counter(v for (v, _), n in want["late"].items() for _ in range(n)),
        "dropped": want["dropped"],
    }
    failures = []
    if got != expected:
        failures.append(f"streaming {scenario['name']}: expected {expected}, got {got}")
    fed = sum(1 for rows in batches for row in rows if row != d.END_ROW)  # a marker is no element
    if records_in != fed:
        failures.append(f"streaming metrics: {fed} rows fed, progress reports {records_in} in")
    if spark.conf.get(STATE_STORE_PROVIDER, None) != provider:
        failures.append("streaming: the session's state store setting was not restored")
    return failures


def _records_in(progress: list[Any]) -> int | None:
    """``num_records_in`` summed over the micro-batches' ``observedMetrics["tidemark"]``
    (None when a micro-batch with input rows has none)."""
    from tidemark.spark.protocol.figures import metrics_of

    total = 0
    for p in progress:
        figures = metrics_of(p)
        if figures is None:
            if p["numInputRows"]:
                return None
            continue
        total += figures["num_records_in"]
    return total


def chained(spark: Any, workdir: Path) -> list[str]:
    """Flink's consecutive windowed operations (per-user sums, then the top two over all
    users) on a stream, in one query, as ``tests/spark/streaming/test_streaming_chain.py`` runs them."""
    from test_streaming_chain import (
        DOCS_BATCHES,
        DOCS_TOP_TWO,
        INPUT_SCHEMA,
        _docs_chain,
        write_batches,
    )

    import tidemark as tm

    write_batches(workdir / "chain-in", DOCS_BATCHES)
    source = (
        spark.readStream.schema(INPUT_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(workdir / "chain-in"))
    )
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(1000)
    stream = tm.from_dataframe(
        source, timestamp="ts", watermark_strategy=strategy, shift_spark_clock=True
    )  # its first watermark is before the epoch, as the classic test's (shifted there too)
    top = _docs_chain(stream)
    out = workdir / "chain-out"
    query = top.write_outputs(
        {"main": _parquet_sink(str(out), "main")},
        str(workdir / "chain-checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(600)
    got = sorted(tuple(r)[:5] for r in _read(spark, out / "main"))
    # the harness chain's, as test_flink_docs_keyed_sum_then_top_k_over_all
    return [] if got == DOCS_TOP_TWO else [f"chain: expected {DOCS_TOP_TWO}, got {got}"]


# the replay below: 5 elements in, 2 results, elements 1 and 3 late to the side output
METRICS_OF_KEPT = {
    "num_records_in": 5,
    "num_records_out": 2,
    "num_late_records_side_output": 2,
    "num_late_records_dropped": 0,
}


def bounded_once(spark: Any) -> list[str]:
    """A replay's results, late side output and dropped count from one kept run (a
    persisted frame over Connect), then ``write_outputs`` and ``unpersist``."""
    import tidemark as tm

    rows = [("a", 20, 0), ("a", 25, 1), ("b", 21, 2), ("a", 1, 3), ("b", 3, 4)]
    df = spark.createDataFrame(rows, "k string, ts long, arrival long")
    late = tm.OutputTag("late")
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(0)
    windowed = (
        tm.from_dataframe(df, timestamp="ts", order_by="arrival", watermark_strategy=strategy)
        .key_by("k")
        .window(tm.TumblingEventTimeWindows.of(10))
    )
    kept = windowed.side_output_late_data(late).reduce(lambda a, b: a)
    dropping = windowed.reduce(lambda a, b: a)
    got = {
        "main": sorted(tuple(r) for r in kept.to_dataframe().collect()),
        "late": sorted(r.ts for r in kept.get_side_output(late).to_dataframe().collect()),
        "kept": kept.combined_dataframe().storageLevel.useMemory,
        "dropped": dropping.num_late_records_dropped(),
        "metrics": kept.metrics(),
    }
    written: dict[str, Any] = {}
    dropping.write_outputs(
        {"__late_records_dropped": lambda d, b: written.update(dropped=(b, d.collect()[0][0]))}
    )
    got["written"] = written
    got["released"] = not dropping.combined_dataframe().storageLevel.useMemory
    kept.unpersist()
    want = {
        "main": [("a", 20, 0), ("b", 21, 2)],
        "late": [1, 3],
        "kept": True,
        "dropped": 2,
        "metrics": METRICS_OF_KEPT,
        "written": {"dropped": (0, 2)},
        "released": True,
    }
    return [] if got == want else [f"bounded once: expected {want}, got {got}"]


def panes(spark: Any, workdir: Path) -> list[str]:
    """A Dataflow-triggered window's panes in BATCH, a replay and a stream, as
    ``tests/spark/api/test_spark_panes.py`` runs them on a classic session."""
    from test_spark_panes import (
        BATCHES,
        ROWS,
        SCHEMA,
        pipeline,
        reference_batch,
        reference_replay,
        reference_stream,
        write_batches,
    )

    from tidemark.panes import AccumulationMode

    retracting = AccumulationMode.RETRACTING
    df = spark.createDataFrame(ROWS, SCHEMA)
    got = {
        "batch": Counter(
            tuple(r) for r in pipeline(df, "sum", retracting).to_dataframe().collect()
        ),
        "replay": Counter(
            tuple(r) for r in pipeline(df, "sum", retracting, replay=True).to_dataframe().collect()
        ),
    }
    write_batches(workdir / "panes-in", BATCHES)
    source = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(workdir / "panes-in"))
    )
    out = workdir / "panes-out"
    query = pipeline(source, "sum", retracting).write_outputs(
        {"main": _parquet_sink(str(out), "main")},
        str(workdir / "panes-checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(600)
    got["streaming"] = Counter(tuple(r)[:-1] for r in _read(spark, out / "main"))  # no batch=
    want = {
        "batch": reference_batch("sum", retracting),
        "replay": reference_replay("sum", retracting),
        "streaming": reference_stream("sum", retracting, BATCHES),
    }
    return [] if got == want else [f"panes: expected {want}, got {got}"]


def sql_fast_path(spark: Any) -> list[str]:
    """BATCH ``.sum()`` on rows of key, field and event time (the SQL fast path's hash
    aggregate) equals the engine path (``spark.tidemark.sqlFastPath=false``)."""
    import tidemark as tm
    from tidemark.spark.batch.sql_plan import CONF

    rows = [("a", n % 7, (n * 37) % 500) for n in range(60)] + [("b", 5, 10), ("b", 6, 10)]
    df = spark.createDataFrame(rows, "k string, amount long, ts long")
    got = {}
    for fast in ("true", "false"):
        spark.conf.set(CONF, fast)
        windowed = tm.from_dataframe(df, timestamp="ts").key_by("k")
        result = windowed.window(tm.TumblingEventTimeWindows.of(100)).sum("amount")
        got[fast] = sorted(tuple(r) for r in result.to_dataframe().collect())
    spark.conf.unset(CONF)
    same = got["true"] == got["false"] and len(got["true"]) > 5
    return [] if same else [f"sql fast path: {got['true']} != engine {got['false']}"]


def plain_action_errors(spark: Any) -> list[str]:
    """A plain ``collect()`` of a tidemark DataFrame whose input has a null key raises
    ``tm.InputDataError``, which is also PySpark's Spark Connect exception
    (tests/spark/api/test_bad_input_runtime.py on a classic session)."""
    from pyspark.errors import PySparkException

    import tidemark as tm

    df = spark.createDataFrame([("a", 1, 1), (None, 2, 1)], "k string, ts long, v long")
    windowed = tm.from_dataframe(df, timestamp="ts").key_by("k")
    result = windowed.window(tm.TumblingEventTimeWindows.of(10)).sum("v").to_dataframe()
    try:
        result.collect()
    except Exception as exc:  # what a user of Spark Connect meets
        right = isinstance(exc, tm.InputDataError) and isinstance(exc, PySparkException)
        said = str(exc).startswith("null key in column 'k'")
        if right and said:
            return []
        return [f"plain action: {type(exc).__mro__} {str(exc)[:300]!r}"]
    return ["plain action: a null key raised nothing"]


def newer_functions(spark: Any) -> list[str]:
    """``aggregate_vectorized`` in BATCH (columnar path and engine path) and as a replay,
    and dynamic-gap sessions that keep all their elements in BATCH and a replay, equal
    to their engine transcripts (tests/spark/batch/test_vectorized_spark.py,
    tests/spark/api/test_dynamic_gap_elements.py)."""
    import test_dynamic_gap_elements as g
    import test_vectorized_spark as v

    from tidemark.spark.batch.columnar import CONF

    failures = []
    frame = spark.createDataFrame(v._rows(), v.SCHEMA)
    batch = [("a", v.w(0), v.w(5), 3.0), ("a", v.w(5), v.w(10), 3.0)]
    batch += [("b", v.w(0), v.w(5), 4.0), ("b", v.w(5), v.w(10), 2.0)]
    for columnar in ("true", "false"):
        spark.conf.set(CONF, columnar)
        got = v._collect(v._pipeline(frame))
        if got != batch:
            failures.append(f"aggregate_vectorized BATCH ({CONF}={columnar}): {got}")
    spark.conf.unset(CONF)
    kept = g.kept_scenarios(31, 3)
    for replay in (False, True):
        reference = d.reference_replay if replay else d.reference_batch
        for scenario, got in zip(kept, d.run_spark(spark, kept, replay)):
            diff = d.describe_difference(scenario, reference(scenario), got)
            if diff:
                failures.append(f"kept dynamic sessions ({'replay' if replay else 'BATCH'}) {diff}")
    return failures


def time_zones(spark: Any, workdir: Path) -> list[str]:
    """A session in New York, daylight-saving changes in the data: every mode gives the
    windows and instants of the UTC wall clock (tests/spark/protocol/test_time_zones.py); a stream of
    2024 shows Spark the real watermark (tests/spark/streaming/test_spark_clock.py)."""
    import test_time_zones as z

    failures = []
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        for mode in ("batch", "replay", "streaming"):
            got = z._run(spark, mode, "ntz", workdir / f"zones-{mode}")
            normalised = sorted((k, s, v, list(at)) for k, s, v, at in got)
            if normalised != z.EXPECTED:
                failures.append(f"time zones {mode}: {normalised}")
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    return failures + _real_watermark(spark, workdir / "clock")


def _real_watermark(spark: Any, root: Path) -> list[str]:
    import test_spark_clock as c

    c._write(root / "in", [[("a", 1, c.JAN_2024 + 1_000), ("a", 2, c.JAN_2024 + 70_000)]])
    query = c._start(spark, root)
    query.awaitTermination(300)
    marks = {p["eventTime"].get("watermark") for p in query.recentProgress}
    want = "2024-01-01T00:01:04.999Z"
    return [] if want in marks else [f"spark clock: progress shows {marks}, not {want}"]


STREAMED_VALUE_CASES = (
    "nan-apart-from-null-in-value-columns",
    "results-hold-nan-and-null-apart",
    "late-rows-keep-their-nan",
    "struct-and-array-keys",
    "timestamps-in-values-and-results-are-utc-instants",
)
"""The value cases also run as streams here (each stream costs a query)."""


def values(spark: Any, workdir: Path) -> list[str]:
    """Real data's values (``value_cases``) over Connect, in a session zone that is not
    UTC: every case in BATCH and a replay, some as streams; a sum beyond its type."""
    import value_cases as v

    import tidemark as tm

    failures = []
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
    try:
        for name, case in v.CASES.items():
            for mode in case.modes:
                if mode == "stream" and name not in STREAMED_VALUE_CASES:
                    continue
                got = v.run(
                    spark, mode, case.rows, case.schema, case.build, workdir, case.late, case.split
                )
                if got != case.expected:
                    failures.append(f"values {name} {mode}: expected {case.expected}, got {got}")
        try:
            v.run(
                spark,
                "batch",
                [("a", 1, 2**62), ("a", 2, 2**62)],
                "k string, ts long, v long",
                lambda s: s.key_by("k").window(v.WINDOW).sum("v"),
                workdir,
            )
            failures.append("values: a sum beyond bigint was not refused")
        except tm.WindowResultError:
            pass
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    return failures


def main(argv: list[str]) -> None:
    workdir = Path(argv[0])
    spark = connect_session()
    assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
    failures = bounded(spark, seed=21, count=6) + streaming(spark, workdir, seed=21)
    failures += chained(spark, workdir)
    failures += bounded_once(spark)
    failures += panes(spark, workdir)
    failures += sql_fast_path(spark)
    failures += plain_action_errors(spark)
    failures += newer_functions(spark)
    failures += time_zones(spark, workdir)
    failures += values(spark, workdir)
    print("CONNECT-RESULT " + json.dumps(failures))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
