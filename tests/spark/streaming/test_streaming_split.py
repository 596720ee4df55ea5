"""A call's rows split by key (``inputs.RowReader._split``): built in one pass and put in key
order by one stable sort, they must come out as a row-by-row split would give them.

::

    frame 1   a@1 b@2 a@3 c@4 b@5        runs  a: 1 3 | 6     keys in order of first row
    frame 2   a@6 d@7                          b: 2 5         (a, b, c, d)
                                               c: 4
                                               d: 7
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from pyspark.sql.types import LongType, StructField, StructType

from tidemark import TumblingEventTimeWindows
from tidemark._engine.functions import window_logic
from tidemark._engine.spec import OperatorSpec
from tidemark.errors import InputDataError
from tidemark.functions import ReduceFunction
from tidemark.spark.protocol.columns import EARLY, ON_ELEMENTS, TS
from tidemark.spark.streaming.worker.clock import END_OF_INPUT_MS, MIN_TIMESTAMP_MS
from tidemark.spark.streaming.worker.config import ProcessorConfig
from tidemark.spark.streaming.worker.inputs import _key_segments, row_reader


class First(ReduceFunction):
    def reduce(self, a, b):  # type: ignore[no-untyped-def]
        return a


SPEC = OperatorSpec(TumblingEventTimeWindows.of(10), window_logic(First()))


COLUMNS = ["key", "v", TS]


def _config(**changes) -> ProcessorConfig:  # type: ignore[no-untyped-def]
    config = ProcessorConfig(
        spec=SPEC,
        time_mode="EventTime",
        value_names=("key", "v"),
        value_types=("StringType", "LongType"),
        value_positions=(0, 1),
        result_schema=StructType([StructField("r", LongType())]),
        result_to_row=lambda value, ts: (value,),
        timestamp_position=2,
    )
    return dataclasses.replace(config, **changes)


def _split(config: ProcessorConfig, *frames: list[tuple]) -> dict:
    pdfs = [pd.DataFrame(rows, columns=COLUMNS) for rows in frames]
    runs, passed, forwarded = row_reader(config).split_frames(pdfs, spark_watermark_ms=0)
    assert passed == [] and forwarded == {}
    return {key: [[tuple(r) for r in run[2]], run[3]] for key, run in runs.items()}


def test_rows_of_a_key_keep_their_order_keys_their_first_appearance():
    first = [("a", 10, 1), ("b", 20, 2), ("a", 30, 3), ("c", 40, 4), ("b", 50, 5)]
    runs = _split(_config(), first, [("a", 60, 6), ("d", 70, 7)])
    assert list(runs) == ["a", "b", "c", "d"]
    assert runs["a"] == [[("a", 10), ("a", 30), ("a", 60)], [1, 3, 6]]
    assert runs["b"] == [[("b", 20), ("b", 50)], [2, 5]]
    assert runs["d"] == [[("d", 70)], [7]]
    assert all(type(ts) is int for _, stamps in runs.values() for ts in stamps)


def test_spark_keys_that_are_one_engine_key_keep_spark_order():
    config = _config(engine_key=lambda columns: columns[0].lower())
    runs = _split(config, [("A", 1, 1), ("b", 2, 2), ("a", 3, 3), ("A", 4, 4)])
    assert list(runs) == ["a", "b"]
    assert runs["a"] == [[("A", 1), ("a", 3), ("A", 4)], [1, 3, 4]]


def test_one_key_in_every_row_is_one_run_in_sparks_order():
    frames = ([("a", v, 10 - v) for v in range(5)], [("a", 9, 0), ("a", 8, 7)])
    runs = _split(_config(), *frames)
    assert runs == {"a": [[(k, v) for k, v, _ in [*frames[0], *frames[1]]], [10, 9, 8, 7, 6, 0, 7]]}
    runs = _split(_config(engine_key=lambda columns: columns[0].upper()), frames[1])
    assert runs == {"A": [[("a", 9), ("a", 8)], [0, 7]]}


def test_one_key_with_a_chains_early_rows_keeps_them_apart():
    order, segments = _key_segments(["a"] * 3, lambda k: k, [ON_ELEMENTS, EARLY, ON_ELEMENTS])
    assert list(order) == [1, 0, 2]
    assert segments == [("a", True, 0, 1), ("a", False, 1, 3)]


def test_two_key_columns_make_a_tuple_key():
    config = _config(key_positions=(0, 1), key_types=("StringType", "LongType"))
    runs = _split(config, [("a", 1, 1), ("a", 2, 2), ("a", 1, 3)])
    assert list(runs) == [("a", 1), ("a", 2)]
    assert runs[("a", 1)][1] == [1, 3]


def test_end_of_input_markers_are_not_fed():
    runs = _split(_config(), [("a", 1, 1), ("b", 2, END_OF_INPUT_MS), ("a", 3, 3)])
    assert list(runs) == ["a"]
    assert runs["a"][1] == [1, 3]


def test_a_null_timestamp_fails_in_event_time_and_is_fed_in_processing_time():
    rows = [("a", 1, 5), ("b", 2, None)]
    with pytest.raises(InputDataError, match="key 'b' has a null timestamp"):
        _split(_config(), rows)
    runs = _split(_config(time_mode="ProcessingTime"), rows)
    assert runs["b"] == [[("b", 2)], [None]]
    assert runs["a"][1] == [5]


def test_a_timestamp_before_the_mapping_fails_naming_it():
    with pytest.raises(InputDataError, match=f"got timestamp={MIN_TIMESTAMP_MS - 1}ms for key 'a'"):
        _split(_config(), [("b", 1, 0), ("a", 1, MIN_TIMESTAMP_MS - 1)])


def test_a_chains_early_rows_are_a_segment_apart():
    keys = ["a", "b", "a", "a", "b"]
    phases = [EARLY, ON_ELEMENTS, ON_ELEMENTS, EARLY, EARLY]
    order, segments = _key_segments(keys, lambda k: k, phases)
    assert [keys[i] for i in order] == ["a", "a", "a", "b", "b"]
    assert order == [0, 3, 2, 4, 1]
    assert segments == [
        ("a", True, 0, 2),
        ("a", False, 2, 3),
        ("b", True, 3, 4),
        ("b", False, 4, 5),
    ]


def test_many_rows_split_as_one_by_one():
    rng = np.random.default_rng(7)
    keys = [f"k{k}" for k in rng.integers(0, 50, 2_000)]
    stamps = rng.integers(0, 10_000, 2_000).tolist()
    rows = [(k, i, ts) for i, (k, ts) in enumerate(zip(keys, stamps))]
    runs = _split(_config(), rows[:700], rows[700:])
    want: dict = {}
    for key, v, ts in rows:
        run = want.setdefault(key, [[], []])
        run[0].append((key, v))
        run[1].append(ts)
    assert runs == want
    assert list(runs) == list(want)
