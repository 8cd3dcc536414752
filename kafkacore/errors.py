"""Kafka's error codes, as exceptions that carry them.

Codes and names are Kafka's (org.apache.kafka.common.protocol.Errors). The storage engine raises
these, and the broker turns them into the error code of a response without translating."""


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
ReplicaNotAvailableError = _error("REPLICA_NOT_AVAILABLE", 9, True)
StaleControllerEpochError = _error("STALE_CONTROLLER_EPOCH", 11)
OffsetMetadataTooLargeError = _error("OFFSET_METADATA_TOO_LARGE", 12)
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
TransactionalIdAuthorizationFailedError = _error("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 53)
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
ProducerFencedError = _error("PRODUCER_FENCED", 90)
UnknownTopicIdError = _error("UNKNOWN_TOPIC_ID", 100, True)
InconsistentTopicIdError = _error("INCONSISTENT_TOPIC_ID", 103, True)
TransactionalIdNotFoundError = _error("TRANSACTIONAL_ID_NOT_FOUND", 105)
TransactionAbortableError = _error("TRANSACTION_ABORTABLE", 120)


class FetchSessionTopicIdError(KafkaError):  # a class statement: _error would name it ...ErrorError
    code, name, retriable = 106, "FETCH_SESSION_TOPIC_ID_ERROR", True


ERRORS_BY_CODE = {cls.code: cls for cls in KafkaError.__subclasses__()}


def error_for_code(code: int, message: str | None = None) -> KafkaError:
    """The exception for a Kafka error code from a response (a plain KafkaError carrying the
    code for codes without a class here)."""
    cls = ERRORS_BY_CODE.get(code)
    if cls is None:
        err = KafkaError(message or f"error code {code}")
        err.code, err.name = code, f"ERROR_{code}"
        return err
    return cls(message or "")


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


class ClientClosedError(KafkaError):
    """The producer or consumer was closed."""

    name = "CLIENT_CLOSED"


class CorruptRecordBatchError(CorruptMessageError):
    """A fetched batch failed its CRC or could not be decoded; names topic, partition and
    offset. Not retried: the broker would serve the same bytes again."""

    retriable = False
