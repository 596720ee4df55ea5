"""A DATE event-time column ends a stream with its largest value (issue 47).

A stream ends when a row stamped at or after ``END_OF_INPUT_MS``
(9999-12-31T23:59:59.999Z) arrives; a DATE is a midnight, and its largest,
9999-12-31, is 86,399,999 ms short of it. It used to be an element whose window never
fired, and windows that end only with the input (a global window under
``EventTimeTrigger``, a window kept by allowed lateness) stayed open. On a stream, a DATE
column's 9999-12-31 is now the end-of-input marker. A global window per key, fired by
the watermark ``Long.MAX_VALUE`` only, one file per micro-batch::

    batch 0: a 2024-01-01, a 2024-01-02, b 2024-01-02   -> watermark 2024-01-01T23:59:59.999
    batch 1: _end 9999-12-31                             -> the end: every window fires
"""

from __future__ import annotations

import datetime
import json
import os

import pytest

import tidemark as tm

pytestmark = pytest.mark.spark

BATCHES = [
    [("a", "2024-01-01", 1), ("a", "2024-01-02", 10), ("b", "2024-01-02", 100)],
    [("_end", "9999-12-31", 1000)],
]


def _source(spark, directory):
    directory.mkdir()
    for n, batch in enumerate(BATCHES):
        path = directory / f"batch-{n:03d}.json"
        path.write_text("".join(json.dumps({"k": k, "d": d, "n": v}) + "\n" for k, d, v in batch))
        os.utime(path, (1_000_000 + n, 1_000_000 + n))  # the file source orders by mtime
    return (
        spark.readStream.schema("k string, d date, n long")
        .option("maxFilesPerTrigger", 1)
        .json(str(directory))
    )


def test_a_date_columns_last_day_ends_the_stream(spark, tmp_path):
    result = (
        tm.from_dataframe(
            _source(spark, tmp_path / "in"),
            timestamp="d",
            watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
        )
        .key_by("k")
        .window(tm.GlobalWindows.create())
        .trigger(tm.EventTimeTrigger.create())
        .sum("n")
    )
    got: dict[str, list] = {"main": [], "dropped": []}
    query = result.write_outputs(
        {
            "main": lambda df, _: got["main"].extend(tuple(r) for r in df.collect()),
            "__late_records_dropped": lambda df, _: got["dropped"].append(df.first()[0]),
        },
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    # each key's window fires at the end of the input; the marker is no element
    assert sorted(got["main"]) == [
        ("a", datetime.date(2024, 1, 1), 11),
        ("b", datetime.date(2024, 1, 2), 100),
    ]
    assert sum(got["dropped"]) == 0
