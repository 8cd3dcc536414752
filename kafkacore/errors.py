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


ERRORS_BY_CODE = {cls.code: cls for cls in KafkaError.__subclasses__()}
