"""Kafka's KafkaController in ZooKeeper mode: one broker of the cluster, elected through the
ephemeral /controller znode, that decides every partition's leader and ISR and tells the
brokers with LeaderAndIsr, UpdateMetadata and StopReplica. Kafka 2.x-3.x's
controller/KafkaController.scala is the model; docs/cluster.md describes the design.

- Election: every broker watches /controller; when it is free each tries to create it, the
  winner increments /controller_epoch (a conditional update: two winners cannot both succeed)
  and every request it sends carries that epoch, so brokers ignore a deposed controller.
- Events are handled one at a time, in order (Kafka's ControllerEventManager): a broker joining
  or leaving (/brokers/ids), topics created (/brokers/topics) or marked for deletion
  (/admin/delete_topics), ISR changes announced by leaders (/isr_change_notification), a
  broker's controlled shutdown, and the controller moving.
- Leader election is clean by default: the first live replica of the assignment that is in the
  ISR (the preferred replica first). With none, the partition stays offline until an ISR member
  returns, unless ``unclean.leader.election.enable`` (topic or broker) lets any live replica
  take over, losing what only the dead ISR had.
- A broker that dies leaves the ISR of the partitions it followed; a new leader epoch is
  written for each partition changed, and the live replicas learn it through LeaderAndIsr.
- Broker epochs (KIP-380): a broker's epoch is the czxid of its /brokers/ids/N registration. A
  registration with a new epoch is a bounce, handled as a death and a start. A new controller
  has no earlier view to compare with, so at failover it compares each partition state's mzxid
  (a zxid too) with the epochs of its leader and ISR: a broker registered after the state was
  last written restarted without any controller handling it, and gets the same treatment (a new
  leader epoch, the bounced replicas out of the ISR until they catch up). Without it a leader
  that restarted in the gap between two controllers kept its epoch and its followers were never
  told to fetch from it again.
- A failed event resigns and frees /controller (Kafka's triggerControllerMove) so that a fresh
  term starts from ZooKeeper's state; ZooKeeper unreachable or a lost session is one warning line,
  and the election is retried until ZooKeeper answers.
- Every partition state the controller writes is conditional on the znode's version; a write
  that loses (a leader changed the ISR meanwhile) is re-read and decided again.
- Requests to a broker are sent in order on one connection and retried while the broker is
  live and this broker is still the controller (Kafka's RequestSendThread).
- Reassignment (KIP-455; AlterPartitionReassignments, or /admin/reassign_partitions as the
  ZooKeeper-era tool writes it): the partition's replicas become target + original, written
  to the topic znode with adding/removing replicas so a new controller resumes it; a new leader
  epoch tells every replica, the new ones start fetching; once the whole target is in the ISR
  the partition moves to the target (a new leader if the old one is not in it) and the removed
  replicas are stopped and deleted. A cancel (null replicas) goes back to the original.
- Partitions added to a topic (CreatePartitions writes the topic znode) are seen through a
  data watch on each topic znode (Kafka's PartitionModificationsHandler).
"""
from __future__ import annotations

import asyncio
import functools
import logging
import os

from ..errors import (InvalidReplicaAssignmentError, KafkaError, NoReassignmentInProgressError,
                      UnknownTopicOrPartitionError)
from ..protocol.api_table import ApiKey
from ..protocol.messages.leader_and_isr_request import (LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState,
                                                        LeaderAndIsrRequest, LeaderAndIsrTopicState)
from ..protocol.messages.stop_replica_request import (StopReplicaPartitionState, StopReplicaRequest,
                                                      StopReplicaTopicState)
from ..protocol.messages.update_metadata_request import (UpdateMetadataBroker, UpdateMetadataEndpoint,
                                                         UpdateMetadataPartitionState, UpdateMetadataRequest,
                                                         UpdateMetadataTopicState)
from ..protocol.wire import ZERO_UUID
from ..replication.broker_channel import BrokerChannelError
from ..protocol.kafka_uuid import uuid_from_text
from .zk_data import SECURITY_PROTOCOLS, ReplicaAssignment, TopicZNode, ZkDataError
from .zk_client import ControllerMovedError, UnknownTopicError, ZkError, ZkNodeExistsError, ZkVersionMismatchError

log = logging.getLogger("kafkacore.controller")

LEADER_AND_ISR_VERSION, STOP_REPLICA_VERSION, UPDATE_METADATA_VERSION = 5, 3, 7
NO_LEADER = -1
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders election types
UNKNOWN_TOPIC_OR_PARTITION, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE = 3, 84, 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
NOT_CONTROLLER_OR_RACE = 41  # NOT_CONTROLLER: the client retries against the controller
LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete: UpdateMetadata drops the partition
SEND_BACKOFF_S = 0.1
ELECT_RETRY_S = 1.0  # ZooKeeper unreachable: how soon the election is tried again
# A test hook: seconds a new controller waits between winning and reading the live brokers, so
# that tests can put a broker's restart in that gap deterministically (KIP-380's race).
FAILOVER_DELAY_ENV = "KAFKACORE_TEST_CONTROLLER_FAILOVER_DELAY_S"


def leader_after_bounce(replicas, leader, isr, live, bounced):
    """(leader, ISR) of a partition once its bounced replicas have left the ISR: the leader
    stays if it is live and did not restart; else the first live ISR member (in assignment
    order) that did not restart; else a live bounced ISR member alone (it was in the ISR and
    restarted with its log: it has every committed record). (None, None) when no ISR member is
    live (the offline-partition election decides)."""
    stayed = [r for r in isr if r in live and r not in bounced]
    if leader in stayed:
        return leader, stayed
    chosen = next((r for r in replicas if r in stayed), None)
    if chosen is not None:
        return chosen, stayed
    chosen = next((r for r in replicas if r in isr and r in live), None)
    return (chosen, [chosen]) if chosen is not None else (None, None)


class LeaderIsr:
    """A partition's state znode and its version."""

    __slots__ = ("leader", "leader_epoch", "isr", "controller_epoch", "zk_version", "mzxid")

    def __init__(self, leader, leader_epoch, isr, controller_epoch, zk_version, mzxid=-1):
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.isr = list(isr)
        self.controller_epoch = controller_epoch
        self.zk_version = zk_version
        self.mzxid = mzxid  # the zxid of the write read back; -1 for a state this term wrote

    def __repr__(self):
        return f"LeaderIsr(leader={self.leader}, epoch={self.leader_epoch}, isr={self.isr}, v{self.zk_version})"


