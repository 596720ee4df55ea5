"""Real data's values through every mode (issue 28): NaN apart from null, NaN and -0.0
keys, struct and array keys, nested values in and out.

Each case is a pipeline, its input rows and the rows every mode must give, run through a
Spark action as a user meets it: ``collect()`` of a bounded run (BATCH, and a replay
ordered by ``ts``), and ``write_outputs`` of a stream (a file source, one micro-batch of
rows then an end-of-input row; each output written by batch id and read back, so the
same code runs over Spark Connect, whose ``foreachBatch`` runs beside the server).
Used by ``tests/spark/protocol/test_values.py`` and ``tests/support/connect_check.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
from pyspark.sql import Row
from pyspark.sql import functions as F

import tidemark as tm
from tidemark.spark.streaming import END_OF_INPUT_MS

MODES = ("batch", "replay", "stream")
NAN = float("nan")
WINDOW = tm.TumblingEventTimeWindows.of(10)
LATE = tm.OutputTag("late")
_runs = itertools.count()


def shown(rows: Any) -> list[str]:
    """Rows as sorted text: ``nan`` and ``None`` told apart (a NaN equals nothing)."""
    return sorted(repr(tuple(row)) for row in rows)


def run(
    spark: Any,
    mode: str,
    rows: list[tuple],
    schema: str,
    build: Callable[[Any], Any],
    workdir: Any,
    late: bool = False,
    split: int | None = None,
) -> dict[str, list[str]]:
    """The outputs (``"main"``, and ``"late"`` with ``late``) of ``build(stream)`` on
    ``rows`` in ``mode``, as :func:`shown` text. A replay arrives in the order of column
    ``o`` where the rows have one, else of ``ts``; a stream in two micro-batches where
    ``split`` says, the rows before it first."""
    df = spark.createDataFrame(rows, schema)
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps()
    if mode != "stream":
        order = ("o" if "o" in df.columns else "ts") if mode == "replay" else None
        result = build(tm.from_dataframe(df, "ts", order_by=order, watermark_strategy=strategy))
        with tm.raising_tidemark_errors():
            found = {"main": shown(result.to_dataframe().collect())}
            if late:
                found["late"] = shown(result.get_side_output(LATE).to_dataframe().collect())
        return found
    root = f"{workdir}/stream-{next(_runs)}"
    parts = [rows] if split is None else [rows[:split], rows[split:]]
    for part in parts:
        spark.createDataFrame(part, schema).coalesce(1).write.mode("append").parquet(f"{root}/in")
    end = df.limit(1).withColumn("ts", F.lit(END_OF_INPUT_MS).cast(df.schema["ts"].dataType))
    end.coalesce(1).write.mode("append").parquet(f"{root}/in")
    source = (
        spark.readStream.schema(df.schema).option("maxFilesPerTrigger", 1).parquet(f"{root}/in")
    )
    # timestamps from 1 ms: their watermarks need the shifted clock (docs/streaming.md)
    result = build(
        tm.from_dataframe(source, "ts", watermark_strategy=strategy, shift_spark_clock=True)
    )
    sinks = {"main": _sink(f"{root}/out/main")}
    if late:
        sinks[LATE] = _sink(f"{root}/out/late")
    query = result.write_outputs(sinks, f"{root}/cp", trigger={"availableNow": True})
    query.awaitTermination(600)
    return {name: _read(spark, f"{root}/out/{name}") for name in ("main", "late")[: 1 + late]}


def _sink(path: str) -> Callable[[Any, int], None]:
    def write(batch: Any, batch_id: int) -> None:
        batch.write.mode("overwrite").parquet(f"{path}/batch={batch_id}")

    return write


def _read(spark: Any, path: str) -> list[str]:
    try:
        frame = spark.read.parquet(path)
    except Exception:  # no batch wrote a file: no rows
        return []
    return shown(frame.drop("batch").collect())


class Seen(tm.ProcessWindowFunction):
    """Each window's key and the repr of its elements' value columns, in time order."""

    def __init__(self, *names: str):
        self.names = names

    def process(self, key, context, elements):
        ordered = sorted(elements, key=lambda e: e.ts)
        yield (key, repr([tuple(e[n] for n in self.names) for e in ordered]))


class Emits(tm.ProcessWindowFunction):
    """NaN and None in every kind of result field, as a function returns them."""

    def process(self, key, context, elements):
        yield (key, NAN, None, [NAN, None, 1.5], {"x": NAN, "y": None}, NAN)


@dataclass(frozen=True)
class Case:
    """A pipeline, its input and what every mode gives."""

    rows: list[tuple]
    schema: str
    build: Callable[[Any], Any]
    expected: dict[str, list[str]]
    modes: tuple[str, ...] = MODES
    late: bool = False
    split: int | None = None  # a stream's second micro-batch starts at this row


NESTED_SCHEMA = (
    "k string, ts long, v double, f float, a array<double>, s struct<x: double, y: float>"
)
NESTED_ROWS = [
    ("a", 1, 1.5, 0.5, [1.0, NAN, None], {"x": NAN, "y": None}),
    ("a", 2, NAN, NAN, None, None),
    ("a", 3, None, None, [], {"x": 1.0, "y": 2.0}),
]

CASES: dict[str, Case] = {
    "nan-apart-from-null-in-value-columns": Case(
        NESTED_ROWS,
        NESTED_SCHEMA,
        lambda s: (
            s.key_by("k").window(WINDOW).process(Seen("v", "f", "a", "s"), "k string, seen string")
        ),
        {
            "main": [
                repr(
                    (
                        "a",
                        "[(1.5, 0.5, [1.0, nan, None], {'x': nan, 'y': None}), "
                        "(nan, nan, None, None), (None, None, [], {'x': 1.0, 'y': 2.0})]",
                    )
                )
            ]
        },
    ),
    "sum-of-a-column-with-nan-is-nan": Case(
        [("a", 1, 1.5), ("a", 2, NAN), ("b", 3, 2.0), ("b", 4, None)],
        "k string, ts long, v double",
        lambda s: s.key_by("k").window(WINDOW).sum("v"),
        {"main": [repr(("a", 1, NAN)), repr(("b", 3, 2.0))]},
    ),
    "max-of-a-column-with-nan-is-nan": Case(
        [("a", 1, 1.5), ("a", 2, NAN), ("a", 3, 0.5), ("b", 4, NAN), ("b", 5, 3.0)],
        "k string, ts long, v double",
        lambda s: s.key_by("k").window(WINDOW).max("v"),
        {"main": [repr(("a", 1, NAN)), repr(("b", 4, NAN))]},
    ),
    "min-and-max-by-order-nan-above-every-number": Case(
        [("a", 1, 1.5), ("a", 2, NAN), ("a", 3, 0.5)],
        "k string, ts long, v double",
        lambda s: s.key_by("k").window(WINDOW).max_by("v"),
        {"main": [repr(("a", 2, NAN))]},
    ),
    "results-hold-nan-and-null-apart": Case(
        [("a", 1, 1.0)],
        "k string, ts long, v double",
        lambda s: (
            s.key_by("k")
            .window(WINDOW)
            .process(
                Emits(),
                "k string, n double, z double, a array<double>, s struct<x: double, y: float>, f float",
            )
        ),
        {"main": [repr(("a", NAN, None, [NAN, None, 1.5], Row(x=NAN, y=None), NAN))]},
    ),
    "late-rows-keep-their-nan": Case(
        [("a", 1, 1.0, 1), ("a", 20, 2.0, 2), ("a", 3, NAN, 3), ("a", 4, None, 4)],
        "k string, ts long, v double, o long",
        lambda s: s.key_by("k").window(WINDOW).side_output_late_data(LATE).sum("v"),
        {
            "main": [repr(("a", 1, 1.0, 1)), repr(("a", 20, 2.0, 2))],
            "late": [repr(("a", 3, NAN, 3)), repr(("a", 4, None, 4))],
        },
        modes=("replay", "stream"),  # nothing is late in BATCH
        late=True,
        split=2,
    ),
    "a-key-function-sees-nan": Case(
        [("a", 1, NAN), ("a", 2, None)],
        "k string, ts long, v double",
        lambda s: (
            s.key_by(lambda r: r.k).window(WINDOW).process(Seen("v"), "k string, seen string")
        ),
        {"main": [repr(("a", "[(nan,), (None,)]"))]},
    ),
    "a-key-function-returning-numpy-nan-keys-once": Case(
        [("a", 1, 1.0), ("b", 2, 2.0), ("c", 3, 3.0)],
        "k string, ts long, v double",
        lambda s: (
            s.key_by(lambda r: np.float32("nan") if r.k != "c" else np.float32(-0.0))
            .window(WINDOW)
            .process(Seen("v"), "k float, seen string")
        ),
        {"main": [repr((0.0, "[(3.0,)]")), repr((NAN, "[(1.0,), (2.0,)]"))]},
        modes=("batch", "replay"),  # a replay compared keys element by element
    ),
    "nan-keys-are-one-key-and-minus-zero-is-zero": Case(
        [(NAN, 1, 1.0), (NAN, 2, 2.0), (-0.0, 3, 3.0), (0.0, 4, 4.0), (1.5, 5, 5.0)],
        "k double, ts long, v double",
        lambda s: s.key_by("k").window(WINDOW).process(Seen("v"), "k double, seen string"),
        {
            "main": [
                repr((0.0, "[(3.0,), (4.0,)]")),
                repr((1.5, "[(5.0,)]")),
                repr((NAN, "[(1.0,), (2.0,)]")),
            ]
        },
    ),
    "a-sum-keyed-by-nan-and-minus-zero": Case(
        [(NAN, 1, 1), (NAN, 2, 2), (-0.0, 3, 3), (0.0, 4, 4)],
        "k double, ts long, v long",
        lambda s: s.key_by("k").window(WINDOW).sum("v"),
        # the first element's fields, its key column as it holds it (-0.0)
        {"main": [repr((-0.0, 3, 7)), repr((NAN, 1, 3))]},
    ),
    "struct-and-array-keys": Case(
        [
            ({"c": "x", "n": 1}, [1, 2], 1, 1),
            ({"c": "x", "n": 1}, [1, 2], 2, 2),
            ({"c": "x", "n": 2}, [1, 2], 3, 4),
            ({"c": "x", "n": 1}, [2, 1], 4, 8),
        ],
        "s struct<c: string, n: int>, a array<int>, ts long, v long",
        lambda s: (
            s.key_by(["s", "a"])
            .window(WINDOW)
            .process(KeyAndCount(), "s struct<c: string, n: int>, a array<int>, n long")
        ),
        {
            "main": [
                repr((Row(c="x", n=1), [1, 2], 2)),
                repr((Row(c="x", n=1), [2, 1], 1)),
                repr((Row(c="x", n=2), [1, 2], 1)),
            ]
        },
    ),
    "a-struct-key-with-a-nan-field": Case(
        [({"x": NAN}, 1, 1), ({"x": NAN}, 2, 2), ({"x": -0.0}, 3, 4), ({"x": 0.0}, 4, 8)],
        "s struct<x: double>, ts long, v long",
        lambda s: s.key_by("s").window(WINDOW).sum("v"),
        {"main": [repr((Row(x=-0.0), 3, 12)), repr((Row(x=NAN), 1, 3))]},
    ),
}


class Instants(tm.ProcessWindowFunction):
    """The instants its elements' timestamps hold (top level and in an array), and a
    naive datetime written back at both levels (UTC, as every mode reads it)."""

    def process(self, key, context, elements):
        e = next(iter(elements))
        seen = [_utc(e.t).isoformat(), [_utc(x).isoformat() for x in e.a]]
        yield (key, repr(seen), e.t, [NOON_UTC.replace(tzinfo=None)])


def _utc(value: datetime) -> datetime:
    """A naive datetime as UTC, an aware one in UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def _collected(instant: datetime) -> datetime:
    """What ``collect()`` gives for a timestamp: a naive local time of this process."""
    return instant.astimezone().replace(tzinfo=None)


NOON_UTC = datetime(2024, 1, 1, 0, 30, tzinfo=timezone.utc)
CASES["timestamps-in-values-and-results-are-utc-instants"] = Case(
    [("a", 1, NOON_UTC, [NOON_UTC])],
    "k string, ts long, t timestamp, a array<timestamp>",
    lambda s: (
        s.key_by("k")
        .window(WINDOW)
        .process(Instants(), "k string, seen string, t timestamp, a array<timestamp>")
    ),
    {
        "main": [
            repr(
                (
                    "a",
                    repr(["2024-01-01T00:30:00+00:00", ["2024-01-01T00:30:00+00:00"]]),
                    _collected(NOON_UTC),
                    [_collected(NOON_UTC)],
                )
            )
        ]
    },
)


class KeyAndCount(tm.ProcessWindowFunction):
    """The key's fields (a struct's Row, an array's tuple) and the window's count."""

    def process(self, key, context, elements):
        struct, array = key
        assert isinstance(struct, Row) and isinstance(array, tuple), key
        yield (struct, array, len(list(elements)))
