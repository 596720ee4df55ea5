"""The column protocol every execution speaks: internal columns (:mod:`.columns`), what
a key is (:mod:`.keys`), rows and schemas (:mod:`.codec`), event time as long ms
(:mod:`.timestamps`), values through pandas without loss (:mod:`.lossless`), pane
columns (:mod:`.pane_columns`), figures (:mod:`.figures`) and a partitioned source's
rows (:mod:`.source_partitions`).

Below batch and streaming, above the plan and the runtime set-up.
"""
