"""The seed article's user-behaviour example, run on local Spark: ``tidemark demo``.

Nine events (page views ``pv``, add-to-cart ``cart``, purchases ``buy``) of
2020-05-24 12:00:00 to 12:00:09 (+08:00) arrive out of order; 5-second tumbling
event-time windows keyed by action count them. The stream is replayed in its arrival
order (the watermark after every element is the largest timestamp seen minus 1 ms), in
three variants:

a. as in the article: ``event3`` (buy, 12:00:03) arrives after the watermark passed
   12:00:05 and is dropped;
b. with ``allowed_lateness``: the window ``[12:00:00, 12:00:05)`` of ``buy`` is kept a
   little longer, so ``event3`` makes a late firing;
c. with ``side_output_late_data``: ``event3`` is caught in the side output.

Each variant runs on Spark (``tidemark.spark``) and, for the picture, on the engine
with a :class:`~tidemark._engine.trace.Tracer`; the demo checks that they agree and
that the results are the article's. It writes each run's trace (JSON) and timeline
(PNG and HTML) to the output directory.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO
from zoneinfo import ZoneInfo

from tidemark.assigners import TumblingEventTimeWindows
from tidemark.functions import ProcessWindowContext, ProcessWindowFunction
from tidemark.outputs import OutputTag
from tidemark.time import LONG_MAX
from tidemark.windows import TimeWindow

__all__ = ["run_demo", "CountPerWindow", "EVENTS", "ARTICLE_RESULTS"]

ZONE_NAME = "Asia/Shanghai"
_ZONE = ZoneInfo(ZONE_NAME)
T0_MS = int(datetime(2020, 5, 24, 12, 0, tzinfo=_ZONE).timestamp() * 1000)
WINDOW_MS = 5000

#: ``(id, action, seconds after 12:00:00)`` in the order the article's source sent them.
EVENTS = (
    ("event1", "pv", 0),
    ("event2", "cart", 1),
    ("event4", "pv", 4),
    ("event5", "pv", 5),
    ("event7", "buy", 7),
    ("event3", "buy", 3),
    ("event6", "cart", 6),
    ("event8", "buy", 8),
    ("event9", "pv", 9),
)

#: The article's output: ``(window start in seconds after 12:00:00, action) -> count``.
ARTICLE_RESULTS = {(0, "cart"): 1, (0, "pv"): 2, (5, "pv"): 2, (5, "buy"): 2, (5, "cart"): 1}

LATE = OutputTag("late-events")
_OUTPUT_SCHEMA = "action string, window_start long, window_end long, n long, watermark long"
_HEARTBEAT_S = 15.0

# Spark's driver logs through log4j2; without a configuration it prints its default
# profile's banner and WARN lines (loopback address, native Hadoop) before any code of
# ours can lower the level. The root stays at WARN (what PySpark's shell expects, else
# it prints a "Setting default log level" banner) while the console shows only errors.
_LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = error
"""


class CountPerWindow(ProcessWindowFunction):
    """Emits ``(action, window start, window end, count, watermark at firing)``."""

    def process(
        self, key: Any, context: ProcessWindowContext, elements: Any
    ) -> Iterator[tuple[Any, int, int, int, int]]:
        window = context.window()
        assert isinstance(window, TimeWindow)
        count = sum(1 for _ in elements)
        yield key, window.start, window.end, count, context.current_watermark()


@dataclass(frozen=True)
class Variant:
    """One run of the pipeline, with what the article's semantics say it must give."""

    letter: str
    slug: str
    heading: str
    allowed_lateness_ms: int = 0
    side_output: bool = False
    late_firing: bool = False  # event3 makes a late firing of buy [12:00:00, 12:00:05)


VARIANTS = (
    Variant("a", "a-plain", "as in the article (allowed_lateness 0)"),
    Variant(
        "b",
        "b-allowed-lateness",
        "allowed_lateness 3 s",
        allowed_lateness_ms=3000,
        late_firing=True,
    ),
    Variant(
        "c", "c-side-output", "side_output_late_data(OutputTag('late-events'))", side_output=True
    ),
)


# ---------------------------------------------------------------------------- formatting


