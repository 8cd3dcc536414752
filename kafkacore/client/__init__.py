"""kafkacore's own Kafka clients: Producer and Consumer (and the embedded Broker's views).

The names load on first use (PEP 562), so a module of this package imported alone (the admin
client, a connection: what most `kafkacore` commands need) does not pull in the producer and
the consumer; that cost a command 0.1 s of start-up."""
_LAZY = {"Producer": "producer", "Consumer": "consumer", "ConsumerRecord": "consumer",
         "RecordMetadata": "accumulator_py"}


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


__all__ = ["Producer", "Consumer", "ConsumerRecord", "RecordMetadata"]
