"""Secondary check (FINDINGS.md §d): what ctx.current_watermark() returns in PyFlink's *Python* window
operator, and how PyFlink count windows behave.  Run with the flinkref venv:

    tools/flinkref/.venv/bin/python tools/flinkref/pyflink_check/pyflink_watermark_check.py

Part 1 uses a slow map (sleep per element) so that periodic watermarks (interval 10 ms) are generated between
elements; the exact watermark values are therefore timing-dependent, but the relation between the reported
watermark and the window's max timestamp is what we look at.  Part 2 has no periodic watermarks at all
(interval 0), so every window fires on the final end-of-input watermark.  Part 3: count_window(2, 1).
"""

import sys
import time

from pyflink.common import Configuration, Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessWindowFunction
from pyflink.datastream.window import TumblingEventTimeWindows


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


class Pwf(ProcessWindowFunction):
    def process(self, key, ctx, elements):
        w = ctx.window()
        yield (
            f"key={key} window=[{w.start},{w.end}) max_ts={w.max_timestamp()} "
            f"values={[e[1] for e in elements]} current_watermark={ctx.current_watermark()}"
        )


def slow(x):
    time.sleep(0.3)
    return x


def run(part, interval_ms, sleep):
    conf = Configuration()
    # small Python bundles so that elements reach the watermark operator one by one
    conf.set_string("python.fn-execution.bundle.size", "1")
    conf.set_string("python.fn-execution.bundle.time", "1")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    env.set_python_executable(sys.executable)
    env.get_config().set_auto_watermark_interval(interval_ms)
    data = [("a", 1, 1), ("a", 2, 3), ("a", 3, 6), ("a", 4, 12), ("b", 5, 13)]
    ds = env.from_collection(
        data, type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])
    )
    if sleep:
        ds = ds.map(slow, output_type=Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()]))
    ds = ds.assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())
    )
    out = (
        ds.key_by(lambda x: x[0], key_type=Types.STRING())
        .window(TumblingEventTimeWindows.of(Time.milliseconds(5)))
        .process(Pwf(), Types.STRING())
    )
    with out.execute_and_collect() as results:
        for r in results:
            print(part, r, flush=True)


def run_count(part):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.set_python_executable(sys.executable)
    data = [("a", 1), ("a", 2), ("a", 3), ("b", 10), ("a", 4)]
    ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
    out = (
        ds.key_by(lambda x: x[0], key_type=Types.STRING())
        .count_window(2, 1)
        .reduce(
            lambda a, b: (a[0], a[1] + b[1]), output_type=Types.TUPLE([Types.STRING(), Types.INT()])
        )
    )
    with out.execute_and_collect() as results:
        for r in results:
            print(part, r, flush=True)


if __name__ == "__main__":
    run("part1(periodic wm, slow source):", 10, True)
    run("part2(no periodic wm):", 0, False)
    run_count("part3(count_window(2,1) reduce-sum):")