class Reassignment:
    """A partition moving from ``original`` to ``target`` replicas (Kafka's ReplicaAssignment
    with adding/removing replicas)."""

    __slots__ = ("target", "original")

    def __init__(self, target, original):
        self.target = list(target)
        self.original = list(original)

    @property
    def adding(self):
        return [r for r in self.target if r not in self.original]

    @property
    def removing(self):
        return [r for r in self.original if r not in self.target]

    @property
    def full(self):
        """Every replica while it runs: the target first (its head is the preferred leader)."""
        return self.target + self.removing

    def __repr__(self):
        return f"Reassignment({self.original} -> {self.target})"


class LiveBroker:
    """A registered broker: ``host``/``port`` on the inter-broker listener (what the controller
    dials), ``endpoints`` every listener it registered (zk_data.EndPoint)."""

    __slots__ = ("node_id", "host", "port", "rack", "epoch", "endpoints")

    def __init__(self, node_id, host, port, rack, epoch, endpoints=()):
        self.node_id = node_id
        self.host = host
        self.port = port
        self.rack = rack
        self.epoch = epoch
        self.endpoints = tuple(endpoints)

    @classmethod
    def from_info(cls, info, inter_broker_listener):
        ep = info.endpoint(inter_broker_listener) if inter_broker_listener else None
        if ep is None:  # a broker without that listener: its first endpoint
            ep = info.endpoints[0] if info.endpoints else None
        return cls(info.broker_id, ep.host if ep else None, ep.port if ep else -1, info.rack, info.epoch,
                   info.endpoints)


