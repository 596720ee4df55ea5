"""Fetch and cache the jars of tidemark's Kafka set-up with Maven (idempotent).

Two sets, each from a small generated pom and ``mvn dependency:copy-dependencies``,
under ``tools/kafka/.jars/<set>/`` (``make clean`` removes them; Maven's own cache is
``~/.m2``):

* ``connector``: Spark's Kafka source and sink (``SPARK_KAFKA`` in ``versions.env``),
  without the jars the installed PySpark already ships (the same artifact in another
  version would shadow or clash with Spark's);
* ``broker``: Apache Kafka's broker and tools (``KAFKA``, ``KAFKA_TOOLS``), run from
  their jars by ``broker.py``;
* ``flink``: Flink's Kafka source (``FLINK_KAFKA``) and its ``kafka-clients``, for the
  check against real Flink (``tools/flinkref/flink_kafka.py``); fetched only when named,
  as Flink's own jars come with ``tools/flinkref/setup.sh``.

    python tools/kafka/jars.py                          # fetch what is missing
    python tools/kafka/jars.py flink                    # the same for the flink set
    python tools/kafka/jars.py --classpath connector     # print spark.jars
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
JARS = HERE / ".jars"
SETS = {
    "connector": ("SPARK_KAFKA",),
    "broker": ("KAFKA", "KAFKA_TOOLS"),
    "flink": ("FLINK_KAFKA",),
}
DEFAULT = ("connector", "broker")
ON_SPARK = ("connector",)
UNREACHABLE = (
    "tools/kafka/jars.py: Maven could not fetch {what} from Maven Central "
    "(https://repo.maven.apache.org/maven2). Check that this machine reaches it (a proxy "
    "goes in ~/.m2/settings.xml), then run `make kafka-setup` again. Maven said:\n{said}"
)


def versions() -> dict[str, str]:
    """The pins of ``versions.env``: name -> ``group:artifact:version``."""
    pins = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            pins[name.strip()] = value.strip()
    return pins


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


def _stamp(name: str, pins: dict[str, str]) -> str:
    return "\n".join(pins[key] for key in SETS[name]) + "\n"


def fetched(name: str, pins: dict[str, str] | None = None) -> bool:
    """Whether set ``name`` is cached for the pinned versions."""
    stamp = JARS / name / "versions.txt"
    return stamp.is_file() and stamp.read_text() == _stamp(name, pins or versions())


def fetch(name: str, pins: dict[str, str]) -> None:
    """Copy set ``name``'s jars and their runtime dependencies into ``.jars/<name>``."""
    if shutil.which("mvn") is None:
        sys.exit("tools/kafka/jars.py: needs Maven (`mvn`): apt-get install maven")
    target = JARS / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    coordinates = [pins[key] for key in SETS[name]]
    with tempfile.TemporaryDirectory() as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(_pom(coordinates))
        command = [
            "mvn", "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
            "-DincludeScope=runtime", f"-DoutputDirectory={target}",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip()[-2000:]
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
    return [str(j) for name in names for j in sorted((JARS / name).glob("*.jar"))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="*", metavar="SET", help=f"to fetch, of {list(SETS)}")
    parser.add_argument("--classpath", nargs="+", choices=list(SETS), metavar="SET")
    parser.add_argument("--check", action="store_true", help="exit 1 unless all are fetched")
    args = parser.parse_args(argv)
    if set(args.sets) - set(SETS):
        parser.error(f"SET must be one of {list(SETS)}, not {args.sets}")
    pins = versions()
    if args.classpath:
        missing = [n for n in args.classpath if not fetched(n, pins)]
        if missing:
            sys.exit(f"not fetched: {missing}; run `make kafka-setup`")
        print(",".join(classpath(args.classpath)))
        return
    names = args.sets or DEFAULT
    if args.check:
        sys.exit(0 if all(fetched(n, pins) for n in names) else 1)
    for name in names:
        if fetched(name, pins):
            print(f"kafka-setup: {name} cached ({', '.join(pins[k] for k in SETS[name])})")
            continue
        print(f"kafka-setup: fetching {name}: {', '.join(pins[k] for k in SETS[name])}")
        fetch(name, pins)
        print(f"kafka-setup: {name}: {len(list((JARS / name).glob('*.jar')))} jars")


if __name__ == "__main__":
    main()
