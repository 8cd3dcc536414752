"""The broker: its topics, its ReplicaManager and MetadataCache (kafkacore/replication), its
coordinators, and what the handlers share - the same on one node and on many. Every broker is a
member of a cluster (``attach_cluster``: kafkacore/cluster/cluster_node.py), whose controller
gives its partitions their roles and fills its metadata cache: a cluster coordinated by
ZooKeeper, or a single node's cluster of one over the metadata store in its own data directory
(kafkacore/cluster/local_metadata.py).

- Topics are the storage engine's logs grouped by name. A topic's id (Kafka's topic UUID, used
  by Fetch v13+ and Metadata v10+) lives in each partition's ``partition.metadata``; a log found
  without one (written by an older tool) is given one at start-up.
- ``create_topic`` / ``delete_topic`` / ``create_partitions`` apply Kafka's rules and raise
  Kafka's errors (INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
  INVALID_REPLICATION_FACTOR, INVALID_CONFIG, ...).
- Fetch long-polls wait on ``DataWaiter``s: every log's append listener wakes the waiters of
  that partition at once (on the event loop; appends from other threads are handed over with
  call_soon_threadsafe), so a waiting fetch answers as soon as data arrives, with no polling.
"""
from __future__ import annotations

import asyncio
import logging
import threading

from ..errors import InvalidTopicError, KafkaError, TopicAlreadyExistsError, TopicDeletionDisabledError
from ..replication.broker_channel import BrokerChannels
from ..replication.metadata_cache import MetadataCache
from ..replication.replica_manager import ReplicaManager
from ..security.acl import Authorizer, parse_super_users
from ..security.client_quotas import ClientQuotaManagers, QuotaConfigs
from ..security.credential_cache import CredentialCache
from ..storage.log_manager import LogManager, validate_topic_name
from .config import BrokerConfig
from .dynamic_config import DynamicBrokerConfig
from .local_channel import LocalChannel
from .topic_store import TopicInfo

log = logging.getLogger("kafkacore.broker")



class DataWaiter:
    """A fetch waiting for appends to any of a set of logs."""

    __slots__ = ("future", "logs")

    def __init__(self, loop, logs):
        self.future = loop.create_future()
        self.logs = logs

    def wake(self):
        if not self.future.done():
            self.future.set_result(None)


