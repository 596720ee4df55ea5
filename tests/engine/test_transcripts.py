"""Every transcript runs on the engine; the self-test transcripts must fail."""

from __future__ import annotations

from pathlib import Path

import pytest
from transcript import (
    TranscriptError,
    TranscriptMismatch,
    check_engine,
    load_transcripts,
)

CASES = load_transcripts()
REAL = [c for c in CASES if not c.must_fail]
SELF_TESTS = [c for c in CASES if c.must_fail]


@pytest.mark.parametrize("case", REAL, ids=[c.name for c in REAL])
def test_transcript_on_engine(case):
    check_engine(case)


@pytest.mark.parametrize("case", SELF_TESTS, ids=[c.name for c in SELF_TESTS])
def test_self_test_transcript_fails(case):
    with pytest.raises(TranscriptMismatch):
        check_engine(case)


def test_there_are_self_tests_and_real_cases():
    assert len(SELF_TESTS) >= 5
    assert len(REAL) >= 1


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "case.yaml"
    path.write_text(text)
    return path


MINIMAL = """
- name: {name}
  window: {{assigner: {{type: GlobalWindows}}, function: sum}}
  steps: [{{element: [a, 1, 1]}}]
"""


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param("[]", "non-empty list", id="empty-file"),
        pytest.param(
            MINIMAL.format(name="x") + "  colour: red\n", "unknown keys", id="unknown-key"
        ),
        pytest.param(
            MINIMAL.format(name="x") + MINIMAL.format(name="x"),
            "duplicate case name",
            id="dup-name",
        ),
        pytest.param(
            "- name: x\n  name: y\n  window: {}\n  steps: []\n", "duplicate key", id="dup-key"
        ),
        pytest.param(
            MINIMAL.format(name="x").replace("function: sum", "function: nope"),
            "unknown function",
            id="unknown-function",
        ),
        pytest.param(
            MINIMAL.format(name="x").replace("element: [a, 1, 1]", "element: [a, 1]"),
            "element must be",
            id="bad-element",
        ),
    ],
)
def test_malformed_transcripts_are_rejected(tmp_path, text, message):
    with pytest.raises(TranscriptError, match=message):
        load_transcripts([_write(tmp_path, text)])


def test_no_files_is_an_error(tmp_path):
    with pytest.raises(TranscriptError, match="no transcripts"):
        load_transcripts([])
