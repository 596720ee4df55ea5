"""Times in an explanation's words: small values as ints, epoch ms as ISO with the zone.

A stream's times are epoch milliseconds (``1590292800000``), a test's small ints
(``9``). :class:`TimeText` shows each as its reader knows it: an int stays an int; a
time past 1973 (above 10^11 ms) is written ISO 8601 in the explanation's time zone
(UTC when none is given), ``+inf`` and ``-inf`` for the engine's ends of time.
Intervals are half-open, ``[start, end)``.

The guide: ``docs/why-no-result.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tidemark.errors import ExplainError
from tidemark.time import LONG_MAX, LONG_MIN

__all__ = ["TimeText", "EPOCH_THRESHOLD_MS", "zone"]

#: Above this (in absolute value), an int ms is an epoch time (1973-03-03 on).
EPOCH_THRESHOLD_MS = 10**11

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def zone(name: str | None) -> tzinfo:
    """The zone ``name`` (None: UTC); an unknown name is refused, naming ``time_zone``."""
    if name is None:
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ExplainError(
            f"`time_zone` must be an IANA zone name such as 'Asia/Shanghai'; got {name!r}"
        ) from exc


@dataclass(frozen=True)
class TimeText:
    """Formats the times of one explanation (``time_zone``: an IANA name, or None: UTC).

    >>> t = TimeText(None)
    >>> t.at(9), t.at(1590292805000), t.window((0, 10)), t.span(5000)
    ('9', '2020-05-24T04:00:05Z', '[0, 10)', '5000 ms')
    >>> TimeText("Asia/Shanghai").at(1590292805999), TimeText("Asia/Shanghai").short(1590292805999)
    ('2020-05-24T12:00:05.999+08:00', '12:00:05.999')
    """

    time_zone: str | None

    def at(self, ms: int | None) -> str:
        if ms is None:
            return "none"
        if ms >= LONG_MAX:
            return "+inf"
        if ms <= LONG_MIN:
            return "-inf"
        if abs(ms) < EPOCH_THRESHOLD_MS:
            return str(ms)
        wall = (_EPOCH + timedelta(milliseconds=ms)).astimezone(zone(self.time_zone))
        text = wall.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
        return text.replace("+00:00", "Z") if self.time_zone in (None, "UTC") else text

    def short(self, ms: int | None) -> str:
        """:meth:`at` without the date and zone (a picture's labels, whose axis says them)."""
        if ms is None or abs(ms) < EPOCH_THRESHOLD_MS or abs(ms) >= LONG_MAX:
            return self.at(ms)
        wall = (_EPOCH + timedelta(milliseconds=ms)).astimezone(zone(self.time_zone))
        return wall.strftime("%H:%M:%S") + (f".{ms % 1000:03d}" if ms % 1000 else "")

    def span(self, ms: int) -> str:
        if ms >= 10**6 and ms % 1000 == 0:
            return f"{ms // 1000} s"
        return f"{ms} ms"

    def window(self, bounds: tuple[int | None, int | None]) -> str:
        start, end = bounds
        if start is None or end is None:
            return "the global window"
        return f"[{self.at(start)}, {self.at(end)})"