class KafkaController:
    def __init__(self, broker, zk):
        self.broker = broker
        self.zk = zk
        self.node_id = broker.node_id
        self.config = broker.config
        # the listener brokers dial each other on (None on a single node: its first)
        self._inter_broker_listener = broker.config.inter_broker_listener_name
        self.active = False
        self.epoch = -1
        self.epoch_zk_version = -1
        self.controller_id = NO_LEADER
        self.live: dict[int, LiveBroker] = {}
        self.assignments: dict[str, dict[int, list]] = {}
        self.topic_ids: dict[str, bytes] = {}
        self.topic_configs: dict[str, dict] = {}
        self.states: dict[tuple, LeaderIsr] = {}
        self.deleting: set = set()
        self.offline: set = set()  # partitions with no live leader that could be elected
        # leaders written from outside the ISR (Kafka's ControllerStats UncleanLeaderElectionsPerSec)
        self.unclean_leader_elections = 0
        self.shutting_down: set = set()
        self.reassignments: dict[tuple, Reassignment] = {}
        self.zk_reassignments: set = set()  # keys asked through /admin/reassign_partitions
        self._topic_watches: dict = {}
        self._events: asyncio.Queue | None = None
        self._task = None
        self._senders: dict[int, "_BrokerSender"] = {}
        self._generation = 0  # bumped on resignation: late watch callbacks of an old term are ignored
        self._watches = []
        self._zk_failing = False  # a ZooKeeper failure was logged; the next ones only at debug
        self.loop = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self, loop):
        """Starts the event loop and the watch on /controller; tries to become controller."""
        self.loop = loop
        self._events = asyncio.Queue()
        self._task = loop.create_task(self._process_events())
        self._rebalancer = (loop.create_task(self._rebalance_timer())
                            if self.config["auto.leader.rebalance.enable"] else None)
        self._enqueue("watch_controller")

    async def _on_watch_controller(self):
        # the watch fires at once with the current state, and then on every change of /controller
        await self._zk(self.zk.watch_data, "/controller", lambda *_a: self._enqueue("elect"))

    def shutdown(self):
        self._resign("shutting down")
        if self._task is not None:
            self._task.cancel()
        if getattr(self, "_rebalancer", None) is not None:
            self._rebalancer.cancel()

    def _enqueue(self, kind, *args, generation=None):
        """Thread-safe: kazoo's callbacks arrive on its own thread."""
        if self.loop is None or self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self._events.put_nowait, (kind, args, generation))

    def broker_registration_changed(self):
        """A broker rewrote its registration (ClusterNode.update_advertised): read them again."""
        self._enqueue("broker_change")

    async def _zk(self, fn, *args):
        return await self.loop.run_in_executor(None, fn, *args)

    async def _fenced(self, fn, *args):
        """A write of this controller's term: conditional on /controller_epoch's zk version, so
        a deposed controller's write fails (ControllerMovedError resigns)."""
        try:
            return await self.loop.run_in_executor(
                None, functools.partial(fn, *args, expected_controller_epoch_zk_version=self.epoch_zk_version))
        except ControllerMovedError:
            self._resign("a newer controller was elected")
            raise

    async def _process_events(self):
        while True:
            kind, args, generation = await self._events.get()
            if generation is not None and generation != self._generation:
                continue  # a watch of an earlier term
            try:
                await getattr(self, f"_on_{kind}")(*args)
                self._zk_failing = False
            except asyncio.CancelledError:
                raise
            except ZkError as e:
                # ZooKeeper unreachable, our session gone (a pause longer than the session
                # timeout), or a newer controller: no view of ours can be trusted now
                log.log(logging.DEBUG if self._zk_failing else logging.WARNING,
                        "controller event %s: %s; %s", kind, e,
                        "resigning" if self.active else f"electing again in {ELECT_RETRY_S:.0f} s")
                self._zk_failing = True
                self._resign(f"ZooKeeper failed during {kind}")
                self.loop.call_later(ELECT_RETRY_S, self._enqueue, "elect")
            except Exception:  # noqa: BLE001 - one failed event must not stop the controller
                log.exception("controller event %s failed", kind)
                if kind != "elect":
                    # our view may be stale: start a new term from ZooKeeper's state
                    self._resign("an event failed")
                    self._enqueue("elect")

    # -- election -----------------------------------------------------------------------------------
    async def _on_elect(self):
        controller = await self._zk(self.zk.get_controller_id)
        if controller == self.node_id and self.active:
            return
        if controller == self.node_id and self.epoch_zk_version >= 0:
            # /controller still names us after we resigned (an event failed, or ZooKeeper was
            # unreachable for less than a session): free it, fenced by the term we held; the
            # deletion fires the watch of every broker and a new election follows
            log.info("broker %d frees /controller after resigning", self.node_id)
            try:
                await self._zk(functools.partial(self.zk.delete_controller,
                                                 expected_controller_epoch_zk_version=self.epoch_zk_version))
            except ControllerMovedError:
                pass  # a newer term exists: its controller's /controller follows
            return
        if controller is not None and controller >= 0:
            if self.active and controller != self.node_id:
                self._resign(f"broker {controller} is the controller now")
            self.controller_id = controller
            return
        election = await self._zk(self.zk.try_elect_controller, self.node_id)
        self.controller_id = election.controller_id if election.controller_id is not None else NO_LEADER
        if not election.elected:
            return
        # the win and the epoch's increment are one multi-op; the epoch's zk version fences
        # every later write of this term
        self.epoch, self.epoch_zk_version = election.epoch, election.epoch_zk_version
        log.log(self.zk.routine_level, "broker %d is the controller (epoch %d)", self.node_id, self.epoch)
        self.active = True
        await self._failover()

    def _resign(self, why):
        if not self.active:
            return
        log.log(self.zk.routine_level, "broker %d stops being the controller: %s", self.node_id, why)
        self.active = False
        self._generation += 1
        for w in self._watches + list(self._topic_watches.values()):
            w.cancel()
        self._watches = []
        self._topic_watches = {}
        self.reassignments.clear()
        self.zk_reassignments.clear()
        for s in self._senders.values():
            s.close()
        self._senders.clear()
        self.live.clear()
        self.states.clear()
        self.assignments.clear()
        self.deleting.clear()
        self.offline.clear()

    async def _failover(self):
        gen = self._generation
        watches = (("/brokers/ids", "broker_change"), ("/brokers/topics", "topic_change"),
                   ("/admin/delete_topics", "topic_deletion"), ("/isr_change_notification", "isr_change"))
        for path, kind in watches:
            w = await self._zk(self.zk.watch_children, path,
                               lambda _children, kind=kind: self._enqueue(kind, generation=gen))
            self._watches.append(w)
        delay = float(os.environ.get(FAILOVER_DELAY_ENV) or 0)
        if delay > 0:
            log.warning("test hook %s: waiting %.1f s before reading the live brokers", FAILOVER_DELAY_ENV, delay)
            await asyncio.sleep(delay)
        self.live = await self._read_live_brokers()
        for b in self.live.values():
            self._sender(b)
        for topic in await self._zk(self.zk.get_all_topics):
            await self._load_topic(topic)
        # partitions without a state get one; replicas that restarted unseen get a new leader
        # epoch; partitions whose leader is gone get a new leader
        await self._initialize_new_partitions(list(self.states_missing()))
        await self._restart_bounced_replicas()
        await self._elect_offline_partitions()
        # replicas on brokers that are not live leave the ISRs (Kafka's replica state machine
        # starts them as OfflineReplica)
        dead = {r for parts in self.assignments.values() for rs in parts.values() for r in rs} - set(self.live)
        if dead:
            await self._remove_from_isr(dead)
        self._send_update_metadata(list(self.live), list(self.states))
        for b in list(self.live):
            self._send_leader_and_isr(b, [k for k in self.states if b in self._replicas(k)], full=True)
        await self._on_topic_deletion()
        # reassignments a former controller left running: done ones finish now
        for key in list(self.reassignments):
            await self._maybe_complete_reassignment(key)
        w = await self._zk(self.zk.watch_data, "/admin/reassign_partitions",
                           lambda *_a: self._enqueue("zk_reassignment", generation=gen))
        self._watches.append(w)

    def states_missing(self):
        for topic, parts in self.assignments.items():
            for p in parts:
                if (topic, p) not in self.states:
                    yield (topic, p)

    # -- ZooKeeper reads ---------------------------------------------------------------------------
    async def _read_live_brokers(self):
        out = {}
        for bid in await self._zk(self.zk.get_all_broker_ids):
            info = await self._zk(self.zk.get_broker, bid)
            if info is not None:
                out[bid] = LiveBroker.from_info(info, self._inter_broker_listener)
        return out

    async def _load_topic(self, topic):
        found = await self._zk(self.zk.get_topic_assignment, topic)
        if found is None:
            return
        assignment, topic_id = found
        self.assignments[topic] = {int(p): list(r) for p, r in assignment.items()}
        for p, a in found.partitions.items():
            if a.adding_replicas or a.removing_replicas:
                self.reassignments[(topic, int(p))] = Reassignment(
                    [r for r in a.replicas if r not in a.removing_replicas],
                    [r for r in a.replicas if r not in a.adding_replicas])
        if topic not in self._topic_watches:
            gen = self._generation
            self._topic_watches[topic] = await self._zk(
                self.zk.watch_data, TopicZNode.path(topic),
                lambda data, _stat, t=topic: data is not None and self._enqueue("partition_modification", t,
                                                                                 generation=gen))
        self.topic_configs[topic] = await self._zk(self.zk.get_topic_configs, topic)
        if topic_id is not None:
            self.topic_ids[topic] = uuid_from_text(topic_id)
        for p in self.assignments[topic]:
            await self._refresh_state(topic, p)

    async def _refresh_state(self, topic, p):
        found = await self._zk(self.zk.get_partition_state_and_zxid, topic, p)
        if found is None:
            self.states.pop((topic, p), None)
            return None
        st, version, mzxid = found
        li = LeaderIsr(st.leader, st.leader_epoch, st.isr, st.controller_epoch, version, mzxid)
        self.states[(topic, p)] = li
        return li

    def _replicas(self, key):
        return self.assignments.get(key[0], {}).get(key[1], [])

    def _unclean_allowed(self, topic):
        configs = self.topic_configs.get(topic, {})
        value = configs.get("unclean.leader.election.enable")
        if value is None:
            return self.broker.log_manager.default_config.unclean_leader_election_enable
        return str(value).lower() == "true"

    # -- partition state changes ---------------------------------------------------------------------
    async def _initialize_new_partitions(self, keys):
        """NewPartition -> OnlinePartition: leader = the first live replica, ISR = the live ones."""
        changed = set()
        for key in keys:
            replicas = self._replicas(key)
            live = [r for r in replicas if r in self.live and r not in self.shutting_down]
            if not live:
                log.warning("%s-%d: no replica is live; it stays offline", *key)
                continue
            try:
                await self._fenced(self.zk.create_partition_state, key[0], key[1], live[0], 0, live, self.epoch)
            except ZkNodeExistsError:
                pass  # written by an earlier controller's term: read it
            except UnknownTopicError:
                continue  # deleted meanwhile
            if await self._refresh_state(*key) is not None:
                changed.add(key)
        return changed

    async def _write_state(self, key, leader, isr, old):
        """A new leader epoch for key, conditional on the version we read; on a lost race the
        state is re-read and None returned (the caller decides again)."""
        try:
            version = await self._fenced(self.zk.update_leader_and_isr, key[0], key[1], leader, old.leader_epoch + 1,
                                         isr, self.epoch, old.zk_version)
        except ZkVersionMismatchError as e:
            log.info("%s-%d: state write lost a race (%s); re-reading", key[0], key[1], e)
            await self._refresh_state(*key)
            return None
        li = LeaderIsr(leader, old.leader_epoch + 1, isr, self.epoch, version)
        self.states[key] = li
        return li

    def _elect_leader(self, key, li, avoid=()):
        """(leader, isr) by Kafka's clean rule, unclean when allowed; (None, None) for none."""
        replicas = self._replicas(key)
        live_isr = [r for r in li.isr if r in self.live and r not in avoid]
        for r in replicas:
            if r in live_isr:
                return r, [x for x in li.isr if x in self.live and x not in avoid]
        if self._unclean_allowed(key[0]):
            for r in replicas:
                if r in self.live and r not in avoid:
                    log.warning("%s-%d: unclean election of broker %d (ISR %s is gone): records only the old "
                                "ISR had are lost", key[0], key[1], r, li.isr)
                    return r, [r]
        return None, None

    async def _elect_offline_partitions(self):
        changed = set()
        for key, li in list(self.states.items()):
            if key[0] in self.deleting:
                continue
            if key not in self.offline and li.leader in self.live and li.leader not in self.shutting_down:
                continue
            for _attempt in range(3):
                leader, isr = self._elect_leader(key, li)
                if leader is None:
                    if key not in self.offline:
                        log.warning("%s-%d: leader %d is gone and no ISR member %s is live; offline", key[0],
                                    key[1], li.leader, li.isr)
                    self.offline.add(key)
                    break
                # a new epoch even when the old leader itself returns: every replica must hear it
                new = await self._write_state(key, leader, isr, li)
                if new is not None:
                    log.info("%s-%d: leader %d -> %d, epoch %d, ISR %s", key[0], key[1], li.leader, leader,
                             new.leader_epoch, isr)
                    if leader not in li.isr:
                        self.unclean_leader_elections += 1
                    self.offline.discard(key)
                    changed.add(key)
                    break
                li = self.states.get(key)
                if li is None:
                    break
        return changed

    def _bounced(self, li):
        """The leader and ISR members whose registration (broker epoch) is newer than the
        partition state: they restarted after it was written, and no controller has written
        this partition since."""
        return {r for r in {li.leader, *li.isr}
                if li.mzxid >= 0 and r in self.live and self.live[r].epoch is not None and self.live[r].epoch > li.mzxid}

    async def _restart_bounced_replicas(self):
        """At failover: a partition whose leader or ISR members restarted unseen (see the module
        docstring) is handled as Kafka handles a bounced broker, a failure then a start. A
        bounced leader hands over to a live ISR member that did not restart, or, when there is
        none, keeps leading under a new epoch; bounced followers leave the ISR and rejoin once
        they have caught up. Either way every replica hears a new leader epoch."""
        changed = set()
        for key, li in list(self.states.items()):
            if key[0] in self.deleting:
                continue
            bounced = self._bounced(li)
            if not bounced:
                continue
            for _attempt in range(3):
                leader, isr = leader_after_bounce(self._replicas(key), li.leader, li.isr, self.live, bounced)
                if leader is None:
                    break  # no ISR member is live: _elect_offline_partitions decides
                new = await self._write_state(key, leader, isr, li)
                if new is not None:
                    # with one replica (a single node's partitions) this is every restart: no news
                    log.log(logging.INFO if len(self._replicas(key)) > 1 else logging.DEBUG,
                            "%s-%d: brokers %s restarted unseen (epochs newer than the state); leader %d -> %d, "
                            "epoch %d, ISR %s", key[0], key[1], sorted(bounced), li.leader, leader,
                            new.leader_epoch, isr)
                    changed.add(key)
                    break
                li = self.states.get(key)
                if li is None:
                    break
                bounced = self._bounced(li)
                if not bounced:
                    break
        return changed

    async def _remove_from_isr(self, brokers):
        """Followers that died leave the ISR of partitions whose leader lives."""
        changed = set()
        for key, li in list(self.states.items()):
            if key[0] in self.deleting or li.leader not in self.live:
                continue
            gone = [r for r in li.isr if r in brokers]
            if not gone or li.leader in brokers:
                continue
            for _attempt in range(3):
                isr = [r for r in li.isr if r not in brokers]
                new = await self._write_state(key, li.leader, isr, li)
                if new is not None:
                    changed.add(key)
                    break
                li = self.states.get(key)
                if li is None or li.leader not in self.live:
                    break
        return changed

    # -- events ---------------------------------------------------------------------------------------
    async def _on_broker_change(self):
        if not self.active:
            return
        now = await self._read_live_brokers()
        old = self.live
        dead = {b for b in old if b not in now or now[b].epoch != old[b].epoch}
        new = {b for b in now if b not in old or now[b].epoch != old[b].epoch}
        # Kafka's BrokerModifications: the same registration (epoch) with a new endpoint or rack
        moved = {b for b in now if b in old and b not in new and
                 (now[b].endpoints, now[b].rack) != (old[b].endpoints, old[b].rack)}
        if moved and not dead and not new:
            log.info("brokers %s changed their endpoints", sorted(moved))
            self.live = now
            for b in moved:
                s = self._senders.get(b)
                if s is not None:
                    s.channel.update_address(now[b].host, now[b].port)
            self._send_update_metadata(list(now), list(self.states))
            return
        if not dead and not new:
            return
        log.info("brokers: live %s (new %s, gone %s)", sorted(now), sorted(new), sorted(dead))
        for b in dead:
            s = self._senders.pop(b, None)
            if s is not None:
                s.close()
            self.shutting_down.discard(b)
        self.live = now
        for b in new:
            self._sender(now[b])
        changed = set()
        if dead:
            # leaders change ISRs without the controller (it hears of it up to
            # ISR_NOTIFICATION_INTERVAL_S later): decide on ZooKeeper's states, not the cache
            for key in [k for k in self.states if dead & set(self._replicas(k))]:
                await self._refresh_state(*key)
            changed |= await self._elect_offline_partitions()
            changed |= await self._remove_from_isr(dead)
        if new:
            # newcomers learn everything; partitions offline for want of them come back
            self._send_update_metadata(list(now), list(self.states))
            for b in new:
                self._send_leader_and_isr(b, [k for k in self.states if b in self._replicas(k)], full=True)
            changed |= await self._initialize_new_partitions(list(self.states_missing()))
            changed |= await self._elect_offline_partitions()
        if changed:
            self._announce(changed)
        elif dead:
            self._send_update_metadata(list(now), list(self.states))

    def _announce(self, keys):
        """LeaderAndIsr to the live replicas of each changed partition, UpdateMetadata to all."""
        by_broker = {}
        for key in keys:
            for r in self._replicas(key):
                if r in self.live and r not in self.shutting_down:
                    by_broker.setdefault(r, []).append(key)
        for b, ks in by_broker.items():
            self._send_leader_and_isr(b, ks)
        self._send_update_metadata(list(self.live), list(keys))

    async def _on_topic_change(self):
        if not self.active:
            return
        topics = set(await self._zk(self.zk.get_all_topics))
        new_topics = [t for t in topics if t not in self.assignments]
        for t in new_topics:
            await self._load_topic(t)
        keys = [k for k in self.states_missing() if k[0] in new_topics]
        changed = await self._initialize_new_partitions(keys)
        if changed:
            log.info("new topics %s", sorted(new_topics))
            self._announce(changed)

    async def _on_topic_deletion(self):
        if not self.active:
            return
        for topic in await self._zk(self.zk.get_topic_deletions):
            if topic not in self.assignments:
                await self._fenced(self.zk.delete_topic_znodes, topic)
                continue
            self.deleting.add(topic)
            keys = [(topic, p) for p in self.assignments[topic]]
            by_broker = {}
            for key in keys:
                for r in self._replicas(key):
                    if r in self.live:
                        by_broker.setdefault(r, []).append(key)
            for b, ks in by_broker.items():
                self._send_stop_replica(b, ks, delete=True)
            self._send_update_metadata(list(self.live), keys, deleting=True)
            await self._fenced(self.zk.delete_topic_znodes, topic)
            for key in keys:
                self.states.pop(key, None)
                self.offline.discard(key)
                self.reassignments.pop(key, None)
                self.zk_reassignments.discard(key)
            w = self._topic_watches.pop(topic, None)
            if w is not None:
                w.cancel()
            self.assignments.pop(topic, None)
            self.topic_ids.pop(topic, None)
            self.deleting.discard(topic)
            log.info("deleted topic %s", topic)

    async def _on_isr_change(self):
        if not self.active:
            return
        keys = await self._fenced(self.zk.take_isr_change_notifications)
        changed = []
        for key in keys:
            if key[0] in self.assignments and await self._refresh_state(*key) is not None:
                changed.append(key)
        if changed:
            self._send_update_metadata(list(self.live), changed)
        for key in changed:
            if key in self.reassignments:
                await self._maybe_complete_reassignment(key)

    async def _request(self, kind, *args):
        """An event answered to its requester: ``_on_<kind>(*args, fut)`` resolves fut."""
        fut = self.loop.create_future()
        self._enqueue(kind, *args, fut)
        return await fut

    async def controlled_shutdown(self, broker_id, broker_epoch):
        """ControlledShutdown: moves leadership off the broker and takes it out of the ISRs.
        Returns the partitions it still leads (none when every one could move)."""
        return await self._request("controlled_shutdown", broker_id, broker_epoch)

    async def _on_controlled_shutdown(self, broker_id, broker_epoch, fut):
        try:
            if not self.active:
                raise RuntimeError("not the controller")
            b = self.live.get(broker_id)
            if b is None:
                raise RuntimeError(f"broker {broker_id} is not live")
            self.shutting_down.add(broker_id)
            changed, remaining = set(), []
            # a partition whose only replica is this broker has nowhere to move: left out, as
            # Kafka's controller leaves out replication factor 1 (a single node stops at once)
            hosted = [k for k in self.states if broker_id in self._replicas(k) and k[0] not in self.deleting
                      and len(self._replicas(k)) > 1]
            for key in hosted:
                await self._refresh_state(*key)  # the ISR as the leaders last wrote it
            for key in hosted:
                li = self.states.get(key)
                if li is None:
                    continue
                if li.leader == broker_id:
                    leader, isr = self._elect_leader(key, li, avoid={broker_id})
                    if leader is None or self._unclean_replica(li, leader):
                        remaining.append(key)
                        continue
                    new = await self._write_state(key, leader, isr, li)
                    if new is None:
                        remaining.append(key)
                        continue
                    changed.add(key)
                elif broker_id in li.isr and len(li.isr) > 1:
                    new = await self._write_state(key, li.leader, [r for r in li.isr if r != broker_id], li)
                    if new is not None:
                        changed.add(key)
            if changed:
                self._announce(changed)
            # the stopping broker stops fetching (Kafka's OfflineReplica): a follower that kept
            # fetching would be taken back into the ISRs it just left
            stopped = [k for k in hosted if k not in remaining]
            if stopped:
                self._send_stop_replica(broker_id, stopped, delete=False)
            fut.set_result(remaining)
        except Exception as e:  # noqa: BLE001 - answered to the shutting-down broker
            if not fut.done():
                fut.set_exception(e)

    def _unclean_replica(self, li, leader):
        return leader not in li.isr

    # -- topic config changes -------------------------------------------------------------------------
    def topic_config_changed(self, topic, overrides):
        """The topic's overrides changed in ZooKeeper (the config manager of this broker saw the
        notification): the controller's cache learns them; turning unclean leader election on
        elects the topic's offline partitions now (Kafka's TopicUncleanLeaderElectionEnable)."""
        self._enqueue("topic_config_change", topic, dict(overrides))

    async def _on_topic_config_change(self, topic, overrides):
        if not self.active or topic not in self.assignments:
            return  # a controller elected later (or loading the topic) reads the configs itself
        self.topic_configs[topic] = overrides
        if not self._unclean_allowed(topic) or not any(k[0] == topic for k in self.offline):
            return
        changed = await self._elect_offline_partitions()
        if changed:
            log.info("topic %s: unclean.leader.election.enable turned on; offline partitions elected: %s", topic,
                     sorted(changed))
            self._announce(changed)

    # -- partitions added to a topic ------------------------------------------------------------------
    async def _on_partition_modification(self, topic):
        if not self.active or topic not in self.assignments or topic in self.deleting:
            return
        found = await self._zk(self.zk.get_topic_assignment, topic)
        if found is None:
            return
        new = sorted(int(p) for p in found.partitions if int(p) not in self.assignments[topic])
        if not new:
            return  # our own reassignment writes land here too
        for p in new:
            self.assignments[topic][p] = list(found.partitions[p].replicas)
        changed = await self._initialize_new_partitions([(topic, p) for p in new])
        log.info("%s: partitions %s added", topic, new)
        if changed:
            self._announce(changed)

    # -- reassignment (KIP-455) --------------------------------------------------------------------
    async def alter_reassignments(self, requests):
        """AlterPartitionReassignments: requests {(topic, partition): target replicas, or None
        to cancel}; returns {(topic, partition): (error code, message)}."""
        return await self._request("alter_reassignments", requests)

    def list_reassignments(self, keys=None):
        """{(topic, partition): (replicas, adding, removing)} of the reassignments running."""
        return {key: (r.full, r.adding, r.removing) for key, r in sorted(self.reassignments.items())
                if keys is None or key in keys}

    async def _on_alter_reassignments(self, requests, fut):
        try:
            if not self.active:
                raise RuntimeError("not the controller")
            results = {}
            for key, target in requests.items():
                try:
                    if target is None:
                        await self._cancel_reassignment(key)
                    else:
                        await self._start_reassignment(key, list(target))
                    results[key] = (0, None)
                except KafkaError as e:
                    results[key] = (e.code, e.message)
            fut.set_result(results)
        except Exception as e:  # noqa: BLE001 - answered to the requester
            if not fut.done():
                fut.set_exception(e)

    def _check_target(self, key, target):
        if key[0] not in self.assignments or key[1] not in self.assignments[key[0]] or key[0] in self.deleting:
            raise UnknownTopicOrPartitionError(f"{key[0]}-{key[1]} does not exist")
        if not target:
            raise InvalidReplicaAssignmentError(f"{key[0]}-{key[1]}: the target replica list is empty")
        if len(set(target)) != len(target):
            raise InvalidReplicaAssignmentError(f"{key[0]}-{key[1]}: the target {target} names a broker twice")
        gone = [r for r in target if r not in self.live]
        if gone:
            raise InvalidReplicaAssignmentError(
                f"{key[0]}-{key[1]}: brokers {gone} of the target {target} are not live (live: {sorted(self.live)})")

    async def _start_reassignment(self, key, target):
        self._check_target(key, target)
        current = self.reassignments.get(key)
        if current is not None and current.target == target:
            return
        original = current.original if current is not None else list(self._replicas(key))
        if current is None and target == original:
            return  # already there
        new = Reassignment(target, original)
        # replicas an earlier reassignment of this partition was adding, which this one drops
        dropped = [r for r in (current.adding if current is not None else []) if r not in new.full]
        await self._write_topic_partition(key, new)
        self.assignments[key[0]][key[1]] = new.full
        self.reassignments[key] = new
        log.info("%s-%d: reassignment %s -> %s started (adding %s, removing %s)", key[0], key[1], original, target,
                 new.adding, new.removing)
        li = self.states.get(key)
        if li is not None:
            # a new leader epoch: every replica, the new ones first of all, learns the replica set
            await self._move_partition(key, new.full, li)
        for b in dropped:
            self._send_stop_replica(b, [key], delete=True)
        await self._maybe_complete_reassignment(key)

    async def _cancel_reassignment(self, key):
        current = self.reassignments.get(key)
        if current is None:
            if key[0] not in self.assignments or key[1] not in self.assignments[key[0]]:
                raise UnknownTopicOrPartitionError(f"{key[0]}-{key[1]} does not exist")
            raise NoReassignmentInProgressError(f"no reassignment of {key[0]}-{key[1]} is in progress")
        log.info("%s-%d: reassignment %s cancelled", key[0], key[1], current)
        await self._finish_reassignment(key, current.original, current.adding)

    async def _maybe_complete_reassignment(self, key):
        r = self.reassignments.get(key)
        li = self.states.get(key)
        if r is None or li is None or not all(b in li.isr for b in r.target):
            return
        await self._finish_reassignment(key, r.target, r.removing)

    async def _finish_reassignment(self, key, replicas, removing):
        """The partition's replicas become ``replicas``; ``removing`` are stopped and deleted."""
        self.assignments[key[0]][key[1]] = list(replicas)
        li = self.states.get(key)
        if li is not None:
            await self._move_partition(key, replicas, li)
        self.reassignments.pop(key, None)
        await self._write_topic_partition(key, None)
        for b in removing:
            self._send_stop_replica(b, [key], delete=True)
        log.info("%s-%d: reassignment done: replicas %s, removed %s", key[0], key[1], replicas, removing)
        if key in self.zk_reassignments:
            self.zk_reassignments.discard(key)
            await self._sync_zk_reassignments()

    async def _move_partition(self, key, replicas, li):
        """A new leader epoch for the replica set ``replicas``: the ISR is cut to it and the leader
        kept when it is in it and live, otherwise elected from it; LeaderAndIsr to the replicas."""
        for _attempt in range(3):
            isr = [r for r in li.isr if r in replicas]
            if li.leader in replicas and li.leader in self.live and li.leader not in self.shutting_down:
                leader = li.leader
            else:
                leader, elected_isr = self._elect_leader(key, LeaderIsr(li.leader, li.leader_epoch, isr,
                                                                        li.controller_epoch, li.zk_version))
                if leader is None:
                    leader = NO_LEADER
                    self.offline.add(key)
                    log.warning("%s-%d: no replica of %s is live and in the ISR %s: offline", key[0], key[1],
                                replicas, li.isr)
                else:
                    isr = elected_isr
            if not isr:
                isr = list(li.isr)  # an offline partition keeps its last ISR (Kafka does)
            new = await self._write_state(key, leader, isr, li)
            if new is not None:
                if leader != NO_LEADER:
                    self.offline.discard(key)
                    if leader not in li.isr:
                        self.unclean_leader_elections += 1
                self._announce({key})
                return
            li = self.states.get(key)
            if li is None:
                return
        log.warning("%s-%d: the partition kept changing; the reassignment's state waits for the next event", *key)

    async def _write_topic_partition(self, key, reassignment):
        """The topic znode's entry for key: target + original with adding/removing while
        ``reassignment`` runs, the plain replica list when None. Conditional on the znode's
        version, so a CreatePartitions written meanwhile is kept."""
        topic, p = key
        for _attempt in range(5):
            found = await self._zk(self.zk.get_topic_assignment, topic)
            if found is None:
                raise UnknownTopicOrPartitionError(f"{topic}-{p} does not exist")
            parts = dict(found.partitions)
            if reassignment is None:
                parts[p] = ReplicaAssignment(tuple(self.assignments[topic][p]))
            else:
                parts[p] = ReplicaAssignment(tuple(reassignment.full), tuple(reassignment.adding),
                                             tuple(reassignment.removing))
            try:
                await self._fenced(self.zk.set_topic_assignment, topic, parts, found.topic_id, found.zk_version)
                return
            except ZkVersionMismatchError:
                continue
        raise RuntimeError(f"{TopicZNode.path(topic)} kept changing under the controller")

    async def _on_zk_reassignment(self):
        """/admin/reassign_partitions (kafka-reassign-partitions.sh --zookeeper): each entry is
        started as AlterPartitionReassignments would; the znode keeps what still runs and goes
        when all is done. Entries that cannot start are dropped from it, with a warning."""
        if not self.active:
            return
        try:
            wanted = await self._zk(self.zk.get_partition_reassignment)
        except ZkDataError as e:
            # not what the tool writes: dropped, or every later event would fail on it again
            log.error("/admin/reassign_partitions is malformed and is deleted: %s", e)
            await self._fenced(self.zk.delete_partition_reassignment)
            return
        if not wanted:
            return
        for key, target in sorted(wanted.items()):
            current = self.reassignments.get(key)
            if current is not None and current.target == list(target):
                self.zk_reassignments.add(key)
                continue
            try:
                self.zk_reassignments.add(key)
                await self._start_reassignment(key, list(target))
            except KafkaError as e:
                self.zk_reassignments.discard(key)
                log.warning("%s-%d: reassignment from %s refused: %s", key[0], key[1], "/admin/reassign_partitions",
                            e.message)
        await self._sync_zk_reassignments()

    async def _sync_zk_reassignments(self):
        running = {k: self.reassignments[k].target for k in self.zk_reassignments if k in self.reassignments}
        self.zk_reassignments = set(running)
        if running:
            await self._fenced(self.zk.set_partition_reassignment, running)
        else:
            await self._fenced(self.zk.delete_partition_reassignment)

    # -- ElectLeaders and preferred-leader rebalancing ------------------------------------------------
    async def elect_leaders(self, election_type, partitions):
        """ElectLeaders (KIP-460): {(topic, partition): (error code, message)} for ``partitions``
        (None: every partition). 0 = PREFERRED, 1 = UNCLEAN."""
        return await self._request("elect_leaders", election_type, partitions)

    async def _on_elect_leaders(self, election_type, partitions, fut):
        try:
            if not self.active:
                raise RuntimeError("not the controller")
            keys = list(self.states) if partitions is None else list(partitions)
            results, changed = {}, set()
            for key in keys:
                li = self.states.get(key)
                if li is None or key[0] in self.deleting:
                    results[key] = (UNKNOWN_TOPIC_OR_PARTITION, f"{key[0]}-{key[1]} does not exist")
                    continue
                if election_type == PREFERRED:
                    preferred = self._replicas(key)[0]
                    if li.leader == preferred and key not in self.offline:
                        results[key] = (ELECTION_NOT_NEEDED, "the preferred replica is the leader already")
                        continue
                    if preferred not in self.live or preferred not in li.isr or preferred in self.shutting_down:
                        results[key] = (PREFERRED_LEADER_NOT_AVAILABLE,
                                        f"the preferred replica {preferred} is not live or not in the ISR {li.isr}")
                        continue
                    leader, isr = preferred, [r for r in li.isr if r in self.live]
                else:
                    if li.leader in self.live and key not in self.offline:
                        results[key] = (ELECTION_NOT_NEEDED, f"broker {li.leader} leads the partition")
                        continue
                    live = [r for r in self._replicas(key) if r in self.live and r not in self.shutting_down]
                    if not live:
                        results[key] = (ELIGIBLE_LEADERS_NOT_AVAILABLE, "no replica is live")
                        continue
                    in_isr = [r for r in live if r in li.isr]
                    leader = (in_isr or live)[0]
                    isr = [r for r in li.isr if r in self.live] if in_isr else [leader]
                    if not in_isr:
                        log.warning("%s-%d: unclean election of broker %d asked by ElectLeaders", key[0], key[1],
                                    leader)
                new = await self._write_state(key, leader, isr, li)
                if new is None:
                    results[key] = (NOT_CONTROLLER_OR_RACE, "the partition changed meanwhile; try again")
                    continue
                self.offline.discard(key)
                if leader not in li.isr:
                    self.unclean_leader_elections += 1
                changed.add(key)
                results[key] = (0, None)
            if changed:
                self._announce(changed)
            fut.set_result(results)
        except Exception as e:  # noqa: BLE001 - answered to the requester
            if not fut.done():
                fut.set_exception(e)

    async def _on_rebalance_check(self):
        """Kafka's checkAndTriggerAutoLeaderRebalance: a broker that leads less than
        (100 - leader.imbalance.per.broker.percentage)% of the partitions it is preferred for
        gets them back, where it is live and in the ISR."""
        if not self.active:
            return
        allowed = self.config["leader.imbalance.per.broker.percentage"] / 100
        by_preferred = {}
        for key, li in self.states.items():
            replicas = self._replicas(key)
            if replicas and key[0] not in self.deleting:
                by_preferred.setdefault(replicas[0], []).append((key, li))
        todo = []
        for broker_id, items in by_preferred.items():
            if broker_id not in self.live or broker_id in self.shutting_down:
                continue
            not_led = [key for key, li in items if li.leader != broker_id]
            if items and len(not_led) / len(items) > allowed:
                todo += [key for key in not_led if broker_id in self.states[key].isr]
        if todo:
            log.info("preferred-leader rebalance of %d partitions", len(todo))
            await self._on_elect_leaders(PREFERRED, todo, self.loop.create_future())

    async def _rebalance_timer(self):
        interval = self.config["leader.imbalance.check.interval.seconds"]
        while True:
            await asyncio.sleep(interval)
            self._enqueue("rebalance_check")

    # -- requests to brokers -----------------------------------------------------------------------
    def _sender(self, b):
        s = self._senders.get(b.node_id)
        if s is None:
            s = self._senders[b.node_id] = _BrokerSender(self, b)
        return s

    def _partition_state(self, key, li, cls, **extra):
        return cls(partition_index=key[1], controller_epoch=li.controller_epoch, leader=li.leader,
                   leader_epoch=li.leader_epoch, isr=list(li.isr), replicas=list(self._replicas(key)), **extra)

    def _send_leader_and_isr(self, broker_id, keys, full=False):
        """full: keys are every partition the broker hosts (LeaderAndIsr type FULL, KIP-516);
        the broker deletes its logs of any other partition."""
        b = self.live.get(broker_id)
        if b is None or (not keys and not full):
            return
        topics = {}
        leaders = set()
        for key in keys:
            li = self.states.get(key)
            if li is None:
                continue
            r = self.reassignments.get(key)
            topics.setdefault(key[0], []).append(self._partition_state(
                key, li, LeaderAndIsrPartitionState, partition_epoch=li.zk_version,
                adding_replicas=r.adding if r is not None else [],
                removing_replicas=r.removing if r is not None else [], is_new=False))
            leaders.add(li.leader)
        if not topics and not full:
            return
        req = LeaderAndIsrRequest(
            controller_id=self.node_id, controller_epoch=self.epoch, broker_epoch=b.epoch, type=1 if full else 0,
            topic_states=[LeaderAndIsrTopicState(topic_name=t, topic_id=self.topic_ids.get(t, ZERO_UUID),
                                                 partition_states=ps) for t, ps in topics.items()],
            live_leaders=[LeaderAndIsrLiveLeader(broker_id=lid, host_name=self.live[lid].host, port=self.live[lid].port)
                          for lid in sorted(leaders) if lid in self.live])
        self._sender(b).send(ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, req)

    def _send_update_metadata(self, brokers, keys, deleting=False):
        topics = {}
        for key in keys:
            li = self.states.get(key)
            if li is None:
                continue
            offline = [r for r in self._replicas(key) if r not in self.live]
            st = self._partition_state(key, li, UpdateMetadataPartitionState, zk_version=li.zk_version,
                                       offline_replicas=offline)
            if deleting:
                st.leader = LEADER_DURING_DELETE
            topics.setdefault(key[0], []).append(st)
        live = [UpdateMetadataBroker(id=b.node_id, endpoints=[UpdateMetadataEndpoint(
            port=ep.port, host=ep.host or "", listener=ep.listener_name,
            security_protocol=SECURITY_PROTOCOLS.index(ep.security_protocol)) for ep in b.endpoints], rack=b.rack)
            for b in self.live.values()]
        for bid in brokers:
            b = self.live.get(bid)
            if b is None:
                continue
            req = UpdateMetadataRequest(
                controller_id=self.node_id, controller_epoch=self.epoch, broker_epoch=b.epoch,
                topic_states=[UpdateMetadataTopicState(topic_name=t, topic_id=self.topic_ids.get(t, ZERO_UUID),
                                                       partition_states=ps) for t, ps in topics.items()],
                live_brokers=live)
            self._sender(b).send(ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, req)

    def _send_stop_replica(self, broker_id, keys, delete):
        b = self.live.get(broker_id)
        if b is None:
            return
        topics = {}
        for key in keys:
            li = self.states.get(key)
            topics.setdefault(key[0], []).append(StopReplicaPartitionState(
                partition_index=key[1], leader_epoch=li.leader_epoch if li else -1, delete_partition=delete))
        req = StopReplicaRequest(controller_id=self.node_id, controller_epoch=self.epoch, broker_epoch=b.epoch,
                                 topic_states=[StopReplicaTopicState(topic_name=t, partition_states=ps)
                                               for t, ps in topics.items()])
        self._sender(b).send(ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, req)


