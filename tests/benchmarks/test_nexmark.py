"""The Nexmark benchmark (benchmarks/nexmark): its generator follows the model and each
query gives the same results in tidemark as in Spark's own SQL, on tiny streams."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

# Spark's Python workers import the queries' functions by module name (nexmark.queries)
_BENCHMARKS = str(Path(__file__).resolve().parents[2] / "benchmarks")
sys.path.insert(0, _BENCHMARKS)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (_BENCHMARKS, os.environ.get("PYTHONPATH", "")) if p
)

from nexmark.generator import GeneratorConfig, generate_bids  # noqa: E402
from nexmark.queries import spark_query, tidemark_query  # noqa: E402
from nexmark.state_bound import distinct_per_slice  # noqa: E402

from tidemark.spark.streaming import END_OF_INPUT_MS  # noqa: E402

CONFIG = GeneratorConfig(seed=7, event_rate=100, out_of_order_group=20)
BIDS = 3_000  # about 33 s of event time at 100 events/s: several windows of each kind


def test_generator_is_deterministic_for_a_seed_and_a_prefix_for_fewer_bids():
    first = generate_bids(2_000, CONFIG)
    assert first.equals(generate_bids(2_000, CONFIG))
    assert first.iloc[:500].equals(generate_bids(500, CONFIG))
    assert not first.equals(generate_bids(2_000, GeneratorConfig(seed=8)))


def test_generator_has_the_hot_auction_and_hot_bidder_skew():
    bids = generate_bids(200_000, GeneratorConfig(seed=1))
    # hot auctions are the first of each batch of 100 (ids from 1000), hot bidders the
    # second of each batch of 100 people: 1/2 and 3/4 of the bids, plus the uniform share
    hot_auction = ((bids.auction - 1000) % 100 == 0).mean()
    hot_bidder = ((bids.bidder - 1000) % 100 == 1).mean()
    assert 0.49 < hot_auction < 0.52
    assert 0.74 < hot_bidder < 0.77
    assert bids.price.between(100, 100_000_000).all()
    assert (bids.auction >= 1000).all() and (bids.bidder >= 1000).all()


def test_state_bound_counts_each_slices_distinct_auctions():
    bids = generate_bids(20_000)
    slices = bids["date_time"] // 2_000
    expected = bids.groupby(slices)["auction"].nunique().tolist()
    assert [len(s) for s in distinct_per_slice(20_000)] == expected


def test_generator_event_time_advances_at_the_rate_with_bounded_disorder():
    config = GeneratorConfig(seed=3, event_rate=10_000, out_of_order_group=1000)
    bids = generate_bids(100_000, config)
    span_s = (bids.date_time.max() - bids.date_time.min()) / 1000
    assert span_s == pytest.approx(100_000 / 0.92 / 10_000, rel=0.01)  # 46 bids in 50 events
    behind = bids.date_time.cummax() - bids.date_time
    assert behind.max() <= config.max_disorder_ms == 100
    assert behind.max() > 50  # disorder is there
    assert bids.seq.is_monotonic_increasing


def _rows(df):
    return sorted(tuple(r) for r in df.collect())


@pytest.fixture(scope="module")
def bids(spark):
    return spark.createDataFrame(generate_bids(BIDS, CONFIG)).cache()


@pytest.mark.spark
@pytest.mark.parametrize("query", ["q5", "q5t", "q7", "q7s", "q11"])
def test_batch_results_equal_spark_sql(spark, bids, query):
    ours = _rows(tidemark_query(query, bids, CONFIG.max_disorder_ms).to_dataframe())
    theirs = _rows(spark_query(query, bids, CONFIG.max_disorder_ms))
    assert ours == theirs
    assert len(ours) >= 3


@pytest.mark.spark
@pytest.mark.parametrize("query, end_at", [("q12", 3), ("q7p", 1)])
def test_a_processing_time_replay_on_arrival_time_equals_spark_sql_on_that_column(
    spark, bids, query, end_at
):
    ours = _rows(tidemark_query(query, bids, CONFIG.max_disorder_ms, replay=True).to_dataframe())
    theirs = _rows(spark_query(query, bids, CONFIG.max_disorder_ms, replay=True))
    # as in Flink, a replay's processing time ends at the last arrival: a processing-time
    # window still open then never fires; Spark's batch query has no clock to wait for
    last_arrival = bids.agg({"p_time": "max"}).first()[0]
    assert ours == [r for r in theirs if r[end_at] - 1 <= last_arrival]
    assert len(ours) >= 3 and len(ours) < len(theirs)


@pytest.mark.spark
@pytest.mark.slow  # a streaming query: about a minute on the shared machine
def test_q5_chained_windows_run_on_a_file_stream_and_equal_spark_sql(spark, bids, tmp_path):
    frame = generate_bids(BIDS, CONFIG)
    end = frame.iloc[-1:].assign(date_time=END_OF_INPUT_MS)  # every window fires
    for n, part in enumerate((frame.iloc[:1500], pd.concat([frame.iloc[1500:], end]))):
        path = tmp_path / "in" / f"part-{n}.parquet"
        path.parent.mkdir(exist_ok=True)
        part.to_parquet(path, index=False)
        stamp = time.time() - 100 + n  # the file source reads files in mtime order
        os.utime(path, (stamp, stamp))
    source = (
        spark.readStream.schema(bids.schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(tmp_path / "in"))
    )
    rows: list = []
    query = tidemark_query("q5", source, CONFIG.max_disorder_ms).write_outputs(
        {"main": lambda df, batch_id: rows.extend(tuple(r) for r in df.collect())},
        checkpoint=str(tmp_path / "checkpoint"),
        trigger={"availableNow": True},
    )
    query.awaitTermination()
    assert sorted(rows) == _rows(spark_query("q5", bids, CONFIG.max_disorder_ms))
    assert len({r[3] for r in rows}) >= 10  # windows fired in several micro-batches
