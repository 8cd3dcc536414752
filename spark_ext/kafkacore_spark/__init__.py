"""kafkacore for PySpark: the "kafkacore" data source and the UDF pack.

    import kafkacore_spark
    kafkacore_spark.register(spark)
    df = spark.read.format("kafkacore").option("path", "/data").option("subscribe", "events").load()

The data source reads a data directory's segment files (``path``) or a broker
(``kafka.bootstrap.servers``), in batch and streaming queries, and writes through kafkacore's
idempotent producer. Records reach Spark as Arrow batches from kafkacore's native decoder. See
docs/spark.md."""
import os
import sys

try:
    import pyspark  # noqa: F401 - checked first, so that its absence is one clear line
except ImportError as e:
    raise ImportError("kafkacore_spark needs PySpark, which is not installed here: install kafkacore with its "
                      "spark extra from the checkout (pip install '.[spark]', docs/spark.md) or "
                      "pip install 'pyspark>=4.0'", name=e.name) from None

from .functions import (confluent_schema_id, decode_batches, header_value, headers_map,
                        strip_confluent_header, value_from_json)
from .options import OptionError
from .segments import DataLossError
from .source import KafkacoreDataSource

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

__all__ = ["register", "KafkacoreDataSource", "decode_batches", "value_from_json", "strip_confluent_header",
           "confluent_schema_id", "header_value", "headers_map", "OptionError", "DataLossError"]


def register(spark) -> None:
    """Registers format("kafkacore") with the session. Safe to call again: a second
    registration replaces the first with the same class.

    Unless a worker Python was chosen (the PYSPARK_PYTHON environment variable, or the
    ``spark.pyspark.python`` conf), Spark would start ``python3`` from PATH for its Python
    workers, which is not this virtualenv's Python when it is not activated, and could not
    import kafkacore. So the workers of this SparkContext are made to run this interpreter
    (``sys.executable``): the data source registered here and the UDFs made after this call
    (decode_batches, mapInArrow, udf) use it.

    It also turns on ``spark.sql.python.filterPushdown.enabled`` (off by default in Spark),
    without which Spark refuses to plan a Python source that takes pushed filters: the
    source reads only the partitions, offsets and times a query's filters admit."""
    _use_this_python_for_workers(spark)
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    spark.dataSource.register(KafkacoreDataSource)


def _use_this_python_for_workers(spark) -> None:
    sc = getattr(spark, "_sc", None)
    if sc is None:
        return  # Spark Connect: the Python workers run on the server, chosen there
    if os.environ.get("PYSPARK_PYTHON") or sc.getConf().contains("spark.pyspark.python"):
        return  # the user's choice
    if sys.executable:
        # PySpark reads PYSPARK_PYTHON once, when the SparkContext starts; each Python function
        # (a registered data source, a UDF) carries sc.pythonExec, the program its workers run.
        sc.pythonExec = sys.executable
