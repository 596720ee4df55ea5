"""Tests for `tidemark.timeline`: trace validation, JSON round trip and both renderers."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tidemark.timeline import (
    TraceError,
    load_trace,
    main_timeline,
    save_trace,
    timeline,
    validate_trace,
)

SEED = Path(__file__).parents[1] / "data" / "seed_trace.json"
END_OF_INPUT = 2**63 - 1
T0 = 1590292800000  # 2020-05-24 12:00:00 in Asia/Shanghai


@pytest.fixture
def seed() -> dict[str, Any]:
    return load_trace(SEED)


def test_seed_trace_is_the_flink_user_behaviour_run(seed: dict[str, Any]) -> None:
    validate_trace(seed)
    labels = [e["label"] for e in seed["elements"]]
    assert labels == [
        "event1",
        "event2",
        "event4",
        "event5",
        "event7",
        "event3",
        "event6",
        "event8",
        "event9",
    ]
    dropped = [e["label"] for e in seed["elements"] if e["status"] == "dropped"]
    assert dropped == ["event3"]
    assert {(f["key"], f["arrival"], f["result"]) for f in seed["firings"]} == {
        ("cart", 3, "1"),
        ("pv", 3, "2"),
        ("pv", 9, "2"),
        ("buy", 9, "2"),
        ("cart", 9, "1"),
    }
    assert seed["watermarks"][3] == {"arrival": 3, "ts": T0 + 4999}
    assert seed["watermarks"][-1] == {"arrival": 9, "ts": END_OF_INPUT}


def test_html_is_self_contained_and_labels_half_open_windows(
    seed: dict[str, Any], tmp_path: Path
) -> None:
    out = timeline(seed, tmp_path / "run.html")
    assert out == tmp_path / "run.html"
    page = out.read_text(encoding="utf-8")
    assert len(page) > 5000
    assert "<svg" in page and "</svg>" in page
    assert "[12:00:00, 12:00:05)" in page and "[12:00:05, 12:00:10)" in page
    assert "12:00:04.999)" not in page and "12:00:09.999" not in page  # no inclusive ends
    assert "end of input" in page
    assert "event3" in page and "key = buy" in page
    for external in ("<script", "http://", "https://", "<link"):
        assert external not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_png_is_a_real_image(seed: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = timeline(seed, tmp_path / "run.PNG", title="custom title")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000


def test_global_window_and_plain_ms_render(tmp_path: Path) -> None:
    trace = {
        "elements": [
            {"key": ["k", 1], "ts": 5, "arrival": 0, "label": "a", "status": "side_output"}
        ],
        "watermarks": [{"arrival": -1, "ts": -(2**63)}, {"arrival": 0, "ts": 4}],
        "windows": [{"key": ["k", 1], "start": None, "end": None}],
        "firings": [
            {
                "key": ["k", 1],
                "start": None,
                "end": None,
                "arrival": 1,
                "watermark": 4,
                "kind": "early",
                "result": "[a]",
            }
        ],
    }
    page = timeline(trace, tmp_path / "g.html").read_text(encoding="utf-8")
    assert "GlobalWindow" in page and "event time (ms)" in page and "(k, 1)" in page


def test_empty_trace_renders(tmp_path: Path) -> None:
    trace: dict[str, Any] = {"elements": [], "watermarks": [], "windows": [], "firings": []}
    assert "<svg" in timeline(trace, tmp_path / "empty.html").read_text(encoding="utf-8")


def test_unknown_suffix_names_the_parameter(seed: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"`path` must end with '\.png' or '\.html'; got .*x\.svg"):
        timeline(seed, tmp_path / "x.svg")


def test_save_load_round_trip(seed: dict[str, Any], tmp_path: Path) -> None:
    assert load_trace(save_trace(seed, tmp_path / "again.json")) == seed


def _mutated(seed: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    trace = copy.deepcopy(seed)
    target: Any = trace
    for step in path[:-1]:
        target = target[step]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return trace


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        pytest.param(
            ("elements", 0, "status"),
            "late",
            "trace['elements'][0]['status'] must be one of 'on_time', 'late_firing', "
            "'side_output', 'dropped'; got 'late'",
            id="unknown-status",
        ),
        pytest.param(
            ("elements", 2, "ts"),
            "12:00:04",
            "trace['elements'][2]['ts'] must be an int; got '12:00:04'",
            id="ts-not-int",
        ),
        pytest.param(
            ("elements", 2, "ts"),
            True,
            "trace['elements'][2]['ts'] must be an int; got True",
            id="ts-bool",
        ),
        pytest.param(
            ("elements", 1, "arrival"),
            5,
            "trace['elements'][1]['arrival'] must equal its position 1",
            id="arrival-order",
        ),
        pytest.param(
            ("elements", 0, "colour"),
            "red",
            "trace['elements'][0] has unknown field(s) ['colour']",
            id="unknown-field",
        ),
        pytest.param(
            ("elements", 0, "label"),
            _DELETE,
            "trace['elements'][0] is missing field(s) ['label']",
            id="missing-field",
        ),
        pytest.param(
            ("elements", 0, "key"),
            {"a": 1},
            "trace['elements'][0]['key'] must be a str, number, bool, None or a list",
            id="key-type",
        ),
        pytest.param(
            ("windows", 0, "end"),
            T0,
            "trace['windows'][0] must have start < end, or both None for GlobalWindow; "
            f"got start={T0}, end={T0}",
            id="empty-window",
        ),
        pytest.param(
            ("windows", 0, "end"),
            None,
            "trace['windows'][0] must have start < end, or both None",
            id="half-global",
        ),
        pytest.param(
            ("windows", 1),
            {"key": "pv", "start": T0, "end": T0 + 5000},
            "trace['windows'][1] repeats window",
            id="duplicate-window",
        ),
        pytest.param(
            ("firings", 0, "kind"),
            "final",
            "trace['firings'][0]['kind'] must be one of 'early', 'on_time', 'late', 'retraction'; got 'final'",
            id="unknown-kind",
        ),
        pytest.param(
            ("firings", 0, "arrival"),
            10,
            "trace['firings'][0]['arrival'] must be in [-1, 9]; got 10",
            id="arrival-range",
        ),
        pytest.param(
            ("firings", 0, "result"),
            1,
            "trace['firings'][0]['result'] must be a str; got 1",
            id="result-str",
        ),
        pytest.param(
            ("firings", 0, "key"),
            "nope",
            "trace['firings'][0] fires a window not listed in trace['windows']",
            id="unknown-window",
        ),
        pytest.param(
            ("watermarks", 4, "ts"),
            T0,
            "trace['watermarks'][4] must come after the previous watermark",
            id="watermark-back",
        ),
        pytest.param(
            ("watermarks", 4, "arrival"),
            3,
            "trace['watermarks'][4] must come after the previous watermark",
            id="watermark-arrival",
        ),
        pytest.param(
            ("time_zone",),
            "Mars/Olympus",
            "trace['time_zone'] must be an IANA zone name",
            id="time-zone",
        ),
        pytest.param(("title",), 5, "trace['title'] must be a str; got 5", id="title"),
        pytest.param(("firings",), {}, "trace['firings'] must be a list; got dict", id="not-list"),
        pytest.param(("extra",), [], "trace has unknown field(s) ['extra']", id="top-unknown"),
        pytest.param(
            ("windows",), _DELETE, "trace is missing field(s) ['windows']", id="top-missing"
        ),
    ],
)
def test_validation_errors_name_the_field(
    seed: dict[str, Any], path: tuple[Any, ...], value: Any, message: str
) -> None:
    with pytest.raises(TraceError) as info:
        validate_trace(_mutated(seed, path, value))
    assert isinstance(info.value, ValueError)
    assert message in str(info.value)


def test_not_a_dict() -> None:
    with pytest.raises(TraceError, match=r"^trace must be a dict; got list \[\]$"):
        validate_trace([])


def test_timeline_validates_before_drawing(seed: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="status"):
        timeline(_mutated(seed, ("elements", 0, "status"), "x"), tmp_path / "x.html")
    assert not (tmp_path / "x.html").exists()


def test_main_timeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.html"
    assert main_timeline([str(SEED), str(out)]) == 0
    assert out.exists() and str(out) in capsys.readouterr().out
    assert main_timeline([str(tmp_path / "missing.json"), str(out)]) == 1
    assert "tidemark timeline: error:" in capsys.readouterr().err
    assert main_timeline([str(SEED), str(tmp_path / "out.gif")]) == 1
    assert "`path` must end with" in capsys.readouterr().err
    assert main_timeline([str(SEED)]) == 2


def test_importing_needs_no_matplotlib() -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None; import tidemark.timeline as t; "
        "assert 'matplotlib' not in [m for m in sys.modules if sys.modules[m]]"
    )
    src = str(Path(__file__).parents[2] / "src")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=src)
