"""The user's API: the DataStream-style pipeline (:mod:`.streams`) read from a DataFrame
(:mod:`.sources`), a window operation's definition (:mod:`.definition`) and the outputs
of one run (:mod:`.results`, a bounded result's ``explain``: :mod:`.bounded_explain`).

The top layer: it builds :mod:`tidemark.spark.plan` nodes and asks
:mod:`tidemark.spark.execution` to run them; nothing below imports it.
"""
