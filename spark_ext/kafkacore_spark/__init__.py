"""kafkacore for PySpark: the "kafkacore" data source and the UDF pack.

    import kafkacore_spark
    kafkacore_spark.register(spark)
    df = spark.read.format("kafkacore").option("path", "/data").option("subscribe", "events").load()

The data source reads a data directory's segment files (``path``) or a broker
(``kafka.bootstrap.servers``), in batch and streaming queries, and writes through kafkacore's
idempotent producer. Records reach Spark as Arrow batches from kafkacore's native decoder. See
docs/spark.md."""
from .functions import (confluent_schema_id, decode_batches, header_value, headers_map,
                        strip_confluent_header, value_from_json)
from .options import OptionError
from .segments import DataLossError
from .source import KafkacoreDataSource

__all__ = ["register", "KafkacoreDataSource", "decode_batches", "value_from_json", "strip_confluent_header",
           "confluent_schema_id", "header_value", "headers_map", "OptionError", "DataLossError"]


def register(spark) -> None:
    """Registers format("kafkacore") with the session. Safe to call again: a second
    registration replaces the first with the same class."""
    spark.dataSource.register(KafkacoreDataSource)
