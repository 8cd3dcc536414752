"""This broker's part in a cluster coordinated by ZooKeeper (what Kafka's KafkaServer starts in
ZooKeeper mode): the session, the broker's registration, the controller candidate, the
ReplicaManager and the MetadataCache.

Start-up order, as Kafka's: the listener is bound and serving (other brokers and the controller
must reach it), then the broker registers its ephemeral /brokers/ids/N (its czxid is the broker
epoch that fences stale controller requests after a restart), then it stands for controller.

A ZooKeeper session that expires (this broker was cut off for longer than
``zookeeper.session.timeout.ms``) loses the registration and any controllership: the rest of the
cluster has already treated the broker as dead. When the client reconnects with a new session
the broker registers again and stands for controller again; leaders it had learn from the
controller's next LeaderAndIsr that they are followers now, and their ISR writes fail the
version check meanwhile.

Controlled shutdown (SIGTERM, ``controlled.shutdown.enable``): before stopping, the broker asks
the controller to move its leaderships away (ControlledShutdown), retrying
``controlled.shutdown.max.retries`` times; then it stops.
"""
from __future__ import annotations

import asyncio
import logging
import random

from ..protocol.kafka_uuid import uuid_to_text
from ..errors import (InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError,
                      ReassignmentInProgressError, TopicAlreadyExistsError, UnknownTopicOrPartitionError)
from ..protocol.api_table import ApiKey
from ..protocol.messages.controlled_shutdown_request import ControlledShutdownRequest
from ..replication.broker_channel import BrokerChannelError
from .acl_store import ZkAclStore
from .config_manager import ZkConfigManager, supported_overrides
from .controller import KafkaController
from .topic_store import ZkTopicStore
from .zk_client import BrokerIdInUseError, ZkVersionMismatchError
from .zk_data import ReplicaAssignment

log = logging.getLogger("kafkacore.cluster")

CONTROLLED_SHUTDOWN_VERSION = 3


