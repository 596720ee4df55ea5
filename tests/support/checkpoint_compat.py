"""A streaming query whose checkpoint an earlier release wrote, restarted on this code.

``tests/data/checkpoint_v0_1/`` was made by running this module with the code of the
last release (commit a5b2198) on the path::

    git worktree add /tmp/old a5b2198
    PYTHONPATH=/tmp/old/src:tests python tests/support/checkpoint_compat.py /tmp/tidemark-checkpoint-v0

which streams the first two input files of :data:`FILES` (one per micro-batch) through
:func:`pipeline` and stops; the directory (inputs, checkpoint, outputs) was copied into
``tests/data/checkpoint_v0_1``. ``tests/spark/streaming/test_streaming_restart_compat.py`` restarts it on
this code with the third file. Only the public API is used, so both releases run it.

The same script keeps checkpoints of a supported PySpark minor before the newest, to
restart on the running one (a platform upgrade): ``tests/data/checkpoint_pyspark_4_0_row``
and ``..._deltas`` were written with PySpark 4.0.4 by this code, one per state layout::

    .venv-pyspark-4.0.4/bin/python tests/support/checkpoint_compat.py \
        /tmp/tidemark-checkpoint-v0 --layout deltas

(``--layout row`` for the other), the directory then copied as above.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import tidemark as tm

PLACEHOLDER = "/tmp/tidemark-checkpoint-v0"
"""The directory the fixture was made in; its paths in the checkpoint are rewritten."""

LATE = tm.OutputTag("late")
LAYOUT_CONF = "spark.tidemark.streaming.stateLayout"
"""The session setting that chooses a new checkpoint's state layout."""
END_OF_INPUT_MS = 253_402_300_799_999

FILES = [
    [("a", 1, 1), ("a", 2, 5), ("b", 3, 3)],
    [("a", 4, 30), ("b", 5, 9), ("a", 6, 12), ("c", 7, 40)],
    [("a", 8, 2), ("b", 9, 60), ("a", 10, 31), ("c", 11, END_OF_INPUT_MS)],
]
"""(key, value, timestamp ms) rows of each input file, one file per micro-batch."""


def write_input(directory: Path, index: int) -> None:
    rows = [json.dumps({"k": k, "v": v, "ts": ts}) for k, v, ts in FILES[index]]
    (directory / f"{index}.json").write_text("\n".join(rows) + "\n")


def pipeline(spark: Any, input_dir: Path, panes: bool = False) -> Any:
    """Session windows (gap 10 ms, lateness 5 ms) summing ``v`` per key, late data to a
    side output: merging windows, timers and reducing state all live in the checkpoint."""
    df = spark.readStream.schema("k string, v long, ts long").option("maxFilesPerTrigger", 1)
    stream = tm.from_dataframe(
        df.json(str(input_dir)),
        timestamp="ts",
        watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(0),
        shift_spark_clock=True,  # timestamps from 1 ms, as the previous release ran them
    )
    if panes:
        return panes_pipeline(stream)
    return (
        stream.key_by("k")
        .window(tm.EventTimeSessionWindows.with_gap(10))
        .allowed_lateness(5)
        .side_output_late_data(LATE)
        .sum("v")
    )


def panes_pipeline(stream: Any) -> Any:
    """Tumbling 10 ms windows under ``AfterWatermark(early=AfterCount(2),
    late=AfterCount(1))`` in RETRACTING mode, lateness 15 ms, late data to a side output:
    the pane records, the trigger's counts and timers and the retraction rows all live in
    the checkpoint."""
    return (
        stream.key_by("k")
        .window(tm.TumblingEventTimeWindows.of(10))
        .trigger(tm.AfterWatermark(early=tm.AfterCount(2), late=tm.AfterCount(1)))
        .accumulation_mode(tm.AccumulationMode.RETRACTING)
        .allowed_lateness(15)
        .side_output_late_data(LATE)
        .sum("v")
    )


def start(spark: Any, root: Path, panes: bool = False) -> Any:
    """Start the query of ``root`` (``in/``, ``checkpoint/``, ``out/``) to the end of its input."""

    def sink(name: str) -> Any:
        def write(batch: Any, batch_id: int) -> None:
            batch.write.mode("overwrite").json(str(root / "out" / name / f"batch={batch_id}"))

        return write

    result = pipeline(spark, root / "in", panes)
    return result.write_outputs(
        {"main": sink("main"), LATE: sink("late")},
        checkpoint=str(root / "checkpoint"),
        trigger={"availableNow": True},
    )


PANE_SCHEMA = (
    "k string, v long, ts long, pane_timing string, pane_index long, pane_is_last boolean, "
    "is_retraction boolean"
)


def outputs(spark: Any, root: Path, panes: bool = False) -> dict[str, list[tuple]]:
    """Every row each sink wrote, as sorted tuples."""
    found = {}
    for name in ("main", "late"):
        schema = PANE_SCHEMA if panes and name == "main" else "k string, v long, ts long"
        rows = spark.read.schema(schema).json(str(root / "out" / name))
        found[name] = sorted(tuple(r) for r in rows.collect())
    return found


if __name__ == "__main__":
    from tidemark.spark.runtime.session import get_spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    target = Path(sys.argv[1])
    with_panes = "--panes" in sys.argv[2:]
    conf = {"spark.sql.shuffle.partitions": "2"}
    if "--layout" in sys.argv[2:]:
        conf[LAYOUT_CONF] = sys.argv[sys.argv.index("--layout") + 1]
    (target / "in").mkdir(parents=True)
    session = get_spark(master="local[2]", conf=conf)
    for index in (0, 1):
        write_input(target / "in", index)
        start(session, target, with_panes).awaitTermination()
    print(outputs(session, target, with_panes))
