"""The ``tidemark`` console command.

Subcommands
-----------
``tidemark demo [--out DIR]``
    The seed article's example on local Spark (what ``make demo`` runs); see
    :mod:`tidemark.demo`.
``tidemark timeline RUN.json OUT.png|OUT.html [--title T]``
    Draw a saved trace (see :func:`tidemark.timeline.main_timeline`).
``tidemark explain --checkpoint PATH [--key K ...] [--window START,END] [--timestamp T]``
``[--batch N] [--picture OUT.png]``
    Why did a window (not) fire? From a streaming query's checkpoint (see
    :mod:`tidemark.spark.streaming.driver.explain_cli`).
``tidemark --version``
    Print tidemark's version.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    from tidemark import __version__

    parser = argparse.ArgumentParser(
        prog="tidemark",
        description="Flink's DataStream windowing for Python, on Spark.",
    )
    parser.add_argument("--version", action="version", version=f"tidemark {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run the seed article's example on local Spark",
        description="Run the user-behaviour example (pv/cart/buy, 5 s tumbling windows) "
        "on local Spark, print its windows and late element, and write "
        "timelines.",
    )
    demo.add_argument(
        "--out",
        default="tidemark-demo",
        metavar="DIR",
        help="where traces and timelines go (default: ./tidemark-demo)",
    )
    commands.add_parser(
        "timeline",
        add_help=False,
        help="draw a saved run trace as PNG or HTML",
        description="Draw a saved run trace: tidemark timeline RUN.json OUT.png|OUT.html",
    )
    _add_explain(commands)
    return parser


def _add_explain(commands: Any) -> None:
    """Add the ``explain`` subcommand to ``commands`` (argparse's subparsers)."""
    explain = commands.add_parser(
        "explain",
        help="why did a window (not) fire? from a streaming query's checkpoint",
        description="Read a streaming query's checkpoint (running or stopped): without "
        "--key the whole query's view (watermark per partition, open windows, keys "
        "waiting longest); with --key the key's open windows and what each waits for.",
    )
    explain.add_argument("--checkpoint", required=True, metavar="PATH")
    explain.add_argument(
        "--key",
        action="append",
        metavar="K",
        help="the key's value (once per key column, in order); read in the column's type",
    )
    explain.add_argument("--window", metavar="START,END", help="a window [START, END), ms")
    explain.add_argument("--timestamp", type=int, metavar="T", help="an element's timestamp, ms")
    explain.add_argument("--batch", type=int, metavar="N", help="as micro-batch N left it")
    explain.add_argument("--picture", metavar="OUT.png", help="draw the key's timeline")
    explain.add_argument("--time-zone", metavar="ZONE", help="IANA zone of the times (UTC)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``tidemark`` command line; return the exit code.

    Examples
    --------
    >>> main(["--version"])
    tidemark 0.1.0
    0
    >>> main(["timeline"])
    2
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["timeline"]:
        # `timeline` has its own parser (tidemark.timeline.main_timeline).
        from tidemark.timeline import main_timeline

        return main_timeline(args[1:])
    parser = _parser()
    try:
        parsed = parser.parse_args(args)
    except SystemExit as exc:  # --version, --help, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else 0
    if parsed.command == "demo":
        from tidemark.demo import run_demo

        return run_demo(parsed.out)
    if parsed.command == "explain":
        from tidemark.spark.streaming.driver.explain_cli import run_explain

        return run_explain(parsed)
    parser.print_help()
    return 2
