"""Dataflow triggers through Spark, against Apache Beam's driver: the differential suite
of tests/beam/ in the Spark modes.

Each scenario of ``tests/beam/golden.json`` (panes recorded from Beam's own trigger
driver through tools/beamref's shims) is replayed on Spark with its recorded watermarks
(``order_by`` + ``watermark=``): every window's panes, with their timing, indexes and
last flag both in the result and in the pane columns, the dropped count and the late
side output must be Beam's. The same scenarios run in BATCH against the harness fed
Flink's BATCH order. One Spark job per mode serves the whole sample.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import reduce
from pathlib import Path
from typing import Any

import pytest
from beam.scenarios import LATE, build_assigner, build_trigger

import tidemark as tm
from tidemark.testing import WindowOperatorHarness
from tidemark.time import LONG_MAX, LONG_MIN

pytestmark = pytest.mark.spark

GOLDEN = json.loads((Path(__file__).parents[2] / "beam" / "golden.json").read_text())["cases"]
SAMPLE = 24  # scenarios per mode in `make test`
SCHEMA = "key string, v long, ts long, arrival long, wm long"
OUTPUT = "pane string"


class PaneJson(tm.ProcessWindowFunction):
    """The pane as JSON: key, window, sorted values and ``context.pane()``."""

    def process(self, key, context, elements):  # type: ignore[no-untyped-def]
        window, pane = context.window(), context.pane()
        yield (
            json.dumps(
                [
                    key,
                    [getattr(window, "start", None), getattr(window, "end", None)],
                    sorted(e.v if hasattr(e, "v") else e[1] for e in elements),
                    pane.timing.name,
                    pane.index,
                    pane.non_speculative_index,
                    pane.is_first,
                    pane.is_last,
                ]
            ),
        )


def rows(scenario: dict[str, Any]) -> list[tuple]:
    """The scenario's elements as a recorded stream: each with the watermark in force."""
    out, watermark = [], LONG_MIN
    for event in scenario["events"]:
        if "watermark" in event:
            watermark = max(watermark, event["watermark"])
        else:
            key, value, ts = event["element"]
            out.append((key, value, ts, len(out), watermark))
    return out


def pipeline(scenario: dict[str, Any], df: Any, replay: bool) -> Any:
    stream = tm.from_dataframe(
        df, "ts", order_by="arrival" if replay else None, watermark="wm" if replay else None
    )
    windowed = (
        stream.key_by("key")
        .window(build_assigner(scenario["assigner"]))
        .trigger(build_trigger(scenario["trigger"]))
        .accumulation_mode(getattr(tm.AccumulationMode, scenario["accumulation_mode"]))
        .allowed_lateness(scenario["allowed_lateness"])
    )
    if scenario["late_side_output"]:
        windowed = windowed.side_output_late_data(LATE)
    return windowed.process(PaneJson(), OUTPUT)


def outcome(panes: list[list[Any]], dropped: int, late: list[Any]) -> dict[str, Any]:
    return {
        "panes": Counter(json.dumps(p) for p in panes),
        "dropped": dropped,
        "late": Counter(json.dumps(v) for v in late),
    }


def beam_outcome(beam: dict[str, Any]) -> dict[str, Any]:
    panes = [
        [
            p["key"],
            p["window"],
            p["values"],
            p["timing"],
            p["index"],
            p["non_speculative_index"],
            p["is_first"],
            p["is_last"],
        ]
        for p in beam["panes"]
    ]
    return outcome(panes, beam["dropped"], [[x["key"], x["value"]] for x in beam["late"]])


