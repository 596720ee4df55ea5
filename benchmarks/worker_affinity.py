"""Which Python worker serves each key group's call, micro-batch after micro-batch: what a
cache of a group's state in the Python worker would find (issue 31, the delta design in
``benchmarks/README.md``).

24 micro-batches of 1,000 rows through ``applyInPandasWithState`` grouped by key group
slot as tidemark groups (4 groups a state partition), each call returning its worker's
pid. Printed: how often a group's call lands on the worker of its previous call, and
for each call how many versions (calls of the group) the serving worker's copy would be
behind ("cold": the worker never served the group).

Usage::

    python benchmarks/worker_affinity.py [--partitions 2]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from tidemark.spark.session import get_spark  # noqa: E402
from tidemark.spark.streaming.driver.keygroups import slot_column  # noqa: E402


def call(group: tuple[Any, ...], frames: Iterator[pd.DataFrame], state: Any) -> Any:
    """The group and the pid of the worker serving it."""
    for _ in frames:
        pass
    yield pd.DataFrame({"group": [group[0]], "pid": [os.getpid()]})


def serve_log(spark: Any, root: Path, groups: int) -> list[tuple[int, int, int]]:
    """(micro-batch, group, pid) of every call of a 24-micro-batch stream."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    (root / "in").mkdir()
    for batch in range(24):
        path = root / "in" / f"p{batch:03d}.parquet"
        pd.DataFrame({"key": range(batch * 1000, batch * 1000 + 1000)}).to_parquet(path)
        os.utime(path, (time.time() - 3600 + batch,) * 2)  # read in this order
    source = spark.readStream.schema("key long").option("maxFilesPerTrigger", 1)
    rows = source.parquet(str(root / "in")).withColumn("group", slot_column(["key"], groups))
    served = rows.groupBy("group").applyInPandasWithState(
        call, "group int, pid long", "n long", "append", GroupStateTimeout.NoTimeout
    )
    log: list[tuple[int, int, int]] = []

    def keep(df: Any, batch_id: int) -> None:
        log.extend((batch_id, r.group, r.pid) for r in df.collect())

    writer = served.writeStream.outputMode("append").foreachBatch(keep)
    writer = writer.option("checkpointLocation", str(root / "ck")).trigger(availableNow=True)
    writer.start().awaitTermination()
    return sorted(log)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2, help="shuffle partitions")
    args = parser.parse_args()
    conf = {"spark.sql.shuffle.partitions": str(args.partitions)}
    spark = get_spark(master="local[2]", conf=conf)
    groups = 4 * args.partitions
    log = serve_log(spark, Path(tempfile.mkdtemp(prefix="tidemark-affinity-")), groups)
    last: dict[int, int] = {}
    seen: dict[tuple[int, int], int] = {}
    calls: collections.Counter[int] = collections.Counter()
    behind: collections.Counter[str] = collections.Counter()
    same = 0
    for _, group, pid in log:
        calls[group] += 1
        same += last.get(group) == pid
        last[group] = pid
        earlier = seen.get((group, pid))
        behind["cold" if earlier is None else str(calls[group] - earlier - 1)] += 1
        seen[group, pid] = calls[group]
    repeat = len(log) - len(calls)
    print(
        f"{args.partitions} partitions, {groups} groups, "
        f"{len({pid for _, _, pid in log})} workers: a group's call on the worker of its "
        f"previous call {same}/{repeat} = {same / repeat:.0%}; versions the serving "
        f"worker's copy is behind: {dict(sorted(behind.items()))}"
    )
    spark.stop()


if __name__ == "__main__":
    main()
