"""A streaming query's first micro-batch: how long Spark plans it (``queryPlanning`` in
its progress) and how long it takes, over fresh starts of one Nexmark query in one
process. A query whose windows run in ``transformWithStateInPandas`` (keyed windows in
the deltas layout, a chain) plans its first micro-batch in a new Python process on the
driver (``benchmarks/README.md``, "A query's first micro-batch"). Compare trees with
``PYTHONPATH=<tree>/src``.

Usage::

    python benchmarks/nexmark/first_batch.py --query q11 --starts 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nexmark.generator import GeneratorConfig  # noqa: E402
from nexmark.queries import tidemark_query  # noqa: E402
from nexmark.run import CountingSink, write_inputs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", default="q11", help="q5, q7, q11 (event-time queries)")
    parser.add_argument("--starts", type=int, default=4, help="timed starts, after a warm one")
    args = parser.parse_args()

    import tidemark
    from tidemark.spark.session import get_spark

    spark = get_spark(master="local[2]")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    config = GeneratorConfig()
    root = Path(tempfile.mkdtemp(prefix="nexmark-first-"))
    write_inputs(root, 200_000, 100_000, config)
    schema = spark.read.parquet(str(root / "bids")).schema
    planning, first, whole = [], [], []
    for start in range(args.starts + 1):
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
        result = tidemark_query(
            args.query, stream.parquet(str(root / "stream")), config.max_disorder_ms
        )
        checkpoint = tempfile.mkdtemp(dir=root)
        started = time.perf_counter()
        query = result.write_outputs({"main": CountingSink()}, checkpoint, {"availableNow": True})
        query.awaitTermination()
        seconds = time.perf_counter() - started
        durations = min(query.recentProgress, key=lambda p: p["batchId"])["durationMs"]
        if start:  # the first start warms the session and its workers
            planning.append(durations["queryPlanning"])
            first.append(durations["triggerExecution"])
            whole.append(round(seconds * 1000))
    print(f"tidemark from {Path(tidemark.__file__).parent}")
    print(f"{args.query}: the first micro-batch's queryPlanning {planning} ms")
    print(
        f"medians: queryPlanning {statistics.median(planning)} ms, the first micro-batch "
        f"{statistics.median(first)} ms, the whole run {statistics.median(whole)} ms"
    )


if __name__ == "__main__":
    main()
