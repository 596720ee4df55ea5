"""The old import path of the key groups' state rows (now
:mod:`tidemark.spark.streaming.worker.state`), kept because pickles name it: a state row
written by release 0.1 holds its keys as :class:`StoredKey` pickled by reference to
``tidemark.spark.streaming.state.StoredKey``, and a restart must load it. New rows name
the new path."""

from tidemark.spark.streaming.worker.state import StoredKey

__all__ = ["StoredKey"]
