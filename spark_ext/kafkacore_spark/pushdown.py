"""Filters Spark pushes to a batch read, turned into the offsets worth reading.

Predicates on ``partition``, ``offset`` and ``timestamp`` (=, <, <=, >, >=, IN; BETWEEN arrives
as two comparisons) narrow each partition's offset range before any record is read: partitions
are skipped, offset bounds cut the range (the splits then start and stop at the batches the
``.index`` points to), and a lower timestamp bound becomes the first offset at or after it (the
``.timeindex`` for segment files, ListOffsets against a broker).

A record's timestamp says nothing about its neighbours' (producers set them), so an upper
timestamp bound cannot end a range early: those records are read and Spark drops them. For
the same reason timestamp filters are always handed back to Spark; partition and offset
comparisons are exact (the ranges hold exactly the records they admit) and are not."""
import datetime
from dataclasses import dataclass

from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MICROSECOND = datetime.timedelta(microseconds=1)
_MS_PER_US = 1000
_COMPARISONS = (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, In)


@dataclass
class Bounds:
    """The integers a column may hold: [lo, hi] (None: unbounded) and, after = or IN, only
    ``values``."""
    lo: int | None = None
    hi: int | None = None
    values: frozenset | None = None

    def at_least(self, n: int):
        self.lo = n if self.lo is None else max(self.lo, n)

    def at_most(self, n: int):
        self.hi = n if self.hi is None else min(self.hi, n)

    def only(self, values):
        values = frozenset(values)
        self.values = values if self.values is None else self.values & values

    def admits(self, n: int) -> bool:
        return ((self.lo is None or n >= self.lo) and (self.hi is None or n <= self.hi)
                and (self.values is None or n in self.values))

    def range(self) -> tuple[int | None, int | None]:
        """[lo, hi] with the values folded in (their min and max); lo > hi when nothing is admitted."""
        lo, hi = self.lo, self.hi
        if self.values is not None:
            if not self.values:
                return 1, 0
            lo = min(self.values) if lo is None else max(lo, min(self.values))
            hi = max(self.values) if hi is None else min(hi, max(self.values))
        return lo, hi

    def __bool__(self):
        return self.lo is not None or self.hi is not None or self.values is not None


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _timestamp_us(value):
    """A pushed timestamp literal in microseconds since the epoch; None for anything else (a
    naive datetime has no instant)."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return (value - _EPOCH) // _MICROSECOND
    return None


class PushedFilters:
    """What the pushed filters allow, per column (records' timestamps in ms)."""

    def __init__(self):
        self.partition = Bounds()
        self.offset = Bounds()
        self.timestamp = Bounds()
        self.described: list[str] = []  # the filters taken, for explain-like summaries

    def __bool__(self):
        return bool(self.partition or self.offset or self.timestamp)

    def push(self, f) -> tuple[bool, bool]:
        """(used, exact): whether the filter narrows the read, and whether the read then holds
        exactly the rows it admits (Spark need not check it again)."""
        if not isinstance(f, _COMPARISONS) or len(f.attribute) != 1:
            return False, False
        column = f.attribute[0]
        if column in ("partition", "offset"):
            values = f.value if isinstance(f, In) else (f.value,)
            if not all(_integer(v) for v in values):
                return False, False
            _narrow_integers(getattr(self, column), f, f.value)
            self.described.append(repr(f))
            # an offset IN reads the range from its smallest to its largest value
            return True, not (column == "offset" and isinstance(f, In) and len(set(values)) > 1)
        if column == "timestamp":
            if isinstance(f, In):
                micros = [_timestamp_us(v) for v in f.value]
                if any(us is None for us in micros):
                    return False, False
                self.timestamp.only(us // _MS_PER_US for us in micros if us % _MS_PER_US == 0)
            else:
                us = _timestamp_us(f.value)
                if us is None:
                    return False, False
                _narrow_timestamp(self.timestamp, f, us)
            self.described.append(repr(f))
            return True, False
        return False, False


def _narrow_integers(bounds: Bounds, f, value):
    if isinstance(f, EqualTo):
        bounds.only((value,))
    elif isinstance(f, In):
        bounds.only(value)
    elif isinstance(f, GreaterThan):
        bounds.at_least(value + 1)
    elif isinstance(f, GreaterThanOrEqual):
        bounds.at_least(value)
    elif isinstance(f, LessThan):
        bounds.at_most(value - 1)
    else:
        bounds.at_most(value)


def _narrow_timestamp(bounds: Bounds, f, us: int):
    """A record of m ms is m * 1000 us in Spark: the ms bounds admitting exactly the same records."""
    floor_ms, ceil_ms = us // _MS_PER_US, -(-us // _MS_PER_US)
    if isinstance(f, EqualTo):
        bounds.only((floor_ms,) if floor_ms == ceil_ms else ())
    elif isinstance(f, GreaterThan):
        bounds.at_least(floor_ms + 1)
    elif isinstance(f, GreaterThanOrEqual):
        bounds.at_least(ceil_ms)
    elif isinstance(f, LessThan):
        bounds.at_most(ceil_ms - 1)
    else:
        bounds.at_most(floor_ms)


def narrow_ranges(backend, ranges: dict, pushed: PushedFilters) -> dict:
    """{tp: (start, end)} cut to what the pushed offset and timestamp bounds can admit; an
    empty range is (start, start)."""
    lo, hi = pushed.offset.range()
    out = {}
    for tp, (start, end) in ranges.items():
        if lo is not None:
            start = max(start, lo)
        if hi is not None:
            end = min(end, hi + 1)
        out[tp] = (start, max(start, end))
    ts_lo, ts_hi = pushed.timestamp.range()
    if ts_lo is not None and ts_hi is not None and ts_lo > ts_hi:
        return {tp: (s, s) for tp, (s, _e) in out.items()}
    if ts_lo is not None:
        # The first offset at or after ts_lo: every record before it is older (ListOffsets'
        # contract), whatever the order of the timestamps after it.
        found = backend.for_timestamps({tp: ts_lo for tp, (s, e) in out.items() if e > s})
        for tp, first in found.items():
            s, e = out[tp]
            out[tp] = (s, s) if first is None else (min(max(s, first), e), e)
    return out
