"""The transactional producer's side of KIP-98 (docs/transactions.md §9.1): the Java client's
TransactionManager reduced to what a blocking API needs. The application thread runs
init/begin/commit/abort and the offsets; the sender thread adds partitions to the transaction
before it sends their first batch.

States: UNINITIALIZED -> (init_transactions) READY -> (begin_transaction) IN_TRANSACTION ->
(commit/abort) READY. An abortable error (a batch that failed, a partition the coordinator would
not add) moves IN_TRANSACTION to ABORTABLE_ERROR: only abort_transaction is allowed then. A fatal
error (fenced by a newer instance, an id mapping the coordinator does not know) moves to
FATAL_ERROR: every call raises it; the producer must be closed.

Errors raised carry confluent-kafka's flags: ``fatal`` and ``txn_requires_abort``."""
from __future__ import annotations

import logging
import threading
import time

from ..errors import (ConcurrentTransactionsError, CoordinatorLoadInProgressError, CoordinatorNotAvailableError,
                      InvalidProducerEpochError, InvalidProducerIdMappingError, InvalidTxnStateError, KafkaError,
                      KafkaTimeoutError, NotCoordinatorError, ProducerFencedError,
                      TransactionalIdAuthorizationFailedError, UnknownProducerIdError, UnknownTopicOrPartitionError,
                      error_for_code)
from ..protocol.api_table import ApiKey
from ..protocol.frames import request_class
from .connection import ConnectionClosed

log = logging.getLogger("kafkacore.producer")

TRANSACTION_KEY_TYPE, GROUP_KEY_TYPE = 1, 0
OPERATION_NOT_ATTEMPTED = 55

UNINITIALIZED, READY, IN_TRANSACTION, COMMITTING, ABORTING, ABORTABLE_ERROR, FATAL_ERROR = (
    "UNINITIALIZED", "READY", "IN_TRANSACTION", "COMMITTING", "ABORTING", "ABORTABLE_ERROR", "FATAL_ERROR")

# answered again after a backoff (the coordinator is moving, loading, or finishing a transaction)
_RETRY = frozenset({ConcurrentTransactionsError.code, CoordinatorLoadInProgressError.code,
                    CoordinatorNotAvailableError.code, NotCoordinatorError.code, UnknownTopicOrPartitionError.code,
                    7})  # REQUEST_TIMED_OUT
_REFIND = frozenset({CoordinatorNotAvailableError.code, NotCoordinatorError.code})
_NEEDS_NEW_EPOCH = frozenset({UnknownProducerIdError.code, InvalidProducerIdMappingError.code})
_FATAL = frozenset({ProducerFencedError.code, InvalidProducerEpochError.code, InvalidTxnStateError.code,
                    TransactionalIdAuthorizationFailedError.code})


def _request(api_key, **fields):
    return request_class(api_key)(**fields)


class ConsumerGroupMetadata:
    """What send_offsets_to_transaction needs of the consumer (Consumer.consumer_group_metadata):
    the generation and member id fence a zombie consumer's offsets (KIP-447)."""

    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id")

    def __init__(self, group_id, generation_id=-1, member_id="", group_instance_id=None):
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id

    def __repr__(self):
        return (f"ConsumerGroupMetadata({self.group_id!r}, generation={self.generation_id}, "
                f"member={self.member_id!r})")


