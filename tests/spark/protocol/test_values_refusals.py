"""Refusals that came too late or not at all (issue 28): each is one tidemark error, at
definition or with the row, the same in every mode it applies to.

- duplicate column names (Spark's ``[AMBIGUOUS_REFERENCE]`` inside tidemark before);
- a function's side output under the late-data tag's id (a ``WindowResultError`` about
  the late rows' schema before);
- a null recorded watermark (``TypeError: int() argument ...`` before);
- an integral ``sum()`` beyond its column's type (Spark's ``[CAST_OVERFLOW]`` in BATCH,
  advice to declare a type ``sum()`` cannot take in a replay, before).
"""

from __future__ import annotations

import pytest
from value_cases import LATE, WINDOW, run

import tidemark as tm
from tidemark.errors import WindowResultError

pytestmark = pytest.mark.spark


class Counts(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, len(list(elements)))


class EmitsToLate(tm.ProcessWindowFunction):
    """Sends its own rows to the late-data tag's id."""

    def process(self, key, context, elements):
        context.output(tm.OutputTag("late", "k string, n long"), (key, 1))
        yield (key, len(list(elements)))


# ------------------------------------------------------------------ column names


def test_duplicate_column_names_are_refused_when_the_source_is_defined(spark):
    df = spark.createDataFrame([("a", 1, 2)], "k string, ts long, v long")
    doubled = df.select("k", "ts", "v", df.v.alias("v"))
    with pytest.raises(tm.WindowSpecError) as info:
        tm.from_dataframe(doubled, "ts")
    assert str(info.value).startswith("`df` has two columns named 'v' and 'v' (equal)")
    assert "rename one first" in str(info.value)
    cased = df.select("k", "ts", "v", df.v.alias("V"))
    with pytest.raises(tm.WindowSpecError, match=r"'v' and 'V' \(equal but for case\)"):
        tm.from_dataframe(cased, "ts")


def test_names_equal_but_for_case_are_kept_apart_in_a_case_sensitive_session(spark):
    df = spark.createDataFrame([("a", 1, 2, 3)], "k string, ts long, v long, V long")
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        stream = tm.from_dataframe(df, "ts")
        result = stream.key_by("k").window(WINDOW).sum("V").to_dataframe()
        assert [tuple(r) for r in result.collect()] == [("a", 1, 2, 3)]
    finally:
        spark.conf.unset("spark.sql.caseSensitive")


def test_an_output_schema_with_one_name_twice_or_an_internal_name_is_refused(spark):
    df = spark.createDataFrame([("a", 1)], "k string, ts long")
    windowed = tm.from_dataframe(df, "ts").key_by("k").window(WINDOW)
    with pytest.raises(tm.WindowSpecError, match=r"^`output_schema` has two columns named 'n'"):
        windowed.process(Counts(), "n string, n long")
    with pytest.raises(tm.WindowSpecError, match=r"tidemark's own internal columns"):
        windowed.process(Counts(), "k string, __tm_ts long")


# ------------------------------------------------------------------ the late-data tag


def test_a_late_data_tag_of_another_type_is_refused_when_its_output_is_read(spark):
    df = spark.createDataFrame([("a", 1)], "k string, ts long")
    windowed = tm.from_dataframe(df, "ts").key_by("k").window(WINDOW)
    typed = tm.OutputTag("late", "k string, n long")
    result = windowed.side_output_late_data(LATE).process(Counts(), "k string, n long")
    with pytest.raises(tm.WindowSpecError, match=r"is the late-data tag of side_output_late"):
        result.get_side_output(typed)
    with pytest.raises(tm.WindowSpecError, match=r"whose rows have the input's schema"):
        result.write_outputs({typed: lambda df, batch_id: None})
    same = tm.OutputTag("late", "k string, ts long")
    assert result.get_side_output(same).to_dataframe().columns == ["k", "ts"]


