"""Kafka's error codes, as exceptions that carry them.

Codes and names are Kafka's (org.apache.kafka.common.protocol.Errors). The storage engine raises
these, and the broker turns them into the error code of a response without translating."""


# Every error code of the protocol and its name: Kafka's Errors enum
# (org.apache.kafka.common.protocol.Errors, Apache Kafka 4.1), a fact table. Codes with a class
# below carry the same name; the table names the others, so any code prints as Kafka names it.
ERROR_NAMES = {
    -1: "UNKNOWN_SERVER_ERROR", 0: "NONE", 1: "OFFSET_OUT_OF_RANGE", 2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION", 4: "INVALID_FETCH_SIZE", 5: "LEADER_NOT_AVAILABLE",
    6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT", 8: "BROKER_NOT_AVAILABLE",
    9: "REPLICA_NOT_AVAILABLE", 10: "MESSAGE_TOO_LARGE", 11: "STALE_CONTROLLER_EPOCH",
    12: "OFFSET_METADATA_TOO_LARGE", 13: "NETWORK_EXCEPTION", 14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR", 17: "INVALID_TOPIC_EXCEPTION",
    18: "RECORD_LIST_TOO_LARGE", 19: "NOT_ENOUGH_REPLICAS", 20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    21: "INVALID_REQUIRED_ACKS", 22: "ILLEGAL_GENERATION", 23: "INCONSISTENT_GROUP_PROTOCOL",
    24: "INVALID_GROUP_ID", 25: "UNKNOWN_MEMBER_ID", 26: "INVALID_SESSION_TIMEOUT",
    27: "REBALANCE_IN_PROGRESS", 28: "INVALID_COMMIT_OFFSET_SIZE", 29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED", 31: "CLUSTER_AUTHORIZATION_FAILED", 32: "INVALID_TIMESTAMP",
    33: "UNSUPPORTED_SASL_MECHANISM", 34: "ILLEGAL_SASL_STATE", 35: "UNSUPPORTED_VERSION",
    36: "TOPIC_ALREADY_EXISTS", 37: "INVALID_PARTITIONS", 38: "INVALID_REPLICATION_FACTOR",
    39: "INVALID_REPLICA_ASSIGNMENT", 40: "INVALID_CONFIG", 41: "NOT_CONTROLLER", 42: "INVALID_REQUEST",
    43: "UNSUPPORTED_FOR_MESSAGE_FORMAT", 44: "POLICY_VIOLATION", 45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    46: "DUPLICATE_SEQUENCE_NUMBER", 47: "INVALID_PRODUCER_EPOCH", 48: "INVALID_TXN_STATE",
    49: "INVALID_PRODUCER_ID_MAPPING", 50: "INVALID_TRANSACTION_TIMEOUT", 51: "CONCURRENT_TRANSACTIONS",
    52: "TRANSACTION_COORDINATOR_FENCED", 53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    54: "SECURITY_DISABLED", 55: "OPERATION_NOT_ATTEMPTED", 56: "KAFKA_STORAGE_ERROR",
    57: "LOG_DIR_NOT_FOUND", 58: "SASL_AUTHENTICATION_FAILED", 59: "UNKNOWN_PRODUCER_ID",
    60: "REASSIGNMENT_IN_PROGRESS", 61: "DELEGATION_TOKEN_AUTH_DISABLED", 62: "DELEGATION_TOKEN_NOT_FOUND",
    63: "DELEGATION_TOKEN_OWNER_MISMATCH", 64: "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
    65: "DELEGATION_TOKEN_AUTHORIZATION_FAILED", 66: "DELEGATION_TOKEN_EXPIRED",
    67: "INVALID_PRINCIPAL_TYPE", 68: "NON_EMPTY_GROUP", 69: "GROUP_ID_NOT_FOUND",
    70: "FETCH_SESSION_ID_NOT_FOUND", 71: "INVALID_FETCH_SESSION_EPOCH", 72: "LISTENER_NOT_FOUND",
    73: "TOPIC_DELETION_DISABLED", 74: "FENCED_LEADER_EPOCH", 75: "UNKNOWN_LEADER_EPOCH",
    76: "UNSUPPORTED_COMPRESSION_TYPE", 77: "STALE_BROKER_EPOCH", 78: "OFFSET_NOT_AVAILABLE",
    79: "MEMBER_ID_REQUIRED", 80: "PREFERRED_LEADER_NOT_AVAILABLE", 81: "GROUP_MAX_SIZE_REACHED",
    82: "FENCED_INSTANCE_ID", 83: "ELIGIBLE_LEADERS_NOT_AVAILABLE", 84: "ELECTION_NOT_NEEDED",
    85: "NO_REASSIGNMENT_IN_PROGRESS", 86: "GROUP_SUBSCRIBED_TO_TOPIC", 87: "INVALID_RECORD",
    88: "UNSTABLE_OFFSET_COMMIT", 89: "THROTTLING_QUOTA_EXCEEDED", 90: "PRODUCER_FENCED",
    91: "RESOURCE_NOT_FOUND", 92: "DUPLICATE_RESOURCE", 93: "UNACCEPTABLE_CREDENTIAL",
    94: "INCONSISTENT_VOTER_SET", 95: "INVALID_UPDATE_VERSION", 96: "FEATURE_UPDATE_FAILED",
    97: "PRINCIPAL_DESERIALIZATION_FAILURE", 98: "SNAPSHOT_NOT_FOUND", 99: "POSITION_OUT_OF_RANGE",
    100: "UNKNOWN_TOPIC_ID", 101: "DUPLICATE_BROKER_REGISTRATION", 102: "BROKER_ID_NOT_REGISTERED",
    103: "INCONSISTENT_TOPIC_ID", 104: "INCONSISTENT_CLUSTER_ID", 105: "TRANSACTIONAL_ID_NOT_FOUND",
    106: "FETCH_SESSION_TOPIC_ID_ERROR", 107: "INELIGIBLE_REPLICA", 108: "NEW_LEADER_ELECTED",
    109: "OFFSET_MOVED_TO_TIERED_STORAGE", 110: "FENCED_MEMBER_EPOCH", 111: "UNRELEASED_INSTANCE_ID",
    112: "UNSUPPORTED_ASSIGNOR", 113: "STALE_MEMBER_EPOCH", 114: "MISMATCHED_ENDPOINT_TYPE",
    115: "UNSUPPORTED_ENDPOINT_TYPE", 116: "UNKNOWN_CONTROLLER_ID", 117: "UNKNOWN_SUBSCRIPTION_ID",
    118: "TELEMETRY_TOO_LARGE", 119: "INVALID_REGISTRATION", 120: "TRANSACTION_ABORTABLE",
    121: "INVALID_RECORD_STATE", 122: "SHARE_SESSION_NOT_FOUND", 123: "INVALID_SHARE_SESSION_EPOCH",
    124: "FENCED_STATE_EPOCH", 125: "INVALID_VOTER_KEY", 126: "DUPLICATE_VOTER", 127: "VOTER_NOT_FOUND",
    128: "INVALID_REGULAR_EXPRESSION", 129: "REBOOTSTRAP_REQUIRED", 130: "STREAMS_INVALID_TOPOLOGY",
    131: "STREAMS_INVALID_TOPOLOGY_EPOCH", 132: "STREAMS_TOPOLOGY_FENCED",
    133: "SHARE_SESSION_LIMIT_REACHED",
}


