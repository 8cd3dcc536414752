"""A share partition's durable state and where it is kept (KIP-932's ``Persister``).

A share group's progress on one topic-partition is the share-partition start offset (SPSO), the
state epoch, and the in-flight batches whose state is not the default (records below the SPSO
are done; records at or above it without a batch entry are AVAILABLE with no delivery yet). The
leader of the partition keeps the live state (``SharePartition``) and writes it through a
``Persister``; the share coordinator stores it in ``__share_group_state``, keyed by
"group:topic-id:partition", as KIP-932's ShareSnapshot / ShareUpdate records.

The record states' numbers are Kafka's (``RecordState`` in KIP-932 and Kafka's
``org.apache.kafka.server.share.persister``): AVAILABLE 0, ACQUIRED 1, ACKNOWLEDGED 2, ARCHIVED 4.
Only AVAILABLE, ACKNOWLEDGED and ARCHIVED are persisted: an acquisition lock does not outlive the
leader, so a batch ACQUIRED when written is written AVAILABLE (its delivery count kept).
"""
from __future__ import annotations

from typing import NamedTuple

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4


class StateBatch(NamedTuple):
    """Records ``first_offset``..``last_offset`` (inclusive), all in one state."""
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


class ShareState(NamedTuple):
    """What the persister holds for one share partition."""
    state_epoch: int
    start_offset: int  # the SPSO; -1: not initialized (the leader applies share.auto.offset.reset)
    leader_epoch: int
    batches: tuple[StateBatch, ...] = ()


class Persister:
    """Kafka's ``Persister``: the share-partition leader's view of the state store.

    Every method is a coroutine; a refusal raises the ``KafkaError`` Kafka answers with (e.g.
    ``FencedStateEpochError`` for a write from an older state epoch, ``CoordinatorNotAvailableError``
    while the share coordinator is loading). ``group_id``/``topic_id``/``partition`` name the share
    partition (``topic_id`` a ``uuid.UUID``)."""

    async def initialize_state(self, group_id: str, topic_id, partition: int, state_epoch: int,
                               start_offset: int) -> None:
        raise NotImplementedError

    async def read_state(self, group_id: str, topic_id, partition: int, leader_epoch: int) -> ShareState | None:
        """The stored state, or None if this share partition was never initialized."""
        raise NotImplementedError

    async def write_state(self, group_id: str, topic_id, partition: int, state: ShareState) -> None:
        raise NotImplementedError

    async def delete_state(self, group_id: str, topic_id, partition: int) -> None:
        raise NotImplementedError

    async def read_summary(self, group_id: str, topic_id, partition: int) -> ShareState | None:
        """The state epoch and start offset only (``batches`` empty), or None if never initialized."""
        raise NotImplementedError


class NoOpPersister(Persister):
    """Keeps nothing (Kafka's ``NoOpStatePersister``): every share partition starts afresh when
    its leader loads it. Used until a share coordinator is configured to store the state."""

    async def initialize_state(self, group_id, topic_id, partition, state_epoch, start_offset):
        return None

    async def read_state(self, group_id, topic_id, partition, leader_epoch):
        return None

    async def write_state(self, group_id, topic_id, partition, state):
        return None

    async def delete_state(self, group_id, topic_id, partition):
        return None

    async def read_summary(self, group_id, topic_id, partition):
        return None
