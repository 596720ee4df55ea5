"""Shipping tidemark to executors without Spark: the zip of the installed package, the
helper's once-per-session shipping, and the version pins the workers are checked against
(parsed and compared on the driver, with and without :mod:`packaging`)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import tidemark as tm
from tidemark.errors import SessionSetupError
from tidemark.spark.runtime import preflight, shipping
from tidemark.spark.runtime.preflight import (
    _check_imports,
    _check_versions,
    _satisfies_release,
    satisfies,
    split_requirement,
    worker_requirements,
)
from tidemark.spark.runtime.shipping import package_zip, ship_to_executors, write_package_zip

ROOT = Path(__file__).resolve().parents[3]
VERSION = tm.__version__
PINS = ("pyspark<5,>=4.0.0", "pyarrow>=15.0", "pandas<3,>=2.0", "protobuf>=4.25")


# ---------------------------------------------------------------- pins
def test_the_pins_are_pyprojects_unconditional_dependencies():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    as_set = {(r.name, r.specifier) for r in map(Requirement, declared)}
    assert {(r.name, r.specifier) for r in map(Requirement, worker_requirements())} == as_set


@pytest.mark.parametrize(
    "requirement, expected",
    [
        pytest.param("pandas<3,>=2.0", ("pandas", "<3,>=2.0"), id="pinned"),
        pytest.param("pyarrow", ("pyarrow", ""), id="bare"),
        pytest.param("pyspark[connect]<5,>=4.0.0", ("pyspark", "<5,>=4.0.0"), id="extras"),
        pytest.param("protobuf (>=4.25)", ("protobuf", ">=4.25"), id="parenthesised"),
        pytest.param("grpcio-status>=1.67.0", ("grpcio-status", ">=1.67.0"), id="dash"),
    ],
)
def test_split_requirement(requirement, expected):
    assert split_requirement(requirement) == expected


VERSIONS = [
    pytest.param("2.3.3", "<3,>=2.0", True, id="pandas-2.3-in"),
    pytest.param("3.1.0", "<3,>=2.0", False, id="pandas-3.1-out"),
    pytest.param("3.0.0", "<3,>=2.0", False, id="upper-bound-excluded"),
    pytest.param("2.0", ">=2.0", True, id="lower-bound-included"),
    pytest.param("2.0.0", "<3,>=2.0", True, id="trailing-zeros"),
    pytest.param("1.5.3", "<3,>=2.0", False, id="too-old"),
    pytest.param("14.0.2", ">=15.0", False, id="pyarrow-14"),
    pytest.param("26.0.1", ">=15.0", True, id="pyarrow-26"),
    pytest.param("4.25.0", ">=4.25", True, id="protobuf-at-pin"),
    pytest.param("4.3.0", "<5,>=4.0.0", True, id="pyspark-4.3"),
    pytest.param("5.0.0", "<5,>=4.0.0", False, id="pyspark-5"),
    pytest.param("4.0.0", "<4.4,>=4.0", True, id="pyspark-oldest-tested"),
    pytest.param("4.3.9", "<4.4,>=4.0", True, id="pyspark-4.3-patch"),
    pytest.param("4.4.0", "<4.4,>=4.0", False, id="pyspark-4.4-out"),
    pytest.param("2.1.0", "!=2.1.0", False, id="excluded"),
    pytest.param("2.1.0", "==2.1", True, id="equal"),
    pytest.param("2.1.0", "", True, id="no-pin"),
]


@pytest.mark.parametrize("version, specifier, ok", VERSIONS)
def test_satisfies_with_packaging(version, specifier, ok):
    assert satisfies(version, specifier) is ok


@pytest.mark.parametrize("version, specifier, ok", VERSIONS)
def test_satisfies_without_packaging(version, specifier, ok, monkeypatch):
    monkeypatch.setattr(preflight, "SpecifierSet", None)
    assert satisfies(version, specifier) is ok
    assert _satisfies_release(version, specifier) is ok


# ---------------------------------------------------------------- the workers' report
def _report(**versions):
    """A worker's report: tidemark's version and the four dependencies', any replaced."""
    report = {"": {"python": "/opt/worker/bin/python"}}
    defaults = {"tidemark": VERSION, "pyspark": "4.3.0", "pyarrow": "26.0.1"}
    defaults |= {"pandas": "2.3.3", "protobuf": "5.29.0"}
    for name, version in (defaults | versions).items():
        if isinstance(version, Exception):
            report[name] = {"error": f"{name}: {type(version).__name__}: {version}"}
        else:
            report[name] = {"version": version, "file": f"/opt/worker/{name}/__init__.py"}
    return report


def test_a_matching_worker_passes():
    _check_imports(_report(), "tidemark")
    _check_versions(_report(), "tidemark", PINS)


def test_a_dependency_outside_its_pin_is_named_with_the_version_the_pin_and_the_fix():
    with pytest.raises(SessionSetupError) as info:
        _check_versions(_report(pandas="3.1.0"), "tidemark", PINS)
    assert str(info.value) == (
        f"Spark's Python workers have pandas 3.1.0 (tidemark {VERSION} needs pandas<3,>=2.0) "
        "(worker Python: /opt/worker/bin/python). Install the pinned versions in the "
        "workers' Python (`pip install 'pandas<3,>=2.0'`), or point Spark at a Python that "
        "has them (`PYSPARK_PYTHON` or `spark.pyspark.python`)."
    )


