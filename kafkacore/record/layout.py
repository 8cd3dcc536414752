"""The v2 record batch header as Kafka's DefaultRecordBatch lays it out: each field's byte
offset, with Kafka's names, and the attribute bits. Every module that reads or patches a
batch header in place takes its offsets from here."""

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
LOG_OVERHEAD = 12  # base offset and length: the bytes before the length-counted part
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # int16; its low byte, which holds every flag, is at 22
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORD_BATCH_OVERHEAD = 61  # the whole header (Kafka's RECORDS_OFFSET): where the records begin

ATTRIBUTES_FLAGS_BYTE = ATTRIBUTES_OFFSET + 1
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
