"""A seeded generator of Nexmark's bid stream, written from the published model.

Nexmark (Tucker et al., "NEXMark - A Benchmark for Queries over Data Streams", and the
generator every implementation since Beam's shares) models an online auction: a stream
of events numbered ``0, 1, 2, ...`` in which every block of ``PROPORTION_DENOMINATOR``
(50) events holds 1 new person, then 3 new auctions, then 46 bids. Only the bids are
generated here (the four windowed queries read nothing else), but each bid keeps its
event number, so ids follow the model exactly as they do beside the other events:

- the **auction** of a bid: with probability ``1 - 1 / hot_auction_ratio`` the hot
  auction, the first of the current batch of ``HOT_AUCTION_BATCH`` (100) auctions (the
  batch of the last auction created before the bid), else one drawn uniformly from the
  ``in_flight_auctions`` last auctions plus ``AUCTION_ID_LEAD`` (10) not created yet;
- the **bidder**: with probability ``1 - 1 / hot_bidder_ratio`` the hot bidder, the
  second person of the current batch of ``HOT_BIDDER_BATCH`` (100) people (the second,
  so hot bidders and hot sellers differ), else one drawn uniformly from the
  ``active_people`` last people plus ``PERSON_ID_LEAD`` (10) not created yet;
  auction ids start at 1000, person ids at 1000;
- the **price**: ``round(10 ** (6 u) * 100)`` for ``u`` uniform in [0, 1): 100 to
  100,000,000 (cents), log-uniform;
- the **event time** ``date_time`` (ms): ``base_time_ms + k * 1_000_000 / event_rate //
  1000`` for the event's *adjusted* number ``k``; event time so advances at
  ``event_rate`` events (of all kinds) per second. Disorder is bounded as in the model:
  the events are shuffled within consecutive groups of ``out_of_order_group`` arrivals
  (arrival ``n`` carries event number ``n - n % g + (n * 953) % g``), so no event arrives
  more than ``max_disorder_ms`` after a later-stamped one.

Each bid also carries its arrival: ``seq`` (the arrival number ``n``: the order of a
replay) and ``p_time`` (ms: ``base_time_ms + n * 1_000_000 / event_rate // 1000``, the
arrival time a replay drives processing time with). The other fields of Nexmark's bid
(channel, url, extra) are not generated: no windowed query reads them.

The randomness is numpy's PCG64 seeded once, drawn in blocks of arrivals, so the stream
for a seed is the same however many bids are asked for (a shorter stream is a prefix).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["GeneratorConfig", "generate_bids", "BID_COLUMNS"]

PROPORTION_DENOMINATOR = 50  # person 1, auction 3, bid 46 of every 50 events
PERSON_PROPORTION = 1
AUCTION_PROPORTION = 3
FIRST_AUCTION_ID = 1000
FIRST_PERSON_ID = 1000
HOT_AUCTION_BATCH = 100
HOT_BIDDER_BATCH = 100
AUCTION_ID_LEAD = 10
PERSON_ID_LEAD = 10
SHUFFLE_PRIME = 953
BLOCK = 1 << 16  # arrivals drawn per block

BID_COLUMNS = ("auction", "bidder", "price", "date_time", "seq", "p_time")


@dataclass(frozen=True)
class GeneratorConfig:
    """Nexmark's generator parameters (defaults: the reference generator's)."""

    seed: int = 42
    event_rate: int = 10_000  # events of all kinds per second of event time
    hot_auction_ratio: int = 2
    hot_bidder_ratio: int = 4
    in_flight_auctions: int = 100
    active_people: int = 1000
    out_of_order_group: int = 1000
    base_time_ms: int = 1_767_225_600_000  # 2026-01-01T00:00:00Z

    def __post_init__(self) -> None:
        if self.out_of_order_group < 1 or self.out_of_order_group % SHUFFLE_PRIME == 0:
            raise ValueError(
                "`out_of_order_group` must be >= 1 and not a multiple of 953 (the shuffle "
                f"within a group must be a permutation); got {self.out_of_order_group}"
            )
        if self.event_rate < 1:
            raise ValueError(f"`event_rate` must be >= 1 event/s; got {self.event_rate}")

    @property
    def max_disorder_ms(self) -> int:
        """The most a bid's event time lies behind one that arrived before it."""
        return -(-(self.out_of_order_group - 1) * 1_000_000 // self.event_rate // 1000)

    def time_ms(self, event_numbers: np.ndarray) -> np.ndarray:
        """Event number -> ms, at ``event_rate`` events per second."""
        return self.base_time_ms + event_numbers * 1_000_000 // self.event_rate // 1000


def generate_bids(n: int, config: GeneratorConfig = GeneratorConfig()) -> pd.DataFrame:
    """The first ``n`` bids of the stream, in arrival order.

    Returns
    -------
    pandas.DataFrame
        int64 columns ``auction, bidder, price, date_time, seq, p_time`` (see the module).
    """
    if n < 0:
        raise ValueError(f"`n` must be >= 0 bids; got {n}")
    rng = np.random.Generator(np.random.PCG64(config.seed))
    blocks, have, start = [], 0, 0
    while have < n:
        block = _block(start, rng, config)
        blocks.append(block)
        have += len(block)
        start += BLOCK
    frame = pd.concat(blocks, ignore_index=True) if blocks else _block(0, rng, config)[:0]
    return frame.iloc[:n].reset_index(drop=True)


def _block(start: int, rng: np.random.Generator, config: GeneratorConfig) -> pd.DataFrame:
    """The bids among arrivals ``[start, start + BLOCK)``; draws the same numbers for a
    block whatever is kept of it."""
    arrival = np.arange(start, start + BLOCK, dtype=np.int64)
    group = config.out_of_order_group
    event = arrival - arrival % group + (arrival * SHUFFLE_PRIME) % group
    is_bid = event % PROPORTION_DENOMINATOR >= PERSON_PROPORTION + AUCTION_PROPORTION
    draws = {name: rng.random(BLOCK) for name in ("hot_a", "auction", "hot_b", "bidder", "price")}
    keep = np.flatnonzero(is_bid)
    event = event[keep]
    draws = {name: values[keep] for name, values in draws.items()}
    return pd.DataFrame(
        {
            "auction": _auctions(event, draws["hot_a"], draws["auction"], config),
            "bidder": _bidders(event, draws["hot_b"], draws["bidder"], config),
            "price": np.round(10.0 ** (draws["price"] * 6.0) * 100.0).astype(np.int64),
            "date_time": config.time_ms(event),
            "seq": arrival[keep],
            "p_time": config.time_ms(arrival[keep]),
        }
    )


def _auctions(
    event: np.ndarray, hot: np.ndarray, pick: np.ndarray, config: GeneratorConfig
) -> np.ndarray:
    # a bid follows the block's 3 auctions: the last auction created is the block's third
    last = event // PROPORTION_DENOMINATOR * AUCTION_PROPORTION + AUCTION_PROPORTION - 1
    hot_id = last // HOT_AUCTION_BATCH * HOT_AUCTION_BATCH
    low = np.maximum(last - config.in_flight_auctions, 0)
    drawn = low + (pick * (last - low + 1 + AUCTION_ID_LEAD)).astype(np.int64)
    is_hot = hot * config.hot_auction_ratio >= 1  # probability 1 - 1/ratio
    return np.where(is_hot, hot_id, drawn) + FIRST_AUCTION_ID


def _bidders(
    event: np.ndarray, hot: np.ndarray, pick: np.ndarray, config: GeneratorConfig
) -> np.ndarray:
    last = event // PROPORTION_DENOMINATOR * PERSON_PROPORTION + PERSON_PROPORTION - 1
    hot_id = last // HOT_BIDDER_BATCH * HOT_BIDDER_BATCH + 1
    people = last + 1
    active = np.minimum(people, config.active_people)
    drawn = people - active + (pick * (active + PERSON_ID_LEAD)).astype(np.int64)
    is_hot = hot * config.hot_bidder_ratio >= 1
    return np.where(is_hot, hot_id, drawn) + FIRST_PERSON_ID
