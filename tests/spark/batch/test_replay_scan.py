"""The replay's watermark scan, vectorised: each partition's running-maximum records and
the watermark stamped on each row equal the element-by-element fold they replace (kept
here as the reference), on random timestamps with nulls, ties, a maximum carried in from
earlier partitions, and extreme values."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from tidemark.spark.batch.replay import running_records, watermarks_before
from tidemark.time import LONG_MAX, LONG_MIN


def reference_records(positions, timestamps, best):
    rec_ts, rec_pos = [], []
    for pos, ts in zip(positions, timestamps):
        if ts is None or ts != ts:
            continue
        if best is None or ts > best:
            best = int(ts)
            rec_ts.append(best)
            rec_pos.append(int(pos))
    return rec_ts, rec_pos, best


def reference_watermarks(timestamps, best, out_of_orderness):
    wms = []
    for ts in timestamps:
        if best is None or out_of_orderness is None:
            wms.append(LONG_MIN)
        else:
            wms.append(max(LONG_MIN, best - out_of_orderness - 1))
        if ts is not None and ts == ts and (best is None or ts > best):
            best = int(ts)
    return wms, best


def random_column(rng, n, with_nulls):
    values = [rng.randrange(-50, 50) * 1_000 + rng.randrange(3) for _ in range(n)]
    if with_nulls:
        return pd.Series([None if rng.random() < 0.2 else v for v in values], dtype=object)
    return pd.Series(values, dtype="int64")


@pytest.mark.parametrize("seed", range(40))
def test_vectorised_scan_equals_the_fold(seed):
    rng = random.Random(seed)
    n = rng.choice([0, 1, 2, 7, 50])
    column = random_column(rng, n, with_nulls=seed % 2 == 1)
    if seed % 4 == 3 and n:  # nulls as NaN in a float column, as pandas may give them
        column = pd.Series([np.nan if v is None else float(v) for v in column])
    positions = pd.Series(range(100, 100 + n), dtype="int64")
    best = rng.choice([None, -60_000, 0, 60_000])
    out_of_orderness = rng.choice([None, 0, 250])

    rec_ts, rec_pos = [], []
    got_best = running_records(positions, column, best, rec_ts, rec_pos)
    assert (rec_ts, rec_pos, got_best) == reference_records(positions, column.tolist(), best)

    wms, after = watermarks_before(column, best, out_of_orderness)
    want, want_after = reference_watermarks(column.tolist(), best, out_of_orderness)
    assert wms.tolist() == want
    assert after == want_after


def test_extreme_timestamps_stay_within_longs():
    column = pd.Series([LONG_MIN, LONG_MIN + 5, LONG_MAX], dtype="int64")
    wms, after = watermarks_before(column, None, 10)
    assert wms.tolist() == [LONG_MIN, LONG_MIN, LONG_MIN]
    assert after == LONG_MAX
    rec_ts, rec_pos = [], []
    assert running_records(pd.Series([0, 1, 2]), column, None, rec_ts, rec_pos) == LONG_MAX
    assert rec_ts == [LONG_MIN, LONG_MIN + 5, LONG_MAX] and rec_pos == [0, 1, 2]
