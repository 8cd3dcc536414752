"""The produce form's writes: one record (key, value, headers, an optional partition) sent with
kafkacore's Producer, made on the first use with the console's client settings (-b and
--command-config, so the same security) and kept until the console stops.

Keys, values and header values are UTF-8 text as typed (null: no key, or a tombstone value),
within the console's request size (http.MAX_BODY_BYTES); the answer is where the record went:
its partition, offset and timestamp.
"""
from __future__ import annotations

import threading

from ..errors import KafkaConfigError
from .api import ApiError, int_field

# how long the form waits for the broker's acknowledgement before giving up
PRODUCE_TIMEOUT_S = 30


class ConsoleProducer:
    """One Producer for the console, made on first use by ``make()``."""

    def __init__(self, make):
        self._make = make
        self._producer = None
        self._lock = threading.Lock()

    def _get(self):
        with self._lock:
            if self._producer is None:
                try:
                    self._producer = self._make()
                except KafkaConfigError as e:
                    raise ApiError(f"the console cannot produce: bad producer property: {e.message}") from None
            return self._producer

    def produce(self, admin, topic: str, doc: dict) -> dict:
        """Sends ``doc`` (``key``, ``value``, ``headers`` [{key, value}] or [[key, value]],
        ``partition``) to ``topic``, which must exist (the producer would create it)."""
        key, value = _text(doc, "key"), _text(doc, "value")
        headers = _headers(doc.get("headers"))
        partition = int_field(doc, "partition", None)
        count = len(admin.describe_topics([topic])[topic].partitions)  # 404 for a topic that does not exist
        if partition is not None and not 0 <= partition < count:
            raise ApiError(f"partition {partition} of {topic!r} does not exist (the topic has {count} "
                           f"partition{'s' if count != 1 else ''}: 0-{count - 1})")
        producer = self._get()
        with self._lock:  # one send at a time: the form is for a person, not for throughput
            handle = producer.send(topic, value, key=key, partition=partition, headers=headers)
        meta = handle.result(PRODUCE_TIMEOUT_S)  # (linger.ms=0: the record leaves at once)
        return {"topic": topic, "partition": meta.partition, "offset": meta.offset, "timestamp": meta.timestamp_ms}

    def close(self):
        with self._lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            producer.close(PRODUCE_TIMEOUT_S)


def _text(doc: dict, name: str) -> bytes | None:
    v = doc.get(name)
    if v is None:
        return None
    if not isinstance(v, str):
        raise ApiError(f"'{name}' must be text (or null)")
    return v.encode("utf-8")


def _headers(items) -> list:
    if items is None:
        return []
    if not isinstance(items, list):
        raise ApiError("'headers' must be a list of {\"key\": ..., \"value\": ...}")
    out = []
    for item in items:
        if isinstance(item, dict):
            k, v = item.get("key"), item.get("value")
        elif isinstance(item, list) and len(item) == 2:
            k, v = item
        else:
            raise ApiError("each header is {\"key\": ..., \"value\": ...} or [key, value]")
        if not isinstance(k, str) or not k:
            raise ApiError("a header needs a key (text)")
        if v is not None and not isinstance(v, str):
            raise ApiError(f"header {k!r}: its value must be text (or null)")
        out.append((k, None if v is None else v.encode("utf-8")))
    return out
