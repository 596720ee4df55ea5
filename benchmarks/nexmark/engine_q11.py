"""Nexmark q11 (bids per bidder in 10 s event-time sessions, ``CountBids`` with
``KeyedCount``) on the engine alone, fed as a streaming call feeds it.

The generator's bids, in arrival order, are cut into micro-batches of ``--batch-rows``;
per micro-batch the watermark moves first (bounded out-of-orderness by the generator's
``max_disorder_ms``, from the bids of the batches before), then each bidder's bids of
the batch go to ``process_elements`` as one run, in arrival order. The final watermark
fires what is left. Prints CPU seconds (``time.process_time``) of the feeding alone and
a digest of the results, so that two trees' runs can be checked equal:

    PYTHONPATH=/path/to/tree/src python benchmarks/nexmark/engine_q11.py --events 400000

``--fast-paths off`` runs the general operator.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.nexmark.generator import GeneratorConfig, generate_bids  # noqa: E402
from benchmarks.nexmark.queries import GAP_MS, CountBids, KeyedCount  # noqa: E402
from tidemark import LONG_MAX, EventTimeSessionWindows  # noqa: E402
from tidemark._engine.create import window_operator  # noqa: E402
from tidemark._engine.functions import window_logic  # noqa: E402


def micro_batches(events: int, batch_rows: int) -> tuple[list[Any], int]:
    """``[(watermark, {bidder: (values, timestamps)})]`` and the disorder bound."""
    config = GeneratorConfig()
    bids = generate_bids(events, config)
    disorder = config.max_disorder_ms
    bidders, stamps = bids["bidder"].tolist(), bids["date_time"].tolist()
    batches, highest = [], None
    for first in range(0, len(bidders), batch_rows):
        watermark = None if highest is None else highest - disorder - 1
        runs: dict[Any, tuple[list[Any], list[int]]] = {}
        for bidder, ts in zip(
            bidders[first : first + batch_rows], stamps[first : first + batch_rows]
        ):
            run = runs.get(bidder)
            if run is None:
                run = runs[bidder] = ([], [])
            run[0].append((bidder, ts))
            run[1].append(ts)
        batches.append((watermark, runs))
        batch_high = max(stamps[first : first + batch_rows])
        highest = batch_high if highest is None else max(highest, batch_high)
    return batches, disorder


def feed(batches: list[Any], fast_paths: bool) -> tuple[float, str, str]:
    """CPU seconds, the operator's class and a digest of the results."""
    operator = window_operator(
        EventTimeSessionWindows.with_gap(GAP_MS),
        window_logic(CountBids(), KeyedCount()),
        fast_paths=fast_paths,
    )
    gc.collect()
    gc.freeze()
    start = time.process_time()
    for watermark, runs in batches:
        if watermark is not None:
            operator.process_watermark(watermark)
        for key, (values, timestamps) in runs.items():
            operator.process_elements(key, values, timestamps)
    operator.process_watermark(LONG_MAX)
    seconds = time.process_time() - start
    gc.unfreeze()
    digest = hashlib.sha256(repr(operator.output).encode()).hexdigest()[:12]
    return seconds, type(operator).__name__, digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=400_000)
    parser.add_argument("--batch-rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--fast-paths", choices=("on", "off"), default="on")
    args = parser.parse_args()
    batches, _ = micro_batches(args.events, args.batch_rows)
    for _ in range(args.rounds):
        seconds, name, digest = feed(batches, args.fast_paths == "on")
        rate = args.events / seconds
        print(f"{name}: {seconds:.3f} s CPU, {rate:,.0f} bids/s, results {digest}")


if __name__ == "__main__":
    main()
