"""The least state any exact q5 can hold, beside q5t's, on the generator's bid stream.

q5 fires, every 2 s, each 10 s window's auctions with the most bids; until a window
fires, any of its auctions can still become the top one, so an exact implementation
holds at least one count for every auction bid in that window (Flink's and Spark's
per-window state, Flink SQL's and tidemark's slices, a ring of five counts per auction:
all hold more). q5t (q5 with 2 s tumbling windows) holds a count for every auction of
one 2 s window. This prints, over the stream, the distinct auctions of each 10 s
window against those of the 2 s window at its end (their mean ratio: the least state
q5 holds as a multiple of q5t's, per auction), and the (auction, 2 s slice) pairs alive
over a 10 s window against one slice's (what a sliced store holds).

Usage::

    python benchmarks/nexmark/state_bound.py [--events 200000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nexmark.generator import generate_bids  # noqa: E402
from nexmark.queries import SLIDE_MS, WINDOW_MS  # noqa: E402


def distinct_per_slice(events: int) -> list[set[int]]:
    """The distinct auctions bid in each 2 s slice of event time, in time order."""
    bids = generate_bids(events)
    slices = (bids["date_time"].to_numpy() // SLIDE_MS).tolist()
    first = min(slices)
    per_slice: list[set[int]] = [set() for _ in range(max(slices) - first + 1)]
    for slice_, auction in zip(slices, bids["auction"].tolist(), strict=True):
        per_slice[slice_ - first].add(auction)
    return per_slice


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args()
    per_slice = distinct_per_slice(args.events)[1:-1]  # the partial first and last slice
    span = WINDOW_MS // SLIDE_MS
    auctions, pairs = [], []
    for end in range(span - 1, len(per_slice)):
        window = per_slice[end - span + 1 : end + 1]
        auctions.append(len(set().union(*window)) / len(per_slice[end]))
        pairs.append(sum(map(len, window)) / len(per_slice[end]))
    print(
        f"{args.events:,} bids, {len(per_slice)} slices of {SLIDE_MS} ms, "
        f"{np.mean([len(s) for s in per_slice]):,.0f} auctions a slice"
    )
    print(
        f"distinct auctions of a {WINDOW_MS} ms window / of its last slice: "
        f"mean {np.mean(auctions):.2f}x (range {min(auctions):.2f}-{max(auctions):.2f})"
    )
    print(f"(auction, slice) pairs alive over a window / in one slice: mean {np.mean(pairs):.2f}x")


if __name__ == "__main__":
    main()
