"""kafkacore's own Kafka clients: Producer and Consumer (and the embedded Broker's views).

The names load on first use (PEP 562), so a module of this package imported alone (the admin
client, a connection: what most `kafkacore` commands need) does not pull in the producer and
the consumer; that cost a command 0.1 s of start-up."""
from .._lazy import lazy_getattr

_LAZY = {"Producer": "producer", "Consumer": "consumer", "ConsumerRecord": "consumer",
         "RecordMetadata": "accumulator_py"}


__getattr__ = lazy_getattr(__name__, globals(), _LAZY)

__all__ = ["Producer", "Consumer", "ConsumerRecord", "RecordMetadata"]
