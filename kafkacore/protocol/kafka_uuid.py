"""Kafka's Uuid (topic ids, cluster ids, directory ids): 16 bytes, shown as URL-safe base64
without padding (22 characters), as org.apache.kafka.common.Uuid prints and parses them."""
from __future__ import annotations

import base64
import uuid

_ZERO = b"\0" * 16
_METADATA_TOPIC_ID = b"\0" * 15 + b"\1"  # Kafka's Uuid.METADATA_TOPIC_ID, never handed out


def uuid_to_text(raw: bytes) -> str:
    if len(raw) != 16:
        raise ValueError(f"a Kafka Uuid is 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_from_text(text: str) -> bytes:
    """Kafka's Uuid.fromString: base64url, exactly 16 bytes; ValueError otherwise."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        raise ValueError(f"{text!r} is not a base64 Kafka Uuid") from None
    if len(raw) != 16:
        raise ValueError(f"{text!r} decodes to {len(raw)} bytes, not the 16 of a Kafka Uuid")
    return raw


def random_uuid() -> bytes:
    """Kafka's Uuid.randomUuid: never the zero uuid, the metadata topic's id, nor one whose text
    starts with '-' (it would read as a command-line option)."""
    while True:
        raw = uuid.uuid4().bytes
        if raw not in (_ZERO, _METADATA_TOPIC_ID) and not uuid_to_text(raw).startswith("-"):
            return raw


def random_uuid_text() -> str:
    return uuid_to_text(random_uuid())
