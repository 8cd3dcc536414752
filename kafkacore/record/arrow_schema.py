"""The Arrow schema of decoded records: the columns and types of Spark's Kafka source."""
import functools
import struct

import pyarrow as pa

_INT32 = struct.Struct("=i")  # native order, as Arrow buffers hold their values

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(HEADER_TYPE)

SPARK_KAFKA_SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("ms")),
    pa.field("timestampType", pa.int32()),
    pa.field("headers", HEADERS_TYPE),
])


def constant_columns(topic, partition, rows: int):
    """The topic and partition columns: one value repeated, or all null when not given."""
    if topic is not None and not isinstance(topic, str):
        raise TypeError("topic must be a str or None")
    if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)):
        raise TypeError("partition must be an int or None")
    if partition is not None and not -(1 << 31) <= partition < 1 << 31:
        raise ValueError(f"partition {partition} does not fit an int32")
    if topic is None:
        topic_col = pa.nulls(rows, pa.string())
    elif rows <= _CACHED_ROWS and _CACHED_ROWS * (len(topic) + 4) <= _CACHED_BYTES:
        topic_col = _repeated_topic(topic).slice(0, rows)  # a slice shares the cached buffers
    else:
        topic_col = _repeat_topic(topic, rows)
    if partition is None:
        part_col = pa.nulls(rows, pa.int32())
    elif rows <= _CACHED_ROWS:
        part_col = _repeated_partition(partition).slice(0, rows)
    else:
        part_col = _repeat_partition(partition, rows)
    return topic_col, part_col


# poll_arrow() and the Spark reader ask for these columns once per batch: repeating the value
# each time cost a quarter of a millisecond per 27k rows (most of a small poll's own work).
# Arrow arrays are immutable, so every batch of up to _CACHED_ROWS rows slices one cached
# column; a few topics and partitions are kept, and a column above _CACHED_BYTES never is.
_CACHED_ROWS = 1 << 17
_CACHED_BYTES = 4 << 20


# Typed scalars: letting pyarrow infer the type costs more than decoding a small batch. They
# are made from buffers, not from Python values: converting a Python value makes pyarrow
# import pandas when it is installed, seconds on a loaded machine at a process's first poll.
def _repeat_topic(topic, rows):
    data = topic.encode("utf-8")
    one = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(_INT32.pack(0) + _INT32.pack(len(data))),
                                                pa.py_buffer(data)])
    return pa.repeat(one[0], rows)


def _repeat_partition(partition, rows):
    one = pa.Array.from_buffers(pa.int32(), 1, [None, pa.py_buffer(_INT32.pack(partition))])
    return pa.repeat(one[0], rows)


@functools.lru_cache(maxsize=16)
def _repeated_topic(topic):
    return _repeat_topic(topic, _CACHED_ROWS)


@functools.lru_cache(maxsize=32)
def _repeated_partition(partition):
    return _repeat_partition(partition, _CACHED_ROWS)


def empty_batch():
    """A record batch of SPARK_KAFKA_SCHEMA with no rows (made without Python-value conversion,
    as constant_columns' are)."""
    return pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in SPARK_KAFKA_SCHEMA], schema=SPARK_KAFKA_SCHEMA)
