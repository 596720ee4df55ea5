"""The pure-Python window engine: no Spark import anywhere below this package.

- :mod:`~tidemark._engine.spec`: :class:`OperatorSpec`, a pipeline's frozen
  configuration, validated once, when it is defined.
- :mod:`~tidemark._engine.create`: ``create_window_operator(spec)``, the one place that
  chooses the path (and so the operator) serving a spec.
- :mod:`~tidemark._engine.operator`: the core, :class:`WindowOperator` (Flink's
  ``WindowOperator`` and ``EvictingWindowOperator``): lateness, cleanup, merging,
  firing, side outputs and timers, written once. It holds a *path* and a *trigger
  driver*, chosen once:
- :mod:`~tidemark._engine.contract`: what its paths, drivers and contexts may call on
  the core (``OperatorCore``) and what a caller driving it may use (``OperatorHandle``);
  only the core and the chooser name the core's class.
- :mod:`~tidemark._engine.paths`: the general path (``WindowPath``): how elements are
  placed, due windows taken and contents stored; the fast paths are the same, faster:
  :mod:`~tidemark._engine.aligned` (tumbling/sliding event-time windows firing at their
  end), :mod:`~tidemark._engine.slices` (sliding windows stored once per slice),
  :mod:`~tidemark._engine.sessions` (event-time sessions), and
  :mod:`~tidemark._engine.processing` (processing-time windows, runs at one time).
- :mod:`~tidemark._engine.triggering`: the trigger drivers (Flink's trigger calls), and
  :mod:`~tidemark._engine.panes` (a Dataflow trigger's panes).
- :mod:`~tidemark._engine.functions`: the window function's state strategy
  (``ElementsLogic``, ``ReduceLogic``, ``AggregateLogic``), with the one fold
  (``add_all``).
- :mod:`~tidemark._engine.keystate`, :mod:`~tidemark._engine.timers`,
  :mod:`~tidemark._engine.merging`, :mod:`~tidemark._engine.contexts`: a key's state,
  the timer services (one per time domain), the merging window set, the contexts
  handed to user code.
- :mod:`~tidemark._engine.replay`: a replay's stepping of the clocks through a recorded
  stream's watermarks and arrival times (the core only advances).

Modules import downward only, with no function-level import
(``tests/layout/test_engine_layout.py``); how to add a fast path: ``docs/internals.md``.
"""
