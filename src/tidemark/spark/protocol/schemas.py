"""A window's schemas and column names: an output schema from a StructType or a DDL
string, and the names Spark could not tell apart or tidemark uses itself, refused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tidemark.errors import WindowSpecError
from tidemark.spark.protocol.columns import INTERNAL_PREFIX, is_internal

__all__ = ["parse_schema", "check_column_names"]


def parse_schema(schema: Any, spark: Any) -> Any:
    """A StructType from a StructType or a DDL string such as ``"user string, n long"``,
    its column names told apart (:func:`check_column_names`)."""
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        check_column_names(schema.fieldNames(), "`output_schema`", spark)
        return schema
    if isinstance(schema, str):
        try:
            parsed = spark.createDataFrame([], schema).schema
        except Exception as exc:
            raise WindowSpecError(
                f"`output_schema` must be a StructType or a DDL string like "
                f"'user string, n long'; could not parse {schema!r}: {exc}"
            ) from exc
        check_column_names(parsed.fieldNames(), "`output_schema`", spark)
        return parsed
    raise WindowSpecError(
        f"`output_schema` must be a StructType or a DDL string; got {schema!r} "
        f"({type(schema).__name__})"
    )


def check_column_names(names: Sequence[str], what: str, spark: Any) -> None:
    """Refuse column ``names`` that Spark cannot tell apart (equal names, or names
    equal but for case in a session where ``spark.sql.caseSensitive`` is false, the
    default: Spark's ``[AMBIGUOUS_REFERENCE]``), or that tidemark uses itself
    (``__tm_...``). ``what`` says whose columns they are, e.g. "`df`".

    Raises
    ------
    WindowSpecError
        Naming the columns and how to rename them.
    """
    sensitive = str(spark.conf.get("spark.sql.caseSensitive", "false")).lower() == "true"
    seen: dict[str, str] = {}
    for name in names:
        folded = name if sensitive else name.lower()
        if folded in seen:
            rule = "equal" if seen[folded] == name else "equal but for case"
            raise WindowSpecError(
                f"{what} has two columns named {seen[folded]!r} and {name!r} ({rule}): "
                f"Spark cannot tell them apart in a window's rows; rename one first, e.g. "
                f"df.toDF(*new_names) or withColumnRenamed; columns: {list(names)}"
            )
        seen[folded] = name
    internal = [name for name in names if is_internal(name)]
    if internal:
        raise WindowSpecError(
            f"{what} has columns named like tidemark's own internal columns "
            f"(`{INTERNAL_PREFIX}...`): "
            f"{internal}; rename them first"
        )
