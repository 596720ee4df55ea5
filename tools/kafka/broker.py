"""A single-node Apache Kafka broker on loopback, in KRaft mode, run from its own jars.

For tidemark's Kafka tests and the docs' example: ``make kafka-start`` / ``make
kafka-stop`` (a broker in ``tools/kafka/.run`` on ``127.0.0.1:19092``), and the tests'
session fixture (a broker in a temporary directory on a free port). The jars come from
``jars.py`` (``make kafka-setup``); nothing here speaks Kafka's protocol: topics are made
with Kafka's own ``TopicCommand``.

    python tools/kafka/broker.py start [--dir D] [--port P]
    python tools/kafka/broker.py topic NAME PARTITIONS [--port P]
    python tools/kafka/broker.py stop [--dir D]
"""

from __future__ import annotations

import argparse
import base64
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import jars  # noqa: E402  (tools/kafka/jars.py)

RUN = HERE / ".run"
PORT = 19092
START_TIMEOUT_S = 90

_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={logs}
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
log.retention.hours=-1
"""

_LOG4J = """\
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def _java(main: str, *args: str, log4j: Path | None = None) -> list[str]:
    classpath = str(jars.JARS / "broker" / "*")  # every jar of the directory
    options = ["-Xmx512m", "-XX:+UseSerialGC"]
    if log4j is not None:
        options.append(f"-Dlog4j.configuration=file:{log4j}")
    return [java(), *options, "-cp", classpath, main, *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start(directory: Path = RUN, port: int = PORT) -> str:
    """Start a broker keeping its data, log and pid in ``directory``; return its
    bootstrap address once it answers Kafka's own topic tool."""
    if not jars.fetched("broker"):
        raise RuntimeError("the Kafka broker's jars are not fetched: run `make kafka-setup`")
    if _listening(port):
        raise RuntimeError(f"port {port} is taken: stop what listens there or pick another")
    directory.mkdir(parents=True, exist_ok=True)
    controller = free_port()
    properties, log4j = directory / "server.properties", directory / "log4j.properties"
    properties.write_text(
        _PROPERTIES.format(port=port, controller=controller, logs=directory / "data")
    )
    log4j.write_text(_LOG4J.format(log=directory / "broker.log"))
    _format(directory, properties, log4j)
    with open(directory / "stdout.log", "ab") as out:
        broker = subprocess.Popen(
            _java("kafka.Kafka", str(properties), log4j=log4j),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (directory / "pid").write_text(str(broker.pid))
    address = f"127.0.0.1:{port}"
    _wait_ready(broker, address, directory)
    return address


def _format(directory: Path, properties: Path, log4j: Path) -> None:
    """Format the broker's storage once; a restart in the same directory keeps its data
    (and its cluster id, kept beside it)."""
    stored = directory / "cluster-id"
    if not stored.is_file():
        raw = uuid.uuid4().bytes  # Kafka's form: a UUID's bytes in URL-safe base64
        stored.write_text(base64.urlsafe_b64encode(raw).decode().rstrip("="))
    command = _java("kafka.tools.StorageTool", "format", "-t", stored.read_text(), "-c",
                    str(properties), "--ignore-formatted", log4j=log4j)  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"formatting the broker's storage failed: {done.stdout}{done.stderr}")


def _wait_ready(broker: subprocess.Popen, address: str, directory: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if broker.poll() is not None:
            raise RuntimeError(f"the broker exited ({broker.returncode}); see {directory}")
        if _listening(int(address.rsplit(":", 1)[1])) and _topics(address).returncode == 0:
            return
        time.sleep(0.5)
    stop(directory)
    raise RuntimeError(f"the broker did not answer within {START_TIMEOUT_S}s; see {directory}")


def _topics(address: str, *args: str) -> subprocess.CompletedProcess:
    command = _java("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", address, *args)
    if not args:
        command.append("--list")
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def create_topic(address: str, name: str, partitions: int) -> None:
    """Create topic ``name`` with ``partitions`` partitions (replication 1)."""
    done = _topics(address, "--create", "--topic", name, "--partitions", str(partitions),
                   "--replication-factor", "1")  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"creating topic {name!r} failed: {done.stdout}{done.stderr}")


def stop(directory: Path = RUN) -> bool:
    """Stop the broker of ``directory`` (SIGTERM, then SIGKILL after 20 s); False when
    none was running."""
    pid_file = directory / "pid"
    if not pid_file.is_file():
        return False
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(80):
            os.kill(pid, 0)
            time.sleep(0.25)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    pid_file.unlink()
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["start", "stop", "topic"])
    parser.add_argument("args", nargs="*")
    parser.add_argument("--dir", type=Path, default=RUN)
    parser.add_argument("--port", type=int, default=PORT)
    args = parser.parse_args(argv)
    if args.action == "start":
        print(f"kafka: broker at {start(args.dir, args.port)} (data in {args.dir})")
    elif args.action == "stop":
        print("kafka: broker stopped" if stop(args.dir) else "kafka: no broker was running")
    else:
        name, partitions = args.args
        create_topic(f"127.0.0.1:{args.port}", name, int(partitions))
        print(f"kafka: topic {name} with {partitions} partitions")


if __name__ == "__main__":
    main()
