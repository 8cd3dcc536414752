"""The UDF pack: decoding raw record-batch bytes held in a DataFrame column, and the value and
header helpers Kafka pipelines need.

Only ``decode_batches`` runs Python (one ``mapInArrow`` call per Arrow batch, decoding natively);
the helpers are Spark column expressions, so they run in the JVM with no Python round trip."""
import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .source import all_columns, output_schema

_PARTITION_DIR = re.compile(r"([^/\\]+)-(\d+)[/\\][^/\\]*$")


def _col(c) -> Column:
    return F.col(c) if isinstance(c, str) else c


def decode_batches(df: DataFrame, column: str = "content", *, topic_column: str | None = None,
                   partition_column: str | None = None, path_column: str | None = None,
                   include_headers: bool = False, check_crcs: bool = True) -> DataFrame:
    """Every record of the record batches held in ``column`` (binary: a whole ``.log`` segment
    from ``spark.read.format("binaryFile")``, or batches from any other store), one row per
    record in the schema of Spark's Kafka source.

    topic and partition come from ``topic_column`` / ``partition_column``, or are parsed from a
    segment file's path (``.../<topic>-<partition>/<offset>.log``) in ``path_column``; null
    otherwise. Control batches are skipped; a truncated final batch (a file still being
    written) ends that value; a corrupt batch fails the task with its position."""
    from .source import _to_spark

    names = df.columns
    for c in (column, topic_column, partition_column, path_column):
        if c is not None and c not in names:
            raise ValueError(f"decode_batches: no column {c!r} in {names}")
    wanted = [column] + [c for c in (topic_column, partition_column, path_column) if c is not None]
    schema = output_schema(include_headers)
    columns = all_columns(include_headers)

    def decode(batches):
        from kafkacore.record import decode_to_arrow
        from kafkacore.record.errors import CorruptRecordError

        for rb in batches:
            data = rb.column(column)
            topics = rb.column(topic_column).to_pylist() if topic_column else None
            parts = rb.column(partition_column).to_pylist() if partition_column else None
            paths = rb.column(path_column).to_pylist() if path_column else None
            for i in range(rb.num_rows):
                scalar = data[i]
                if not scalar.is_valid:
                    continue
                topic = topics[i] if topics else None
                part = parts[i] if parts else None
                if paths and paths[i] and (topic is None or part is None):
                    m = _PARTITION_DIR.search(paths[i])
                    if m:
                        topic = topic if topic is not None else m.group(1)
                        part = part if part is not None else int(m.group(2))
                try:
                    out = decode_to_arrow(scalar.as_buffer(), topic, part, check_crcs)
                except CorruptRecordError as e:
                    where = f" ({paths[i]})" if paths else ""
                    raise CorruptRecordError(f"corrupt record batch in row {i}{where}: {e.reason}", e.position) from e
                if out.num_rows:
                    yield _to_spark(out, columns)

    return df.select(*wanted).mapInArrow(decode, schema)


# -- values ---------------------------------------------------------------------------------
def strip_confluent_header(value) -> Column:
    """The payload after Confluent's wire-format prefix (magic byte 0, then a 4-byte big-endian
    schema id), ready for Avro/JSON/Protobuf decoding. A value without the prefix fails the
    query with a clear message rather than decoding garbage; null stays null."""
    v = _col(value)
    ok = (F.length(v) >= 5) & (F.substring(v, 1, 1) == F.lit(bytes([0])))
    bad = F.raise_error(F.lit("value does not start with the Confluent wire-format prefix "
                              "(magic byte 0 + 4-byte schema id)"))
    return (F.when(v.isNull(), F.lit(None).cast("binary"))
            .when(ok, F.substring(v, 6, 2147483647))
            .otherwise(bad.cast("binary")))


def confluent_schema_id(value) -> Column:
    """The schema id of a Confluent wire-format value (bytes 1-4, big-endian); null when the
    value is null or has no prefix."""
    v = _col(value)
    ok = (F.length(v) >= 5) & (F.substring(v, 1, 1) == F.lit(bytes([0])))
    return F.when(ok, F.conv(F.hex(F.substring(v, 2, 4)), 16, 10).cast("long").cast("int"))


def value_from_json(value, schema, options: dict | None = None, confluent: bool = False) -> Column:
    """from_json over a binary value (UTF-8 JSON), optionally after stripping the Confluent
    prefix (JSON Schema serializer). ``schema`` is a StructType or a DDL string."""
    v = strip_confluent_header(value) if confluent else _col(value)
    return F.from_json(v.cast("string"), schema, options or {})


# -- headers --------------------------------------------------------------------------------
def header_value(headers, key: str) -> Column:
    """The value of the last header named ``key`` (Kafka's Headers.lastHeader); null if none."""
    h = _col(headers)
    matching = F.filter(h, lambda x: x["key"] == F.lit(key))
    return F.when(F.size(matching) > 0, F.element_at(matching, -1)["value"])


def headers_map(headers) -> Column:
    """Headers as map<string, binary>; a key that repeats keeps its last value (as
    Headers.lastHeader would). Null headers give an empty map."""
    h = F.coalesce(_col(headers), F.array().cast("array<struct<key:string,value:binary>>"))
    n = F.size(h)
    last_of_each = F.filter(
        h, lambda x, i: ~F.exists(F.slice(h, i + 2, F.greatest(n, F.lit(1))), lambda y: y["key"] == x["key"]))
    return F.map_from_entries(last_of_each)
