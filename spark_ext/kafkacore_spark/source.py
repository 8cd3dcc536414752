"""The "kafkacore" data source: batch and streaming reads, batch and streaming writes.

Its output is the schema of Spark's Kafka source; ``read()`` yields the Arrow record batches of
kafkacore's native decoder, so no Python object is made per record. Stream offsets have the
JSON shape of Spark's Kafka source offsets: ``{"topic": {"0": 42}}`` (the next offset to read)."""
import time

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField,
                               StructType, TimestampType)

from .backends import backend_for, check_ranges, read_split, resolve
from .options import OptionError, parse_sink_options, parse_source_options
from .pushdown import PushedFilters, narrow_ranges

try:  # Spark 4.2+: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # Spark 4.0 / 4.1
    ReadAllAvailable = ReadMaxRows = None

    class SupportsTriggerAvailableNow:  # a stand-in base so the class below still defines
        pass

SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
])
HEADERS_FIELD = StructField("headers", ArrayType(StructType([
    StructField("key", StringType()), StructField("value", BinaryType())])))


def output_schema(include_headers: bool) -> StructType:
    return StructType(SCHEMA.fields + [HEADERS_FIELD]) if include_headers else SCHEMA


def all_columns(include_headers: bool) -> tuple[str, ...]:
    """The columns read when no schema narrows them: every one, in the source's order."""
    return tuple(output_schema(include_headers).fieldNames())


def requested_columns(schema, include_headers: bool) -> tuple[str, ...]:
    """The columns a user schema (``.schema("value binary")``) asks for, in its order: any
    subset of the source's columns, each with the source's type. Anything else is an error
    naming the column, before any task runs."""
    available = {f.name: f.dataType for f in output_schema(include_headers).fields}
    if not schema.fields:
        raise OptionError("the schema names no column; format('kafkacore') has " + ", ".join(available))
    names = []
    for f in schema.fields:
        want = available.get(f.name)
        if want is None:
            if f.name == HEADERS_FIELD.name:
                raise OptionError("column 'headers' is read only with the option includeHeaders=true")
            raise OptionError(f"format('kafkacore') has no column {f.name!r}; its columns are " + ", ".join(available))
        if f.dataType.simpleString() != want.simpleString():
            raise OptionError(f"column {f.name!r} of format('kafkacore') is {want.simpleString()}, "
                              f"not {f.dataType.simpleString()}")
        if f.name in names:
            raise OptionError(f"column {f.name!r} is named twice in the schema")
        names.append(f.name)
    return tuple(names)


def _to_spark(batch, columns: tuple[str, ...]):
    """The decoder's batch in the columns asked for, in their order (a zero-copy selection):
    timestamps as UTC microseconds (Spark's TimestampType)."""
    import pyarrow as pa

    arrays = []
    for name in columns:
        col = batch.column(name)
        if name == "timestamp":
            col = col.cast(pa.timestamp("us", tz="UTC"))
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, names=list(columns))


class KafkacoreDataSource(DataSource):
    """spark.read / readStream / write / writeStream .format("kafkacore")."""

    @classmethod
    def name(cls):
        return "kafkacore"

    def schema(self):
        include = str({k.lower(): v for k, v in self.options.items()}.get("includeheaders", "false")).lower() == "true"
        return output_schema(include)

    def reader(self, schema):
        opts = parse_source_options(self.options, streaming=False)
        return KafkacoreBatchReader(opts, requested_columns(schema, opts.include_headers))

    def streamReader(self, schema):
        opts = parse_source_options(self.options, streaming=True)
        return KafkacoreStreamReader(opts, requested_columns(schema, opts.include_headers))

    def writer(self, schema, overwrite):
        from .sink import KafkacoreBatchWriter

        return KafkacoreBatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema, overwrite):
        from .sink import KafkacoreStreamWriter

        return KafkacoreStreamWriter(parse_sink_options(self.options), schema)


class KafkacoreBatchReader(DataSourceReader):
    """Plans on the driver, once Spark has pushed its filters (``partitions()``): bad offsets,
    missing partitions and data loss are reported before any task runs. ``bytes_planned`` and
    ``bytes_stored`` (segment files only) say how much of the data the plan reads."""

    def __init__(self, opts, columns=None):
        self.opts = opts
        self.columns = columns or all_columns(opts.include_headers)
        self.pushed = PushedFilters()
        self._splits = None
        self.ranges = self.bytes_planned = self.bytes_stored = None

    def pushFilters(self, filters):
        # a filter taken is applied exactly (ranges, then row_mask in read()); the others
        # Spark checks on the rows
        return [f for f in filters if not self.pushed.push(f)]

    def _plan(self):
        opts = self.opts
        backend = backend_for(opts)
        try:
            subscribed = backend.topic_partitions()
            tps = [tp for tp in subscribed if self.pushed.partition.admits(tp[1])]
            earliest = backend.earliest(tps)
            starts = resolve(backend, opts.starting, tps, "starting", opts.timestamp_strategy)
            ends = resolve(backend, opts.ending, tps, "ending")
            if opts.ending.kind != "latest":
                # an ending offset past the end of the log reads up to the end: tasks must not
                # wait for records that may never come
                latest = backend.latest(tps)
                ends = {tp: min(o, latest[tp]) for tp, o in ends.items()}
            self.ranges = check_ranges(starts, ends, earliest, opts.fail_on_data_loss)
            narrowed = bool(self.pushed.offset or self.pushed.timestamp)
            if narrowed:
                self.ranges = narrow_ranges(backend, self.ranges, self.pushed)
            splits = backend.plan(self.ranges, exact=narrowed)
            self.bytes_stored = backend.stored_bytes(subscribed)
            if self.bytes_stored is not None:
                self.bytes_planned = sum(s.bytes for s in splits)
            return splits
        finally:
            close = getattr(backend, "close", None)
            if close:
                close()

    def partitions(self):
        if self._splits is None:
            self._splits = self._plan()
        return self._splits

    def read(self, partition):
        pushed = self.pushed
        for batch in read_split(partition, self.opts):
            mask = pushed.row_mask(batch) if pushed else None
            if mask is not None:
                batch = batch.filter(mask)
                if not batch.num_rows:
                    continue
            yield _to_spark(batch, self.columns)


