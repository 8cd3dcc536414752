"""The Arrow schema of decoded records: the columns and types of Spark's Kafka source."""
import pyarrow as pa

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
    # Typed scalars: letting pyarrow infer the type costs more than decoding a small batch.
    topic_col = pa.nulls(rows, pa.string()) if topic is None else pa.repeat(pa.scalar(topic, pa.string()), rows)
    part_col = pa.nulls(rows, pa.int32()) if partition is None else pa.repeat(pa.scalar(partition, pa.int32()), rows)
    return topic_col, part_col

