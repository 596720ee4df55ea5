"""Sum the raw py-spy profiles ``profile_workers.sh`` wrote: each function's share of the
Python workers' samples, inclusive and self, most first.

Usage::

    python benchmarks/nexmark/profile_summary.py OUT [--top 40]
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def frame_name(frame: str) -> str:
    """``function (path/to/file.py:line)`` as ``function file.py:line``."""
    function, _, where = frame.partition(" (")
    return f"{function} {where.rstrip(')').rsplit('/', 1)[-1]}"


def summarise(directory: Path) -> tuple[int, Counter[str], Counter[str]]:
    """Samples in all, and per frame the samples it is in (inclusive) and on top (self)."""
    total, inclusive, own = 0, Counter[str](), Counter[str]()
    for path in sorted(directory.glob("w-*.raw")):
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            frames = [frame_name(f) for f in stack.split(";")[1:]]  # the first: the process
            if not frames:
                continue
            samples = int(count)
            total += samples
            own[frames[-1]] += samples
            for frame in set(frames):
                inclusive[frame] += samples
    return total, inclusive, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    total, inclusive, own = summarise(args.directory)
    print(f"{total:,} samples (read_int: a worker waiting for the JVM)")
    for title, counts in (("inclusive", inclusive), ("self", own)):
        print(f"--- {title}")
        for frame, samples in counts.most_common(args.top):
            print(f"{samples / max(total, 1):6.1%} {frame}")


if __name__ == "__main__":
    main()