def batch_reference(scenario: dict[str, Any]) -> dict[str, Any]:
    """Flink BATCH on the harness: per key, its elements by timestamp (ties by the other
    columns, as BATCH orders them), then the final watermark."""
    panes: list[list[Any]] = []
    dropped, late = 0, []
    by_key: dict[str, list[tuple]] = {}
    for row in rows(scenario):
        by_key.setdefault(row[0], []).append(row)
    for members in by_key.values():
        h = WindowOperatorHarness(
            build_assigner(scenario["assigner"]),
            PaneJson(),
            key_selector=lambda r: r.key,
            trigger=build_trigger(scenario["trigger"]),
            allowed_lateness=scenario["allowed_lateness"],
            late_data_tag=LATE if scenario["late_side_output"] else None,
            accumulation_mode=getattr(tm.AccumulationMode, scenario["accumulation_mode"]),
        )
        for key, v, ts, arrival, wm in sorted(members, key=lambda r: (r[2], r[1], r[3], r[4])):
            h.process_element(_row(key, v, ts, arrival, wm), ts)
        h.process_watermark(LONG_MAX)
        panes += [json.loads(value[0]) for value, _ in h.output()]
        dropped += h.num_late_records_dropped
        late += [[e.key, e.v] for e, _ in h.side_output(LATE)]
    # elements that reach only windows whose trigger finished are late in BATCH too
    return outcome(panes, dropped, late)


def _row(key: str, v: int, ts: int, arrival: int, wm: int) -> Any:
    from pyspark.sql import Row

    return Row(key=key, v=v, ts=ts, arrival=arrival, wm=wm)


def run_spark(spark: Any, scenarios: list[dict[str, Any]], replay: bool) -> list[dict[str, Any]]:
    """Every scenario's outcome from ONE collect over the union of their combined frames."""
    from pyspark.sql import functions as F

    frames = []
    for index, scenario in enumerate(scenarios):
        df = spark.createDataFrame(rows(scenario), SCHEMA)
        combined = pipeline(scenario, df, replay).combined_dataframe()
        frames.append(
            combined.select(
                F.lit(index).alias("scenario"),
                F.col("__tm_output").alias("output"),
                F.col("pane"),
                F.col("pane_timing"),
                F.col("pane_index"),
                F.col("pane_is_last"),
                F.col("__tm_side").alias("side"),
                F.col("__tm_dropped").alias("dropped")
                if "__tm_dropped" in combined.columns
                else F.lit(None).cast("long").alias("dropped"),
            )
        )
    union = reduce(lambda a, b: a.unionByName(b), frames)
    found = [{"panes": [], "dropped": 0, "late": []} for _ in scenarios]
    for row in union.collect():
        _add(found[row.scenario], row)
    return [outcome(f["panes"], f["dropped"], f["late"]) for f in found]


def _add(found: dict[str, Any], row: Any) -> None:
    import pickle

    from tidemark.spark.batch.worker import DROPPED_OUTPUT

    if row.output == "main":
        pane = json.loads(row.pane)
        # the pane columns say what context.pane() said
        assert (row.pane_timing, row.pane_index, row.pane_is_last) == (
            pane[3],
            pane[4],
            pane[7],
        ), row
        found["panes"].append(pane)
    elif row.output == DROPPED_OUTPUT:
        found["dropped"] += row.dropped if row.side is None else pickle.loads(row.side)
    elif row.output == LATE.tag_id:
        element = pickle.loads(row.side)
        found["late"].append([element.key, element.v])


def _sample(start: int, count: int) -> list[dict[str, Any]]:
    return [case for case in GOLDEN[start : start + count]]


def test_replay_gives_beams_panes(spark):
    cases = _sample(0, SAMPLE)
    got = run_spark(spark, [c["scenario"] for c in cases], replay=True)
    failures = [
        (c["scenario"]["name"], mine, beam_outcome(c["beam"]))
        for c, mine in zip(cases, got)
        if mine != beam_outcome(c["beam"])
    ]
    assert not failures, failures[0]


def test_batch_gives_the_harness_batch_panes(spark):
    scenarios = [c["scenario"] for c in _sample(SAMPLE, SAMPLE)]
    got = run_spark(spark, scenarios, replay=False)
    failures = [
        (s["name"], mine, batch_reference(s))
        for s, mine in zip(scenarios, got)
        if mine != batch_reference(s)
    ]
    assert not failures, failures[0]


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(4))
def test_replay_gives_beams_panes_many(spark, chunk):
    cases = _sample(2 * SAMPLE + chunk * 80, 80)
    got = run_spark(spark, [c["scenario"] for c in cases], replay=True)
    failures = [
        c["scenario"]["name"] for c, mine in zip(cases, got) if mine != beam_outcome(c["beam"])
    ]
    assert not failures, failures