class KafkaError(Exception):
    """An error with a Kafka error code. ``retriable`` as Kafka classifies it. For a
    transactional producer, ``fatal``: the producer cannot go on (fenced: close it and start
    another); ``txn_requires_abort``: the transaction must be aborted, then the producer goes on
    (confluent-kafka's KafkaError has the same two flags)."""

    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    retriable = False
    fatal = False
    txn_requires_abort = False

    def __init__(self, message: str = ""):
        self.message = message or self.name
        super().__init__(f"{self.name}: {self.message}" if message else self.name)


class OffsetOutOfRangeError(KafkaError):
    code, name = 1, "OFFSET_OUT_OF_RANGE"


class CorruptMessageError(KafkaError):
    code, name, retriable = 2, "CORRUPT_MESSAGE", True


class UnknownTopicOrPartitionError(KafkaError):
    code, name, retriable = 3, "UNKNOWN_TOPIC_OR_PARTITION", True


class MessageTooLargeError(KafkaError):
    code, name = 10, "MESSAGE_TOO_LARGE"


class InvalidTopicError(KafkaError):
    code, name = 17, "INVALID_TOPIC_EXCEPTION"


class RecordListTooLargeError(KafkaError):
    code, name = 18, "RECORD_LIST_TOO_LARGE"


