"""A restart with a changed pipeline is refused before the query starts, naming what
changed (the checkpoint's state was built for the pipeline it first ran)."""

from __future__ import annotations

import pytest
from checkpoint_compat import LATE, write_input
from streaming_scenarios import RESULT_SCHEMA, VALUE_COLUMNS, _spec, describe_row

import tidemark as tm
from tidemark.errors import WindowSpecError
from tidemark.spark.streaming import StreamPlan, window_stream, write_outputs
from tidemark.spark.streaming.driver import checkpoint as checkpoint_files
from tidemark.spark.streaming.driver import from_plan
from tidemark.spark.streaming.driver.checkpoint import (
    DEFAULT_LAYOUT,
    GROUPS_FILE,
    LAYOUT_CONF,
    PIPELINE_FILE,
    check_checkpoint,
    check_checkpoint_clock,
    check_checkpoint_groups,
    check_checkpoint_layout,
    describe,
    read_records,
    state_layout,
)
from tidemark.spark.streaming.driver.keygroups import KeyGroups

pytestmark = pytest.mark.spark


def _windowed(spark, root, assigner, lateness=5):
    df = spark.readStream.schema("k string, v long, ts long").json(str(root / "in"))
    stream = tm.from_dataframe(
        df,
        timestamp="ts",
        watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(0),
        shift_spark_clock=True,  # timestamps from 1 ms: their watermarks need it
    )
    windowed = stream.key_by("k").window(assigner).allowed_lateness(lateness)
    return windowed.side_output_late_data(LATE).sum("v")


def _run(result, root):
    return result.write_outputs(
        {"main": lambda d, b: d.collect()},
        checkpoint=str(root / "checkpoint"),
        trigger={"availableNow": True},
    )


def test_a_changed_window_size_is_refused_naming_it(spark, tmp_path):
    (tmp_path / "in").mkdir()
    write_input(tmp_path / "in", 0)
    ten_minutes = tm.TumblingEventTimeWindows.of(tm.Duration.of_minutes(10))
    _run(_windowed(spark, tmp_path, ten_minutes), tmp_path).awaitTermination(300)
    twenty = tm.TumblingEventTimeWindows.of(tm.Duration.of_minutes(20))
    with pytest.raises(WindowSpecError) as error:
        _run(_windowed(spark, tmp_path, twenty), tmp_path)
    message = str(error.value)
    assert "the pipeline must stay what the checkpoint" in message
    assert "assigner was TumblingEventTimeWindows(offset_ms=0, size_ms=600000)" in message
    assert "now TumblingEventTimeWindows(offset_ms=0, size_ms=1200000)" in message
    assert "start a new checkpoint" in message
    assert spark.streams.active == []
    # the same pipeline restarts
    _run(_windowed(spark, tmp_path, ten_minutes), tmp_path).awaitTermination(300)


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        pytest.param(
            {"allowed lateness": "9ms"}, "allowed lateness was 5ms, now 9ms", id="lateness"
        ),
        pytest.param({"key": "k bigint"}, "key was k string, now k bigint", id="key-type"),
        pytest.param(
            {"trigger": "CountTrigger"}, r"trigger was EventTimeTrigger\(\), now", id="trigger"
        ),
    ],
)
def test_each_part_of_the_pipeline_is_compared(spark, tmp_path, changed, named):
    first = {
        "assigner": "A",
        "trigger": "EventTimeTrigger()",
        "evictor": "None",
        "allowed lateness": "5ms",
        "function": "ReduceLogic",
        "key": "k string",
    }
    checkpoint = str(tmp_path / "checkpoint")
    check_checkpoint(spark, read_records(spark, checkpoint), 4, (first,))
    assert (tmp_path / "checkpoint" / PIPELINE_FILE).is_dir()
    check_checkpoint(spark, read_records(spark, checkpoint), 4, (first,))
    with pytest.raises(WindowSpecError, match=named):
        check_checkpoint(spark, read_records(spark, checkpoint), 4, ({**first, **changed},))


