"""Kafka record batches v2: build, iterate, validate and decode to Arrow.

The compiled ``kafkacore._ext.records`` module is used when available; the pure-Python
twins in ``batch_py`` / ``arrow_py`` otherwise (or with ``KAFKACORE_NO_EXTENSIONS=1``).

pyarrow is imported on first use of ``decode_to_arrow`` or ``SPARK_KAFKA_SCHEMA``, not with
this package: the broker never needs it, and it would cost every process ~27 MB of RSS."""
from .._loader import load_native
from .errors import CorruptRecordError, UnsupportedCodecError

_native = load_native("records")

if _native is not None:
    RecordBatchBuilder = _native.RecordBatchBuilder
    RecordBatch = _native.RecordBatch
    Record = _native.Record
    iter_batches = _native.iter_batches
    decode_to_arrow = _native.decode_to_arrow
    decode_segments_to_arrow = _native.decode_segments_to_arrow
else:
    from .batch_py import Record, RecordBatch, RecordBatchBuilder, iter_batches
    from .arrow_py import decode_segments_to_arrow, decode_to_arrow

__all__ = [
    "RecordBatchBuilder", "RecordBatch", "Record", "iter_batches", "decode_to_arrow",
    "decode_segments_to_arrow",
    "CorruptRecordError", "UnsupportedCodecError", "SPARK_KAFKA_SCHEMA",
]


def __getattr__(name):
    # PEP 562: SPARK_KAFKA_SCHEMA is a pyarrow object, so it is made on first access.
    if name == "SPARK_KAFKA_SCHEMA":
        from .arrow_schema import SPARK_KAFKA_SCHEMA

        globals()[name] = SPARK_KAFKA_SCHEMA
        return SPARK_KAFKA_SCHEMA
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"SPARK_KAFKA_SCHEMA"})
