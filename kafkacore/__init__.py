"""kafkacore: a Kafka-compatible broker core for Python with native hot paths."""
from .checksum import crc32c
from .partitioner import murmur2, partition_for_key, partitions_for_keys
# Loaded with the package so that importing kafkacore._ext.records directly finds
# kafkacore.record initialised first (the extension imports its codecs and errors).
from . import record
from ._lazy import lazy_getattr

__version__ = "0.1.0"


def native_extensions() -> bool:
    """True when the compiled extensions are in use (not the pure-Python twins)."""
    from . import checksum, partitioner
    from .storage import _hot as storage_hot

    return all(m._native is not None for m in (checksum, partitioner, record, storage_hot))


# The clients and the embedded broker load on first use: ``import kafkacore`` stays light.
_LAZY = {"Producer": "client.producer", "Consumer": "client.consumer", "ConsumerRecord": "client.consumer",
         "RecordMetadata": "client.accumulator_py", "Broker": "embedded",
         "ShareConsumer": "client.share_consumer", "AcknowledgeType": "client.share_consumer"}


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)

__all__ = ["Producer", "Consumer", "ConsumerRecord", "ShareConsumer", "AcknowledgeType", "RecordMetadata", "Broker", "crc32c", "murmur2", "partition_for_key", "partitions_for_keys", "native_extensions", "__version__"]
