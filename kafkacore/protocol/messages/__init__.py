"""Generated codecs (kafkacore.protocol.generator). Import the module you need."""
