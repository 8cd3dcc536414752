"""The Kafka-compatible broker: ``kafkacore serve`` (see kafkacore/broker/main.py)."""
