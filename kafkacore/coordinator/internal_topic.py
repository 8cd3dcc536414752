"""A coordinator's internal topic (``__consumer_offsets``, ``__transaction_state``): compacted,
created on first use, written by its partition's leader as one uncompressed v2 batch per call
(producer id -1), replicated with acks=all on a cluster, and replayed from log start to end when
the coordinator loads a partition. The group and transaction coordinators differ only in the
topic, its settings and how append errors map to the error their clients get."""
from __future__ import annotations

import asyncio
import logging
from typing import NamedTuple

from ..clock import wall_ms
from ..errors import (CoordinatorNotAvailableError, KafkaError, NotLeaderOrFollowerError, TopicAlreadyExistsError,
                      UnknownServerError)
from ..record import CorruptRecordError, RecordBatchBuilder, iter_batches
from ..record.control import COMMIT, parse_control_key
from ..storage.producer_state import AppendOrigin

log = logging.getLogger("kafkacore.coordinator")

READ_CHUNK_BYTES = 1 << 20



class StoreWrite(NamedTuple):
    """An append to a coordinator's topic: its LogAppendInfo, and ``replicated``, a future of
    None that fails with StoreError, while the ISR has not got it yet (None once committed)."""
    info: object
    replicated: asyncio.Future | None


class StoreError(Exception):
    """An append to a coordinator's topic failed; ``code`` is the error for the client."""

    def __init__(self, code, cause):
        super().__init__(f"error {code}: {cause}")
        self.code = code
        self.cause = cause


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0, not to itself."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(key: str, partitions: int) -> int:
    """Kafka's partitionFor of a group id or transactional id."""
    return java_abs(java_string_hash(key)) % partitions


class InternalTopicLog:
    def __init__(self, broker, topic, configured_partitions, segment_bytes, configs=None):
        self.broker = broker
        self.topic = topic
        self.configured_partitions = configured_partitions
        self.segment_bytes = segment_bytes
        self.configs = dict(configs or {})

    @property
    def partitions(self) -> int:
        info = self.broker.topic(self.topic)
        return info.partitions if info is not None else self.configured_partitions

    def partition_for(self, key) -> int:
        return partition_for(key, self.partitions)

    def exists(self) -> bool:
        return self.broker.topic(self.topic) is not None

    def ensure_topic(self):
        """Creates the topic if this broker does not know it. A creation that fails (no live
        broker known yet: a broker still starting) is COORDINATOR_NOT_AVAILABLE, which clients
        retry, as Kafka answers when it cannot create an internal topic."""
        if self.broker.topic(self.topic) is not None:
            return
        try:
            self.broker.create_topic(self.topic, self.configured_partitions, 1, configs={
                "cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes), **self.configs})
            log.info("created %s with %d partitions", self.topic, self.configured_partitions)
        except TopicAlreadyExistsError:
            pass
        except KafkaError as e:
            if e.retriable:
                raise
            raise CoordinatorNotAvailableError(f"{self.topic} cannot be created now: {e.message}") from None

    def created_on_first_use(self) -> bool:
        """A coordinator's first request for a key creates the topic, as FindCoordinator does
        (a single node then leads its partitions at once). False when the creation failed
        (logged): the caller answers as a broker without the topic does."""
        if self.broker.topic(self.topic) is not None:
            return True
        try:
            self.ensure_topic()
        except Exception as e:  # noqa: BLE001 - a ZooKeeper outage on a cluster: the client asks again
            log.warning("creating %s failed: %s", self.topic, e)
            return False
        return True

    def append(self, key, records, errors, producer=None):
        """Appends [(record key, value or None)] as one uncompressed batch to the partition of
        ``key`` through the replica manager, as Kafka's coordinators write: acks=-1 with
        coordinator origin, so an ISR below min.insync.replicas refuses it before anything is
        written. ``producer`` (producer id, epoch) makes it a transactional batch of that
        producer (TxnOffsetCommit's offsets, which count only once the transaction's COMMIT
        marker lands in this partition). Returns a StoreWrite (None for no records). Raises
        StoreError with ``errors``' mapping of the failure's code (the code itself when
        unmapped)."""
        if not records:
            return None
        try:
            self.ensure_topic()
            partition = self.partition_for(key)
            builder = RecordBatchBuilder(compression="none")
            ts = wall_ms()
            for k, value in records:
                builder.append(value, key=k, timestamp_ms=ts)
            if producer is not None:
                builder.set_producer_state(producer[0], producer[1], 0, transactional=True)
            result = self.broker.replica_manager.append_records(
                {(self.topic, partition): builder.build()}, -1, AppendOrigin.COORDINATOR)[(self.topic, partition)]
            if result.error is not None:
                raise result.error
        except KafkaError as e:
            log.warning("writing %d record(s) for %s to %s failed: %s", len(records), key, self.topic, e)
            raise StoreError(errors.get(e.code, e.code), e) from None
        return StoreWrite(result.info, self._replicated(result.commit, errors))

    @staticmethod
    def _replicated(commit, errors):
        """The acks=all wait as a future of None failing with StoreError (None: committed at
        the write). Nothing here is ever cancelled by a client: the coordinator decides what to
        do with a write once it is replicated, whoever is still listening."""
        if commit is None:
            return None
        out = asyncio.get_running_loop().create_future()

        def done(f):
            if out.done():
                return
            e = f.exception() if not f.cancelled() else NotLeaderOrFollowerError("the replica stopped")
            if e is None:
                out.set_result(None)
            else:
                code = e.code if isinstance(e, KafkaError) else UnknownServerError.code
                out.set_exception(StoreError(errors.get(code, code), e))
        commit.add_done_callback(done)
        return out

    def read_partition(self, partition):
        """Yields (key, value) of every record of one partition, oldest first, transactional
        ones included (control batches, the transaction markers, are not records)."""
        for kind, *rest in self.read_partition_with_markers(partition):
            if kind == "record":
                yield rest[0], rest[1]

    def read_partition_with_markers(self, partition):
        """Yields ("record", key, value, producer id of a transactional batch or None, the
        batch's base offset) and ("marker", producer id, committed?) in log order: what a
        coordinator that keeps transactional writes pending until their marker replays."""
        lg = self.broker.get_log(self.topic, partition)
        if lg is None:
            return
        offset = lg.log_start_offset
        end = lg.log_end_offset
        while offset < end:
            data = lg.read(offset, READ_CHUNK_BYTES).read()
            if not data:
                break
            next_offset = offset
            try:
                for batch in iter_batches(data):
                    if batch.is_control:
                        for rec in batch:
                            if rec.offset >= offset:
                                yield "marker", batch.producer_id, parse_control_key(rec.key) == COMMIT
                    else:
                        txn = batch.producer_id if batch.is_transactional else None
                        for rec in batch:
                            if rec.offset >= offset and rec.key is not None:
                                yield "record", rec.key, rec.value, txn, batch.base_offset
                    next_offset = batch.next_offset
            except CorruptRecordError as e:
                log.error("%s-%d: unreadable batch after offset %d, the rest is skipped: %s",
                          self.topic, partition, next_offset, e)
                return
            if next_offset <= offset:
                break
            offset = next_offset