class TopicAlreadyExistsError(KafkaError):
    code, name = 36, "TOPIC_ALREADY_EXISTS"


class InvalidConfigurationError(KafkaError):
    code, name = 40, "INVALID_CONFIG"


class KafkaStorageError(KafkaError):
    code, name, retriable = 56, "KAFKA_STORAGE_ERROR", True


class InvalidRecordError(KafkaError):
    """``record_errors``: [(batch index, message)] of the records that made the batch invalid
    (Kafka's RecordValidationException, KIP-467), for Produce v8+; empty when the batch as a
    whole is invalid."""

    code, name = 87, "INVALID_RECORD"

    def __init__(self, message: str = "", record_errors=()):
        super().__init__(message)
        self.record_errors = list(record_errors)


class InvalidTimestampError(KafkaError):
    code, name = 32, "INVALID_TIMESTAMP"


# -- codes the broker and the group coordinator return (Kafka's Errors enum) ---------------
def _error(name, code, retriable=False):
    cls_name = "".join(part.capitalize() for part in name.split("_")) + "Error"
    return type(cls_name, (KafkaError,), {"code": code, "name": name, "retriable": retriable,
                                          "__module__": __name__})


UnknownServerError = _error("UNKNOWN_SERVER_ERROR", -1)
LeaderNotAvailableError = _error("LEADER_NOT_AVAILABLE", 5, True)
NotLeaderOrFollowerError = _error("NOT_LEADER_OR_FOLLOWER", 6, True)
RequestTimedOutError = _error("REQUEST_TIMED_OUT", 7, True)
BrokerNotAvailableError = _error("BROKER_NOT_AVAILABLE", 8)
ReplicaNotAvailableError = _error("REPLICA_NOT_AVAILABLE", 9, True)
StaleControllerEpochError = _error("STALE_CONTROLLER_EPOCH", 11)
OffsetMetadataTooLargeError = _error("OFFSET_METADATA_TOO_LARGE", 12)
NetworkExceptionError = _error("NETWORK_EXCEPTION", 13, True)
CoordinatorLoadInProgressError = _error("COORDINATOR_LOAD_IN_PROGRESS", 14, True)
CoordinatorNotAvailableError = _error("COORDINATOR_NOT_AVAILABLE", 15, True)
NotCoordinatorError = _error("NOT_COORDINATOR", 16, True)
NotEnoughReplicasError = _error("NOT_ENOUGH_REPLICAS", 19, True)
NotEnoughReplicasAfterAppendError = _error("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 20, True)
InvalidRequiredAcksError = _error("INVALID_REQUIRED_ACKS", 21)
IllegalGenerationError = _error("ILLEGAL_GENERATION", 22)
InconsistentGroupProtocolError = _error("INCONSISTENT_GROUP_PROTOCOL", 23)
InvalidGroupIdError = _error("INVALID_GROUP_ID", 24)
UnknownMemberIdError = _error("UNKNOWN_MEMBER_ID", 25)
InvalidSessionTimeoutError = _error("INVALID_SESSION_TIMEOUT", 26)
RebalanceInProgressError = _error("REBALANCE_IN_PROGRESS", 27)
UnsupportedVersionError = _error("UNSUPPORTED_VERSION", 35)
InvalidPartitionsError = _error("INVALID_PARTITIONS", 37)
InvalidReplicationFactorError = _error("INVALID_REPLICATION_FACTOR", 38)
InvalidReplicaAssignmentError = _error("INVALID_REPLICA_ASSIGNMENT", 39)
InvalidRequestError = _error("INVALID_REQUEST", 42)
NotControllerError = _error("NOT_CONTROLLER", 41, True)
PolicyViolationError = _error("POLICY_VIOLATION", 44)
OutOfOrderSequenceNumberError = _error("OUT_OF_ORDER_SEQUENCE_NUMBER", 45)
DuplicateSequenceNumberError = _error("DUPLICATE_SEQUENCE_NUMBER", 46)
InvalidProducerEpochError = _error("INVALID_PRODUCER_EPOCH", 47)
InvalidTxnStateError = _error("INVALID_TXN_STATE", 48)
InvalidProducerIdMappingError = _error("INVALID_PRODUCER_ID_MAPPING", 49)
InvalidTransactionTimeoutError = _error("INVALID_TRANSACTION_TIMEOUT", 50)
ConcurrentTransactionsError = _error("CONCURRENT_TRANSACTIONS", 51, True)
TransactionCoordinatorFencedError = _error("TRANSACTION_COORDINATOR_FENCED", 52)
TopicAuthorizationFailedError = _error("TOPIC_AUTHORIZATION_FAILED", 29)
GroupAuthorizationFailedError = _error("GROUP_AUTHORIZATION_FAILED", 30)
ClusterAuthorizationFailedError = _error("CLUSTER_AUTHORIZATION_FAILED", 31)
TransactionalIdAuthorizationFailedError = _error("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 53)
SecurityDisabledError = _error("SECURITY_DISABLED", 54)
OperationNotAttemptedError = _error("OPERATION_NOT_ATTEMPTED", 55)
UnknownProducerIdError = _error("UNKNOWN_PRODUCER_ID", 59)
ReassignmentInProgressError = _error("REASSIGNMENT_IN_PROGRESS", 60)
NonEmptyGroupError = _error("NON_EMPTY_GROUP", 68)
GroupIdNotFoundError = _error("GROUP_ID_NOT_FOUND", 69)
FetchSessionIdNotFoundError = _error("FETCH_SESSION_ID_NOT_FOUND", 70, True)
InvalidFetchSessionEpochError = _error("INVALID_FETCH_SESSION_EPOCH", 71, True)
TopicDeletionDisabledError = _error("TOPIC_DELETION_DISABLED", 73)
FencedLeaderEpochError = _error("FENCED_LEADER_EPOCH", 74, True)
UnknownLeaderEpochError = _error("UNKNOWN_LEADER_EPOCH", 75, True)
FencedStateEpochError = _error("FENCED_STATE_EPOCH", 124)  # KIP-932: a share-partition state write from an older state epoch
UnsupportedCompressionTypeError = _error("UNSUPPORTED_COMPRESSION_TYPE", 76)
StaleBrokerEpochError = _error("STALE_BROKER_EPOCH", 77)
PreferredLeaderNotAvailableError = _error("PREFERRED_LEADER_NOT_AVAILABLE", 80, True)
EligibleLeadersNotAvailableError = _error("ELIGIBLE_LEADERS_NOT_AVAILABLE", 83, True)
ElectionNotNeededError = _error("ELECTION_NOT_NEEDED", 84)
NoReassignmentInProgressError = _error("NO_REASSIGNMENT_IN_PROGRESS", 85)
MemberIdRequiredError = _error("MEMBER_ID_REQUIRED", 79)
GroupMaxSizeReachedError = _error("GROUP_MAX_SIZE_REACHED", 81)
FencedInstanceIdError = _error("FENCED_INSTANCE_ID", 82)
GroupSubscribedToTopicError = _error("GROUP_SUBSCRIBED_TO_TOPIC", 86)
UnstableOffsetCommitError = _error("UNSTABLE_OFFSET_COMMIT", 88, True)
# KIP-848 consumer groups
FencedMemberEpochError = _error("FENCED_MEMBER_EPOCH", 110)
UnreleasedInstanceIdError = _error("UNRELEASED_INSTANCE_ID", 111)
UnsupportedAssignorError = _error("UNSUPPORTED_ASSIGNOR", 112)
StaleMemberEpochError = _error("STALE_MEMBER_EPOCH", 113)
InvalidRegularExpressionError = _error("INVALID_REGULAR_EXPRESSION", 128)
ThrottlingQuotaExceededError = _error("THROTTLING_QUOTA_EXCEEDED", 89, True)  # KIP-599: retriable
ProducerFencedError = _error("PRODUCER_FENCED", 90)
UnknownTopicIdError = _error("UNKNOWN_TOPIC_ID", 100, True)
InconsistentTopicIdError = _error("INCONSISTENT_TOPIC_ID", 103, True)
TransactionalIdNotFoundError = _error("TRANSACTIONAL_ID_NOT_FOUND", 105)
TransactionAbortableError = _error("TRANSACTION_ABORTABLE", 120)
# KIP-932 share groups: the share-partition leader's errors (ShareFetch, ShareAcknowledge)
InvalidRecordStateError = _error("INVALID_RECORD_STATE", 121)
ShareSessionNotFoundError = _error("SHARE_SESSION_NOT_FOUND", 122, True)
InvalidShareSessionEpochError = _error("INVALID_SHARE_SESSION_EPOCH", 123, True)
ShareSessionLimitReachedError = _error("SHARE_SESSION_LIMIT_REACHED", 133, True)
UnsupportedSaslMechanismError = _error("UNSUPPORTED_SASL_MECHANISM", 33)
IllegalSaslStateError = _error("ILLEGAL_SASL_STATE", 34)
SaslAuthenticationFailedError = _error("SASL_AUTHENTICATION_FAILED", 58)
ResourceNotFoundError = _error("RESOURCE_NOT_FOUND", 91)
DuplicateResourceError = _error("DUPLICATE_RESOURCE", 92)
UnacceptableCredentialError = _error("UNACCEPTABLE_CREDENTIAL", 93)


class FetchSessionTopicIdError(KafkaError):  # a class statement: _error would name it ...ErrorError
    code, name, retriable = 106, "FETCH_SESSION_TOPIC_ID_ERROR", True


ERRORS_BY_CODE = {cls.code: cls for cls in KafkaError.__subclasses__()}

# Errors that mean a client's view of the cluster is stale: it refreshes its metadata before it
# retries (Kafka's producer and fetcher treat these as InvalidMetadataException).
STALE_METADATA_ERRORS = frozenset({
    UnknownTopicOrPartitionError.code, LeaderNotAvailableError.code, NotLeaderOrFollowerError.code,
    FencedLeaderEpochError.code, UnknownLeaderEpochError.code, UnknownTopicIdError.code,
    InconsistentTopicIdError.code})


def error_name(code: int) -> str:
    """Kafka's name of an error code (``ERROR_<code>`` for a code newer than the table)."""
    return ERROR_NAMES.get(code, f"ERROR_{code}")


def error_for_code(code: int, message: str | None = None) -> KafkaError:
    """The exception for a Kafka error code from a response (a plain KafkaError carrying the
    code and Kafka's name for codes without a class here)."""
    cls = ERRORS_BY_CODE.get(code)
    if cls is not None:
        return cls(message or "")
    err = KafkaError.__new__(KafkaError)
    err.code, err.name = code, error_name(code)  # set first: __init__ formats the message with the name
    KafkaError.__init__(err, message or "")
    return err


# -- raised by kafkacore's clients, not sent on the wire ---------------------------------------
class KafkaConfigError(ValueError):
    """A client config that is unknown, malformed or contradictory."""


class KafkaTimeoutError(KafkaError):
    """A client operation did not finish in time (the Java client's TimeoutException)."""

    name, retriable = "TIMEOUT", True


class RecordTooLargeError(KafkaError):
    """A record larger than max.request.size or buffer.memory (the Java client's
    RecordTooLargeException, which carries MESSAGE_TOO_LARGE)."""

    code, name = 10, "MESSAGE_TOO_LARGE"


class NoOffsetForPartitionError(KafkaError):
    """auto.offset.reset=none and the group has no committed offset for a partition."""

    name = "NO_OFFSET_FOR_PARTITION"


class CommitFailedError(KafkaError):
    """An OffsetCommit the coordinator refused for a reason of membership that no retry mends
    (the Java client's CommitFailedException): with group.protocol=consumer, STALE_MEMBER_EPOCH
    for a partition this member no longer owns, or once it is no longer in the group. The
    coordinator's error is the ``__cause__``."""

    name = "COMMIT_FAILED"


class ClientClosedError(KafkaError):
    """The producer or consumer was closed."""

    name = "CLIENT_CLOSED"


class CorruptRecordBatchError(CorruptMessageError):
    """A fetched batch failed its CRC or could not be decoded; names topic, partition and
    offset. Not retried: the broker would serve the same bytes again."""

    retriable = False