class TransactionManager:
    def __init__(self, config, cluster):
        self.transactional_id = config["transactional.id"]
        self.timeout_ms = config["transaction.timeout.ms"]
        self.request_timeout = config["request.timeout.ms"] / 1000.0
        self.backoff = config["retry.backoff.ms"] / 1000.0
        self.cluster = cluster
        self.state = UNINITIALIZED
        self.error: KafkaError | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.partitions: set = set()  # in the current transaction (the coordinator answered NONE)
        self._bump_epoch = False  # the abort must get a new epoch (KIP-360) before the next transaction
        self.lock = threading.RLock()  # the application thread and the sender both call in
        self._coordinators: dict[tuple, object] = {}  # (key type, key) -> connection

    # -- state ------------------------------------------------------------------------------
    def _raise_if_failed(self, allowed):
        if self.state == FATAL_ERROR:
            raise self.error
        if self.state not in allowed:
            if self.state == ABORTABLE_ERROR:
                raise self.error
            raise _state_error(f"transactional producer {self.transactional_id!r} is in state {self.state}; "
                               f"this call needs {' or '.join(allowed)}")

    def fail(self, err: KafkaError, fatal=False):
        """An error inside the transaction: it must be aborted (or, fatal, the producer closed)."""
        with self.lock:
            if fatal or err.code in _FATAL:
                err.fatal = True
                if not err.message.startswith("transactional id"):
                    err.message = f"transactional id {self.transactional_id!r}: {err.message}"
                    err.args = (f"{err.name}: {err.message}",)
                self.state, self.error = FATAL_ERROR, err
            elif self.state in (IN_TRANSACTION, COMMITTING):
                err.txn_requires_abort = True
                self.state, self.error = ABORTABLE_ERROR, err
                # the coordinator or a partition lost the producer's id, or a batch timed out
                # after it may have been written: the abort bumps the epoch (KIP-360) so the
                # next transaction's sequences start clean
                if err.code in _NEEDS_NEW_EPOCH or isinstance(err, KafkaTimeoutError):
                    self._bump_epoch = True
        return err

    @property
    def in_transaction(self) -> bool:
        return self.state == IN_TRANSACTION

    # -- the coordinators -----------------------------------------------------------------------
    def _coordinator(self, key_type, key, deadline):
        conn = self._coordinators.get((key_type, key))
        if conn is not None and not conn.closed:
            return conn
        while True:
            try:
                resp = self.cluster.call_any(ApiKey.FIND_COORDINATOR,
                                             _request(ApiKey.FIND_COORDINATOR, key=key, key_type=key_type))
                if resp.error_code == 0:
                    conn = self.cluster.connect_to(resp.host, resp.port, resp.node_id)
                    self._coordinators[(key_type, key)] = conn
                    return conn
                if resp.error_code not in _RETRY:
                    raise error_for_code(resp.error_code, resp.error_message or "FindCoordinator")
            except (ConnectionClosed, OSError) as e:
                log.debug("FindCoordinator for %r failed: %s", key, e)
            self._wait(deadline, "a transaction coordinator")

    def _wait(self, deadline, what):
        if time.monotonic() + self.backoff > deadline:
            raise KafkaTimeoutError(f"transactional id {self.transactional_id!r}: no answer from {what} in time")
        time.sleep(self.backoff)

    def _call(self, key_type, key, api_key, body, deadline, codes_of=lambda r: [r.error_code]):
        """The response, retried after a backoff while its error codes are retriable (and the
        coordinator looked up again when it moved), until ``deadline``."""
        while True:
            conn = self._coordinator(key_type, key, deadline)
            try:
                resp = conn.call(api_key, body, timeout=max(0.1, min(self.request_timeout, deadline - time.monotonic())))
            except (ConnectionClosed, OSError, KafkaTimeoutError) as e:
                log.debug("request %d to the coordinator failed: %s", api_key, e)
                self._coordinators.pop((key_type, key), None)
                self._wait(deadline, "the coordinator")
                continue
            codes = [c for c in codes_of(resp) if c]
            if not codes or any(c not in _RETRY for c in codes):
                return resp
            if any(c in _REFIND for c in codes):
                self._coordinators.pop((key_type, key), None)
            self._wait(deadline, "the coordinator")

    # -- the API --------------------------------------------------------------------------------
    def init(self, timeout):
        """InitProducerId with the transactional id: (producer id, epoch). A previous instance
        of the same id is fenced; its open transaction is aborted by the coordinator."""
        with self.lock:
            self._raise_if_failed((UNINITIALIZED, READY))
            deadline = time.monotonic() + timeout
            body = _request(ApiKey.INIT_PRODUCER_ID, transactional_id=self.transactional_id,
                            transaction_timeout_ms=self.timeout_ms, producer_id=self.producer_id,
                            producer_epoch=self.producer_epoch)
            resp = self._call(TRANSACTION_KEY_TYPE, self.transactional_id, ApiKey.INIT_PRODUCER_ID, body, deadline)
            if resp.error_code:
                raise self.fail(error_for_code(resp.error_code, "InitProducerId"), fatal=True)
            self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
            self.state = READY
            log.info("transactional id %r: producer id %d, epoch %d", self.transactional_id, self.producer_id,
                     self.producer_epoch)
            return self.producer_id, self.producer_epoch

    def begin(self):
        with self.lock:
            self._raise_if_failed((READY,))
            self.partitions.clear()
            self.state = IN_TRANSACTION

    def add_partitions(self, tps, timeout):
        """The sender, before the first batch of each partition: AddPartitionsToTxn. Raises the
        (abortable or fatal) error when the coordinator refuses."""
        with self.lock:
            new = sorted(set(tps) - self.partitions)
            if not new:
                return
            if self.state != IN_TRANSACTION:
                raise self.error or _state_error(f"a batch for {new} outside a transaction")
            topics = {}
            for t, p in new:
                topics.setdefault(t, []).append(p)
            topic_cls = __import__("kafkacore.protocol.messages.add_partitions_to_txn_request",
                                   fromlist=["x"]).AddPartitionsToTxnTopic
            body = _request(ApiKey.ADD_PARTITIONS_TO_TXN, v3_and_below_transactional_id=self.transactional_id,
                            v3_and_below_producer_id=self.producer_id, v3_and_below_producer_epoch=self.producer_epoch,
                            v3_and_below_topics=[topic_cls(name=t, partitions=ps) for t, ps in topics.items()])
            resp = self._call(TRANSACTION_KEY_TYPE, self.transactional_id, ApiKey.ADD_PARTITIONS_TO_TXN, body,
                              time.monotonic() + timeout, codes_of=_add_partitions_codes)
            codes = _add_partitions_codes(resp)
            bad = sorted({c for c in codes if c}, key=lambda c: c == OPERATION_NOT_ATTEMPTED)  # the cause first
            if bad:
                raise self.fail(error_for_code(bad[0], f"AddPartitionsToTxn {new}"))
            self.partitions.update(new)

    def send_offsets(self, offsets, group_metadata: ConsumerGroupMetadata, timeout):
        """AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator: the offsets
        ({(topic, partition): next offset}) commit or abort with the transaction."""
        with self.lock:
            self._raise_if_failed((IN_TRANSACTION,))
            deadline = time.monotonic() + timeout
            group = group_metadata.group_id
            resp = self._call(TRANSACTION_KEY_TYPE, self.transactional_id, ApiKey.ADD_OFFSETS_TO_TXN, _request(
                ApiKey.ADD_OFFSETS_TO_TXN, transactional_id=self.transactional_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, group_id=group), deadline)
            if resp.error_code:
                raise self.fail(error_for_code(resp.error_code, "AddOffsetsToTxn"))
            mod = __import__("kafkacore.protocol.messages.txn_offset_commit_request", fromlist=["x"])
            topics = {}
            for (t, p), off in sorted(offsets.items()):
                topics.setdefault(t, []).append(mod.TxnOffsetCommitRequestPartition(
                    partition_index=p, committed_offset=off, committed_leader_epoch=-1, committed_metadata=""))
            body = _request(ApiKey.TXN_OFFSET_COMMIT, transactional_id=self.transactional_id, group_id=group,
                            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                            generation_id=group_metadata.generation_id, member_id=group_metadata.member_id,
                            group_instance_id=group_metadata.group_instance_id,
                            topics=[mod.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()])
            resp = self._call(GROUP_KEY_TYPE, group, ApiKey.TXN_OFFSET_COMMIT, body, deadline,
                              codes_of=lambda r: [p.error_code for t in r.topics for p in t.partitions])
            bad = [p.error_code for t in resp.topics for p in t.partitions if p.error_code]
            if bad:
                fatal = bad[0] in (InvalidProducerIdMappingError.code,) or bad[0] in _FATAL
                raise self.fail(error_for_code(bad[0], "TxnOffsetCommit"), fatal=fatal)

    def end(self, commit, timeout):
        """EndTxn (after the producer flushed, or purged for an abort)."""
        with self.lock:
            if commit:
                self._raise_if_failed((IN_TRANSACTION, COMMITTING))
            elif self.state == FATAL_ERROR:
                raise self.error
            elif self.state not in (IN_TRANSACTION, ABORTABLE_ERROR, ABORTING):
                raise _state_error(f"abort_transaction in state {self.state}: no transaction to abort")
            self.state = COMMITTING if commit else ABORTING
            deadline = time.monotonic() + timeout
            if self.partitions:  # nothing written: nothing to end at the coordinator
                resp = self._call(TRANSACTION_KEY_TYPE, self.transactional_id, ApiKey.END_TXN, _request(
                    ApiKey.END_TXN, transactional_id=self.transactional_id, producer_id=self.producer_id,
                    producer_epoch=self.producer_epoch, committed=commit), deadline)
                if resp.error_code and not (self._bump_epoch and resp.error_code in _NEEDS_NEW_EPOCH):
                    raise self.fail(error_for_code(resp.error_code, "EndTxn"))
            if not commit and self._bump_epoch:
                self._new_epoch(deadline)
            self.partitions.clear()
            self.state, self.error = READY, None

    def _new_epoch(self, deadline):
        """KIP-360: InitProducerId naming the current id and epoch gets the next epoch (or a new
        id); the sender starts the sequences over when it sees it."""
        resp = self._call(TRANSACTION_KEY_TYPE, self.transactional_id, ApiKey.INIT_PRODUCER_ID, _request(
            ApiKey.INIT_PRODUCER_ID, transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch), deadline)
        if resp.error_code:
            raise self.fail(error_for_code(resp.error_code, "InitProducerId (epoch bump)"), fatal=True)
        log.info("transactional id %r: producer id %d epoch %d -> %d epoch %d after an abortable error",
                 self.transactional_id, self.producer_id, self.producer_epoch, resp.producer_id, resp.producer_epoch)
        self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
        self._bump_epoch = False


def _add_partitions_codes(resp):
    return [p.partition_error_code for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition]


class TransactionStateError(KafkaError):
    """A transaction call in the wrong state (confluent-kafka's _STATE)."""

    name = "_STATE"


def _state_error(message):
    return TransactionStateError(message)