class KafkaServer:
    def __init__(self, config: BrokerConfig | None = None, isr_store=None, inter_broker_security=None):
        """isr_store: where the leaders of a cluster write ISR changes (cluster/isr_store.py
        over the cluster's ZooKeeper); None on a single node. inter_broker_security: how this
        broker dials the others' inter-broker listener (broker/inter_broker.py), None for
        PLAINTEXT."""
        self.config = config or BrokerConfig()
        cfg = self.config
        self.node_id = cfg.node_id
        self.log_manager = LogManager(
            cfg.data_dir, cfg.log_config, node_id=cfg.node_id, cluster_id=cfg["cluster.id"],
            retention_check_interval_ms=cfg["log.retention.check.interval.ms"],
            flush_check_interval_ms=min(cfg["log.flush.scheduler.interval.ms"], 1000),
            checkpoint_interval_ms=cfg["log.flush.offset.checkpoint.interval.ms"] or 60000,
            cleaner_enable=cfg["log.cleaner.enable"], cleaner_backoff_ms=cfg["log.cleaner.backoff.ms"],
            cleaner_dedupe_buffer_size=cfg["log.cleaner.dedupe.buffer.size"],
            producer_id_expiration_ms=cfg["producer.id.expiration.ms"],
            producer_id_expiration_check_interval_ms=cfg["producer.id.expiration.check.interval.ms"])
        self.cluster_id = self.log_manager.cluster_id
        self.data_dir = self.log_manager.data_dir
        self.loop = None
        self._started = None  # an asyncio.Event once the loop runs (attach_loop)
        self._credentials_loaded = None  # likewise
        self._auto_creating: set[str] = set()  # topics a Metadata request is creating on a cluster
        self.loop_thread = None
        self._lock = threading.RLock()
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[bytes, TopicInfo] = {}
        self._waiters: dict[object, set] = {}
        self.group_coordinator = None
        self.transaction_coordinator = None
        # KIP-932: the share coordinator of the __share_group_state partitions led here, the
        # persister through which share-partition leaders store their state (at its coordinator;
        # coordinator/share_state.py's Persister, set in _start_coordinators, the one place) and the
        # share partitions this broker leads
        self.share_coordinator = None
        self.share_persister = None
        self.share_partition_manager = None
        # the GROUP config resource's overrides (coordinator/group_config.py), filled from the
        # metadata store by the config manager
        self.group_configs = None
        self.producer_ids = None
        self.metrics = None  # a BrokerMetrics (broker/metrics.py) when metrics.port is set
        # the cluster this broker is a member of, and where its topics and their configs are
        # written: given by attach_cluster (kafkacore/cluster/cluster_node.py) before it serves
        self.cluster = None
        self.topic_store = None
        # SCRAM credentials, filled from the metadata store by the config manager
        self.credential_cache = CredentialCache()
        # client quotas' settings, filled the same way (security/client_quotas.py)
        self.quota_configs = QuotaConfigs()
        # the dynamic broker configs over the static ones (broker/dynamic_config.py), filled the
        # same way; the TLS listeners whose key stores they may reload (set by broker/main.py)
        self.dynamic_config = DynamicBrokerConfig(self)
        self.listener_tls = {}
        # the client quotas' sensors, which the connections record on (broker/quotas.py)
        self.quotas = ClientQuotaManagers(self.quota_configs, cfg["quota.window.size.seconds"], cfg["quota.window.num"])
        # the SocketServer's connection limits (broker/connection_quotas.py) while it serves;
        # dynamic configs reconfigure them
        self.connection_quotas = None
        # the ACLs and decisions on them, filled from the metadata store by the ACL store
        # (kafkacore/cluster/acl_store.py); None without authorizer.class.name
        self.authorizer = Authorizer(parse_super_users(cfg["super.users"]), cfg["allow.everyone.if.no.acl.found"]) \
            if cfg["authorizer.class.name"] else None
        # what the broker knows of the cluster (the controller's UpdateMetadata fills it), and
        # the partitions it holds a replica of: every write of a leader goes through the
        # replica manager, on one node as on many
        self.metadata_cache = MetadataCache(self.node_id)
        self.replica_manager = ReplicaManager(self, isr_store)
        # every connection to another broker (the coordinators', the fetchers', the controller's)
        self.channels = BrokerChannels(self.node_id, self.metadata_cache, security=inter_broker_security)
        self.channels.local = LocalChannel(self, client_id=f"broker-{self.node_id}")  # ... and to itself
        try:
            for lg in self.log_manager.logs.values():  # their roles come from the controller
                self._watch(lg)
            self._start_coordinators()
        except BaseException:
            self.log_manager.abandon()  # a failed start leaves the directory as it found it, unlocked
            raise

    def _start_coordinators(self):
        # Imported here, not at the top: the coordinators import the handlers' shared code. A
        # failure to import is a broken install and must stop the broker, never be skipped.
        from ..coordinator.group_config import GroupConfigs
        from ..coordinator.group_coordinator import GroupCoordinator
        from ..coordinator.producer_id_manager import ProducerIdManager
        from ..coordinator.share_coordinator import ShareCoordinator
        from ..coordinator.share_partition_manager import SharePartitionManager
        from ..coordinator.share_persister import DefaultStatePersister
        from ..coordinator.transaction_coordinator import TransactionCoordinator

        self.producer_ids = ProducerIdManager(self.data_dir)
        self.group_configs = GroupConfigs(self.config)
        self.group_coordinator = GroupCoordinator(self)
        self.transaction_coordinator = TransactionCoordinator(self)
        self.share_coordinator = ShareCoordinator(self)
        self.share_persister = DefaultStatePersister(self)
        self.share_partition_manager = SharePartitionManager(self)

    @property
    def started(self) -> bool:
        """In its cluster: the start (ClusterNode.start) is done; clients' requests are served."""
        return self._started is not None and self._started.is_set()

    def mark_started(self):
        self._credentials_loaded.set()
        self._started.set()

    @property
    def credentials_loaded(self) -> bool:
        """The SCRAM users are read from the metadata store (ClusterNode.start, before the
        broker registers): SASL logins are answered from then on."""
        return self._credentials_loaded is not None and self._credentials_loaded.is_set()

    def mark_credentials_loaded(self):
        self._credentials_loaded.set()

    async def wait_credentials_loaded(self):
        await self._credentials_loaded.wait()

    async def wait_started(self):
        await self._started.wait()

    def attach_loop(self, loop):
        """Called by the server once the event loop runs: timers and wake-ups use it."""
        self.loop = loop
        self._started = asyncio.Event()
        self._credentials_loaded = asyncio.Event()
        self.loop_thread = threading.get_ident()
        self.group_coordinator.start(loop)
        self.transaction_coordinator.start(loop)  # after the groups: its markers may complete their offsets
        self.share_coordinator.start(loop)

    # -- the cluster ----------------------------------------------------------------------------
    def attach_cluster(self, cluster, isr_store=None):
        """The cluster this broker is a member of (a ClusterNode) and, when given, where its
        leaders write ISR changes (cluster/isr_store.py)."""
        self.cluster = cluster
        self.topic_store = cluster.topic_store
        if isr_store is not None:
            self.replica_manager.isr_store = isr_store

    def refresh_topics(self, cache, deleted=()):
        """The topic table from the controller's metadata (a broker of a cluster)."""
        with self._lock:
            topics, by_id = {}, {}
            for name, count in cache.topics().items():
                old = self.topics.get(name)
                topic_id = cache.topic_ids.get(name) or (old.topic_id if old else b"\x00" * 16)
                info = TopicInfo(name, topic_id, count)
                topics[name] = info
                by_id[topic_id] = info
            gone = [info for name, info in self.topics.items() if name not in topics]
            self.topics, self.topics_by_id = topics, by_id
        for info in gone:
            if self.group_coordinator is not None:
                self.group_coordinator.on_topic_deleted(info.name, info.partitions)
            if self.share_coordinator is not None:
                self.share_coordinator.on_topic_deleted(info.topic_id)

    def leader_log(self, topic, partition):
        """The log of a partition this broker leads: UNKNOWN_TOPIC_OR_PARTITION, or
        NOT_LEADER_OR_FOLLOWER when another broker leads it."""
        return self.replica_manager.leader_partition(topic, partition).log

    def leader_epoch_of(self, topic, partition):
        """The partition's current leader epoch as this broker knows it (-1 when it holds no
        replica)."""
        partition_ = self.replica_manager.partitions.get((topic, partition))
        return partition_.leader_epoch if partition_ is not None else -1

    def topic_config_overrides(self, topic):
        return dict(self.log_manager.topic_overrides.get(topic, {}))

    # -- topics -------------------------------------------------------------------------------
    def get_log(self, topic, partition):
        return self.log_manager.logs.get((topic, partition))

    def topic(self, name) -> TopicInfo | None:
        return self.topics.get(name)

    def create_topic(self, name, num_partitions=-1, replication_factor=-1, configs=None,
                     validate_only=False, assignments=None) -> TopicInfo:
        """Kafka's CreateTopics rules: -1 means the broker default; a replication factor above
        the number of brokers is INVALID_REPLICATION_FACTOR. The topic store writes it: a single
        node creates and leads its partitions at once; a cluster writes ZooKeeper and the
        controller creates the partitions (the returned TopicInfo is what was asked; the
        metadata follows)."""
        validate_topic_name(name)
        topic_id, count = self.topic_store.create_topic(name, num_partitions, replication_factor, configs,
                                                        validate_only, assignments)
        return TopicInfo(name, topic_id, count)

    def check_new_topic_name(self, name):
        """TOPIC_ALREADY_EXISTS, or INVALID_TOPIC_EXCEPTION for a name that collides with an
        existing one once '.' and '_' are unified."""
        if name in self.topics:
            raise TopicAlreadyExistsError(f"topic '{name}' already exists")
        collide = _collision_name(name)
        for other in list(self.topics):  # a snapshot: on a cluster this runs off the event loop
            if _collision_name(other) == collide:
                raise InvalidTopicError(
                    f"topic '{name}' collides with existing topic '{other}' ('.' and '_' are interchangeable in metric names)")

    def auto_create_topic(self, name):
        """auto.create.topics.enable: a Metadata request named a topic that does not exist. The
        caller answers LEADER_NOT_AVAILABLE, as Kafka does, and the client asks again. A store
        whose writes are round trips (ZooKeeper) writes from a worker thread, so that a round
        trip (or an outage) does not stall every client of this broker; a creation already
        under way, or done by another broker meanwhile, is not an error."""
        if not self.topic_store.blocking:
            self.create_topic(name)
            return
        if name in self._auto_creating:
            return
        validate_topic_name(name)
        self.check_new_topic_name(name)
        self._auto_creating.add(name)

        def create():
            try:
                self.create_topic(name)
            except TopicAlreadyExistsError:
                pass
            except KafkaError as e:
                log.warning("auto-creating topic %s failed: %s", name, e)
            except Exception:  # noqa: BLE001 - a worker thread's failure must be seen, and the name freed
                log.exception("auto-creating topic %s failed", name)

        future = asyncio.get_running_loop().run_in_executor(None, create)
        future.add_done_callback(lambda _f: self._auto_creating.discard(name))

    def delete_topic(self, name):
        if not self.config["delete.topic.enable"]:
            raise TopicDeletionDisabledError("delete.topic.enable is false")
        self.topic_store.delete_topic(name)

    def create_partitions(self, name, count, validate_only=False, assignments=None):
        """assignments: a replica list per new partition (a single node places every partition
        on itself)."""
        return self.topic_store.create_partitions(name, count, validate_only, assignments)

    async def topic_store_call(self, fn, *args):
        """Runs an admin handler's work on the topic store (``fn(*args)``, reads and writes): in a
        worker thread when the store's calls are round trips (ZooKeeper), on the event loop
        otherwise."""
        if self.topic_store.blocking:
            return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
        return fn(*args)

    async def wait_for_topic_gone(self, name, timeout_s):
        """Until the controller's metadata no longer has the topic (its deletion done here) and
        the metadata store has neither its znode nor its deletion request. Kafka answers once its metadata cache is
        clear, when the controller may not yet have removed the znode, and a CreateTopics of
        the same name then fails with TOPIC_ALREADY_EXISTS; waiting for both lets a client
        delete and re-create a name at once."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while (name in self.metadata_cache.partition_counts or name in self.topics
               or await self.topic_store_call(self.topic_store.topic_name_in_use, name)):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.02)
        return True

    async def wait_for_topic(self, name, timeout_s, partitions=1):
        """Until the topic has at least ``partitions`` partitions and each has a live leader in
        the metadata cache (at once on a single node, which leads them as it creates them)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        cache = self.metadata_cache
        while True:
            n = cache.partition_counts.get(name)
            if n and n >= partitions and all(cache.leader(name, p) >= 0 for p in range(n)):
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.02)

    # -- waiting for data (fetch long-poll) -------------------------------------------------------
    def _watch(self, lg):
        lg.append_listeners.append(self._on_append)

    def watch_log(self, lg):
        """Fetches waiting on this log wake at its appends (and high watermark moves)."""
        self._watch(lg)

    def unwatch_log(self, topic, partition):
        lg = self.get_log(topic, partition)
        if lg is not None:
            self._wake(lg)
            self._waiters.pop(lg, None)

    def _on_append(self, lg):
        if not self._waiters.get(lg):
            return
        if self.loop is None:
            return
        if threading.get_ident() == self.loop_thread:
            self._wake(lg)
        else:
            self.loop.call_soon_threadsafe(self._wake, lg)

    def _wake(self, lg):
        # a woken waiter is done with every log: dropping the set here also clears a waiter whose
        # fetch went away before it began waiting (its coroutine never ran its cleanup)
        for waiter in self._waiters.pop(lg, ()):
            waiter.wake()

    def wake_fetches(self, lg):
        """Wakes the fetches waiting on lg as an append would (a share partition's records
        became available again)."""
        self._wake(lg)

    def connection_closed(self, connection_id):
        """A client connection closed: the share sessions it opened end and their members'
        acquired records are released (Kafka 4.1's connection disconnect listener)."""
        if self.share_partition_manager is not None:
            self.share_partition_manager.connection_closed(connection_id)

    def data_waiter(self, logs):
        """A waiter registered now on logs: any append from here on wakes it, even one made
        before the fetch's coroutine first runs (the server awaits a long poll's coroutine only
        after the handler returns; an append in between must not be missed)."""
        waiter = DataWaiter(asyncio.get_running_loop(), logs)
        for lg in logs:
            self._waiters.setdefault(lg, set()).add(waiter)
        return waiter

    async def wait_for_data(self, logs, timeout_s, waiter=None):
        """Returns after an append to any of logs (since ``waiter`` was registered, when one is
        given), or after timeout_s."""
        if timeout_s <= 0 or not logs:
            if waiter is not None:
                self.drop_waiter(waiter)
            if timeout_s > 0:
                await asyncio.sleep(timeout_s)
            return
        if waiter is None:
            waiter = self.data_waiter(logs)
        # one future and one timer: cheaper than wait_for (a task per wait) on the latency path
        timer = asyncio.get_running_loop().call_later(timeout_s, waiter.wake)
        try:
            await waiter.future
        finally:
            timer.cancel()
            self.drop_waiter(waiter)

    def drop_waiter(self, waiter):
        for lg in waiter.logs:
            ws = self._waiters.get(lg)
            if ws is not None:
                ws.discard(waiter)
                if not ws:
                    self._waiters.pop(lg, None)

    # -- shutdown -------------------------------------------------------------------------------
    def abandon(self):
        """A start that failed before the broker ran (its coordinators never started): the
        data directory is left as it was found, unlocked, and nothing is said."""
        self.channels.close()
        self.log_manager.abandon()

    def shutdown(self):
        """Coordinators first (their state is written to logs), then the cluster node, then the
        logs: flushed, checkpointed, and the clean-shutdown marker written."""
        if self.share_partition_manager is not None:
            self.share_partition_manager.shutdown()
        for name in ("share_coordinator", "transaction_coordinator", "group_coordinator"):
            c = getattr(self, name, None)
            if c is not None:
                try:
                    c.shutdown()
                except Exception:  # noqa: BLE001 - the logs must still close cleanly
                    log.exception("%s shutdown failed", name.replace("_", " "))
        if self.producer_ids is not None:
            self.producer_ids.close()
        self.channels.close()
        self.cluster.shutdown()  # attached before any start (a start that failed earlier abandons)
        self.log_manager.shutdown()
        log.info("broker stopped; data in %s", self.data_dir)


def _collision_name(name):
    return name.replace(".", "_")

