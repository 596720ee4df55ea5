"""The old import path of what pickled state rows call, kept because pickles name it
(the code is :mod:`tidemark.spark.protocol.codec` and :mod:`tidemark.spark.protocol.keys`):
a state row written before the layers' move holds its Rows (and NaN keys) pickled by
reference to ``tidemark.spark.codec``, and a restart must load it. New rows name the new
path, but for a NaN key, which still pickles by this one: a key's pickle is hashed into
its key group."""

from tidemark.spark.protocol.codec import restored_row, rows_from_columns
from tidemark.spark.protocol.keys import _nan_key

__all__ = ["_nan_key", "restored_row", "rows_from_columns"]
