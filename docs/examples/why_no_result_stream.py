"""The streaming run of ``docs/why-no-result.md`` ("A streaming query's checkpoint").

Clicks of two partitions, one file per micro-batch; partition 1 goes quiet after its
first click, so it holds the watermark and none of ann's minute windows fires. The page
asks the query's checkpoint why. Run ``python docs/examples/why_no_result_stream.py
[DIR]`` to print the answers, with ``--page`` to write them into the page as well
(``tests/docs/test_docs_examples.py`` runs it and compares them with the page's).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import tidemark as tm
from tidemark.spark import explain_checkpoint, explain_query

NOON = 1_590_292_800_000  # 2020-05-24T04:00:00Z
BATCHES = [
    [("ann", NOON + 0, 1, 0), ("bob", NOON + 2_000, 1, 1)],
    [("ann", NOON + 61_000, 1, 0), ("ann", NOON + 65_000, 1, 0)],
    [("ann", NOON + 130_000, 1, 0)],
]
"""``(user, ts, n, partition)`` per micro-batch: partition 1 has one click, at 04:00:02."""


def click_files(directory: Path) -> None:
    """One JSON file per micro-batch (the file source takes them in modification order)."""
    directory.mkdir(parents=True, exist_ok=True)
    for number, batch in enumerate(BATCHES):
        path = directory / f"clicks-{number}.json"
        rows = [{"user": u, "ts": ts, "n": n, "partition": p} for u, ts, n, p in batch]
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        os.utime(path, (1_000_000 + number, 1_000_000 + number))


def pipeline(spark, directory: Path):
    """Clicks per user and minute, the watermark per partition (5 s out of orderness)."""
    clicks = (
        spark.readStream.schema("user string, ts long, n long, partition int")
        .option("maxFilesPerTrigger", 1)
        .json(str(directory))
    )
    return (
        tm.from_dataframe(
            clicks,
            timestamp="ts",
            watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(5_000),
            partition_column="partition",
            partitions=2,
        )
        .key_by("user")
        .window(tm.TumblingEventTimeWindows.of(60_000))
        .sum("n")
    )


def run(spark, root: Path):
    """Run the query to the end of its files; return the pipeline and its checkpoint."""
    click_files(root / "clicks")
    result = pipeline(spark, root / "clicks")
    checkpoint = str(root / "checkpoint")
    query = result.write_outputs(
        {"main": lambda df, batch_id: df.count()},
        checkpoint=checkpoint,
        trigger={"availableNow": True},
    )
    query.awaitTermination()
    # each micro-batch's record is written by a listener, right after the micro-batch
    deadline = time.monotonic() + 60
    while not (Path(checkpoint) / "tidemark-batches" / str(len(BATCHES) - 1)).exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the last micro-batch was not recorded")
        time.sleep(0.2)
    return result, checkpoint


def answers(spark, result, checkpoint: str) -> tuple[str, str]:
    """The whole query's view, and why ann's first minute did not fire."""
    view = explain_query(spark, checkpoint)
    ann = explain_checkpoint(spark, checkpoint, "ann", result, window=(NOON, NOON + 60_000))
    return view.text(), ann.text()


MARK = "<!-- a streaming run's answer -->\n```text\n"
PAGE = Path(__file__).resolve().parent.parent / "why-no-result.md"


def write_page(texts: tuple[str, str], checkpoint: str) -> None:
    """Put ``texts`` into the page's answer blocks (the checkpoint as ``out/checkpoint``)."""
    shown = iter(t.replace(checkpoint, "out/checkpoint").strip() + "\n" for t in texts)
    pattern = re.escape(MARK) + r"(.*?)```"
    page = re.sub(pattern, lambda _: MARK + next(shown) + "```", PAGE.read_text(), flags=re.S)
    PAGE.write_text(page)


if __name__ == "__main__":
    from tidemark.spark import get_spark

    session = get_spark(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
    arguments = [a for a in sys.argv[1:] if a != "--page"]
    where = Path(arguments[0]) if arguments else Path(tempfile.mkdtemp())
    result, checkpoint = run(session, where)
    texts = answers(session, result, checkpoint)
    for text in texts:
        print(text)
    if "--page" in sys.argv:
        write_page(texts, checkpoint)