def assign_replicas(brokers, num_partitions, replication_factor, racks=None, rng=random):
    """Kafka's AdminUtils.assignReplicasToBrokers (rack-unaware form): a random first broker,
    partition p's leader is broker (start + p) % n, followers follow at a shift that grows every
    n partitions, so leaders and followers spread evenly. Rack-aware when every broker has a
    rack: brokers are interleaved by rack first, and followers skip racks already used while
    others remain."""
    brokers = sorted(brokers)
    n = len(brokers)
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the number of available brokers ({n})")
    if racks and all(racks.get(b) for b in brokers):
        brokers = _rack_alternated(brokers, racks)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out = {}
    for p in range(num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [brokers[first]]
        used_racks = {racks.get(brokers[first])} if racks else set()
        step = 0
        while len(replicas) < replication_factor:
            idx = (first + 1 + (shift + step) % (n - 1)) % n if n > 1 else first
            step += 1
            b = brokers[idx]
            if b in replicas:
                continue
            if racks and racks.get(b) in used_racks and len(used_racks) < len(set(racks.values())) \
                    and step < 2 * n:
                continue
            replicas.append(b)
            if racks:
                used_racks.add(racks.get(b))
        out[p] = replicas
    return out


def _rack_alternated(brokers, racks):
    by_rack = {}
    for b in brokers:
        by_rack.setdefault(racks[b], []).append(b)
    ordered, lists = [], [by_rack[r] for r in sorted(by_rack)]
    i = 0
    while any(lists):
        for lst in lists:
            if i < len(lst):
                ordered.append(lst[i])
        i += 1
        if all(i >= len(lst) for lst in lists):
            break
    return ordered


KNOWN_WAIT_S = 30.0  # start() waits this long for the controller to name this broker

class ClusterNode:
    serves_inter_broker_apis = True  # LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown
    def __init__(self, broker, zk):
        self.broker = broker
        self.zk = zk
        self.node_id = broker.node_id
        self.metadata_cache = broker.metadata_cache
        self.replica_manager = broker.replica_manager
        self.replica_manager.replica_alive = self.metadata_cache.alive
        self.controller = KafkaController(broker, zk)
        self.config_manager = ZkConfigManager(broker, zk, self.controller)  # topic config changes
        self.topic_store = ZkTopicStore(broker, self, self.config_manager)  # the broker's, once attached
        # the ACLs, loaded and kept current in the broker's authorizer: only with one configured
        self.acl_store = ZkAclStore(broker, zk) if broker.authorizer is not None else None
        self.loop = None
        self.broker_epoch = -1
        # producer ids unique cluster-wide: blocks from /latest_producer_id_block
        broker.producer_ids._allocate_block = lambda size: zk.allocate_producer_id_block(self.node_id, size)
        self._session_lost = False
        self._closed = False

    async def start(self, loop, endpoints):
        """``endpoints``: the advertised listeners (zk_data.EndPoint), all registered."""
        self.loop = loop
        self.advertised = tuple(endpoints)
        self.zk.add_state_listener(self._on_zk_state)
        # the SCRAM users before the registration: the controller dials this broker once it sees
        # it registered, and its login must find the credentials (clients' logins are held in
        # the server until then)
        await self.config_manager.load_users_and_clients(loop)
        self.broker.mark_credentials_loaded()
        await self._register()
        self.replica_manager.start(loop)
        self.controller.start(loop)
        await self.config_manager.start(loop)
        if self.acl_store is not None:
            await self.acl_store.start(loop)
        # started = known to the controller: its UpdateMetadata names this broker and its first
        # LeaderAndIsr gave the replicas their roles (on a single node its own controller's, a
        # moment after the election), so the first request finds leaders, here and in metadata
        deadline = loop.time() + KNOWN_WAIT_S
        while not self._serving_its_metadata():
            if loop.time() > deadline:
                log.warning("broker %d: no UpdateMetadata from a controller within %.0f s of registering; "
                            "serving meanwhile", self.node_id, KNOWN_WAIT_S)
                break
            await asyncio.sleep(0.005)
        self.broker.mark_started()  # clients' requests held meanwhile are served now

    async def _register(self):
        """A broker restarted right after a crash finds its previous session's ephemeral
        /brokers/ids/N still there until that session expires: it waits for it (up to the session
        timeout and a margin) instead of failing; a registration that outlives that belongs to
        another live broker with the same id, and BrokerIdInUseError stops this one."""
        endpoints = self.advertised
        wait_s = self.broker.config["zookeeper.session.timeout.ms"] / 1000 * 1.5 + 2
        deadline = self.loop.time() + wait_s
        warned = False
        while True:
            try:
                self.broker_epoch = await self.loop.run_in_executor(
                    None, lambda: self.zk.register_broker(self.node_id, None, -1, listeners=endpoints,
                                                          rack=self.broker.config["broker.rack"]))
                break
            except BrokerIdInUseError as e:
                if self.loop.time() >= deadline:
                    raise
                if not warned:
                    log.warning("%s; waiting up to %.0f s for a previous session of this broker to expire", e, wait_s)
                    warned = True
                await asyncio.sleep(0.5)
        self.replica_manager.broker_epoch = self.broker_epoch
        # (cluster up's launcher waits for this line: its words stay)
        log.log(self.zk.routine_level, "broker %d registered in ZooKeeper as %s (broker epoch %d)", self.node_id,
                ",".join(ep.connection_string for ep in endpoints), self.broker_epoch)

    def _on_zk_state(self, state):
        """Kazoo's thread: hand over to the loop."""
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._zk_state, state)

    def _zk_state(self, state):
        if self._closed:
            return
        if state == "lost":
            log.warning("broker %d: ZooKeeper session expired; the cluster treats this broker as dead", self.node_id)
            self._session_lost = True
            self.controller._resign("ZooKeeper session expired")
        elif state == "connected" and self._session_lost:
            self._session_lost = False
            self.loop.create_task(self._reregister())

    async def _reregister(self):
        try:
            await self._register()
        except Exception:  # noqa: BLE001 - the next reconnect tries again
            log.exception("broker %d: registering again failed", self.node_id)
            return
        self.controller._enqueue("elect")

    # -- what the controller's requests change ----------------------------------------------------------
    def apply_metadata(self, controller_id, brokers, states, deleted):
        self.metadata_cache.update(controller_id, brokers, states, deleted)
        self.replica_manager.live_brokers_changed()
        for b in brokers:
            fetcher = self.replica_manager.fetchers.get(b.node_id)
            if fetcher is not None:
                fetcher.channel.update_address(b.host, b.port)
        self.broker.refresh_topics(self.metadata_cache, deleted)

    def topic_configs(self, topic):
        """The topic's config overrides from ZooKeeper (/config/topics/T), for a new log."""
        try:
            return supported_overrides(topic, self.zk.get_topic_configs(topic) or {})
        except Exception as e:  # noqa: BLE001 - the broker defaults serve until the next change
            log.warning("%s: topic configs not read from ZooKeeper (%s); using the broker defaults", topic, e)
            return {}

    # -- admin operations through ZooKeeper ----------------------------------------------------------
    def create_topic(self, name, num_partitions, replication_factor, configs, assignments, topic_id,
                     validate_only=False):
        """Writes the topic's assignment and configs; the controller does the rest. Blocking
        (a ZooKeeper round trip), bounded by the session timeout."""
        live = self.metadata_cache.brokers
        racks = {b: e.rack for b, e in live.items()}
        if assignments:
            assignment = {p: list(r) for p, r in assignments}
            for p, replicas in assignment.items():
                if len(set(replicas)) != len(replicas):
                    raise InvalidReplicaAssignmentError(f"partition {p} lists a broker twice: {replicas}")
                unknown = [r for r in replicas if r not in live]
                if unknown:
                    raise InvalidReplicaAssignmentError(f"partition {p} is assigned to unknown brokers {unknown}")
            if len({len(r) for r in assignment.values()}) > 1:
                raise InvalidReplicaAssignmentError("partitions have different replication factors")
        else:
            if replication_factor <= 0:
                raise InvalidReplicationFactorError(f"replication factor {replication_factor} must be larger than 0")
            if not live:
                raise InvalidReplicationFactorError("no live brokers are known yet")
            assignment = assign_replicas(list(live), num_partitions, replication_factor, racks)
        if validate_only:
            return assignment
        try:
            self.zk.create_topic(name, assignment, {k: str(v) for k, v in (configs or {}).items()},
                                 uuid_to_text(topic_id))
        except Exception as e:
            if type(e).__name__ in ("TopicExistsError", "NodeExistsError"):
                raise TopicAlreadyExistsError(f"topic '{name}' already exists") from None
            raise
        return assignment

    def delete_topic(self, name):
        if name not in self.metadata_cache.partition_counts:
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        self.zk.delete_topic_request(name)

    def create_partitions(self, name, count, validate_only=False, assignments=None):
        """Adds partitions to the topic znode (conditional on its version, so two writers cannot
        lose each other's partitions); the controller's watch on the znode does the rest.
        Returns {partition: replicas} of the new partitions. Blocking (ZooKeeper round trips)."""
        for _attempt in range(5):
            found = self.zk.get_topic_assignment(name)
            if found is None:
                raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
            parts = dict(found.partitions)
            if any(a.adding_replicas or a.removing_replicas for a in parts.values()):
                raise ReassignmentInProgressError(f"a reassignment of topic '{name}' is in progress")
            current = len(parts)
            if count <= current:
                raise InvalidPartitionsError(f"topic '{name}' has {current} partitions; {count} is not an increase")
            rf = len(parts[min(parts)].replicas)
            if assignments:
                new = {current + i: list(r) for i, r in enumerate(assignments)}
                for p, replicas in new.items():
                    if len(replicas) != rf:
                        raise InvalidReplicaAssignmentError(
                            f"partition {p} is given {len(replicas)} replicas; the topic's replication factor is {rf}")
            else:
                live = self.metadata_cache.brokers
                placed = assign_replicas(list(live), count, rf, {b: e.rack for b, e in live.items()})
                new = {p: placed[p] for p in range(current, count)}
            if validate_only:
                return new
            parts.update({p: ReplicaAssignment(tuple(r)) for p, r in new.items()})
            try:
                self.zk.set_topic_assignment(name, parts, found.topic_id, found.zk_version)
            except ZkVersionMismatchError:
                continue  # another writer (the controller, a reassignment) was first: read again
            log.info("topic %s: partitions %s added in ZooKeeper", name, new)
            return new
        raise InvalidPartitionsError(f"topic '{name}' kept changing in ZooKeeper; try again")

    # -- stopping --------------------------------------------------------------------------------------
    def _serving_its_metadata(self):
        """Known to the controller, and leading every partition its metadata says it leads."""
        if self.node_id not in self.metadata_cache.brokers or not self.replica_manager.roles_received:
            return False
        led = self.replica_manager.partitions
        for key, st in list(self.metadata_cache.partitions.items()):
            if st.leader == self.node_id and (key not in led or not led[key].is_leader):
                return False
        return True

    async def update_advertised(self, endpoints):
        """New addresses for this broker (the embedded broker serving a socket after it
        started): the registration is rewritten and the controller tells every broker."""
        self.advertised = tuple(endpoints)
        await self.loop.run_in_executor(None, self.zk.update_broker_registration, self.advertised)
        if self.controller.active:
            self.controller.broker_registration_changed()

    async def controlled_shutdown(self):
        """Asks the controller to move this broker's leaderships away; True when it did."""
        cfg = self.broker.config
        if not cfg["controlled.shutdown.enable"]:
            return False
        for attempt in range(cfg["controlled.shutdown.max.retries"] + 1):
            if attempt:
                await asyncio.sleep(min(cfg["controlled.shutdown.retry.backoff.ms"] / 1000, 1.0))
            controller = self.metadata_cache.controller_id
            if controller == self.node_id and self.controller.active:
                remaining = await self.controller.controlled_shutdown(self.node_id, self.broker_epoch)
            else:
                ep = self.metadata_cache.brokers.get(controller)
                if ep is None:
                    continue
                channel = self.broker.channels.open(controller, ep.host, ep.port, client_id=f"broker-{self.node_id}")
                try:
                    resp = await channel.call(ApiKey.CONTROLLED_SHUTDOWN, CONTROLLED_SHUTDOWN_VERSION,
                                              ControlledShutdownRequest(broker_id=self.node_id,
                                                                        broker_epoch=self.broker_epoch), 30)
                except BrokerChannelError as e:
                    log.info("controlled shutdown: %s", e)
                    continue
                finally:
                    channel.close()
                if resp.error_code:
                    log.info("controlled shutdown: controller answered error %d", resp.error_code)
                    continue
                remaining = [(r.topic_name, r.partition_index) for r in resp.remaining_partitions]
            if not remaining:
                log.log(self.zk.routine_level, "controlled shutdown of broker %d: leaderships moved", self.node_id)
                # wait until the new leaders' LeaderAndIsr reached us, so we stop as a follower
                for _ in range(100):
                    if not any(p.is_leader for p in self.replica_manager.partitions.values()):
                        break
                    await asyncio.sleep(0.02)
                return True
            log.info("controlled shutdown: %d partitions could not move yet", len(remaining))
        return False

    def controller_gauges(self):
        """(active, offline partitions, topics, partitions) as this broker's controller reports
        them (zeros on a broker that is not the controller)."""
        c = self.controller
        if not c.active:
            return False, 0, 0, 0
        return True, len(c.offline), len(c.assignments), sum(len(a) for a in c.assignments.values())

    def unclean_leader_elections(self) -> int:
        """Leaders this broker's controller elected from outside the ISR since it started."""
        return self.controller.unclean_leader_elections

    def health(self):
        """None while registered in ZooKeeper, else why not (one line)."""
        if self._session_lost:
            return "the ZooKeeper session expired; not registered"
        if self.broker_epoch < 0:
            return "not registered in ZooKeeper yet"
        return None

    def shutdown(self):
        self._closed = True
        self.config_manager.shutdown()
        if self.acl_store is not None:
            self.acl_store.shutdown()
        self.controller.shutdown()
        self.replica_manager.shutdown()
        try:
            self.zk.close()
        except Exception:  # noqa: BLE001 - stopping anyway
            log.exception("closing the ZooKeeper client failed")
