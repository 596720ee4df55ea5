"""Within a micro-batch the order of a key's rows can decide lateness for sessions
(docs/streaming.md, "Equivalence with the engine"; issue 47).

Sessions with a gap of 10 s, one file per micro-batch::

    batch 0: a@200                         -> watermark 199.999 s
    batch 1: a@195 and a@185, in the file's order
    batch 2: the end-of-input marker

``[185, 195)`` is behind the watermark: a@185 is late when it comes first, and joins
the session when a@195 (whose window ``[195, 205)`` touches a@200's) came before it.
The stream's results equal the engine's fed the rows in the file's order.
"""

from __future__ import annotations

import pytest
from streaming_scenarios import keyed_file_stream

import tidemark as tm
from tidemark.spark.streaming import END_OF_INPUT_MS
from tidemark.testing import WindowOperatorHarness
from tidemark.time import LONG_MAX

S = 1000
GAP = tm.EventTimeSessionWindows.with_gap(10 * S)


def _engine(batches):
    """The engine fed each batch, then the watermark after it (monotonous timestamps)."""
    h = WindowOperatorHarness(GAP, lambda a, b: a + b)
    seen = None
    for batch in batches:
        for _, ts, n in batch:
            h.process_element(n, ts)
            seen = ts if seen is None else max(seen, ts)
        h.process_watermark(seen - 1)
    h.process_watermark(LONG_MAX)
    return [v for v, _ in h.output()], h.num_late_records_dropped


def _stream(spark, tmp_path, batches):
    source = keyed_file_stream(spark, tmp_path / "in", [*batches, [("_end", END_OF_INPUT_MS, 0)]])
    result = (
        tm.from_dataframe(
            source,
            timestamp="ts",
            watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
        )
        .key_by("k")
        .window(GAP)
        .sum("n")
    )
    got: dict[str, list] = {"main": [], "dropped": []}
    query = result.write_outputs(
        {
            "main": lambda df, _: got["main"].extend(r.n for r in df.collect()),
            "__late_records_dropped": lambda df, _: got["dropped"].append(df.first()[0]),
        },
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    return got["main"], sum(got["dropped"])


@pytest.mark.parametrize(
    ("second", "expected"),
    [
        pytest.param([("a", 195 * S, 10), ("a", 185 * S, 100)], ([111], 0), id="joins"),
        pytest.param([("a", 185 * S, 100), ("a", 195 * S, 10)], ([11], 1), id="late-first"),
    ],
)
def test_session_lateness_follows_the_order_of_a_batch_on_the_engine(second, expected):
    assert _engine([[("a", 200 * S, 1)], second]) == expected


@pytest.mark.spark
@pytest.mark.parametrize(
    "second",
    [
        pytest.param([("a", 195 * S, 10), ("a", 185 * S, 100)], id="joins"),
        pytest.param([("a", 185 * S, 100), ("a", 195 * S, 10)], id="late-first"),
    ],
)
def test_a_stream_judges_session_lateness_in_its_rows_order(spark, tmp_path, second):
    batches = [[("a", 200 * S, 1)], second]
    assert _stream(spark, tmp_path, batches) == _engine(batches)
