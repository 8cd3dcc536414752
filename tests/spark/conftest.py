"""Real local Spark for the kafkacore_spark tests: one session for the whole run (local[2],
Java from the machine, the UI off), and one real `kafkacore serve` process whose topics the
tests fill with records they remember, so every read is checked record by record."""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/broker_client.py

from broker_client import BrokerProcess  # noqa: E402

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    import kafkacore_spark

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (SparkSession.builder.master("local[2]").appName("kafkacore-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    kafkacore_spark.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    # small segments, so partitions have several and big reads split into many tasks; no time
    # retention, since the tests' records carry timestamps from 2023 (_records.BASE_TS), which
    # the default 7 days would delete at the first retention check, 5 minutes in
    settings = {"num.partitions": "3", "log.segment.bytes": "16384", "log.index.interval.bytes": "1024",
                "log.retention.ms": "-1"}
    with BrokerProcess(tmp_path_factory.mktemp("spark-broker"), settings) as b:
        yield b
