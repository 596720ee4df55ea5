"""A user's own session on a machine outside UTC, as a script: ``TZ`` is set for the
driver, the JVM (whose zone ``SparkSession.builder.getOrCreate()`` makes the session's
time zone) and the Python workers. The daylight-saving data of ``test_time_zones`` runs
in BATCH, replay and streaming (NTZ event time; zoned and string in one mode each);
prints one JSON line: the
failures found (an empty list when every mode gives the UTC windows and instants).

Run by tests/spark/protocol/test_time_zones.py; by hand: ``TZ=America/New_York python tests/support/tz_check.py
<workdir>``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import search_path  # noqa: E402

search_path.put_on_path()  # the test modules, by name

import test_time_zones as z  # noqa: E402


def main(workdir: Path) -> list[str]:
    from pyspark.sql import SparkSession

    from tidemark.spark.runtime._java import ensure_java

    ensure_java()
    time.tzset()
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    failures = [f"session zone {spark.conf.get('spark.sql.session.timeZone')}, not the JVM's"]
    if spark.conf.get("spark.sql.session.timeZone") == os.environ["TZ"]:
        failures = []
    runs = [("ntz", mode) for mode in ("batch", "replay", "streaming")]
    for kind, mode in [*runs, ("zoned", "streaming"), ("string", "replay")]:
        got = z._run(spark, mode, kind, workdir / f"{kind}-{mode}")
        normalised = sorted((k, s, v, list(at)) for k, s, v, at in got)
        if normalised != z.EXPECTED:
            failures.append(f"{kind} {mode}: {normalised}")
    spark.stop()
    return failures


if __name__ == "__main__":
    print("TZ-RESULT " + json.dumps(main(Path(sys.argv[1]))))
