"""Spark over a secured broker, with spark-sql-kafka's option names (issue 28): kafka.security.protocol,
kafka.sasl.*, kafka.ssl.* go to kafkacore's consumer and producer. A SASL_SSL listener with
SCRAM-SHA-512 and a TLS server certificate from a test CA: Spark writes, then reads back
exactly what it wrote; a wrong password fails the query with the broker's reason."""
import pytest

from _tls import KEY_PASSWORD, make_tls_material
from broker_client import BrokerProcess, free_port

PASSWORD = "spark-scram-pw"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    d = tmp_path_factory.mktemp("spark-secured")
    tls = make_tls_material(d / "tls")
    port, sasl_ssl = free_port(), free_port()
    settings = {"listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_ssl}",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512", "ssl.keystore.type": "PEM",
                "ssl.keystore.location": tls["server_keystore"], "ssl.key.password": KEY_PASSWORD,
                "num.partitions": "2"}
    b = BrokerProcess(d / "data", settings, port=port)
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "spark", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())]).values():
        f.result(30)
    b.secure_bootstrap, b.ca = f"127.0.0.1:{sasl_ssl}", tls["ca"]
    yield b
    b.stop()
    assert PASSWORD not in b.output()


def _options(broker, password=PASSWORD):
    return {"kafka.bootstrap.servers": broker.secure_bootstrap, "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                      f'username="spark" password="{password}";',
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": broker.ca}


def test_spark_writes_and_reads_over_sasl_ssl(spark, secured):
    from pyspark.sql import functions as F
    df = spark.range(500).select(F.col("id").cast("string").cast("binary").alias("key"),
                                 F.concat(F.lit("v"), F.col("id").cast("string")).cast("binary").alias("value"))
    w = df.write.format("kafkacore").option("topic", "spark-secured").mode("append")
    for k, v in _options(secured).items():
        w = w.option(k, v)
    w.save()
    r = spark.read.format("kafkacore").option("subscribe", "spark-secured")
    for k, v in _options(secured).items():
        r = r.option(k, v)
    rows = r.load().select("key", "value").collect()
    assert sorted((bytes(x.key), bytes(x.value)) for x in rows) == sorted(
        (str(i).encode(), b"v%d" % i) for i in range(500))


def test_a_wrong_password_fails_the_query(spark, secured):
    r = spark.read.format("kafkacore").option("subscribe", "spark-secured")
    for k, v in _options(secured, password="wrong").items():
        r = r.option(k, v)
    with pytest.raises(Exception) as e:
        r.load().count()
    assert "SASL_AUTHENTICATION_FAILED" in str(e.value) or "authentication" in str(e.value).lower()