class _BrokerSender:
    """Requests to one broker, in order, each retried until it is answered, the broker dies or
    this controller's term ends."""

    def __init__(self, controller, b):
        self.controller = controller
        self.generation = controller._generation
        local = controller.broker.channels.local
        self.owns_channel = not (b.node_id == controller.node_id and local is not None)
        if not self.owns_channel:
            self.channel = local  # its own broker: straight to the handlers, no socket (the broker's)
        else:
            self.channel = controller.broker.channels.open(
                b.node_id, b.host, b.port, client_id=f"controller-{controller.node_id}",
                connect_timeout=controller.config["controller.socket.timeout.ms"] / 1000)
        self.queue: asyncio.Queue = asyncio.Queue()
        self.task = controller.loop.create_task(self._run())
        self.closed = False

    def send(self, api_key, version, body):
        self.queue.put_nowait((api_key, version, body))

    def close(self):
        self.closed = True
        self.task.cancel()
        if self.owns_channel:
            self.channel.close()

    async def _run(self):
        timeout = self.controller.config["controller.socket.timeout.ms"] / 1000
        while not self.closed:
            api_key, version, body = await self.queue.get()
            while not self.closed and self.generation == self.controller._generation:
                try:
                    resp = await self.channel.call(api_key, version, body, timeout)
                except BrokerChannelError as e:
                    log.debug("controller -> broker %d: %s; retrying", self.channel.node_id, e)
                    await asyncio.sleep(SEND_BACKOFF_S)
                    continue
                if getattr(resp, "error_code", 0):
                    log.warning("controller -> broker %d: api %d answered error %d", self.channel.node_id, api_key,
                                resp.error_code)
                break
