"""The default Persister (Kafka's DefaultStatePersister, KIP-932): the share-partition leader's
reads and writes of share state, sent to the share coordinator of each share partition.

For each call the persister finds the coordinator - the leader of the key's
``__share_group_state`` partition, which it creates on first use as FindCoordinator does -
and sends it the inter-broker RPC (InitializeShareGroupState, ReadShareGroupState,
WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary; version 0) through the
broker's channels: to itself without a socket (broker/local_channel.py), to another broker over
the inter-broker listener with its security. NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS and an unreachable broker are retried, with the metadata looked up
again and an exponential backoff (``RETRY_BACKOFF_MS`` to ``RETRY_BACKOFF_MAX_MS``, Kafka's
client defaults), until ``timeout_s``; any other refusal is raised as its KafkaError."""
from __future__ import annotations

import asyncio
import logging
import uuid

from ..clock import monotonic_ms
from ..errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, KafkaError,
                      NotCoordinatorError, UnknownTopicOrPartitionError, error_for_code)
from ..protocol.api_table import ApiKey
from ..protocol.messages import delete_share_group_state_request as delete_rq
from ..protocol.messages import initialize_share_group_state_request as init_rq
from ..protocol.messages import read_share_group_state_request as read_rq
from ..protocol.messages import read_share_group_state_summary_request as summary_rq
from ..protocol.messages import write_share_group_state_request as write_rq
from ..replication.broker_channel import BrokerChannelError
from .share_state import Persister, ShareState, StateBatch
from .share_state_log import coordinator_key

log = logging.getLogger("kafkacore.share")

RPC_VERSION = 0
RETRY_BACKOFF_MS = 100  # Kafka's retry.backoff.ms
RETRY_BACKOFF_MAX_MS = 1000  # Kafka's retry.backoff.max.ms
DEFAULT_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms
RETRIABLE = frozenset({NotCoordinatorError.code, CoordinatorNotAvailableError.code,
                       CoordinatorLoadInProgressError.code})


def _topic_bytes(topic_id) -> bytes:
    return topic_id.bytes if isinstance(topic_id, uuid.UUID) else bytes(topic_id)


class DefaultStatePersister(Persister):
    """``DefaultStatePersister(broker)``: the persister of a KafkaServer (``broker.share_persister``)."""

    def __init__(self, broker, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.broker = broker
        self.timeout_s = timeout_s

    # -- finding the coordinator and asking it ---------------------------------------------------
    def _coordinator(self, key) -> int:
        return self.broker.share_coordinator.coordinator_for(key)

    async def _call(self, group_id, topic_id, partition, api_key, request, result):
        """Sends ``request`` to the coordinator of the share partition until it answers with a
        non-retriable code; returns the partition's result (``result(response)``: an object with
        ``error_code`` and ``error_message``). Raises its KafkaError."""
        key = coordinator_key(group_id, topic_id, partition)
        deadline = monotonic_ms() + self.timeout_s * 1000
        backoff = RETRY_BACKOFF_MS
        while True:
            try:
                node = self._coordinator(key)
                channel = self.broker.channels.channel(node)
                if channel is None:
                    raise CoordinatorNotAvailableError(f"share coordinator {node} is not reachable")
                remaining = max(0.1, (deadline - monotonic_ms()) / 1000)
                resp = await channel.call(api_key, RPC_VERSION, request, remaining)
                r = result(resp)
                if r.error_code == 0:
                    return r
                err = error_for_code(r.error_code, r.error_message)
            except KafkaError as e:
                err = e
            except BrokerChannelError as e:
                err = CoordinatorNotAvailableError(f"share coordinator of {key}: {e}")
            if err.code not in RETRIABLE or monotonic_ms() + backoff > deadline:
                raise err
            log.debug("%s for %s: %s; retrying in %d ms", api_key.name, key, err, backoff)
            await asyncio.sleep(backoff / 1000)
            backoff = min(backoff * 2, RETRY_BACKOFF_MAX_MS)

    @staticmethod
    def _only(resp_topics):
        return resp_topics[0].partitions[0]

    # -- the Persister ------------------------------------------------------------------------------
    async def initialize_state(self, group_id, topic_id, partition, state_epoch, start_offset):
        t = _topic_bytes(topic_id)
        req = init_rq.InitializeShareGroupStateRequest(group_id=group_id, topics=[init_rq.InitializeStateData(
            topic_id=t, partitions=[init_rq.PartitionData(partition=partition, state_epoch=state_epoch, start_offset=start_offset)])])
        await self._call(group_id, t, partition, ApiKey.INITIALIZE_SHARE_GROUP_STATE, req,
                         lambda r: self._only(r.results))

    async def read_state(self, group_id, topic_id, partition, leader_epoch):
        t = _topic_bytes(topic_id)
        req = read_rq.ReadShareGroupStateRequest(group_id=group_id, topics=[read_rq.ReadStateData(
            topic_id=t, partitions=[read_rq.PartitionData(partition=partition, leader_epoch=leader_epoch)])])
        try:
            r = await self._call(group_id, t, partition, ApiKey.READ_SHARE_GROUP_STATE, req,
                                 lambda r: self._only(r.results))
        except UnknownTopicOrPartitionError:
            return None  # never initialized
        return ShareState(r.state_epoch, r.start_offset, leader_epoch, tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in r.state_batches))

    async def write_state(self, group_id, topic_id, partition, state: ShareState):
        t = _topic_bytes(topic_id)
        req = write_rq.WriteShareGroupStateRequest(group_id=group_id, topics=[write_rq.WriteStateData(
            topic_id=t, partitions=[write_rq.PartitionData(
            partition=partition, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
            start_offset=state.start_offset,
            state_batches=[write_rq.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                 delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                           for b in state.batches])])])
        await self._call(group_id, t, partition, ApiKey.WRITE_SHARE_GROUP_STATE, req, lambda r: self._only(r.results))

    async def delete_state(self, group_id, topic_id, partition):
        t = _topic_bytes(topic_id)
        req = delete_rq.DeleteShareGroupStateRequest(group_id=group_id, topics=[delete_rq.DeleteStateData(
            topic_id=t, partitions=[delete_rq.PartitionData(partition=partition)])])
        await self._call(group_id, t, partition, ApiKey.DELETE_SHARE_GROUP_STATE, req, lambda r: self._only(r.results))

    async def read_summary(self, group_id, topic_id, partition):
        t = _topic_bytes(topic_id)
        req = summary_rq.ReadShareGroupStateSummaryRequest(group_id=group_id, topics=[summary_rq.ReadStateSummaryData(
            topic_id=t, partitions=[summary_rq.PartitionData(partition=partition, leader_epoch=-1)])])
        try:
            r = await self._call(group_id, t, partition, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, req,
                                 lambda r: self._only(r.results))
        except UnknownTopicOrPartitionError:
            return None
        return ShareState(r.state_epoch, r.start_offset, -1)
