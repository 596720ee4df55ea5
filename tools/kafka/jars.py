"""Fetch and cache the jars of tidemark's Kafka set-up with Maven (idempotent).

Two sets, each from a small generated pom and ``mvn dependency:copy-dependencies``,
under ``tools/kafka/.jars/<set>/``, or ``$TIDEMARK_JARS_DIR/<set>/`` where that is set
(``make clean`` removes the default folder; Maven's own cache is ``~/.m2``). The
versions are pinned in ``tools/versions.env``:

* ``connector``: Spark's Kafka source and sink, ``spark-sql-kafka-0-10_2.13`` at the
  installed PySpark's version (``TIDEMARK_SPARK_KAFKA_VERSION`` names another where
  Maven Central serves none for it), without the jars the installed PySpark already
  ships (the same artifact in another version would shadow or clash with Spark's);
* ``broker``: Apache Kafka's broker and tools (``KAFKA``, ``KAFKA_TOOLS``), run from
  their jars by ``broker.py``;
* ``delta``: Delta Lake, ``io.delta:delta-spark_<minor>_2.13`` (``DELTA``) for the
  installed PySpark's minor, where Delta publishes one (``DELTA_SPARK``);
* ``iceberg``: Apache Iceberg, ``org.apache.iceberg:iceberg-spark-runtime-<minor>_2.13``
  at the release pinned for that minor (``ICEBERG_SPARK_<minor>``), where there is one;
* ``flink``: Flink's Kafka source (``FLINK_KAFKA``) and its ``kafka-clients``, for the
  check against real Flink (``tools/flinkref/flink_kafka.py``); fetched only when named,
  as Flink's own jars come with ``tools/flinkref/setup.sh``.

    python tools/kafka/jars.py                          # fetch what is missing: connector,
                                                        # broker, and delta and iceberg where
                                                        # the installed PySpark has them
    python tools/kafka/jars.py delta iceberg            # the table formats alone
    python tools/kafka/jars.py flink                    # the same for the flink set
    python tools/kafka/jars.py --classpath connector     # print spark.jars
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
JARS = Path(os.environ.get("TIDEMARK_JARS_DIR") or HERE / ".jars").resolve()
PINS = HERE.parent / "versions.env"
CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"
SETS = {
    "connector": ("SPARK_KAFKA",),
    "broker": ("KAFKA", "KAFKA_TOOLS"),
    "flink": ("FLINK_KAFKA",),
    "delta": ("DELTA_JAR",),
    "iceberg": ("ICEBERG_JAR",),
}
DEFAULT = ("connector", "broker")
FORMATS = ("delta", "iceberg")
"""Fetched by default where the installed PySpark's minor has a release of them."""
ON_SPARK = ("connector", "delta", "iceberg")
UNREACHABLE = (
    "tools/kafka/jars.py: Maven could not fetch {what} from Maven Central "
    "(https://repo.maven.apache.org/maven2). Check that this machine reaches it (a proxy "
    "goes in ~/.m2/settings.xml), then run `make kafka-setup` again. Maven said:\n{said}"
)


NOT_SERVED = (
    "tools/kafka/jars.py: Maven Central serves no {coordinates}: Spark's Kafka connector "
    "reaches Maven Central some time after its PySpark {version} reaches PyPI, and the "
    "connector must be the session's Spark's own. Install a PySpark whose connector is "
    "served (the default environment's, PYSPARK in tools/versions.env, is), or name a "
    "served release, the nearest of the same minor, at your own risk: "
    "TIDEMARK_SPARK_KAFKA_VERSION=4.2.0 make kafka-setup"
)


NO_FORMAT = (
    "tools/kafka/jars.py: {name} publishes no release for Spark {minor} (the installed "
    "PySpark {version}); tools/versions.env lists the minors it serves"
)


def _not_served(said: str) -> bool:
    return "Could not find artifact" in said


def versions() -> dict[str, str]:
    """The pins of ``tools/versions.env`` (name -> value), with ``SPARK_KAFKA``: the
    connector of the installed PySpark (``group:artifact:version``)."""
    pins = {}
    for line in PINS.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            pins[name.strip()] = value.strip()
    pins["SPARK_KAFKA"] = f"{CONNECTOR}:{spark_version()}"
    minor = installed_minor()
    if minor in pins.get("DELTA_SPARK", "").split():
        pins["DELTA_JAR"] = f"io.delta:delta-spark_{minor}_2.13:{pins['DELTA']}"
    iceberg = pins.get(f"ICEBERG_SPARK_{minor.replace('.', '_')}")
    if iceberg:
        pins["ICEBERG_JAR"] = f"org.apache.iceberg:iceberg-spark-runtime-{minor}_2.13:{iceberg}"
    return pins


def installed_minor() -> str:
    """The installed PySpark's minor, ``4.2``: the table formats' jars are built per minor."""
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


def served(name: str, pins: dict[str, str] | None = None) -> bool:
    """Whether set ``name`` has a release for the installed PySpark (a table format
    may not)."""
    pins = pins or versions()
    return all(key in pins for key in SETS[name])


def default_sets(pins: dict[str, str]) -> list[str]:
    """What ``jars.py`` fetches when no set is named."""
    return [*DEFAULT, *(name for name in FORMATS if served(name, pins))]


