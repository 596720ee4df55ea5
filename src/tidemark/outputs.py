"""Side outputs: ``OutputTag`` names a stream beside the main result."""

from __future__ import annotations

from typing import Any

from tidemark.errors import WindowSpecError

__all__ = ["OutputTag"]


class OutputTag:
    """Names a side output, such as the late data of a window operator.

    >>> OutputTag("late") == OutputTag("late"), OutputTag("late")
    (True, OutputTag('late'))
    """

    __slots__ = ("tag_id", "type_info")

    def __init__(self, tag_id: str, type_info: Any = None):
        if not isinstance(tag_id, str) or not tag_id:
            raise WindowSpecError(f"`tag_id` must be a non-empty str; got {tag_id!r}")
        self.tag_id = tag_id
        self.type_info = type_info

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self) -> int:
        return hash(("OutputTag", self.tag_id))

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r})"
