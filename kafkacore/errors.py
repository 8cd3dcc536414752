"""Kafka's error codes, as exceptions that carry them.

Codes and names are Kafka's (org.apache.kafka.common.protocol.Errors). The storage engine raises
these, and the broker turns them into the error code of a response without translating."""


class KafkaError(Exception):
    """An error with a Kafka error code. ``retriable`` as Kafka classifies it."""

    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    retriable = False

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
    code, name = 87, "INVALID_RECORD"


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
OffsetMetadataTooLargeError = _error("OFFSET_METADATA_TOO_LARGE", 12)
CoordinatorLoadInProgressError = _error("COORDINATOR_LOAD_IN_PROGRESS", 14, True)
CoordinatorNotAvailableError = _error("COORDINATOR_NOT_AVAILABLE", 15, True)
NotCoordinatorError = _error("NOT_COORDINATOR", 16, True)
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
PolicyViolationError = _error("POLICY_VIOLATION", 44)
OutOfOrderSequenceNumberError = _error("OUT_OF_ORDER_SEQUENCE_NUMBER", 45)
DuplicateSequenceNumberError = _error("DUPLICATE_SEQUENCE_NUMBER", 46)
InvalidProducerEpochError = _error("INVALID_PRODUCER_EPOCH", 47)
InvalidTxnStateError = _error("INVALID_TXN_STATE", 48)
UnknownProducerIdError = _error("UNKNOWN_PRODUCER_ID", 59)
NonEmptyGroupError = _error("NON_EMPTY_GROUP", 68)
GroupIdNotFoundError = _error("GROUP_ID_NOT_FOUND", 69)
TopicDeletionDisabledError = _error("TOPIC_DELETION_DISABLED", 73)
FencedLeaderEpochError = _error("FENCED_LEADER_EPOCH", 74, True)
UnknownLeaderEpochError = _error("UNKNOWN_LEADER_EPOCH", 75, True)
UnsupportedCompressionTypeError = _error("UNSUPPORTED_COMPRESSION_TYPE", 76)
MemberIdRequiredError = _error("MEMBER_ID_REQUIRED", 79)
GroupMaxSizeReachedError = _error("GROUP_MAX_SIZE_REACHED", 81)
FencedInstanceIdError = _error("FENCED_INSTANCE_ID", 82)
GroupSubscribedToTopicError = _error("GROUP_SUBSCRIBED_TO_TOPIC", 86)
ProducerFencedError = _error("PRODUCER_FENCED", 90)
UnknownTopicIdError = _error("UNKNOWN_TOPIC_ID", 100, True)
InconsistentTopicIdError = _error("INCONSISTENT_TOPIC_ID", 103, True)


ERRORS_BY_CODE = {cls.code: cls for cls in KafkaError.__subclasses__()}