@pytest.mark.parametrize("mode", ["batch", "replay", "stream"])
def test_a_function_emitting_to_the_late_data_tag_fails_naming_it(spark, tmp_path, mode):
    def build(stream):
        windowed = stream.key_by("k").window(WINDOW).side_output_late_data(LATE)
        return windowed.process(EmitsToLate(), "k string, n long")

    with pytest.raises(tm.UserFunctionError) as info:
        run(spark, mode, [("a", 1)], "k string, ts long", build, tmp_path, late=True)
    message = str(info.value)
    assert message.startswith("the window function raised ValueError: `output_tag` 'late'")
    assert "give the function's side output a tag id of its own" in message


# ------------------------------------------------------------------ recorded watermarks


def test_a_null_recorded_watermark_is_an_input_data_error(spark):
    df = spark.createDataFrame(
        [("a", 1, 1, 0), ("a", 2, 2, None), ("a", 3, 3, 2)], "k string, ts long, o long, wm long"
    )
    stream = tm.from_dataframe(df, "ts", order_by="o", watermark="wm")
    result = stream.key_by("k").window(WINDOW).sum("ts")
    with pytest.raises(tm.InputDataError) as info:
        result.to_dataframe().collect()
    message = str(info.value)
    assert message.startswith("null `watermark` in column 'wm': a replay with recorded")
    assert "(o=2, timestamp=2ms)" in message and "Fill it in" in message


def test_a_nan_arrival_order_is_named_as_null_or_nan(spark):
    df = spark.createDataFrame(
        [("a", 1, 1.0), ("a", 2, float("nan"))], "k string, ts long, o double"
    )
    strategy = tm.WatermarkStrategy.for_monotonous_timestamps()
    stream = tm.from_dataframe(df, "ts", order_by="o", watermark_strategy=strategy)
    stream = stream.key_by("k").window(WINDOW)
    with pytest.raises(tm.InputDataError, match=r"no `order_by` value \(null or NaN 'o'\)"):
        stream.sum("ts").to_dataframe().collect()


# ------------------------------------------------------------------ sums beyond the type


SUMS = [
    pytest.param("v long", [2**62] * 3, "bigint", id="bigint"),
    pytest.param("v int", [2**30] * 2, "int", id="int"),
    pytest.param("v decimal(4,1)", [999.9, 0.1], "decimal(4,1)", id="decimal"),
]


@pytest.mark.parametrize(("column", "values", "declared"), SUMS)
@pytest.mark.parametrize("mode", ["batch", "batch-engine", "replay", "stream"])
def test_a_sum_beyond_its_columns_type_is_one_window_result_error(
    spark, tmp_path, mode, column, values, declared
):
    from decimal import Decimal

    rows = [("a", n, Decimal(str(v)) if "decimal" in column else v) for n, v in enumerate(values)]
    engine = mode == "batch-engine"
    spark.conf.set("spark.tidemark.sqlFastPath", str(not engine).lower())
    try:
        with pytest.raises(WindowResultError) as info:
            run(
                spark,
                "batch" if engine else mode,
                rows,
                f"k string, ts long, {column}",
                lambda s: s.key_by("k").window(WINDOW).sum("v"),
                tmp_path,
            )
    finally:
        spark.conf.unset("spark.tidemark.sqlFastPath")
    message = str(info.value)
    assert message.startswith(f"`output_schema` field 'v' is {declared}, but a result holds")
    assert "window max_timestamp=9" in message
    assert "sum() keeps its column's type" in message and "cast('decimal(38,0)')" in message


def test_the_sql_fast_path_refuses_an_overflowing_sum_without_ansi_too(spark, tmp_path):
    spark.conf.set("spark.sql.ansi.enabled", "false")  # Spark's own sum would wrap around
    try:
        with pytest.raises(WindowResultError, match=r"beyond the bigint range"):
            run(
                spark,
                "batch",
                [("a", 1, 2**62), ("a", 2, 2**62)],
                "k string, ts long, v long",
                lambda s: s.key_by("k").window(WINDOW).sum("v"),
                tmp_path,
            )
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")