def _offset_json(offsets: dict) -> dict:
    out: dict = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def _offset_map(js: dict) -> dict:
    return {(t, int(p)): int(o) for t, ps in (js or {}).items() for p, o in ps.items()}


class KafkacoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over offset ranges. ``maxOffsetsPerTrigger`` caps each batch (split over
    the partitions in proportion to what each has waiting, as Spark's Kafka source does);
    ``minOffsetsPerTrigger`` holds a trigger back until that many offsets wait, or until
    ``maxTriggerDelay`` has passed since the last batch (Spark's KafkaMicroBatchStream's rule:
    the first trigger always runs); partitions that appear later are read from their earliest
    offset."""

    def __init__(self, opts, columns=None):
        self.opts = opts
        self.columns = columns or all_columns(opts.include_headers)
        self._backend = backend_for(opts)
        self._target = None  # the latest offsets when Trigger.AvailableNow began
        self._last = None  # for Spark 4.0/4.1, whose latestOffset() has no start argument
        self._last_trigger_ms = 0  # when minOffsetsPerTrigger last let a batch run (0: never)

    def initialOffset(self):
        tps = self._backend.topic_partitions()
        start = resolve(self._backend, self.opts.starting, tps, "starting", self.opts.timestamp_strategy)
        return _offset_json(start)

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self):
        tps = self._backend.topic_partitions()
        self._target = self._backend.latest(tps)

    def _available(self) -> dict:
        if self._target is not None:
            return dict(self._target)
        tps = self._backend.topic_partitions()
        return self._backend.latest(tps)

    def reportLatestOffset(self):
        return _offset_json(self._available())

    def latestOffset(self, start=None, limit=None):
        if start is None:  # Spark 4.0/4.1: no arguments; the source applies its own limit
            start = self._last if self._last is not None else self.initialOffset()
            limit = self.getDefaultReadLimit()
        begin = _offset_map(start)
        latest = self._available()
        if self._delay_batch(begin, latest):
            self._last = _offset_json(begin)  # the same offsets: Spark runs no batch
            return self._last
        new = [tp for tp in latest if tp not in begin]
        if new:
            begin.update(self._backend.earliest(new))
        end = {tp: max(latest[tp], begin[tp]) for tp in latest}
        max_rows = getattr(limit, "max_rows", None)
        if max_rows is None and limit is None and self.opts.max_offsets_per_trigger:
            max_rows = self.opts.max_offsets_per_trigger
        if max_rows is not None:
            end = _rate_limit(begin, end, max_rows)
        # partitions that vanished (topic deleted) keep their last offset, so the JSON stays stable
        for tp, o in _offset_map(start).items():
            end.setdefault(tp, o)
        self._last = _offset_json(end)
        return self._last

    def _delay_batch(self, begin: dict, latest: dict) -> bool:
        """minOffsetsPerTrigger and maxTriggerDelay as Spark's Kafka source applies them: once
        the delay has passed since the last batch a batch runs whatever waits; before that, only
        when at least the minimum waits (counted from offset 0 for partitions the start does not
        name, as Spark counts). Trigger.AvailableNow is never held back: it must end."""
        minimum = self.opts.min_offsets_per_trigger
        if minimum is None or self._target is not None:
            return False
        now = time.time() * 1000
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        if sum(o - begin.get(tp, 0) for tp, o in latest.items()) < minimum:
            return True
        self._last_trigger_ms = now
        return False

    def partitions(self, start, end):
        begin, stop = _offset_map(start), _offset_map(end)
        new = [tp for tp in stop if tp not in begin]
        earliest = self._backend.earliest(list(stop)) if stop else {}
        for tp in new:
            begin[tp] = earliest[tp]
        ranges = check_ranges(begin, stop, earliest, self.opts.fail_on_data_loss)
        return self._backend.plan(ranges)

    def read(self, partition):
        for batch in read_split(partition, self.opts):
            yield _to_spark(batch, self.columns)

    def commit(self, end):
        pass  # Spark's checkpoint holds the offsets; nothing is committed to the broker

    def stop(self):
        close = getattr(self._backend, "close", None)
        if close:
            close()


def _rate_limit(begin: dict, end: dict, max_rows: int) -> dict:
    """At most max_rows offsets in all, shared in proportion to each partition's backlog."""
    lag = {tp: end[tp] - begin[tp] for tp in end}
    total = sum(lag.values())
    if total <= max_rows:
        return end
    out = {}
    left = max_rows
    for tp in sorted(end):
        share = min(lag[tp], (lag[tp] * max_rows) // total)
        out[tp] = begin[tp] + share
        left -= share
    # hand the rounding remainder to partitions that still have data, so progress never stalls
    for tp in sorted(end):
        if left <= 0:
            break
        extra = min(left, end[tp] - out[tp])
        out[tp] += extra
        left -= extra
    return out
