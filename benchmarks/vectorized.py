"""A keyed mean and 90th percentile per 1-minute window: tidemark's ``aggregate_vectorized``
beside Spark's own aggregation and PySpark's Series-to-scalar pandas UDF (issue 31,
target 4), same input, same session, alternated.

The input (cached): N events, 2,000 keys, integer amounts 0..99, timestamps spanning
N x 0.366 ms (10M events: ~61 minutes, ~122,000 windows of ~80 events). Three sides per
aggregate, each writing to Spark's ``noop`` sink:

* **Spark**: ``groupBy(user, window(ts, '1 minute')).agg(avg(amount))``, and the exact
  ``percentile(amount, 0.9)`` (``percentile_approx`` gives other numbers);
* **tidemark**: ``key_by('user').window(Tumbling 1 min).aggregate_vectorized(...)`` with
  ``np.mean`` / ``np.percentile(v, 90)`` (BATCH: the columnar path, every value shuffled);
* **tidemark (combined)**, the mean only: a ``tm.VectorizedCombineFunction`` (partials
  ``(total, count)``; BATCH: each input partition combined where it is, only the
  partials shuffled, :mod:`tidemark.spark.batch.columnar_preaggregate`);
* **PySpark UDF**: ``@pandas_udf('double')`` of a Series with the same NumPy call,
  ``groupBy(user, window).agg(udf(amount))`` (timed once: it is slow);
* **shuffle floor**: the input shuffled by key into Python workers as Arrow and
  dropped there (``repartition`` + ``mapInArrow``): what any exact, non-combinable path on
  PySpark's operators pays before computing anything;
* **in-place floor**, beside the mean: the input into Python workers as Arrow where it
  is (``mapInArrow``, no shuffle), dropped there: what the combined path pays before
  its local step computes anything.

Every result is checked before anything is timed: tidemark's rows against Spark's (the
mean exactly: the amounts are integers, so every order of summation gives the same
double; the percentile within 1e-9, and the count of bit-equal values printed: Spark
and NumPy interpolate with differently ordered float operations) and the UDF's against
Spark's the same way. Then one untimed warm-up round and ROUNDS alternated rounds (Spark,
tidemark, floor, ...); prints every time, the best and median ratios.

``--stream`` runs the stream instead (``benchmarks/vectorized_stream.py``): BATCHES
micro-batches of ROWS events (default 10 x 100,000), tidemark's streaming
``aggregate_vectorized`` beside Spark's ``withWatermark`` + ``groupBy(window).agg(avg)``,
the emitted windows checked first.

Usage::

    python benchmarks/vectorized.py [N] [ROUNDS]      # default 10,000,000 events, 2 rounds
    python benchmarks/vectorized.py --stream [BATCHES] [ROUNDS] [ROWS]
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
import warnings
from typing import Any

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import tidemark as tm  # noqa: E402
from tidemark.spark.runtime.session import get_spark  # noqa: E402

KEYS = 2_000
MINUTE_MS = 60_000


def events(spark: Any, n: int, first: int = 0) -> Any:
    """N events (user, amount, ts) from id ``first``: 2,000 keys, ~0.366 ms apart, with
    up to 5 s of disorder."""
    from pyspark.sql import functions as F

    ts = (F.col("id") * 366 / 1000).cast("long") + (F.col("id") * 7919) % 5000
    return spark.range(first, first + n).select(
        (F.col("id") % KEYS).cast("string").alias("user"),
        (F.col("id") % 100).alias("amount"),
        ts.alias("ts"),
    )


def mean(values: np.ndarray) -> float:
    return float(np.mean(values))


class CombinedMean(tm.VectorizedCombineFunction):
    """The mean with a partial step (the amounts have no nulls)."""

    partials = ("total", "count")

    def partial(self, values: np.ndarray) -> tuple[float, int]:
        return float(values.sum()), len(values)

    def finish(self, total: np.ndarray, count: np.ndarray) -> float:
        return float(total.sum() / count.sum())


def p90(values: np.ndarray) -> float:
    return float(np.percentile(values, 90))


AGGREGATES = {"mean": mean, "p90": p90}


def spark_side(df: Any, name: str) -> Any:
    from pyspark.sql import functions as F

    aggregate = F.avg("amount") if name == "mean" else F.percentile("amount", 0.9)
    grouped = df.groupBy("user", F.window(F.timestamp_millis("ts"), "1 minute"))
    return grouped.agg(aggregate.alias("value")).select(
        "user", F.unix_millis("window.start").alias("window_start"), "value"
    )


def udf_side(df: Any, name: str) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    function = AGGREGATES[name]

    @pandas_udf("double")  # type: ignore[call-overload]
    def series_to_scalar(values: pd.Series) -> float:
        return function(values.to_numpy(dtype=np.float64))

    grouped = df.groupBy("user", F.window(F.timestamp_millis("ts"), "1 minute"))
    return grouped.agg(series_to_scalar("amount").alias("value")).select(
        "user", F.unix_millis("window.start").alias("window_start"), "value"
    )


def tidemark_side(df: Any, name: str) -> Any:
    """tidemark's ``name`` (``"combined"``: the mean with a partial step)."""
    windowed = tm.from_dataframe(df, timestamp="ts").key_by("user")
    windows = windowed.window(tm.TumblingEventTimeWindows.of(MINUTE_MS))
    function = CombinedMean() if name == "combined" else AGGREGATES[name]
    result = windows.aggregate_vectorized(function, fields=["amount"])
    return result.to_dataframe().select("user", "window_start", "value")


