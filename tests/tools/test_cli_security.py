"""``kafkacore users`` and ``kafkacore quotas`` against a real broker: SCRAM credentials and
client quotas managed from the command line, read back with confluent-kafka's AdminClient and
the command itself, and their misuse refused in one line."""
import pytest
from confluent_kafka.admin import AdminClient

from _cli import fails, kafkacore
from broker_client import BrokerProcess
from kafkacore.tools.common import EXIT_FAILED, EXIT_USAGE


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("cli-security") / "data") as b:
        yield b


def test_users_set_list_and_delete_passwords_that_never_touch_argv(broker, tmp_path):
    b = broker.bootstrap
    r = kafkacore("users", "set-password", "alice", "--iterations", "8192", bootstrap=b, input="alice-secret\n")
    assert r.out == "Set the SCRAM-SHA-256 and SCRAM-SHA-512 credentials of user alice (8192 iterations).\n"
    secret = tmp_path / "pw"
    secret.write_text("bob-secret\n")
    kafkacore("users", "set-password", "bob", "--mechanism", "SCRAM-SHA-512", "--password-file", secret, bootstrap=b)
    rows = kafkacore("users", "list", "-o", "json", bootstrap=b).json()
    assert {(r["user"], r["mechanism"], r["iterations"]) for r in rows} >= {
        ("alice", "SCRAM-SHA-256", 8192), ("alice", "SCRAM-SHA-512", 8192), ("bob", "SCRAM-SHA-512", 4096)}
    admin = AdminClient({"bootstrap.servers": b})  # kept alive until the future resolves
    described = admin.describe_user_scram_credentials(["bob"])["bob"].result(30)
    assert [i.iterations for i in described.scram_credential_infos] == [4096]
    assert kafkacore("users", "delete", "alice", bootstrap=b).out == \
        "Deleted the SCRAM-SHA-256 and SCRAM-SHA-512 credentials of user alice.\n"
    assert "RESOURCE_NOT_FOUND" in fails("users", "list", "alice", code=EXIT_FAILED, bootstrap=b)
    assert "4096-16384" in fails("users", "set-password", "x", "--iterations", "100", code=EXIT_USAGE, bootstrap=b)
    assert "empty password" in fails("users", "set-password", "x", "--password-stdin", code=EXIT_USAGE, bootstrap=b)
    assert "secret" not in broker.output()


def test_quotas_alter_and_describe_every_kind_of_entity(broker):
    b = broker.bootstrap
    assert kafkacore("quotas", "alter", "--user", "alice", "--set", "producer_byte_rate=1048576", bootstrap=b).out == \
        "Altered the quotas of user alice: producer_byte_rate=1048576.\n"
    kafkacore("quotas", "alter", "--user-default", "--client-id", "etl", "--set", "consumer_byte_rate=2000000",
              "--set", "request_percentage=25", bootstrap=b)
    kafkacore("quotas", "alter", "--client-default", "--set", "consumer_byte_rate=500000", bootstrap=b)
    table = kafkacore("quotas", "describe", bootstrap=b).table()
    assert {(r["ENTITY"], r["QUOTA"], r["VALUE"]) for r in table} >= {
        ("user alice", "producer_byte_rate", "1048576.0"),
        ("user <default>, client-id etl", "consumer_byte_rate", "2000000.0"),
        ("user <default>, client-id etl", "request_percentage", "25.0"),
        ("client-id <default>", "consumer_byte_rate", "500000.0")}
    one = kafkacore("quotas", "describe", "--user", "alice", "-o", "json", bootstrap=b).json()
    assert one == [{"entity": [{"type": "user", "name": "alice"}], "quotas": {"producer_byte_rate": 1048576.0}}]
    kafkacore("quotas", "alter", "--user", "alice", "--delete", "producer_byte_rate", bootstrap=b)
    assert kafkacore("quotas", "describe", "--user", "alice", "-o", "json", bootstrap=b).json() == []
    assert "name the entity" in fails("quotas", "alter", "--set", "producer_byte_rate=1", code=EXIT_USAGE, bootstrap=b)
    assert "INVALID_REQUEST" in fails("quotas", "alter", "--user", "x", "--set", "retention.ms=1",
                                      code=EXIT_FAILED, bootstrap=b)
    assert "a quota is a number" in fails("quotas", "alter", "--user", "x", "--set", "producer_byte_rate=fast",
                                          code=EXIT_USAGE, bootstrap=b)
