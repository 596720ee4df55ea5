"""A key's state pickled by an earlier tidemark loads and runs on this one.

The streaming runtime keeps each key's :class:`~tidemark._engine.keystate.KeyState`
pickled in Spark's state store, so a query checkpointed by one version restarts on the
next. The bytes below were pickled by the code at commit 3d6de86 (before the engine's
timers became one service per time domain), with ``pickle.HIGHEST_PROTOCOL`` as
``tidemark.spark.streaming.state`` stores them.
"""

from __future__ import annotations

import pickle

from tidemark import ContinuousProcessingTimeTrigger, EventTimeSessionWindows
from tidemark._engine.create import window_operator
from tidemark._engine.functions import window_logic
from tidemark._engine.keystate import KeyState
from tidemark._engine.operator import WindowOperator
from tidemark.time import LONG_MAX
from tidemark.windows import GlobalWindow, TimeWindow

# A KeyState with every attribute set (see `every_attribute_set`).
EVERY_ATTRIBUTE_3D6DE86 = bytes.fromhex(
    "800595ec000000000000008c19746964656d61726b2e5f656e67696e652e6b65797374617465948c084b65"
    "795374617465949394298194287d948c10746964656d61726b2e77696e646f7773948c0a54696d6557696e"
    "646f779493944b024b05869452945d94288c0161944b0186948c0162944b03869465737d9468074b004b0a"
    "869452947d948c05636f756e74944b0273737d9468116809737d9468074b0a4b14869452947d948c047365"
    "656e944b0173737d948c05746f74616c944b07737d94284b09681186944b014b13681186944b03757d944b"
    "0468058c0c476c6f62616c57696e646f7794939429529486944b02737494622e"
)

# Key "k" of `session_operator()` after `feed_until_snapshot`: two sessions, their
# contents, trigger state, merging set, event-time cleanup timers and processing-time
# timers (one of them stale: its window merged away).
SESSIONS_MID_STREAM_3D6DE86 = bytes.fromhex(
    "800595d5000000000000008c19746964656d61726b2e5f656e67696e652e6b65797374617465948c084b65"
    "795374617465949394298194287d94288c10746964656d61726b2e77696e646f7773948c0a54696d655769"
    "6e646f779493944b014b06869452944b0368074b144b19869452944b04757d942868074b014b0886945294"
    "7d948c09666972652d74696d65944b0573680b7d9468104b1873757d9428680e6809680b680b757d947d94"
    "7d94284b07680e86944b024b18680b86944b03757d94284b05680986944b014b05680e86944b024b18680b"
    "86944b03757494622e"
)


def every_attribute_set() -> KeyState:
    ks = KeyState()
    window, state_window = TimeWindow(0, 10), TimeWindow(2, 5)
    ks.contents[state_window] = [("a", 1), ("b", 3)]
    ks.trigger_state[window] = {"count": 2}
    ks.merging[window] = state_window
    ks.window_state[TimeWindow(10, 20)] = {"seen": 1}
    ks.global_state["total"] = 7
    ks.event_timers[(9, window)] = 1
    ks.event_timers[(19, window)] = 3
    ks.processing_timers[(4, GlobalWindow.get())] = 2
    return ks


def attributes(ks: KeyState) -> dict[str, object]:
    return {name: getattr(ks, name) for name in KeyState.__slots__}


def test_a_key_state_pickled_by_the_earlier_code_loads_with_every_attribute() -> None:
    loaded = pickle.loads(EVERY_ATTRIBUTE_3D6DE86)
    assert isinstance(loaded, KeyState)
    assert attributes(loaded) == attributes(every_attribute_set())


def test_a_key_state_pickles_to_the_earlier_code_s_bytes() -> None:
    """The format is unchanged both ways: a query can also go back to the earlier code."""
    blob = pickle.dumps(every_attribute_set(), protocol=pickle.HIGHEST_PROTOCOL)
    assert blob == EVERY_ATTRIBUTE_3D6DE86


def session_operator() -> WindowOperator:
    return window_operator(
        EventTimeSessionWindows.with_gap(5),
        window_logic(lambda a, b: a + b),
        trigger=ContinuousProcessingTimeTrigger.of(100),
    )


def feed_until_snapshot(op: WindowOperator) -> None:
    for value, timestamp in [(1, 1), (2, 3), (4, 20)]:
        op.process_element("k", value, timestamp)
    op.process_watermark(2)


def finish(op: WindowOperator) -> list[object]:
    op.advance_processing_time(10)
    op.process_element("k", 8, 30)
    op.process_watermark(LONG_MAX)
    return [list(op.output), op.num_keyed_state_entries(), op.num_event_time_timers()]


def test_a_key_state_pickled_mid_stream_by_the_earlier_code_runs_on() -> None:
    """Restored from the earlier code's bytes, key "k" fires and is cleaned up as the
    uninterrupted run does: the clock at 10 fires [1, 8) at 5 and at its end, 7 (the
    trigger's next firing, caught up in the same advance); the stale timer of [1, 6) is
    skipped; the final watermark clears everything."""
    straight = session_operator()
    feed_until_snapshot(straight)
    assert pickle.loads(SESSIONS_MID_STREAM_3D6DE86).__getstate__() == (
        straight.snapshot_key("k").__getstate__()  # type: ignore[union-attr]
    )
    restored = session_operator()
    restored.current_watermark = 2
    restored.restore_key("k", pickle.loads(SESSIONS_MID_STREAM_3D6DE86))
    assert finish(restored) == finish(straight) == [[(3, 7), (3, 7)], 0, 0]
