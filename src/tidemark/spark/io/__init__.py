"""Input and output: the user's Kafka reader (:mod:`.kafka`) and the sinks
``write_outputs`` writes to (:mod:`.sinks`: Parquet, Delta Lake, Iceberg, Kafka).

Above the streaming driver: a table sink writes by a query's batch id and claims its
table beside the query's checkpoint (:mod:`tidemark.spark.streaming.driver.tables`).
"""
