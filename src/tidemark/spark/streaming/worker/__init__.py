"""What runs in Spark's Python workers: the key groups of a streaming window, called
once per key group and micro-batch.

:mod:`.bindings` are what Spark calls (``applyInPandasWithState``,
``transformWithStateInPandas``); each hands :class:`~.groups.WindowGroups` a group
store of its operator's state and timers. A call splits its rows by key
(:mod:`.inputs`), moves each key's clocks (:mod:`.time_advance`, on Spark's clock:
:mod:`.clock`), runs the engine's window operator, emits rows (:mod:`.output_rows`) and the
call's figures (:mod:`.metrics`), and writes the group's row back (:mod:`.state`). What
the driver hands a worker is :class:`~.config.ProcessorConfig` with its time mode
(:mod:`.modes`). Nothing here imports :mod:`tidemark.spark.streaming.driver`.
"""