def spark_version() -> str:
    """The Spark version whose connector the set-up fetches: the installed PySpark's,
    unless ``TIDEMARK_SPARK_KAFKA_VERSION`` names another."""
    chosen = os.environ.get("TIDEMARK_SPARK_KAFKA_VERSION")
    if chosen:
        return chosen
    import pyspark

    return pyspark.__version__


# Maven's global settings for the fetch: every repository a fetched pom declares is read
# from Maven Central (Spark 4.0's poms declare a Google Cloud mirror that a machine
# reaching only Maven Central cannot resolve). The user's ~/.m2/settings.xml (a proxy, a
# mirror of their own) still applies over it.
CENTRAL_ONLY = (
    "<settings><mirrors><mirror><id>central-only</id><mirrorOf>*</mirrorOf>"
    "<url>https://repo.maven.apache.org/maven2</url></mirror></mirrors></settings>"
)


def _pyspark() -> str:
    import pyspark

    return pyspark.__version__


def _pom(coordinates: list[str]) -> str:
    dependencies = "".join(
        "<dependency><groupId>{}</groupId><artifactId>{}</artifactId>"
        "<version>{}</version></dependency>".format(*c.split(":"))
        for c in coordinates
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>tidemark</groupId><artifactId>kafka-jars</artifactId><version>0</version>"
        f"<dependencies>{dependencies}</dependencies></project>"
    )


def folder(name: str) -> Path:
    """Where set ``name``'s jars go: a folder per Spark version for the sets that run on
    Spark (one machine may test several PySpark versions side by side)."""
    if name == "connector":
        return JARS / f"{name}-{spark_version()}"
    # the table formats' jars follow the installed PySpark, whatever connector is named
    return JARS / (f"{name}-{_pyspark()}" if name in ON_SPARK else name)


def _stamp(name: str, pins: dict[str, str]) -> str:
    return "\n".join(pins[key] for key in SETS[name]) + "\n"


def fetched(name: str, pins: dict[str, str] | None = None) -> bool:
    """Whether set ``name`` is cached for the pinned versions."""
    pins = pins or versions()
    stamp = folder(name) / "versions.txt"
    return served(name, pins) and stamp.is_file() and stamp.read_text() == _stamp(name, pins)


def fetch(name: str, pins: dict[str, str]) -> None:
    """Copy set ``name``'s jars and their runtime dependencies into ``.jars/<name>``."""
    if shutil.which("mvn") is None:
        sys.exit("tools/kafka/jars.py: needs Maven (`mvn`): apt-get install maven")
    target = folder(name)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    coordinates = [pins[key] for key in SETS[name]]
    with tempfile.TemporaryDirectory() as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(_pom(coordinates))
        central = Path(work) / "central.xml"
        central.write_text(CENTRAL_ONLY)
        command = [
            "mvn", "-B", "-q", "-gs", str(central), "-f", str(pom), "dependency:copy-dependencies",
            "-DincludeScope=runtime", f"-DoutputDirectory={target}",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip()[-2000:]
        if name == "connector" and _not_served(said):
            sys.exit(NOT_SERVED.format(coordinates=pins["SPARK_KAFKA"], version=spark_version()))
        sys.exit(UNREACHABLE.format(what=", ".join(coordinates), said=said))
    if name in ON_SPARK:
        _drop_shipped(target)
    (target / "versions.txt").write_text(_stamp(name, pins))


def _artifact(jar: str) -> str:
    """``kafka-clients`` of ``kafka-clients-3.9.2.jar``."""
    return re.sub(r"-\d[^-]*(-[A-Za-z0-9.]+)*\.jar$", "", jar)


def _drop_shipped(target: Path) -> None:
    import pyspark

    shipped = {_artifact(j.name) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    for jar in target.glob("*.jar"):
        if _artifact(jar.name) in shipped:
            jar.unlink()


def classpath(names: list[str]) -> list[str]:
    """The jar files of the sets ``names`` (fetched), for ``spark.jars`` or ``-cp``."""
    return [str(j) for name in names for j in sorted(folder(name).glob("*.jar"))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="*", metavar="SET", help=f"to fetch, of {list(SETS)}")
    parser.add_argument("--classpath", nargs="+", choices=list(SETS), metavar="SET")
    parser.add_argument("--check", action="store_true", help="exit 1 unless all are fetched")
    args = parser.parse_args(argv)
    if set(args.sets) - set(SETS):
        parser.error(f"SET must be one of {list(SETS)}, not {args.sets}")
    pins = versions()
    unserved = [n for n in [*args.sets, *(args.classpath or [])] if not served(n, pins)]
    if unserved:
        sys.exit(
            NO_FORMAT.format(name=", ".join(unserved), minor=installed_minor(), version=_pyspark())
        )
    if args.classpath:
        missing = [n for n in args.classpath if not fetched(n, pins)]
        if missing:
            sys.exit(f"not fetched: {missing}; run `make kafka-setup`")
        print(",".join(classpath(args.classpath)))
        return
    names = args.sets or default_sets(pins)
    if args.check:
        sys.exit(0 if all(fetched(n, pins) for n in names) else 1)
    for name in names:
        if fetched(name, pins):
            print(f"kafka-setup: {name} cached ({', '.join(pins[k] for k in SETS[name])})")
            continue
        print(f"kafka-setup: fetching {name}: {', '.join(pins[k] for k in SETS[name])}")
        fetch(name, pins)
        print(f"kafka-setup: {name}: {len(list(folder(name).glob('*.jar')))} jars")


if __name__ == "__main__":
    main()
