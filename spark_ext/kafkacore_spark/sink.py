"""Writing DataFrames to a broker with kafkacore's idempotent producer (at-least-once: a task
that Spark retries writes its records again).

Columns, as Spark's Kafka sink takes them: ``value`` (binary or string, required), ``key``,
``topic`` (unless the ``topic`` option is set, which wins), ``partition`` (int; null lets the
partitioner choose) and ``headers`` (array<struct<key string, value binary>>). A batch with no
partition or header values and one topic goes through ``send_many`` (a native loop over the
Arrow columns); other batches record by record."""
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from .options import OptionError

try:
    from pyspark.sql.datasource import DataSourceArrowWriter
except ImportError:  # before Spark 4.0's Arrow writer
    DataSourceArrowWriter = DataSourceWriter
try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # Spark 4.0: rows only
    DataSourceStreamArrowWriter = None


@dataclass
class WriteResult(WriterCommitMessage):
    records: int


def check_schema(schema: StructType, topic_option):
    """The input columns, checked on the driver so a bad DataFrame fails before any task."""
    fields = {f.name: f.dataType for f in schema.fields}
    text_or_bytes = (BinaryType, StringType)
    if "value" not in fields:
        raise OptionError("writing to kafkacore needs a 'value' column (binary or string)")
    if not isinstance(fields["value"], text_or_bytes):
        raise OptionError(f"column 'value' must be binary or string, not {fields['value'].simpleString()}")
    if "key" in fields and not isinstance(fields["key"], text_or_bytes):
        raise OptionError(f"column 'key' must be binary or string, not {fields['key'].simpleString()}")
    if topic_option is None:
        if "topic" not in fields:
            raise OptionError("say which topic to write: option 'topic' or a 'topic' column")
        if not isinstance(fields["topic"], StringType):
            raise OptionError(f"column 'topic' must be a string, not {fields['topic'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise OptionError(f"column 'partition' must be an int, not {fields['partition'].simpleString()}")
    if "headers" in fields:
        h = fields["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [f.name for f in h.elementType.fields] == ["key", "value"]
              and isinstance(h.elementType.fields[0].dataType, StringType)
              and isinstance(h.elementType.fields[1].dataType, BinaryType))
        if not ok:
            raise OptionError("column 'headers' must be array<struct<key:string,value:binary>>, not "
                              + h.simpleString())


def producer_config(kafka: dict) -> dict:
    conf = {"enable.idempotence": True, "acks": "all", "linger.ms": 5}
    conf.update(kafka)
    return conf


def write_batches(batches, opts) -> int:
    """Sends every row of the Arrow batches; returns how many, or raises the first error."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from kafkacore import Producer

    errors = []

    def on_delivery(err, _md):
        if err is not None and not errors:
            errors.append(err)

    producer = Producer(producer_config(opts.kafka))
    handles = []
    total = 0
    try:
        for batch in batches:
            n = batch.num_rows
            if not n:
                continue
            names = batch.schema.names
            col = batch.column
            value = col(names.index("value"))
            if pa.types.is_string(value.type) or pa.types.is_large_string(value.type):
                value = value.cast(pa.binary())
            key = col(names.index("key")) if "key" in names else None
            if key is not None and (pa.types.is_string(key.type) or pa.types.is_large_string(key.type)):
                key = key.cast(pa.binary())
            if opts.topic is not None:
                topics = None
                topic = opts.topic
            else:
                topics = col(names.index("topic"))
                if topics.null_count:
                    raise ValueError("a row has a null 'topic' and no 'topic' option is set")
                distinct = pc.unique(topics)
                topic = distinct[0].as_py() if len(distinct) == 1 else None
            part = col(names.index("partition")) if "partition" in names else None
            headers = col(names.index("headers")) if "headers" in names else None
            bulk = (topic is not None and (part is None or part.null_count == n)
                    and (headers is None or headers.null_count == n
                         or pc.sum(pc.list_value_length(headers)).as_py() in (None, 0)))
            if bulk:
                handles.append(producer.send_many(topic, value, key))
            else:
                values = value.to_pylist()
                keys = key.to_pylist() if key is not None else [None] * n
                ts = topics.to_pylist() if topics is not None else [topic] * n
                ps = part.to_pylist() if part is not None else [None] * n
                hs = headers.to_pylist() if headers is not None else [None] * n
                send = producer.send
                for i in range(n):
                    h = hs[i]
                    send(ts[i], values[i], key=keys[i], partition=ps[i],
                         headers=[(x["key"], x["value"]) for x in h] if h else None, on_delivery=on_delivery)
            total += n
            if errors:
                raise errors[0]
        left = producer.flush()
        for h in handles:
            h.result(0)
        if errors:
            raise errors[0]
        if left:
            raise TimeoutError(f"{left} records were not acknowledged")
        return total
    finally:
        producer.close(timeout=0)


def _rows_to_arrow(rows, schema: StructType):
    """Row iterator -> Arrow batches of 10k rows (for Spark versions without Arrow writers)."""
    import pyarrow as pa

    names = [f.name for f in schema.fields]
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == 10_000:
            yield pa.RecordBatch.from_pylist([dict(zip(names, r)) for r in chunk])
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist([dict(zip(names, r)) for r in chunk])


def _arrow_input(iterator, schema):
    first = next(iterator, None)
    if first is None:
        return iter(())
    import itertools

    import pyarrow as pa

    it = itertools.chain([first], iterator)
    if isinstance(first, pa.RecordBatch):
        return it
    return _rows_to_arrow(it, schema)


class _SendsPartition:
    """What both writers do with one task's partition: send it all, then return."""

    def __init__(self, opts, schema):
        check_schema(schema, opts.topic)
        self.opts, self.schema = opts, schema

    def write(self, iterator):
        return WriteResult(write_batches(_arrow_input(iterator, self.schema), self.opts))


class KafkacoreBatchWriter(_SendsPartition, DataSourceArrowWriter):
    pass


_StreamBase = DataSourceStreamArrowWriter or DataSourceStreamWriter


class KafkacoreStreamWriter(_SendsPartition, _StreamBase):
    def commit(self, messages, batchId):
        pass  # each record was acknowledged (acks=all) before its task returned

    def abort(self, messages, batchId):
        pass  # what was written stays: the sink is at-least-once, as Spark's Kafka sink is
