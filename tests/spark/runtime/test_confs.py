"""tidemark's own Spark confs (``spark/runtime/confs.py``): each parsed as Spark parses its own
confs of the kind (``true``/``false`` in any case, spaces around stripped, ...), unset
as its default, and any other value refused with an error naming the conf, the rule,
the value and the fix, where the conf is read: on the driver, when a BATCH run is
planned or a streaming query's frame is built. The readers are checked with a stand-in
``spark.conf``; each path that reads them, once through a real session.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import tidemark as tm
from tidemark.errors import WindowSpecError
from tidemark.spark import execution
from tidemark.spark.batch import local_global, sorting, sql_plan
from tidemark.spark.execution import ExecutionMode
from tidemark.spark.plan import fast_paths_enabled, slice_incremental_enabled
from tidemark.spark.runtime import confs
from tidemark.spark.streaming.driver import preaggregate as stream_preaggregate
from tidemark.spark.streaming.driver.checkpoint import DEFAULT_LAYOUT, state_layout
from tidemark.spark.streaming.driver.keygroups import session_max_parallelism
from tidemark.spark.streaming.worker.variables import LAYOUTS, StateLayout

ROOT = Path(__file__).resolve().parents[3]
SWITCHES = [c for c in confs.CONFS if isinstance(c, confs.Switch)]
NOT_BOOLEANS = ["off", "no", "0", "1", "yes", "on", "", "  ", "truee", "t", "disabled"]


class FakeConf:
    """``spark.conf`` of a session with ``values`` set."""

    def __init__(self, values: dict[str, str]):
        self.values = values

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.values.get(name, default)


class FakeSpark:
    def __init__(self, values: dict[str, str] | None = None):
        self.conf = FakeConf(values or {})


def _refusal(name: str, value: str) -> str:
    """What every refusal says first: the conf, then (after the rule) the value."""
    return rf"^`{re.escape(name)}` must be .*; got {re.escape(repr(value))}: "


# --- the readers ---------------------------------------------------------------------


@pytest.mark.parametrize("switch", SWITCHES, ids=lambda c: c.name)
def test_a_switch_takes_true_or_false_in_any_case_and_is_its_default_unset(switch):
    assert switch.enabled(FakeSpark()) is switch.default
    for value in ("true", "TRUE", " True ", "\ttrue\n"):
        assert switch.enabled(FakeSpark({switch.name: value})) is True
    for value in ("false", "FALSE", " false ", "False\n"):
        assert switch.enabled(FakeSpark({switch.name: value})) is False


@pytest.mark.parametrize("switch", SWITCHES, ids=lambda c: c.name)
@pytest.mark.parametrize("value", NOT_BOOLEANS)
def test_a_switch_refuses_anything_else_with_the_fix(switch, value):
    with pytest.raises(WindowSpecError, match=_refusal(switch.name, value)) as refused:
        switch.enabled(FakeSpark({switch.name: value}))
    message = str(refused.value)
    assert "must be true or false" in message
    assert f"set it to false to {switch.when_false}, or to true to {switch.when_true}" in message


def test_the_switch_message_reads_as_a_fix():
    with pytest.raises(WindowSpecError) as refused:
        confs.PRE_AGGREGATE.enabled(FakeSpark({"spark.tidemark.preAggregate": "off"}))
    assert str(refused.value) == (
        "`spark.tidemark.preAggregate` must be true or false; got 'off': set it to false to "
        "run every BATCH window_all in one task, and every vectorized function on all of a "
        "window's values, or to true to pre-aggregate a BATCH window_all of an "
        "order-insensitive function, and a keyed vectorized function with a partial step, "
        "per partition (unset, it is true)"
    )


@pytest.mark.parametrize(
    "conf, accepted, refused",
    [
        (
            confs.MAX_PARALLELISM,
            {"8": 8, " 128 ": 128, "+1": 1, "32768": 32768},
            ["0", "-4", "32769", "many", "1_000", "8.0", "0x10", "", "٣"],
        ),
        (
            confs.STATE_CACHE_KEYS,
            {"2000000": 2_000_000, " 1 ": 1},
            ["0", "-1", "many", "2_000_000", "2e6", ""],
        ),
        (
            confs.STATE_COMPACT_BYTES,
            {"2048": 2048, "\t1\n": 1},
            ["0", "-2048", "1m", "1.5", ""],
        ),
    ],
    ids=lambda c: c.name if isinstance(c, confs.WholeNumber) else None,
)
def test_a_whole_number_takes_digits_within_its_bounds(conf, accepted, refused):
    assert conf.read(FakeSpark()) is None  # the caller's default
    for value, number in accepted.items():
        assert conf.read(FakeSpark({conf.name: value})) == number
    for value in refused:
        with pytest.raises(WindowSpecError, match=_refusal(conf.name, value)) as error:
            conf.read(FakeSpark({conf.name: value}))
        assert f"must be {conf.rule}" in str(error.value) and conf.fix in str(error.value)


def test_the_state_layout_is_row_or_deltas_in_any_case():
    name = confs.STATE_LAYOUT.name
    assert confs.STATE_LAYOUT.choices == LAYOUTS
    assert confs.STATE_LAYOUT.read(FakeSpark()) is None
    assert confs.STATE_LAYOUT.read(FakeSpark({name: " Deltas "})) == "deltas"
    assert confs.STATE_LAYOUT.read(FakeSpark({name: "ROW"})) == "row"
    for value in ("delta", "rows", "", "row,deltas"):
        with pytest.raises(WindowSpecError, match=_refusal(name, value)) as error:
            confs.STATE_LAYOUT.read(FakeSpark({name: value}))
        assert "must be one of ['row', 'deltas']" in str(error.value)
        assert "set 'deltas' to keep a base plus deltas" in str(error.value)


def test_the_sort_budget_is_bytes_with_an_optional_unit():
    conf = confs.WORKER_SORT_BYTES
    assert conf.read(FakeSpark()) == conf.default == sorting.DEFAULT_BUDGET == 64 << 20
    for value, size in {"256m": 256 << 20, " 1G ": 1 << 30, "0": 0, "4096": 4096}.items():
        assert conf.read(FakeSpark({conf.name: value})) == size
    for value in ("lots", "-1", "1.5m", "64mb", "m", ""):
        with pytest.raises(WindowSpecError, match=_refusal(conf.name, value)) as error:
            conf.read(FakeSpark({conf.name: value}))
        assert "0 to leave the sort to Spark, or unset it for 64m" in str(error.value)


def test_the_fixes_name_the_defaults_the_code_uses():
    assert f"unset it for {StateLayout.cache_keys}" in confs.STATE_CACHE_KEYS.fix
    assert f"unset it for {StateLayout.compact_bytes} " in confs.STATE_COMPACT_BYTES.fix
    assert DEFAULT_LAYOUT == "deltas" and "('deltas' for a new one)" in confs.STATE_LAYOUT.fix


# --- every conf is declared, read through its declaration, and documented ------------


def _conf_names_in(paths: list[Path]) -> set[str]:
    pattern = re.compile(r"spark\.tidemark\.[A-Za-z][A-Za-z.]*[A-Za-z]")
    return {name for path in paths for name in pattern.findall(path.read_text())}


def test_every_conf_the_source_names_is_declared():
    names = _conf_names_in(sorted((ROOT / "src").rglob("*.py")))
    assert names == {c.name for c in confs.CONFS}


def _conf_reads(tree: ast.Module) -> list[ast.expr]:
    """The first argument of each ``<...>.conf.get(...)`` or ``conf.get(...)`` call."""
    reads = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver = node.func.value
        named = getattr(receiver, "attr", getattr(receiver, "id", None))
        if node.func.attr == "get" and named == "conf" and node.args:
            reads.append(node.args[0])
    return reads


def _read_name(module: object, arg: ast.expr) -> object:
    """The conf name an argument is: a literal, an f-string (its literal parts, each
    formatted part as ``{}``), or a module-level name (or attribute)."""
    if isinstance(arg, ast.Constant):
        return arg.value
    if isinstance(arg, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in arg.values)
    if isinstance(arg, ast.Attribute):
        return getattr(_read_name(module, arg.value), arg.attr)
    assert isinstance(arg, ast.Name), ast.dump(arg)
    return getattr(module, arg.id)  # a local variable: fails here, as it should


def test_no_module_reads_a_conf_of_its_own_but_through_its_declaration():
    """A ``spark.conf.get`` of a tidemark conf anywhere but ``confs.py`` would bypass
    its parsing; the modules' names of the confs are their declarations' names."""
    package = ROOT / "src" / "tidemark"
    reads = 0
    for path in sorted(package.rglob("*.py")):
        if path.name == "confs.py":
            continue
        parts = path.relative_to(package.parent).with_suffix("").parts
        module = importlib.import_module(".".join(p for p in parts if p != "__init__"))
        for arg in _conf_reads(ast.parse(path.read_text())):
            name = _read_name(module, arg)
            assert not str(name).startswith("spark.tidemark."), f"{path}: reads {name}"
            reads += 1
    assert reads >= 5  # Spark's own confs (shuffle partitions, ...) are found
    assert sql_plan.CONF == confs.SQL_FAST_PATH.name
    assert local_global.CONF == confs.PRE_AGGREGATE.name
    assert stream_preaggregate.CONF == confs.STREAMING_PRE_AGGREGATE.name
    assert sorting.CONF == confs.WORKER_SORT_BYTES.name


def test_the_configuration_page_lists_every_conf_with_its_values():
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert _conf_names_in([ROOT / "docs" / "configuration.md"]) == {c.name for c in confs.CONFS}
    rows = {line.split("`")[1]: line for line in page.splitlines() if line.startswith("| `")}
    for conf in confs.CONFS:
        row = rows[conf.name]
        if isinstance(conf, confs.Switch):
            assert f"`true` or `false` | `{str(conf.default).lower()}`" in row, row
        elif isinstance(conf, confs.Choice):
            assert " or ".join(f"`{c}`" for c in conf.choices) in row, row
        else:
            assert "whole number" in row or "bytes" in row, row


# --- the accessors that read them, with a stand-in session ---------------------------


def test_the_accessors_refuse_a_malformed_value():
    cases = [
        (fast_paths_enabled, confs.FAST_PATHS.name, "off"),
        (slice_incremental_enabled, confs.SLICE_INCREMENTAL.name, "yes"),
        (session_max_parallelism, confs.MAX_PARALLELISM.name, "0"),
        (session_max_parallelism, confs.MAX_PARALLELISM.name, "40000"),
        (lambda s: state_layout(s, None), confs.STATE_LAYOUT.name, "delta"),
        (lambda s: state_layout(s, None), confs.STATE_CACHE_KEYS.name, "0"),
        (lambda s: state_layout(s, None), confs.STATE_COMPACT_BYTES.name, "1m"),
    ]
    for read, name, value in cases:
        with pytest.raises(WindowSpecError, match=_refusal(name, value)):
            read(FakeSpark({name: value}))


def test_the_accessors_read_valid_values_as_before():
    assert fast_paths_enabled(FakeSpark()) and not fast_paths_enabled(
        FakeSpark({confs.FAST_PATHS.name: " FALSE "})
    )
    assert not slice_incremental_enabled(FakeSpark())
    assert slice_incremental_enabled(FakeSpark({confs.SLICE_INCREMENTAL.name: "True"}))
    assert session_max_parallelism(FakeSpark({confs.MAX_PARALLELISM.name: " 64"})) == 64
    layout = state_layout(
        FakeSpark(
            {
                confs.STATE_LAYOUT.name: "DELTAS",
                confs.STATE_CACHE_KEYS.name: "10",
                confs.STATE_COMPACT_BYTES.name: "2048",
            }
        ),
        None,
    )
    assert layout == StateLayout("deltas", 10, 2048)
    assert state_layout(FakeSpark(), None) == StateLayout(DEFAULT_LAYOUT)


# --- through a real session: each path that reads them -------------------------------


class Highest(tm.AggregateFunction):
    """The largest ``n``: declared order-insensitive, so a window_all pre-aggregates."""

    order_insensitive = True

    def create_accumulator(self):
        return None

    def add(self, value, acc):
        return value.n if acc is None else max(acc, value.n)

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a if b is None else b if a is None else max(a, b)


class Mean(tm.VectorizedAggregateFunction):
    def aggregate(self, values):
        return float(np.mean(values))


class CombinedMean(tm.VectorizedCombineFunction):
    partials = ("total", "count")

    def partial(self, values):
        return float(np.sum(values)), len(values)

    def finish(self, total, count):
        return float(total.sum() / count.sum())


@pytest.fixture
def setting(spark):
    """Set confs for a test; each is put back as it was (unset, or the session's) after."""
    before: dict[str, str | None] = {}

    def set_conf(name: str, value: str) -> None:
        before.setdefault(name, spark.conf.get(name, None))
        spark.conf.set(name, value)

    yield set_conf
    for name, value in before.items():
        if value is None:
            spark.conf.unset(name)
        else:
            spark.conf.set(name, value)


def _frame(spark):
    rows = [("k", 10, 1, 1.0), ("k", 12, 2, 2.0), ("j", 55, 3, 3.0)]
    return spark.createDataFrame(rows, "key string, ts long, n long, x double")


def _keyed_sum(spark):
    stream = tm.from_dataframe(_frame(spark), timestamp="ts").key_by("key")
    return stream.window(tm.TumblingEventTimeWindows.of(50)).sum("n")


def _keyed_reduce(spark):
    stream = tm.from_dataframe(_frame(spark), timestamp="ts").key_by("key")
    return stream.window(tm.SlidingEventTimeWindows.of(50, 25)).reduce(lambda a, b: a)


def _all_highest(spark):
    windowed = tm.from_dataframe(_frame(spark), timestamp="ts").window_all(
        tm.TumblingEventTimeWindows.of(50)
    )
    return windowed.aggregate(Highest(), output_schema="n long")


def _keyed_vectorized(spark):
    stream = tm.from_dataframe(_frame(spark), timestamp="ts").key_by("key")
    return stream.window(tm.TumblingEventTimeWindows.of(50)).aggregate_vectorized(Mean(), ["x"])


def _keyed_combined(spark):
    stream = tm.from_dataframe(_frame(spark), timestamp="ts").key_by("key")
    windowed = stream.window(tm.TumblingEventTimeWindows.of(50))
    return windowed.aggregate_vectorized(CombinedMean(), ["x"])


def _stream_all_highest(spark, directory: Path):
    source = spark.readStream.schema("n long, ts long").json(str(directory))
    strategy = tm.WatermarkStrategy.for_bounded_out_of_orderness(1000)
    windowed = tm.from_dataframe(source, timestamp="ts", watermark_strategy=strategy)
    return windowed.window_all(tm.TumblingEventTimeWindows.of(50)).aggregate(
        Highest(), output_schema="n long"
    )


@pytest.mark.spark
@pytest.mark.parametrize(
    "pipeline, conf, value",
    [
        (_keyed_sum, confs.SQL_FAST_PATH, "off"),
        (_keyed_sum, confs.FAST_PATHS, "0"),
        (_all_highest, confs.PRE_AGGREGATE, "no"),
        (_keyed_vectorized, confs.VECTORIZED_FAST_PATH, "disabled"),
        (_keyed_combined, confs.PRE_AGGREGATE, "nope"),
        (_keyed_reduce, confs.SLICE_INCREMENTAL, "on"),
        (_keyed_reduce, confs.WORKER_SORT_BYTES, "64mb"),
        (_keyed_vectorized, confs.WORKER_SORT_BYTES, "lots"),
    ],
    ids=lambda p: p.name if hasattr(p, "name") else getattr(p, "__name__", p),
)
def test_a_batch_run_is_refused_when_it_is_planned(spark, setting, pipeline, conf, value):
    result = pipeline(spark)
    setting(conf.name, value)
    with pytest.raises(WindowSpecError, match=_refusal(conf.name, value)):
        result.to_dataframe()


def _malformed(conf) -> str:
    return "off" if isinstance(conf, confs.Switch) else "lots"


@pytest.mark.spark
@pytest.mark.parametrize("conf", confs.CONFS, ids=lambda c: c.name)
def test_a_run_is_refused_whatever_confs_its_path_reads(spark, setting, tmp_path, conf):
    # the SQL fast path reads none but its own two switches, a window_all max on it
    # not spark.tidemark.preAggregate: a typo there is still a typo
    setting(conf.name, _malformed(conf))
    batch = tm.from_dataframe(_frame(spark), timestamp="ts").window_all(
        tm.TumblingEventTimeWindows.of(50)
    )
    with pytest.raises(WindowSpecError, match=_refusal(conf.name, _malformed(conf))):
        batch.max("n").to_dataframe()
    with pytest.raises(WindowSpecError, match=_refusal(conf.name, _malformed(conf))):
        _stream_all_highest(spark, tmp_path).to_dataframe()


@pytest.mark.spark
def test_valid_spellings_choose_the_same_batch_paths(spark, setting):
    def mode(pipeline):
        return execution.mode_of(pipeline(spark).plan, spark)

    assert mode(_keyed_sum) is ExecutionMode.SQL
    setting(confs.SQL_FAST_PATH.name, " FALSE ")
    assert mode(_keyed_sum) is ExecutionMode.BATCH
    setting(confs.SQL_FAST_PATH.name, "True")
    assert mode(_keyed_sum) is ExecutionMode.SQL
    assert mode(_all_highest) is ExecutionMode.LOCAL_GLOBAL
    assert mode(_keyed_combined) is ExecutionMode.VECTORIZED_COMBINED
    setting(confs.PRE_AGGREGATE.name, "False")
    assert mode(_all_highest) is ExecutionMode.BATCH
    assert mode(_keyed_combined) is ExecutionMode.VECTORIZED
    assert mode(_keyed_vectorized) is ExecutionMode.VECTORIZED
    setting(confs.FAST_PATHS.name, "FALSE")
    assert mode(_keyed_vectorized) is ExecutionMode.BATCH
    assert not _keyed_reduce(spark).plan.run_spec().fast_paths


@pytest.mark.spark
@pytest.mark.parametrize(
    "conf, value",
    [
        (confs.STREAMING_PRE_AGGREGATE, "off"),
        (confs.FAST_PATHS, "no"),
        (confs.SLICE_INCREMENTAL, "1"),
        (confs.MAX_PARALLELISM, "0"),
        (confs.STATE_LAYOUT, "delta"),
        (confs.STATE_CACHE_KEYS, "many"),
        (confs.STATE_COMPACT_BYTES, "-1"),
    ],
    ids=lambda p: p.name if hasattr(p, "name") else p,
)
def test_a_streaming_query_is_refused_when_it_is_built(spark, setting, tmp_path, conf, value):
    result = _stream_all_highest(spark, tmp_path)
    setting(conf.name, value)
    with pytest.raises(WindowSpecError, match=_refusal(conf.name, value)):
        result.to_dataframe()


@pytest.mark.spark
def test_valid_spellings_turn_the_streaming_pre_aggregation_off(spark, setting, tmp_path):
    def plan() -> str:
        frame = _stream_all_highest(spark, tmp_path).to_dataframe()
        return frame._jdf.queryExecution().analyzed().toString()

    assert "MapInPandas" in plan()
    setting(confs.STREAMING_PRE_AGGREGATE.name, " False")
    assert "MapInPandas" not in plan()
    setting(confs.STREAMING_PRE_AGGREGATE.name, "TRUE")
    assert "MapInPandas" in plan()