def test_every_dependency_outside_its_pin_is_named():
    with pytest.raises(SessionSetupError) as info:
        _check_versions(_report(pyarrow="14.0.2", protobuf="3.20.3"), "tidemark", PINS)
    message = str(info.value)
    assert "pyarrow 14.0.2 (tidemark" in message and "needs pyarrow>=15.0" in message
    assert (
        "protobuf 3.20.3" in message and "`pip install 'pyarrow>=15.0' 'protobuf>=4.25'`" in message
    )


def test_another_tidemark_on_the_workers_is_refused_with_how_to_ship():
    with pytest.raises(SessionSetupError) as info:
        _check_versions(_report(tidemark="0.0.9"), "tidemark", PINS)
    message = str(info.value)
    assert message.startswith(
        "Spark's Python workers import tidemark 0.0.9 (/opt/worker/tidemark/__init__.py), "
        f"the driver runs tidemark {VERSION}"
    )
    assert "tidemark.ship_to_executors(spark)" in message and "make dist" in message


def test_a_worker_without_tidemark_is_told_the_files_make_dist_builds():
    with pytest.raises(SessionSetupError) as info:
        _check_imports(
            _report(tidemark=ModuleNotFoundError("No module named 'tidemark'")), "tidemark"
        )
    message = str(info.value)
    assert message.startswith(
        "Spark's Python workers cannot import 'tidemark' (tidemark: ModuleNotFoundError: "
        "No module named 'tidemark'), so tidemark's window operator cannot run in them "
        "(worker Python: /opt/worker/bin/python). Ship the driver's tidemark"
    )
    zip_name, wheel = f"dist/tidemark-{VERSION}.zip", f"dist/tidemark-{VERSION}-py3-none-any.whl"
    assert "`tidemark.ship_to_executors(spark)`" in message and "`make dist`" in message
    assert f"`spark-submit --py-files {zip_name} ...`" in message
    assert f"`spark.sparkContext.addPyFile('{zip_name}')`" in message
    assert f"`spark.addArtifacts('{zip_name}', pyfile=True)`" in message
    assert f"`pip install {wheel}`" in message and "tidemark.zip" not in message


def test_a_worker_without_a_dependency_is_told_which_python_to_use():
    with pytest.raises(SessionSetupError) as info:
        _check_imports(_report(pandas=ModuleNotFoundError("No module named 'pandas'")), "tidemark")
    message = str(info.value)
    assert "cannot import 'pandas' (pandas: ModuleNotFoundError" in message
    assert "`PYSPARK_PYTHON` or `spark.pyspark.python`" in message


def test_an_unknown_version_is_not_refused():
    _check_versions(_report(protobuf=None), "tidemark", PINS)


# ---------------------------------------------------------------- the zip
def test_the_package_zip_holds_the_package_at_its_root_without_bytecode(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub" / "__pycache__").mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 1\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (package / "py.typed").write_text("")
    target = write_package_zip(package, tmp_path / "pkg.zip")
    assert sorted(zipfile.ZipFile(target).namelist()) == [
        "pkg/__init__.py",
        "pkg/py.typed",
        "pkg/sub/__init__.py",
    ]


def test_the_installed_tidemark_imports_from_its_zip_alone(tmp_path):
    # -S: no site-packages (and so no editable install); only the zip on the path
    code = "import tidemark, tidemark.spark.runtime.shipping as s; print(tidemark.__file__, tidemark.__version__)"
    done = subprocess.run(
        [sys.executable, "-S", "-c", code],
        env={"PYTHONPATH": package_zip()},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    path, version = done.stdout.split()
    assert path.startswith(package_zip() + "/tidemark/") and version == VERSION
    # not make dist's name: a classic session refuses two files of one name (test_cluster)
    assert re.fullmatch(
        rf"tidemark-{re.escape(VERSION)}-[0-9a-f]{{12}}\.zip", Path(package_zip()).name
    )


# ---------------------------------------------------------------- shipping
class _Context:
    def __init__(self, app):
        self.applicationId, self.added = app, []

    def addPyFile(self, path):
        self.added.append(path)


class _ClassicSession:
    def __init__(self, app):
        self.sparkContext = _Context(app)


class _ConnectSession:
    __module__ = "pyspark.sql.connect.session"

    def __init__(self, session_id):
        self.session_id, self.artifacts = session_id, []

    def addArtifacts(self, *paths, pyfile=False, archive=False, file=False):
        self.artifacts.append((paths, pyfile))


def test_a_classic_session_gets_the_zip_once_per_application():
    first, same_app, other = (_ClassicSession(a) for a in ("app-1", "app-1", "app-2"))
    assert ship_to_executors(first) == package_zip()
    ship_to_executors(first)
    ship_to_executors(same_app)  # newSession(): the same SparkContext
    ship_to_executors(other)
    assert first.sparkContext.added == [package_zip()]
    assert same_app.sparkContext.added == []
    assert other.sparkContext.added == [package_zip()]


def test_a_connect_session_gets_the_zip_as_a_python_artifact_once():
    session = _ConnectSession("2f7c-connect")
    ship_to_executors(session)
    ship_to_executors(session)
    assert session.artifacts == [((package_zip(),), True)]


def test_tidemark_exports_the_helper_lazily():
    assert tm.ship_to_executors is shipping.ship_to_executors
