"""The documentation's code runs: every ```pycon block of a page in docs/ is a doctest.

The blocks of one page share a namespace, in page order, with ``docs/examples`` on the
path (the concept pages show code from ``docs/examples/concepts.py`` and check it here).
Spark examples live in ``docs/examples/*.py`` and run in ``tests/docs/test_docs_examples.py``.
"""

from __future__ import annotations

import doctest
import re
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)
BLOCK = re.compile(r"^```pycon\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def page_doctest(page: Path) -> doctest.DocTest | None:
    blocks = BLOCK.findall(page.read_text())
    if not blocks:
        return None
    text = "\n".join(blocks)
    name = str(page.relative_to(DOCS)) if page.is_relative_to(DOCS) else page.name
    return doctest.DocTestParser().get_doctest(text, {}, name, str(page), 0)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_page_examples_run(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    test = page_doctest(page)
    if test is None:
        pytest.skip("no pycon examples on this page")
    monkeypatch.syspath_prepend(str(DOCS / "examples"))
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test, out=sys.stdout.write)
    assert runner.failures == 0, f"{runner.failures} failing example(s) on {test.name}"


def test_a_failing_example_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```pycon\n>>> 1 + 1\n3\n```\n")
    test = page_doctest(page)
    assert test is not None and len(test.examples) == 1
    runner = doctest.DocTestRunner()
    runner.run(test, out=lambda _: None)
    assert runner.failures == 1
