"""The timeline draws one watermark per source partition beside the source's (their
minimum), from a trace's optional ``partition_watermarks`` (``tools/TRACE.md``)."""

from __future__ import annotations

import pytest

from tidemark.timeline import TraceError, timeline, validate_trace

TRACE = {
    "title": "two partitions, one lagging",
    "elements": [
        {"key": "s0", "ts": 6_000, "arrival": 0, "label": "s0@6", "status": "on_time"},
        {"key": "s1", "ts": 1_000, "arrival": 1, "label": "s1@1", "status": "on_time"},
        {"key": "s0", "ts": 12_000, "arrival": 2, "label": "s0@12", "status": "on_time"},
        {"key": "s1", "ts": 11_000, "arrival": 3, "label": "s1@11", "status": "on_time"},
    ],
    "watermarks": [{"arrival": 1, "ts": -1}, {"arrival": 3, "ts": 8_999}],
    "windows": [{"key": "s0", "start": 0, "end": 10_000}, {"key": "s1", "start": 0, "end": 10_000}],
    "firings": [],
    "partition_watermarks": [
        {"partition": 0, "arrival": 0, "ts": 3_999},
        {"partition": 1, "arrival": 1, "ts": -1},
        {"partition": 0, "arrival": 2, "ts": 9_999},
        {"partition": 1, "arrival": 3, "ts": 8_999},
    ],
}


def test_partition_watermarks_are_drawn_in_html(tmp_path):
    page = timeline(TRACE, tmp_path / "run.html").read_text()
    assert "watermark of partition 0" in page and "watermark of partition 1" in page
    assert page.count("<polyline") == 2 * 3  # per lane: the source's and each partition's


def test_partition_watermarks_are_drawn_in_png(tmp_path):
    pytest.importorskip("matplotlib")
    assert timeline(TRACE, tmp_path / "run.png").stat().st_size > 10_000


def test_a_partition_watermark_going_back_is_refused():
    bad = {**TRACE, "partition_watermarks": [
        {"partition": 0, "arrival": 0, "ts": 3_999}, {"partition": 0, "arrival": 2, "ts": 10},
    ]}  # fmt: skip
    with pytest.raises(TraceError, match=r"partition 0's watermarks: .* ts never decreasing"):
        validate_trace(bad)
    with pytest.raises(TraceError, match=r"\['partition'\] must be an int or str"):
        validate_trace({**TRACE, "partition_watermarks": [{"partition": 1.5, "arrival": 0,
                                                           "ts": 0}]})  # fmt: skip
