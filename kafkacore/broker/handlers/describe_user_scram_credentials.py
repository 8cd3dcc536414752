"""DescribeUserScramCredentials (API key 50), version 0 (KIP-554): which SCRAM mechanisms each
user has a credential for, and with how many iterations; never the credential. No users named
(null or empty): every user with a credential. As Kafka answers: a user named twice is
DUPLICATE_RESOURCE (for that user), a user without any credential RESOURCE_NOT_FOUND. Read from
the metadata store, so every broker answers the same as soon as an alteration is written."""
from ...errors import DuplicateResourceError, KafkaError, ResourceNotFoundError
from ...protocol.api_table import ApiKey
from ...protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo, DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResult)
from ...security.scram import MECHANISMS, ScramCredential
from ..authorization import DESCRIBE, require_cluster

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
VERSIONS = (0, 0)


def handle(ctx, req):
    require_cluster(ctx, DESCRIBE)
    return ctx.broker.topic_store_call(_respond, ctx.broker.cluster.config_manager, req)


def _credential_infos(configs):
    infos = []
    for name, mechanism in MECHANISMS.items():
        if name in configs:
            try:
                iterations = ScramCredential.from_config_value(configs[name]).iterations
            except ValueError:
                continue  # the cache skips it too (and says so in the log)
            infos.append(CredentialInfo(mechanism=mechanism.type_id, iterations=iterations))
    return infos


def _respond(config_manager, req):
    try:
        if not req.users:
            results = []
            for user in config_manager.users_with_configs():
                infos = _credential_infos(config_manager.user_configs(user))
                if infos:
                    results.append(DescribeUserScramCredentialsResult(user=user, credential_infos=infos))
            return DescribeUserScramCredentialsResponse(results=results)
        names = [u.name for u in req.users]
        results = []
        for user in dict.fromkeys(names):
            if names.count(user) > 1:
                results.append(DescribeUserScramCredentialsResult(
                    user=user, error_code=DuplicateResourceError.code, credential_infos=[],
                    error_message="Cannot describe SCRAM credentials for the same user twice in a single request"))
                continue
            infos = _credential_infos(config_manager.user_configs(user))
            if infos:
                results.append(DescribeUserScramCredentialsResult(user=user, credential_infos=infos))
            else:
                results.append(DescribeUserScramCredentialsResult(
                    user=user, error_code=ResourceNotFoundError.code, credential_infos=[],
                    error_message="Attempt to describe a user credential that does not exist"))
        return DescribeUserScramCredentialsResponse(results=results)
    except KafkaError as e:
        return DescribeUserScramCredentialsResponse(error_code=e.code, error_message=e.message, results=[])


def error_response(req, version, code):
    return DescribeUserScramCredentialsResponse(error_code=code, results=[])
