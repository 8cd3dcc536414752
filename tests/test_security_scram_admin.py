"""SCRAM credentials managed with Kafka's APIs (KIP-554): AlterUserScramCredentials and
DescribeUserScramCredentials through confluent-kafka's AdminClient and raw requests, stored in
the metadata store as Kafka stores them, kept across a restart."""
import json
import os

import pytest
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)

from broker_client import BrokerProcess, request
from kafkacore.cluster.local_metadata import METADATA_DIR
from kafkacore.cluster.local_znodes import ZnodeTree
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.messages.alter_user_scram_credentials_request import (ScramCredentialDeletion,
                                                                              ScramCredentialUpsertion)
from kafkacore.protocol.messages.describe_user_scram_credentials_request import UserName
from kafkacore.security import scram


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("scram") / "data") as b:
        yield b


def _admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _alter(admin, alterations):
    return {u: f.result(30) for u, f in admin.alter_user_scram_credentials(alterations).items()}


def _describe(admin, users=None):
    return admin.describe_user_scram_credentials(users).result(30) if users is None else \
        {u: f.result(30) for u, f in admin.describe_user_scram_credentials(users).items()}


def test_confluent_kafka_adds_describes_and_deletes_credentials(broker):
    admin = _admin(broker)
    sha256, sha512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
    _alter(admin, [UserScramCredentialUpsertion("alice", ScramCredentialInfo(sha256, 8192), b"alice-secret"),
                   UserScramCredentialUpsertion("alice", ScramCredentialInfo(sha512, 4096), b"alice-secret"),
                   UserScramCredentialUpsertion("bob", ScramCredentialInfo(sha512, 4096), b"bob-secret")])
    described = _describe(admin, ["alice", "bob"])
    assert sorted((i.mechanism, i.iterations) for i in described["alice"].scram_credential_infos) == \
        [(sha256, 8192), (sha512, 4096)]
    assert [(i.mechanism, i.iterations) for i in described["bob"].scram_credential_infos] == [(sha512, 4096)]
    assert {"alice", "bob"} <= set(_describe(admin))  # no users named: all of them
    _alter(admin, [UserScramCredentialDeletion("bob", sha512)])
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        _describe(admin, ["bob"])
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        _alter(admin, [UserScramCredentialDeletion("bob", sha512)])


def _raw_alter(broker, deletions=(), upsertions=()):
    with broker.client() as conn:
        resp = conn.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, request(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS, deletions=list(deletions), upsertions=list(upsertions)))
    return {r.user: (r.error_code, r.error_message) for r in resp.results}


def _upsert(name, mechanism=1, iterations=4096, salt=b"salt", salted=b"x" * 32):
    return ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
                                    salted_password=salted)


def test_refusals_carry_kafkas_errors_and_apply_nothing_for_that_user(broker):
    results = _raw_alter(broker, deletions=[ScramCredentialDeletion(name="carol", mechanism=1)],
                         upsertions=[_upsert("carol"), _upsert("dave", mechanism=3), _upsert("erin", iterations=100),
                                     _upsert("frank", iterations=20000), _upsert("", salt=b"s"),
                                     _upsert("gina", salt=b""), _upsert("hank")])
    assert results["carol"][0] == 92  # DUPLICATE_RESOURCE: deleted and upserted in one request
    assert results["dave"][0] == 33  # UNSUPPORTED_SASL_MECHANISM
    assert results["erin"][0] == 93 and "4096-16384" in results["erin"][1]  # UNACCEPTABLE_CREDENTIAL
    assert results["frank"][0] == 93 and results[""][0] == 93 and results["gina"][0] == 93
    assert results["hank"][0] == 0
    with broker.client() as conn:
        resp = conn.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, request(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, users=[UserName(name=n) for n in ("carol", "hank", "hank")]))
    by_user = {r.user: r for r in resp.results}
    assert by_user["carol"].error_code == 91 and by_user["hank"].error_code == 92


def test_credentials_are_stored_as_kafka_stores_them_and_survive_a_restart(broker):
    admin = _admin(broker)
    _alter(admin, [UserScramCredentialUpsertion("ivan,=x", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                                b"ivan-secret", b"0123456789abcdef")])
    broker.stop()
    tree = ZnodeTree(os.path.join(broker.data_dir, METADATA_DIR))
    try:
        data, _stat = tree.get("/config/users/ivan%2C%3Dx")  # Kafka's Sanitizer: URL-encoded
        notifications = [tree.get(f"/config/changes/{c}")[0] for c in tree.get_children("/config/changes")]
    finally:
        tree.close()
    stored = json.loads(data)
    assert stored["version"] == 1 and set(stored["config"]) == {"SCRAM-SHA-256"}
    assert "ivan-secret" not in data.decode()
    expected = scram.make_credential(scram.SCRAM_SHA_256, "ivan-secret", 4096, salt=b"0123456789abcdef")
    assert scram.ScramCredential.from_config_value(stored["config"]["SCRAM-SHA-256"]) == expected
    assert any(json.loads(n) == {"version": 2, "entity_path": "users/ivan%2C%3Dx"} for n in notifications)
    broker.start()
    described = _describe(_admin(broker), ["ivan,=x"])["ivan,=x"]
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_256, 4096)]
    assert "ivan-secret" not in broker.output()