def _clock(ms: int, precise: bool = False) -> str:
    stamp = datetime.fromtimestamp(ms / 1000, tz=timezone.utc).astimezone(_ZONE)
    return stamp.strftime("%H:%M:%S.%f")[:12] if precise else stamp.strftime("%H:%M:%S")


def _interval(start: int, end: int) -> str:
    return f"[{_clock(start)}, {_clock(end)})"


def _watermark(ms: int) -> str:
    return "end of input (+inf)" if ms >= LONG_MAX else _clock(ms, precise=True)


def _say(text: str = "", out: TextIO | None = None) -> None:
    print(text, file=out or sys.stdout, flush=True)


@contextmanager
def _progress(label: str) -> Iterator[None]:
    """Print `label`, a heartbeat while it runs long, then how long it took."""
    _say(f"{label} …")
    started = time.monotonic()
    done = threading.Event()

    def beat() -> None:
        while not done.wait(_HEARTBEAT_S):
            _say(f"    … still working ({time.monotonic() - started:.0f} s)")

    thread = threading.Thread(target=beat, name="tidemark-demo-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
    _say(f"    done in {time.monotonic() - started:.1f} s")


# ---------------------------------------------------------------------------- Spark


def _quiet_conf() -> dict[str, str]:
    """Spark settings that keep the driver's log4j2 at ERROR from the first line."""
    path = Path(tempfile.gettempdir()) / "tidemark-log4j2-error.properties"
    if not path.exists() or path.read_text(encoding="utf-8") != _LOG4J2:
        path.write_text(_LOG4J2, encoding="utf-8")
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={path.as_uri()}"}


def _quiet_python() -> None:
    # PySpark 4 warns on every pandas UDF that it prefers pandas < 3; workers inherit
    # PYTHONWARNINGS from this process.
    message = ".*PySpark does not yet fully support pandas.*"
    warnings.filterwarnings("ignore", message=message, category=FutureWarning)
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")


def _start_spark() -> Any:
    from tidemark.spark.runtime.session import get_spark

    _quiet_python()
    return get_spark(master="local[2]", app_name="tidemark-demo", conf=_quiet_conf())


def _input_frame(spark: Any) -> Any:
    rows = [
        (action, ident, datetime.fromtimestamp((T0_MS + s * 1000) / 1000, tz=_ZONE), n)
        for n, (ident, action, s) in enumerate(EVENTS)
    ]
    return spark.createDataFrame(rows, "action string, id string, ts timestamp, arrival long")


def _run_on_spark(df: Any, variant: Variant) -> tuple[list[Any], list[Any], int]:
    """The variant's window results, late side output (Rows) and dropped count."""
    import tidemark as tm

    windowed = (
        # the article's watermark: monotonous timestamps, chosen explicitly
        tm.from_dataframe(
            df,
            timestamp="ts",
            order_by="arrival",
            watermark_strategy=tm.WatermarkStrategy.for_monotonous_timestamps(),
        )
        .key_by("action")
        .window(TumblingEventTimeWindows.of(WINDOW_MS))
    )
    if variant.allowed_lateness_ms:
        windowed = windowed.allowed_lateness(variant.allowed_lateness_ms)
    if variant.side_output:
        windowed = windowed.side_output_late_data(LATE)
    result = windowed.process(CountPerWindow(), output_schema=_OUTPUT_SCHEMA)
    rows = result.to_dataframe().collect()
    late = result.get_side_output(LATE).to_dataframe().collect() if variant.side_output else []
    return rows, late, result.num_late_records_dropped()


# ---------------------------------------------------------------------------- engine


def _engine_trace(variant: Variant, allowed_lateness_ms: int | None = None) -> dict[str, Any]:
    from tidemark.testing import replay_trace

    lateness = variant.allowed_lateness_ms if allowed_lateness_ms is None else allowed_lateness_ms
    title = (
        f"({variant.letter}) user behaviour, 5 s tumbling windows keyed by action"
        + (f", allowed lateness {lateness // 1000} s" if lateness else "")
        + (", late data to a side output" if variant.side_output else "")
    )
    elements = [((action, ident), T0_MS + s * 1000, ident) for ident, action, s in EVENTS]
    return replay_trace(
        TumblingEventTimeWindows.of(WINDOW_MS),
        CountPerWindow(),
        elements,
        key_selector=lambda value: value[0],
        allowed_lateness=lateness,
        late_data_tag=LATE if variant.side_output else None,
        title=title,
        time_zone=ZONE_NAME,
        describe=lambda r: f"{r[3]} {r[0]}",
    )


def _watermark_at(trace: dict[str, Any], arrival: int) -> int | None:
    """The watermark in force when element `arrival` came (after the one before it)."""
    marks = [w["ts"] for w in trace["watermarks"] if w["arrival"] < arrival]
    return marks[-1] if marks else None


# ---------------------------------------------------------------------------- checks


def _expected(variant: Variant) -> dict[tuple[str, int, int], list[int]]:
    want: dict[tuple[str, int, int], list[int]] = {}
    for (start_s, action), count in ARTICLE_RESULTS.items():
        start = T0_MS + start_s * 1000
        want.setdefault((action, start, start + WINDOW_MS), []).append(count)
    if variant.late_firing:
        want[("buy", T0_MS, T0_MS + WINDOW_MS)] = [1]
    return want


def _problems(
    variant: Variant, rows: list[Any], late: list[Any], trace: dict[str, Any]
) -> list[str]:
    """Where Spark, the engine and the article disagree (empty when all is well)."""
    got: dict[tuple[str, int, int], list[int]] = {}
    for r in rows:
        got.setdefault((r.action, r.window_start, r.window_end), []).append(r.n)
    problems = []
    if got != _expected(variant):
        problems.append(f"Spark's window results differ from the expected ones: {got}")
    engine = sorted((f["key"], f["start"], f["result"]) for f in trace["firings"])
    spark = sorted((r.action, r.window_start, f"{r.n} {r.action}") for r in rows)
    if engine != spark:
        problems.append(f"Spark and the engine disagree: {spark} vs {engine}")
    late_ids = [r.id for r in late]
    if late_ids != (["event3"] if variant.side_output else []):
        problems.append(f"late side output should be ['event3']; got {late_ids}")
    want = (
        "late_firing"
        if variant.late_firing
        else ("side_output" if variant.side_output else "dropped")
    )
    statuses = {e["label"]: e["status"] for e in trace["elements"] if e["status"] != "on_time"}
    if statuses != {"event3": want}:
        problems.append(f"the engine should mark only event3 as {want}; got {statuses}")
    return problems


# ---------------------------------------------------------------------------- printing


def _print_windows(rows: list[Any], trace: dict[str, Any]) -> None:
    kinds = {(f["key"], f["start"], f["watermark"]): f["kind"] for f in trace["firings"]}
    ordered = sorted(rows, key=lambda r: (r.watermark, r.window_start, r.action))
    _say(f"  {'window':<22} {'key':<5} {'count':>5}  {'fired at watermark':<20} firing")
    for r in ordered:
        kind = kinds.get((r.action, r.window_start, r.watermark), "?").replace("_", "-")
        _say(
            f"  {_interval(r.window_start, r.window_end):<22} {r.action:<5} {r.n:>5}  "
            f"{_watermark(r.watermark):<20} {kind}"
        )


def _late_line(element: dict[str, Any], trace: dict[str, Any]) -> str:
    watermark = _watermark_at(trace, element["arrival"])
    at = _watermark(watermark) if watermark is not None else "none yet"
    return (
        f"{element['label']} ({element['key']}, {_clock(element['ts'])}, arrival "
        f"{element['arrival']}) came at watermark {at}"
    )


def _print_late(variant: Variant, late: list[Any], trace: dict[str, Any], dropped: int) -> None:
    behind = [e for e in trace["elements"] if e["status"] != "on_time"]
    for element in behind:
        line = _late_line(element, trace)
        if element["status"] == "dropped":
            _say(f"  late: {line}: dropped\n        num_late_records_dropped() on Spark: {dropped}")
        elif element["status"] == "late_firing":
            _say(f"  late: {line}:\n        within the allowed lateness: the late firing above")
        else:
            _say(f"  late: {line}:\n        sent to the side output")
    for r in late:
        stamp = r.ts.astimezone(_ZONE).strftime("%H:%M:%S")
        _say(
            f"  side output 'late-events' (Spark): action={r.action} id={r.id} ts={stamp} "
            f"arrival={r.arrival}"
        )


def _print_lateness_boundary() -> None:
    """Why variant (b) allows 3 s: with 2 s event3 comes exactly at the cleanup time."""
    trace = _engine_trace(VARIANTS[1], allowed_lateness_ms=2000)
    event3 = next(e for e in trace["elements"] if e["label"] == "event3")
    cleanup = T0_MS + WINDOW_MS - 1 + 2000
    _say(
        f"  Why 3 s: with 2 s the window's state is cleaned when the watermark reaches "
        f"{_clock(cleanup, True)}\n  (end - 1 ms + 2 s), and event7 brought exactly that "
        f"watermark before event3 came;\n  the engine replay with 2 s: event3 "
        f"{event3['status']}."
    )


def _print_pictures(paths: Sequence[Path]) -> None:
    _say("Timelines (elements by arrival, watermark, windows, firings) and traces:")
    for path in paths:
        _say(f"  {path}")
    _say("Redraw a saved trace with: tidemark timeline RUN.json OUT.png")


# ---------------------------------------------------------------------------- the demo


def _write_run(trace: dict[str, Any], out_dir: Path, slug: str) -> list[Path]:
    from tidemark.timeline import save_trace, timeline

    paths = [save_trace(trace, out_dir / f"{slug}.json"), timeline(trace, out_dir / f"{slug}.html")]
    try:
        paths.insert(1, timeline(trace, out_dir / f"{slug}.png"))
    except ImportError as exc:  # matplotlib is optional: tidemark[plot]
        _say(f"  (no PNG: {exc})")
    return paths


def _run_variant(df: Any, variant: Variant, number: int, out_dir: Path) -> tuple[bool, list[Path]]:
    with _progress(
        f"running replay {number}/{len(VARIANTS)} on Spark: ({variant.letter}) {variant.heading}"
    ):
        rows, late, dropped = _run_on_spark(df, variant)
    trace = _engine_trace(variant)
    _say()
    _say(f"({variant.letter}) {variant.heading}")
    if variant.late_firing:
        _print_lateness_boundary()
    _print_windows(rows, trace)
    _print_late(variant, late, trace, dropped)
    problems = _problems(variant, rows, late, trace)
    expected_dropped = sum(e["status"] == "dropped" for e in trace["elements"])
    if dropped != expected_dropped:
        problems.append(f"Spark dropped {dropped} late elements, the engine {expected_dropped}")
    for problem in problems:
        _say(f"  PROBLEM: {problem}")
    _say()
    return not problems, _write_run(trace, out_dir, variant.slug)


def run_demo(out_dir: str | os.PathLike[str] = "tidemark-demo") -> int:
    """Run the seed example's three variants on local Spark and write their timelines.

    Parameters
    ----------
    out_dir : str or os.PathLike
        Where the traces (``*.json``) and timelines (``*.png``, ``*.html``) go; created
        when missing.

    Returns
    -------
    int
        0 when every variant gave the article's results (and Spark agreed with the
        engine), else 1.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _say(
        "tidemark demo: the seed article's user-behaviour events, 5 s tumbling windows "
        "keyed by action,\nreplayed on Spark in arrival order "
        + " ".join(ident for ident, _, _ in EVENTS)
        + ";\nwatermark = largest "
        "timestamp seen - 1 ms; times in +08:00."
    )
    with _progress("starting Spark (local[2]; the first start takes a while)"):
        df = _input_frame(_start_spark())
    ok, paths = True, list[Path]()
    for number, variant in enumerate(VARIANTS, start=1):
        good, written = _run_variant(df, variant, number, out)
        ok, paths = ok and good, paths + written
    _print_pictures(paths)
    _say(
        "All three runs match the article's results."
        if ok
        else "Some runs went wrong: see PROBLEM above."
    )
    return 0 if ok else 1
