"""Filters Spark pushes to a batch read, turned into the offsets worth reading.

Predicates on ``partition``, ``offset`` and ``timestamp`` (=, <, <=, >, >=, IN; BETWEEN arrives
as two comparisons) narrow each partition's offset range before any record is read: partitions
are skipped, offset bounds cut the range (the splits then start and stop at the batches the
``.index`` points to), and a lower timestamp bound becomes the first offset at or after it (the
``.timeindex`` for segment files, ListOffsets against a broker).

A record's timestamp says nothing about its neighbours' (producers set them), so an upper
timestamp bound cannot end a range early: those records are read, and the reader drops them
(``row_mask``), as it drops the records between the values of an offset IN. So every filter
taken is applied exactly by the source and none is handed back: Spark lists them all under
PushedFilters in ``explain()`` (pyspark's PythonScan shows only the filters a source does not
return) and does not check them again."""
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

    def mask(self, column):
        """A boolean Arrow array: which of the int64 column's values the bounds admit (None:
        all of them)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        parts = []
        if self.lo is not None:
            parts.append(pc.greater_equal(column, pa.scalar(self.lo, pa.int64())))
        if self.hi is not None:
            parts.append(pc.less_equal(column, pa.scalar(self.hi, pa.int64())))
        if self.values is not None:
            parts.append(pc.is_in(column, value_set=pa.array(sorted(self.values), pa.int64())))
        if not parts:
            return None
        out = parts[0]
        for p in parts[1:]:
            out = pc.and_(out, p)
        return out


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

    def push(self, f) -> bool:
        """Whether the filter is taken: the read then holds exactly the rows it admits (the
        offset ranges and ``row_mask``), so Spark need not check it again."""
        if not isinstance(f, _COMPARISONS) or len(f.attribute) != 1:
            return False
        column = f.attribute[0]
        if column in ("partition", "offset"):
            values = f.value if isinstance(f, In) else (f.value,)
            if not all(_integer(v) for v in values):
                return False
            _narrow_integers(getattr(self, column), f, f.value)
            self.described.append(repr(f))
            return True
        if column == "timestamp":
            if isinstance(f, In):
                micros = [_timestamp_us(v) for v in f.value]
                if any(us is None for us in micros):
                    return False
                self.timestamp.only(us // _MS_PER_US for us in micros if us % _MS_PER_US == 0)
            else:
                us = _timestamp_us(f.value)
                if us is None:
                    return False
                _narrow_timestamp(self.timestamp, f, us)
            self.described.append(repr(f))
            return True
        return False

    def row_mask(self, batch):
        """Which rows of a decoded batch (its int64-compatible ``offset`` and ms ``timestamp``
        columns) the filters admit, or None when the ranges alone are exact: the timestamp
        bounds, and the values of an offset = or IN (its range runs from the smallest to the
        largest)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        masks = []
        if self.timestamp:
            masks.append(self.timestamp.mask(batch.column("timestamp").cast(pa.int64())))
        if self.offset.values is not None and len(self.offset.values) > 1:
            masks.append(pc.is_in(batch.column("offset"), value_set=pa.array(sorted(self.offset.values), pa.int64())))
        masks = [m for m in masks if m is not None]
        if not masks:
            return None
        return masks[0] if len(masks) == 1 else pc.and_(masks[0], masks[1])


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
    if ts_lo is not None and ts_lo >= 0:
        # (a negative target is not a time to ListOffsets: -1 is "latest", -2 "earliest"; and
        # every record is at or after it but those of a producer's own negative timestamps)
        # The first offset at or after ts_lo: every record before it is older (ListOffsets'
        # contract), whatever the order of the timestamps after it.
        found = backend.for_timestamps({tp: ts_lo for tp, (s, e) in out.items() if e > s})
        for tp, first in found.items():
            s, e = out[tp]
            out[tp] = (s, s) if first is None else (min(max(s, first), e), e)
    return out
