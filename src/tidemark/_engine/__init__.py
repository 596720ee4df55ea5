"""The pure-Python window engine: no Spark import anywhere below this package.

- :mod:`~tidemark._engine.spec`: :class:`OperatorSpec`, a pipeline's frozen
  configuration, validated once per query.
- :mod:`~tidemark._engine.create`: ``create_window_operator(spec)``, the one place that
  chooses the operator serving a spec.
- :mod:`~tidemark._engine.operator`: the general :class:`WindowOperator` (Flink's
  ``WindowOperator`` and ``EvictingWindowOperator``), for every pipeline.
- :mod:`~tidemark._engine.aligned`: ``AlignedWindowOperator``, the same but faster for
  tumbling/sliding event-time windows whose trigger fires only at the window end.
- :mod:`~tidemark._engine.functions`: the window function's state strategy
  (``ElementsLogic``, ``ReduceLogic``, ``AggregateLogic``).
- :mod:`~tidemark._engine.keystate`, :mod:`~tidemark._engine.timers`,
  :mod:`~tidemark._engine.merging`, :mod:`~tidemark._engine.contexts`: a key's state,
  the timer services (one per time domain), the merging window set, the contexts
  handed to user code.
- :mod:`~tidemark._engine.replay`: a replay's stepping of the clocks through a recorded
  stream's watermarks and arrival times (the general operator only advances).
"""