def shuffle_floor(df: Any) -> Any:
    """The floor of an exact path on PySpark's operators: the columns shuffled by key
    into Python as Arrow (``mapInArrow``), nothing computed, nothing returned."""
    from tidemark.spark.batch.run import engine_partitions

    partitions = engine_partitions(df.sparkSession)
    return df.repartition(partitions, "user").mapInArrow(
        lambda batches: (b.slice(0, 0) for b in batches), df.schema
    )


def in_place_floor(df: Any) -> Any:
    """The floor of the combined path: the columns into Python as Arrow where they
    are, nothing computed, nothing returned."""
    return df.mapInArrow(lambda batches: (b.slice(0, 0) for b in batches), df.schema)


def check(label: str, got: Any, expected: Any, exact: bool) -> None:
    """``got`` and ``expected`` hold the same windows with equal values (exact, or
    within 1e-9 relative with the bit-equal count printed); raises otherwise."""
    mine = {(r.user, r.window_start): r.value for r in got.collect()}
    theirs = {(r.user, r.window_start): r.value for r in expected.collect()}
    if mine.keys() != theirs.keys():
        missing, extra = len(theirs.keys() - mine.keys()), len(mine.keys() - theirs.keys())
        raise SystemExit(f"{label}: windows differ ({missing} missing, {extra} extra)")
    equal = sum(mine[k] == theirs[k] for k in theirs)
    close = all(math.isclose(mine[k], theirs[k], rel_tol=1e-9, abs_tol=1e-12) for k in theirs)
    if (exact and equal != len(theirs)) or not close:
        raise SystemExit(f"{label}: values differ ({equal:,} of {len(theirs):,} equal)")
    print(f"  checked {label}: {len(theirs):,} windows, {equal:,} bit-equal, all within 1e-9")


def write(frame: Any) -> None:
    frame.write.format("noop").mode("overwrite").save()


def timed(action: Any) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def batch(n: int, rounds: int) -> None:
    spark = get_spark()
    spark.sparkContext.setLogLevel("ERROR")
    df = events(spark, n).cache()
    df.count()
    print(
        f"{n:,} events, {KEYS:,} keys, 1-minute tumbling windows, "
        f"{spark.sparkContext.defaultParallelism} cores, load {os.getloadavg()[0]:.1f}"
    )
    for name in AGGREGATES:
        expected = spark_side(df, name)
        check(f"tidemark {name}", tidemark_side(df, name), expected, exact=name == "mean")
        check(f"PySpark UDF {name}", udf_side(df, name), expected, exact=name == "mean")
        sides = {
            "Spark": lambda name=name: write(spark_side(df, name)),
            "tidemark": lambda name=name: write(tidemark_side(df, name)),
            "shuffle floor": lambda: write(shuffle_floor(df)),
        }
        if name == "mean":
            check("tidemark combined mean", tidemark_side(df, "combined"), expected, exact=True)
            sides["tidemark (combined)"] = lambda: write(tidemark_side(df, "combined"))
            sides["in-place floor"] = lambda: write(in_place_floor(df))
        for action in sides.values():
            action()  # warm-up, untimed
        times: dict[str, list[float]] = {side: [] for side in sides}
        for _ in range(rounds):
            for side, action in sides.items():
                times[side].append(timed(action))
        times["PySpark UDF"] = [timed(lambda name=name: write(udf_side(df, name)))]  # once: slow
        report(name, times, n)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


def report(name: str, times: dict[str, list[float]], n: int) -> None:
    spark_best, spark_median = min(times["Spark"]), statistics.median(times["Spark"])
    for side, runs in times.items():
        shown = ", ".join(f"{t:.2f}" for t in runs)
        best = spark_best / min(runs)
        median = spark_median / statistics.median(runs)
        print(
            f"  {name:5} {side:19} best {min(runs):6.2f} s ({n / min(runs) / 1e6:5.2f}M ev/s)"
            f"  x Spark's speed: best {best:.2f}, median {median:.2f}  (runs: {shown})"
        )


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--stream":
        from vectorized_stream import run_stream

        numbers = [int(a) for a in argv[1:]]
        batches, rounds, rows = numbers + [10, 2, 100_000][len(numbers) :]
        run_stream(batches, rounds, rows, events)
        return
    numbers = [int(a) for a in argv]
    batch(*(numbers + [10_000_000, 2][len(numbers) :]))


if __name__ == "__main__":
    main(sys.argv[1:])
