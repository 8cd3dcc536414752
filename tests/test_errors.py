"""kafkacore.errors: every protocol error code has Kafka's name, and the exception classes agree
with the table."""
from kafkacore.errors import (ERROR_NAMES, ERRORS_BY_CODE, KafkaError, NotControllerError, error_for_code,
                              error_name)


def test_the_table_is_complete_and_the_classes_agree_with_it():
    assert sorted(ERROR_NAMES) == list(range(-1, max(ERROR_NAMES) + 1))  # no code skipped
    assert len(set(ERROR_NAMES.values())) == len(ERROR_NAMES)
    for code, cls in ERRORS_BY_CODE.items():
        assert ERROR_NAMES[code] == cls.name, (code, cls)


def test_codes_without_a_class_carry_their_kafka_name():
    err = error_for_code(57, "log dir /x")
    assert type(err) is KafkaError and (err.code, err.name) == (57, "LOG_DIR_NOT_FOUND")
    assert str(err) == "LOG_DIR_NOT_FOUND: log dir /x"
    assert str(error_for_code(89)) == "THROTTLING_QUOTA_EXCEEDED"
    assert error_name(9999) == "ERROR_9999"
    assert isinstance(error_for_code(41), NotControllerError)
