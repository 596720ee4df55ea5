"""tools/kafka/jars.py without Maven: what it fetches for the installed PySpark, and where."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pyspark
import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools" / "kafka"))
import jars  # noqa: E402  (tools/kafka/jars.py)


def test_the_connector_is_the_installed_pysparks_own():
    assert jars.versions()["SPARK_KAFKA"] == (
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    )


def test_another_release_is_named_by_the_environment(monkeypatch):
    monkeypatch.setenv("TIDEMARK_SPARK_KAFKA_VERSION", "4.2.0")
    assert jars.versions()["SPARK_KAFKA"].endswith(":4.2.0")
    assert jars.folder("connector").name == "connector-4.2.0"
    assert jars.folder("broker").name == "broker"


def test_the_jars_folder_is_chosen_by_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TIDEMARK_JARS_DIR", str(tmp_path))
    moved = importlib.reload(jars)
    try:
        assert moved.folder("broker") == tmp_path / "broker"
        assert not moved.fetched("broker")
    finally:
        monkeypatch.delenv("TIDEMARK_JARS_DIR")
        importlib.reload(jars)


def test_the_pins_file_pins_the_pyspark_versions_the_makefile_reads():
    pins = jars.versions()
    tested = pins["PYSPARK_TESTED"].split()
    assert pins["PYSPARK"] in tested and pins["PYSPARK_OLDEST"] == min(
        tested, key=lambda v: tuple(map(int, v.split(".")))
    )


@pytest.mark.parametrize(
    "said, served",
    [
        pytest.param("Could not find artifact org.apache.spark:spark-sql-kafka", False, id="404"),
        pytest.param("Could not transfer artifact ... Connection refused", True, id="offline"),
    ],
)
def test_a_connector_maven_lacks_is_told_apart_from_an_unreachable_maven(said, served):
    assert jars._not_served(said) is not served
