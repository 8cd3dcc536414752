"""kafkacore's own Kafka clients: Producer and Consumer (and the embedded Broker's views)."""
from .accumulator_py import RecordMetadata
from .consumer import Consumer, ConsumerRecord
from .producer import Producer

__all__ = ["Producer", "Consumer", "ConsumerRecord", "RecordMetadata"]
