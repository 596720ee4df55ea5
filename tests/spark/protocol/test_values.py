"""Real data's values give the same rows in every mode (issue 28, the values half).

Each case of :mod:`value_cases` runs through a Spark action in BATCH, a replay and a
stream, on a session whose time zone is not UTC: a NaN stays a NaN and a null None in
value columns, nested in arrays and structs, in results and side outputs; every NaN in a
key column is one key and ``-0.0`` is the key ``0.0``; struct and array columns key by
Rows and tuples. What each rule is: ``docs/errors.md``, "Values and keys".
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from pyspark.sql import Row
from value_cases import CASES, MODES, NAN, run

import tidemark as tm
from tidemark.spark.aggregations import Max, MaxBy, Min, MinBy
from tidemark.spark.protocol.columns import encode_key
from tidemark.spark.protocol.keys import NAN_KEY, column_key, function_key_value, key_normaliser
from tidemark.spark.runtime.confs import STREAMING_PACK_INPUT as PACK_INPUT

# ------------------------------------------------------------------ engine-side rules


def test_every_nan_key_is_one_key_and_pickles_to_the_same_bytes():
    keys = {column_key(float("nan")): 1}
    keys[column_key(float("-nan"))] = 2
    assert len(keys) == 1 and keys[NAN_KEY] == 2
    assert pickle.loads(pickle.dumps(NAN_KEY)) is NAN_KEY
    assert pickle.dumps(function_key_value(("a", float("nan")))) == pickle.dumps(("a", NAN_KEY))
    assert repr(NAN_KEY) == "nan" and NAN_KEY != 1.0 and NAN_KEY + 1 != NAN_KEY + 1


def test_a_nan_key_pickles_to_the_bytes_old_checkpoints_hold():
    # a key function's keys are pickled into __tm_key: a streaming query's key groups
    # hash those bytes and its state holds them, so a NaN key calls the name it was
    # first written with, wherever NaNKey lives
    written = b"\x80\x04\x95(\x00\x00\x00\x00\x00\x00\x00\x8c\x14tidemark.spark.codec\x94"
    assert encode_key(NAN_KEY) == written + b"\x8c\x08_nan_key\x94\x93\x94)R\x94."
    assert pickle.loads(encode_key(NAN_KEY)) is NAN_KEY


def test_minus_zero_is_the_key_zero_also_inside_structs_and_arrays():
    assert repr(column_key(-0.0)) == "0.0"
    assert column_key({"x": -0.0, "a": [-0.0, float("nan")]}) == Row(x=0.0, a=(0.0, NAN_KEY))
    assert repr(function_key_value(("a", -0.0))) == "('a', 0.0)"
    assert function_key_value(["a"]) == ["a"]  # a list stays unhashable: refused as before
    assert function_key_value(np.float32("nan")) is NAN_KEY  # numpy's float32 is no float
    assert repr(function_key_value(np.float32(-0.0))) == "np.float32(0.0)"


def test_only_keys_that_need_it_are_normalised():
    assert key_normaliser(["StringType", "LongType"]) is None
    assert key_normaliser(["DoubleType"]) is column_key
    assert key_normaliser(["StringType", "ArrayType"])(("a", [1, 2])) == ("a", (1, 2))


@pytest.mark.parametrize(
    ("kind", "values", "expected"),
    [
        (Max, [1.5, NAN, 0.5], "nan"),
        (Max, [NAN, 1.5], "nan"),
        (Min, [NAN, 1.5, 0.5], "0.5"),
        (Min, [1.5, NAN], "1.5"),
    ],
)
def test_min_and_max_order_nan_above_every_number(kind, values, expected):
    function = kind("v")
    accumulator = function.create_accumulator()
    for n, value in enumerate(values):
        accumulator = function.add(Row(n=n, v=value), accumulator)
    assert repr(function.get_result(accumulator).v) == expected


def test_min_by_and_max_by_order_nan_above_every_number():
    rows = [Row(n=0, v=1.5), Row(n=1, v=NAN), Row(n=2, v=0.5)]
    assert MaxBy("v").reduce(MaxBy("v").reduce(rows[0], rows[1]), rows[2]).n == 1
    assert MinBy("v").reduce(MinBy("v").reduce(rows[1], rows[0]), rows[2]).n == 2


# ------------------------------------------------------------------ every mode


@pytest.fixture
def zoned(spark):
    """The session in a time zone that is not UTC (India, +05:30), as getOrCreate()
    leaves many laptops' sessions."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", before)