def test_descriptions_never_show_an_address():
    class Custom(tm.CountTrigger):
        def __init__(self):
            super().__init__(3)
            self.every = 3
            self.f = lambda x: x

    text = describe(Custom())
    assert text.startswith("test_descriptions_never_show_an_address.<locals>.Custom(")
    assert "every=3" in text and "function " in text and " at 0x" not in text


def test_a_restart_adopts_the_checkpoints_default_number_of_key_groups(spark, tmp_path):
    """The default number of key groups follows the session; a restart on a session
    whose default differs carries on with the number the checkpoint holds."""
    (tmp_path / "in").mkdir()
    write_input(tmp_path / "in", 0)
    window = tm.TumblingEventTimeWindows.of(10)
    _run(_windowed(spark, tmp_path, window), tmp_path).awaitTermination(300)
    first = read_records(spark, str(tmp_path / "checkpoint")).groups
    assert first == 8  # 2 state partitions (shuffle partitions, cores), 4 groups each
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")  # a default of 4 groups now
    try:
        write_input(tmp_path / "in", 1)
        _run(_windowed(spark, tmp_path, window), tmp_path).awaitTermination(300)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    assert read_records(spark, str(tmp_path / "checkpoint")).groups == 8


def test_a_restart_reads_the_record_before_building_the_window_once(spark, tmp_path, monkeypatch):
    """The checkpoint's number of key groups is read before the window is built: on a
    session whose default differs, the restarted query's window is built once, with the
    recorded number."""
    (tmp_path / "in").mkdir()
    write_input(tmp_path / "in", 0)
    window = tm.TumblingEventTimeWindows.of(10)
    _run(_windowed(spark, tmp_path, window), tmp_path).awaitTermination(300)
    built = []

    def counted(*args, **kwargs):
        built.append(window_stream(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(from_plan, "window_stream", counted)
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")  # a default of 4 groups now
    try:
        write_input(tmp_path / "in", 1)
        _run(_windowed(spark, tmp_path, window), tmp_path).awaitTermination(300)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    assert [w.key_groups for w in built] == [KeyGroups(8, 8)]


def _low_level_window(spark, root, **checkpoint):
    df = spark.readStream.schema("key string, v long, ts long").json(str(root / "in"))
    return window_stream(
        df,
        StreamPlan(
            key_columns=["key"],
            timestamp_column="ts",
            spec=_spec(tm.TumblingEventTimeWindows.of(10)),
            out_of_orderness_ms=0,
            value_columns=VALUE_COLUMNS,
            result_schema=RESULT_SCHEMA,
            result_to_row=describe_row,
        ),
        **checkpoint,
    )


def test_window_stream_takes_the_number_its_checkpoint_recorded(spark, tmp_path):
    """``window_stream(checkpoint=...)`` reads the record first and builds for it;
    without it, the session's default meets the record when the query starts and is
    refused, naming the number to use."""
    (tmp_path / "in").mkdir()
    checkpoint = str(tmp_path / "checkpoint")
    check_checkpoint_layout(
        spark, read_records(spark, checkpoint), state_layout(spark, None).name
    )  # a first start
    check_checkpoint_clock(spark, read_records(spark, checkpoint), 0)
    check_checkpoint_groups(spark, read_records(spark, checkpoint), 3)  # with 3 groups
    assert _low_level_window(spark, tmp_path, checkpoint=checkpoint).key_groups == KeyGroups(3, 3)
    unread = _low_level_window(spark, tmp_path)
    assert unread.key_groups == KeyGroups(8, 2)  # the session's default
    with pytest.raises(WindowSpecError, match=r"has 3 key groups, this query 8.*maxParallelism=3"):
        write_outputs(unread, {"main": lambda d, b: None}, checkpoint)
    assert spark.streams.active == []


@pytest.fixture
def no_layout_asked(spark):
    """The session asks for no state layout (``make test-row`` asks for the row one)."""
    asked = spark.conf.get(LAYOUT_CONF, None)
    spark.conf.unset(LAYOUT_CONF)
    yield
    if asked is not None:
        spark.conf.set(LAYOUT_CONF, asked)


def test_a_window_built_without_the_checkpoint_of_the_release_before_is_refused(
    spark, tmp_path, no_layout_asked
):
    """A checkpoint written before layouts were recorded is in the row layout; a window
    built without it takes the default (deltas) and is refused when the query starts,
    naming the setting that restarts it; built with it, the window takes the row layout."""
    (tmp_path / "in").mkdir()
    checkpoint = str(tmp_path / "checkpoint")
    check_checkpoint_clock(
        spark, read_records(spark, checkpoint), 0
    )  # as the release before's first start
    check_checkpoint_groups(spark, read_records(spark, checkpoint), 8)
    assert _low_level_window(spark, tmp_path, checkpoint=checkpoint).state_layout.name == "row"
    unread = _low_level_window(spark, tmp_path)
    assert unread.state_layout.name == DEFAULT_LAYOUT == "deltas"
    with pytest.raises(WindowSpecError) as error:
        write_outputs(unread, {"main": lambda d, b: None}, checkpoint)
    assert "its state is in the 'row' layout" in str(error.value)
    assert "Set spark.tidemark.streaming.stateLayout='row'" in str(error.value)
    assert spark.streams.active == []


# ------------------------------------------------------------------ what the state holds


class Listing(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, ",".join(str(e.v) for e in elements))


class ListingWithCount(tm.ProcessWindowFunction):
    def process(self, key, context, elements):
        values = [str(e.v) for e in elements]
        yield (key, ",".join(values), len(values))


def _retracting(spark, root, function, schema):
    df = spark.readStream.schema("k string, v long, ts long").json(str(root / "in"))
    stream = tm.from_dataframe(
        df,
        timestamp="ts",
        watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(0),
        shift_spark_clock=True,  # timestamps from 1 ms: their watermarks need it
    )
    trigger = tm.AfterWatermark(early=tm.AfterCount(1))
    windowed = stream.key_by("k").window(tm.TumblingEventTimeWindows.of(10)).trigger(trigger)
    return windowed.accumulation_mode(tm.AccumulationMode.RETRACTING).process(function, schema)


def test_a_retracting_restart_with_another_output_schema_is_refused_before_it_starts(
    spark, tmp_path
):
    """The state keeps each window's last results to retract them: results of the old
    schema would be retracted through the new function's columns."""
    (tmp_path / "in").mkdir()
    write_input(tmp_path / "in", 0)
    first = _retracting(spark, tmp_path, Listing(), "k string, values string")
    _run(first, tmp_path).awaitTermination(300)
    wider = _retracting(spark, tmp_path, ListingWithCount(), "k string, values string, n long")
    with pytest.raises(WindowSpecError) as error:
        _run(wider, tmp_path)
    message = str(error.value)
    assert "output schema was struct<k:string,values:string,pane_timing:string" in message
    assert "now struct<k:string,values:string,n:bigint,pane_timing:string" in message
    assert spark.streams.active == []
    write_input(tmp_path / "in", 1)
    _run(first, tmp_path).awaitTermination(300)  # the same one carries on


def test_an_aggregate_with_another_accumulator_is_refused_before_it_starts(spark, tmp_path):
    (tmp_path / "in").mkdir()
    write_input(tmp_path / "in", 0)
    window = tm.TumblingEventTimeWindows.of(tm.Duration.of_minutes(10))
    _run(_windowed(spark, tmp_path, window), tmp_path).awaitTermination(300)
    df = spark.readStream.schema("k string, v long, ts long").json(str(tmp_path / "in"))
    stream = tm.from_dataframe(
        df,
        timestamp="ts",
        watermark_strategy=tm.WatermarkStrategy.for_bounded_out_of_orderness(0),
        shift_spark_clock=True,  # timestamps from 1 ms: their watermarks need it
    )
    windowed = stream.key_by("k").window(window).allowed_lateness(5)
    maxima = windowed.side_output_late_data(LATE).max("v")
    with pytest.raises(WindowSpecError, match=r"accumulator was Sum\('v'\) with a list"):
        _run(maxima, tmp_path)


def test_a_record_written_before_a_field_was_described_restarts_and_gains_it(spark, tmp_path):
    old = {"assigner": "A", "function": "AggregateLogic", "key": "k string"}
    checkpoint = str(tmp_path / "checkpoint")
    check_checkpoint(spark, read_records(spark, checkpoint), 4, (old,))
    now = {**old, "accumulator": "Sum('v') with a list accumulator", "output schema": "s"}
    check_checkpoint(
        spark, read_records(spark, checkpoint), 4, (now,)
    )  # accepted: the old record lacks both
    with pytest.raises(WindowSpecError, match=r"accumulator was Sum\('v'\) with a list"):
        check_checkpoint(
            spark,
            read_records(spark, checkpoint),
            4,
            ({**now, "accumulator": "Max('v') with a list"},),
        )


def test_a_record_on_the_drivers_disk_is_written_without_hadoop(spark, tmp_path, monkeypatch):
    """On the local file system the records are the driver's own files (Hadoop's local
    file system starts a process per file it creates), laid out as Spark's text writer
    leaves them, so that Spark and Connect read them."""

    def no_hadoop(*args):
        raise AssertionError("the JVM's file system was used for a local checkpoint")

    monkeypatch.setattr(checkpoint_files, "_HadoopFiles", no_hadoop)
    checkpoint = str(tmp_path / "checkpoint")
    check_checkpoint_clock(spark, read_records(spark, checkpoint), 0)
    check_checkpoint_layout(spark, read_records(spark, checkpoint), DEFAULT_LAYOUT)
    check_checkpoint(spark, read_records(spark, checkpoint), 4, ({"assigner": "A"},))
    check_checkpoint(
        spark, read_records(spark, checkpoint), 4, ({"assigner": "A"},)
    )  # a restart reads them
    assert read_records(spark, checkpoint).groups == 4
    assert [r.value for r in spark.read.text(f"{checkpoint}/{PIPELINE_FILE}").collect()] == [
        '[{"assigner": "A"}]'
    ]
    assert sorted(p.name for p in (tmp_path / "checkpoint" / PIPELINE_FILE).iterdir()) == [
        "_SUCCESS",
        "part-00000.txt",
    ]


def test_a_record_rewritten_replaces_what_hadoop_or_sparks_writer_left(spark, tmp_path):
    """A record rewritten on the driver's disk leaves neither Hadoop's checksum of the
    old one (Hadoop's read would fail on it) nor a part file Spark's text writer wrote
    (a Connect session's record, which would be read beside the new one)."""
    path = str(tmp_path / "record")
    checkpoint_files._HadoopFiles(spark, path).write_line("old, with a checksum")
    assert (tmp_path / "record" / ".part-00000.txt.crc").exists()
    checkpoint_files._write_line(spark, path, "new")
    assert checkpoint_files._HadoopFiles(spark, path).read_lines() == ["new"]
    assert [r.value for r in spark.read.text(path).collect()] == ["new"]

    spark.createDataFrame([("Connect's",)], "value string").coalesce(1).write.mode(
        "overwrite"
    ).text(path)
    checkpoint_files._write_line(spark, path, "newer")
    assert checkpoint_files._read_lines(spark, path) == ["newer"]
    assert [r.value for r in spark.read.text(path).collect()] == ["newer"]


def test_a_checkpoint_elsewhere_than_the_drivers_disk_goes_through_hadoop(
    spark, tmp_path, monkeypatch
):
    """Any other file system (HDFS, an object store) is read and written with the JVM's
    Hadoop file system, as Spark writes its own checkpoint there."""
    used = []

    class Spy(checkpoint_files._HadoopFiles):
        def __init__(self, spark, path):
            used.append(path)
            super().__init__(spark, path)

    monkeypatch.setattr(checkpoint_files, "_local_directory", lambda spark, path: None)
    monkeypatch.setattr(checkpoint_files, "_HadoopFiles", Spy)
    checkpoint = str(tmp_path / "checkpoint")
    check_checkpoint_groups(spark, read_records(spark, checkpoint), 4)
    check_checkpoint_groups(spark, read_records(spark, checkpoint), 4)
    assert used and all(path.startswith(checkpoint) for path in used)
    assert read_records(spark, checkpoint).groups == 4
    assert (tmp_path / "checkpoint" / GROUPS_FILE / ".part-00000.txt.crc").exists()
