"""A null key on a stream or a replay is refused as BATCH refuses it (issue 47).

Flink refuses an element whose key is null ("Assigned key must not be null"); BATCH
raises :class:`~tidemark.errors.InputDataError` naming the column and the row. A stream
used to window such a row as the key None, and a null key arriving in a later
micro-batch then failed the query with a raw ``TypeError`` from the engine's timers.
Each case below is a file stream (one file per micro-batch) or a replay, run through a
Spark action, for a record without the key field and for ``"user": null``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tidemark as tm
from tidemark.spark.streaming import END_OF_INPUT_MS

pytestmark = pytest.mark.spark

WINDOW = tm.TumblingEventTimeWindows.of(10_000)
SCHEMA = "user string, v long, ts long"
GOOD = [{"user": "ann", "v": 1, "ts": 1_000}, {"user": "bob", "v": 2, "ts": 2_000}]
MISSING = {"v": 3, "ts": 3_000}  # no "user" field at all
NULL = {"user": None, "v": 3, "ts": 3_000}
END = {"user": None, "v": 0, "ts": END_OF_INPUT_MS}  # a marker's key is never read

MESSAGE = (
    "null key in column 'user': every element needs a key; example row: "
    '{"v":3,"ts":3000}. Fill in or filter out the rows without one.'
)


def _write(directory: Path, batches: list[list[dict]]) -> None:
    directory.mkdir()
    for n, rows in enumerate(batches):
        path = directory / f"batch-{n:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime


def _run(spark, tmp_path: Path, batches: list[list[dict]]) -> list[tuple]:
    _write(tmp_path / "in", batches)
    source = (
        spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
    )
    result = (
        tm.from_dataframe(
            source, "ts", watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps()
        )
        .key_by("user")
        .window(WINDOW)
        .sum("v")
    )
    rows: list[tuple] = []
    query = result.write_outputs(
        {"main": lambda df, _: rows.extend(tuple(r) for r in df.collect())},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    return rows


@pytest.mark.parametrize(
    "batches",
    [
        pytest.param([[*GOOD, MISSING], [END]], id="missing-field-first-batch"),
        pytest.param([[*GOOD, NULL], [END]], id="null-first-batch"),
        pytest.param([GOOD, [MISSING], [END]], id="missing-field-later-batch"),
        pytest.param([GOOD, [NULL], [END]], id="null-later-batch"),
    ],
)
def test_a_null_key_fails_the_query_as_batch_does(spark, tmp_path, batches):
    with pytest.raises(tm.InputDataError) as info:
        _run(spark, tmp_path, batches)
    assert str(info.value) == MESSAGE


def test_an_end_of_input_marker_may_have_a_null_key(spark, tmp_path):
    assert sorted(_run(spark, tmp_path, [GOOD, [END]])) == [
        ("ann", 1, 1_000),
        ("bob", 2, 2_000),
    ]


@pytest.mark.parametrize("row", [MISSING, NULL], ids=["missing-field", "null"])
def test_a_null_key_fails_a_replay_as_batch_does(spark, row):
    df = spark.createDataFrame([(r.get("user"), r["v"], r["ts"]) for r in [*GOOD, row]], SCHEMA)
    result = tm.from_dataframe(df, "ts", order_by="ts").key_by("user").window(WINDOW).sum("v")
    with pytest.raises(tm.InputDataError, match=r"^null key in column 'user': every element"):
        with tm.raising_tidemark_errors():
            result.to_dataframe().collect()
