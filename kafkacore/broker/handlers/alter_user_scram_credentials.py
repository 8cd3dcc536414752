"""AlterUserScramCredentials (API key 51), version 0 (KIP-554): upsert or delete users' SCRAM
credentials. The client sends the salted password (never the password); the broker derives
StoredKey and ServerKey from it and writes them, as Kafka does, to the user's config entity in
the metadata store with a change notification, so every broker authenticates with them at once
(kafkacore/cluster/config_manager.py). Any broker takes it (Kafka's ZooKeeper mode wants the
controller; clients that send it there still reach a broker that takes it).

Checks, per user, with Kafka's errors; a user with any refused alteration has none applied:
- a mechanism other than SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2): UNSUPPORTED_SASL_MECHANISM;
- the same user and mechanism twice in the request: DUPLICATE_RESOURCE;
- an empty user name, salt or salted password, or iterations outside 4096-16384:
  UNACCEPTABLE_CREDENTIAL;
- deleting a credential the user does not have: RESOURCE_NOT_FOUND."""
import logging

from ...errors import (DuplicateResourceError, KafkaError, ResourceNotFoundError, UnacceptableCredentialError,
                       UnsupportedSaslMechanismError)
from ...protocol.api_table import ApiKey
from ...protocol.messages.alter_user_scram_credentials_response import (AlterUserScramCredentialsResponse,
                                                                        AlterUserScramCredentialsResult)
from ...security.scram import MECHANISMS_BY_TYPE, check_iterations, credential_from_salted_password
from ..authorization import ALTER, require_cluster

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
VERSIONS = (0, 0)
log = logging.getLogger("kafkacore.broker")


def handle(ctx, req):
    require_cluster(ctx, ALTER)
    return ctx.broker.topic_store_call(_respond, ctx.broker.cluster.config_manager, req)


def _check(alteration):
    if not alteration.name:
        raise UnacceptableCredentialError("Username must not be empty")
    mechanism = MECHANISMS_BY_TYPE.get(alteration.mechanism)
    if mechanism is None:
        raise UnsupportedSaslMechanismError("Unknown SCRAM mechanism")
    return mechanism


def _respond(config_manager, req):
    by_user: dict[str, list] = {}  # user -> [(kind, alteration)] in request order
    for d in req.deletions:
        by_user.setdefault(d.name, []).append(("delete", d))
    for u in req.upsertions:
        by_user.setdefault(u.name, []).append(("upsert", u))
    results = []
    for user, alterations in by_user.items():
        try:
            mechanisms = [_check(a) for _kind, a in alterations]
            if len({m.name for m in mechanisms}) != len(mechanisms):
                raise DuplicateResourceError("A user credential cannot be altered twice in the same request")
            for (kind, a), mechanism in zip(alterations, mechanisms):
                if kind == "upsert":
                    if not a.salt or not a.salted_password:
                        raise UnacceptableCredentialError("Salt and salted password must not be empty")
                    try:
                        check_iterations(mechanism, a.iterations)
                    except ValueError as e:
                        raise UnacceptableCredentialError(str(e)) from None
            configs = dict(config_manager.user_configs(user))
            for (kind, a), mechanism in zip(alterations, mechanisms):
                if kind == "delete":
                    if configs.pop(mechanism.name, None) is None:
                        raise ResourceNotFoundError("Attempt to delete a user credential that does not exist")
                else:
                    cred = credential_from_salted_password(mechanism, bytes(a.salted_password), bytes(a.salt),
                                                           a.iterations)
                    configs[mechanism.name] = cred.to_config_value()
            config_manager.set_user_configs(user, configs)
            log.info("user %s: SCRAM credentials %s", user,
                     ", ".join(f"{kind}d {m.name}" for (kind, _a), m in zip(alterations, mechanisms)))
            results.append(AlterUserScramCredentialsResult(user=user, error_message=None))  # null, as Kafka
        except KafkaError as e:
            results.append(AlterUserScramCredentialsResult(user=user, error_code=e.code, error_message=e.message))
    return AlterUserScramCredentialsResponse(results=results)


def error_response(req, version, code):
    users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
    return AlterUserScramCredentialsResponse(results=[AlterUserScramCredentialsResult(user=u, error_code=code)
                                                      for u in users])
