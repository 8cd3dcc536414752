"""Errors raised while reading or building record batches."""


class CorruptRecordError(ValueError):
    """Bytes that are not a valid record batch v2.

    ``position`` is the byte offset, within the buffer handed to the reader, where the
    problem was found (the start of the batch, or of the record inside it)."""

    def __init__(self, reason: str, position: int = -1):
        self.reason = reason
        self.position = position
        super().__init__(f"{reason} (at byte {position})" if position >= 0 else reason)


class UnsupportedCodecError(ValueError):
    """A compression type Kafka does not define, or that this build cannot handle."""