_PARAMS = [
    pytest.param(name, mode, id=f"{name}-{mode}")
    for name, case in CASES.items()
    for mode in MODES
    if mode in case.modes
]


@pytest.mark.spark
@pytest.mark.parametrize(("name", "mode"), _PARAMS)
def test_every_mode_gives_the_case_rows(zoned, tmp_path, name, mode):
    case = CASES[name]
    found = run(zoned, mode, case.rows, case.schema, case.build, tmp_path, case.late, case.split)
    assert found == case.expected


@pytest.mark.spark
def test_the_sql_fast_path_gives_the_engines_rows_for_nan_and_minus_zero_keys(zoned, tmp_path):
    case = CASES["a-sum-keyed-by-nan-and-minus-zero"]
    zoned.conf.set("spark.tidemark.sqlFastPath", "false")
    try:
        engine = run(zoned, "batch", case.rows, case.schema, case.build, tmp_path)
    finally:
        zoned.conf.unset("spark.tidemark.sqlFastPath")
    assert (
        engine == case.expected == run(zoned, "batch", case.rows, case.schema, case.build, tmp_path)
    )


@pytest.mark.spark
def test_a_map_key_column_is_refused_when_keyed(spark):
    df = spark.createDataFrame([({"a": 1}, 1)], "m map<string,int>, ts long")
    stream = tm.from_dataframe(df, "ts")
    with pytest.raises(tm.WindowSpecError, match=r"^`key` column 'm' is map<string,int>"):
        stream.key_by("m")
    nested = spark.createDataFrame([([{"a": 1}], 1)], "m array<map<string,int>>, ts long")
    with pytest.raises(tm.WindowSpecError, match=r"holds a map: a key must compare equal"):
        tm.from_dataframe(nested, "ts").key_by(["ts", "m"])


@pytest.mark.spark
def test_the_streaming_key_group_of_minus_zero_and_of_every_nan_is_one(spark):
    """Measured on PySpark 4.3: Spark's ``hash`` (the key groups' slot) gives -0.0 the
    hash of 0.0 and every NaN one hash, as its grouping does."""
    import struct

    from pyspark.sql import functions as F

    from tidemark.spark.streaming.driver.keygroups import slot_column

    other_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_0000_0123))[0]
    df = spark.createDataFrame([(0.0,), (-0.0,), (NAN,), (other_nan,)], "k double")
    slots = [r[0] for r in df.select(slot_column(["k"], 32)).collect()]
    assert slots[0] == slots[1] and slots[2] == slots[3]
    grouped = df.groupBy("k").count().select(F.col("count")).collect()
    assert sorted(r[0] for r in grouped) == [2, 2]


@pytest.fixture
def unpacked(zoned):
    """A stream's rows handed to ``transformWithStateInPandas`` one by one (PySpark's
    own row path), not packed per key group as by default."""
    zoned.conf.set(PACK_INPUT.name, "false")
    yield zoned
    zoned.conf.unset(PACK_INPUT.name)


@pytest.mark.spark
@pytest.mark.parametrize("name", [n for n, case in CASES.items() if "stream" in case.modes])
def test_a_stream_gives_the_case_rows_with_its_rows_not_packed(unpacked, tmp_path, name):
    case = CASES[name]
    found = run(
        unpacked, "stream", case.rows, case.schema, case.build, tmp_path, case.late, case.split
    )
    assert found == case.expected
