"""Kafka record batches v2: build, iterate, validate and decode to Arrow.

The compiled ``kafkacore._ext.records`` module is used when available; the pure-Python
twins in ``batch_py`` / ``arrow_py`` otherwise (or with ``KAFKACORE_NO_EXTENSIONS=1``)."""
from .._loader import load_native
from .errors import CorruptRecordError, UnsupportedCodecError
from .arrow_schema import SPARK_KAFKA_SCHEMA

_native = load_native("records")

if _native is not None:
    RecordBatchBuilder = _native.RecordBatchBuilder
    RecordBatch = _native.RecordBatch
    Record = _native.Record
    iter_batches = _native.iter_batches
    decode_to_arrow = _native.decode_to_arrow
else:
    from .batch_py import Record, RecordBatch, RecordBatchBuilder, iter_batches
    from .arrow_py import decode_to_arrow

__all__ = [
    "RecordBatchBuilder", "RecordBatch", "Record", "iter_batches", "decode_to_arrow",
    "CorruptRecordError", "UnsupportedCodecError", "SPARK_KAFKA_SCHEMA",
]
