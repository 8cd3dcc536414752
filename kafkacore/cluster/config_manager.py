"""Kafka's ZkConfigManager (DynamicConfigManager, over its ZkNodeChangeNotificationListener):
how a topic's config change reaches every broker of a ZooKeeper cluster.

- AlterConfigs / IncrementalAlterConfigs, on any broker, write the topic's whole set of
  overrides to /config/topics/T and add a sequential /config/changes/config_change_N naming the
  entity ({"version":2,"entity_path":"topics/T"}; KafkaZkClient.set_topic_configs), as Kafka's
  AdminZkClient.changeTopicConfig does. DescribeConfigs reads /config/topics/T, so every broker
  answers the same as soon as the write is done.
- Every broker watches the children of /config/changes. Notifications with a sequence number
  above the last one processed are taken in order; each names an entity, not a change, so the
  broker reads the topic's current overrides and hands them to its logs of T (the same
  LogManager.set_topic_config as a single node's AlterConfigs: retention, segment rolling,
  max.message.bytes, min.insync.replicas for acks=all...). The broker that is the controller
  also updates the controller's topic config cache (unclean.leader.election.enable), and
  turning unclean election on elects the topic's offline partitions at once, as Kafka's
  TopicUncleanLeaderElectionEnable event does.
- Start-up: the notifications present are processed (re-applying is harmless), and so are
  the topics this broker has logs of: a broker that was down longer than the notifications
  live would otherwise keep stale overrides from its data directory.
- Purge: after processing, notifications older than 15 minutes are deleted (Kafka's
  changeExpirationMs; every broker does it, a notification already gone is fine).

Users (/config/users/<sanitized name>) hold SCRAM credentials: AlterUserScramCredentials writes
the user's entity with a notification ("users/<sanitized name>"), and every broker reloads that
user into its CredentialCache (kafkacore/security/credential_cache.py). Users, clients and
users' clients (/config/users/<u>/clients/<c>, /config/clients/<c>, <default> for defaults)
hold client quotas: AlterClientQuotas writes them the same way and every broker reloads the
entity into its QuotaConfigs (kafkacore/security/client_quotas.py). At start-up every user and
client entity is read, before the broker registers (``load_users_and_clients``): a SASL login
answered from an empty credential cache would be refused as invalid credentials (Kafka's broker
processes no request before its DynamicConfigManager has read them).

Brokers (/config/brokers/<id> and /config/brokers/<default>) hold dynamic broker configs:
AlterConfigs on a BROKER resource writes the entity with a notification ("brokers/<id>" or
"brokers/<default>"), and every broker reloads its own and the default entity into its dynamic
broker config (kafkacore/broker/dynamic_config.py, through the broker object). Both are read at
start-up.

Groups (/config/groups/<sanitized group id>) hold group configs (the GROUP config resource:
share.record.lock.duration.ms, share.auto.offset.reset, ...; coordinator/group_config.py):
IncrementalAlterConfigs / AlterConfigs write the entity with a notification ("groups/<name>"),
and every broker reloads that group into its ``GroupConfigs``; every group entity is read at
start-up.

Other entity types (ips: connection quotas) are logged and skipped: kafkacore has none of them.
"""
from __future__ import annotations

import json
import logging

from ..errors import KafkaError, UnknownServerError
from ..security.client_quotas import DEFAULT as QUOTA_DEFAULT_ENTITY
from ..security.client_quotas import entity_config_path, entity_from_path
from ..security.credential_cache import desanitize, sanitize
from ..storage.config import TOPIC_CONFIGS
from .change_notifications import ChangeNotificationListener
from .zk_client import ZkError
from .zk_data import (ConfigEntityChangeNotificationSequenceZNode, ConfigEntityChangeNotificationZNode, ConfigType,
                      ZkDataError)

log = logging.getLogger("kafkacore.cluster")

# the cluster-wide broker entity: Kafka's ConfigEntityName.Default, as the quota defaults use it
BROKER_DEFAULT_ENTITY = QUOTA_DEFAULT_ENTITY

PREFIX = ConfigEntityChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX


def entity_of(data) -> tuple[str, str]:
    """(entity type, entity name) of a notification: version 2's "entity_path" ("topics/T"),
    or version 1's entity_type and entity_name (Kafka still reads both)."""
    try:
        path = ConfigEntityChangeNotificationSequenceZNode.decode(data)
    except ZkDataError:
        try:
            js = json.loads(data)
            return str(js["entity_type"]), str(js["entity_name"])
        except (ValueError, TypeError, KeyError):
            raise ZkDataError(f"config change notification: neither entity_path nor entity_type/entity_name: "
                              f"{bytes(data or b'')[:200]!r}") from None
    entity_type, _, name = path.partition("/")
    return entity_type, name


def supported_overrides(topic, raw) -> dict:
    """The overrides kafkacore knows. Kafka's tools may have written others to /config/topics/T
    (the reassignment throttles, tiered storage settings...): they are left in ZooKeeper and
    ignored here, with a warning, instead of failing the topic's logs and DescribeConfigs."""
    known = {k: v for k, v in raw.items() if k in TOPIC_CONFIGS}
    if len(known) != len(raw):
        ignored = sorted(k for k in raw if k not in TOPIC_CONFIGS)
        if _IGNORED_WARNED.get(topic) != ignored:
            _IGNORED_WARNED[topic] = ignored
            log.warning("topic %s: configs %s in ZooKeeper are not kafkacore topic configs; ignored", topic, ignored)
    return known


_IGNORED_WARNED: dict = {}


def _zk_failure(what, e):
    return UnknownServerError(f"{what}: ZooKeeper failed: {e}")


class ZkConfigManager:
    def __init__(self, broker, zk, controller=None):
        self.broker = broker
        self.zk = zk
        self.controller = controller
        self.node_id = broker.node_id
        self._bootstrap = True  # the first round also re-reads every topic this broker has logs of
        self._entities_loaded = False  # users and clients read at start-up (load_users_and_clients)
        self.listener = ChangeNotificationListener(zk, ConfigEntityChangeNotificationZNode.path, PREFIX,
                                                   self._on_changes, node_id=self.node_id, what="config changes")

    # -- the admin side (blocking ZooKeeper round trips: handlers call these off the event loop) ------
    def topic_overrides(self, topic) -> dict:
        """The topic's overrides kafkacore knows (supported_overrides)."""
        return supported_overrides(topic, self._raw_overrides(topic))

    def _raw_overrides(self, topic) -> dict:
        try:
            return self.zk.get_topic_configs(topic)
        except (ZkError, ZkDataError) as e:
            raise _zk_failure(f"reading the configs of topic '{topic}'", e) from None

    def topic_exists(self, topic) -> bool:
        try:
            return self.zk.topic_exists(topic)
        except ZkError as e:
            raise _zk_failure(f"looking up topic '{topic}'", e) from None

    def topic_name_in_use(self, topic) -> bool:
        """The topic's znode or its deletion request is still there: a CreateTopics of the name
        would fail (the controller removes the deletion request last)."""
        try:
            return self.zk.topic_exists(topic) or self.zk.is_topic_marked_for_deletion(topic)
        except ZkError as e:
            raise _zk_failure(f"looking up topic '{topic}'", e) from None

    def set_topic_overrides(self, topic, overrides):
        """Replaces the topic's overrides in ZooKeeper and notifies every broker. This broker
        applies them to its own replicas before it answers (read your writes: a produce right
        after the AlterConfigs meets the new limits here); the notification does the same on the
        others. Keys only Kafka knows, written there by Kafka's tools, are kept."""
        kept = {k: v for k, v in self._raw_overrides(topic).items() if k not in TOPIC_CONFIGS}
        try:
            self.zk.set_topic_configs(topic, {**kept, **overrides})
        except KafkaError:
            raise  # UnknownTopicError: the topic went meanwhile
        except ZkError as e:
            raise _zk_failure(f"writing the configs of topic '{topic}'", e) from None
        self._apply_topic(topic, supported_overrides(topic, {**kept, **overrides}))

    # -- users' configs (SCRAM credentials) ----------------------------------------------------------
    def user_configs(self, user) -> dict:
        try:
            return self.zk.get_entity_configs(ConfigType.USER, sanitize(user))
        except (ZkError, ZkDataError) as e:
            raise _zk_failure(f"reading the configs of user '{user}'", e) from None

    def users_with_configs(self) -> list[str]:
        try:
            return [desanitize(u) for u in self.zk.get_children(f"/config/{ConfigType.USER}")]
        except ZkError as e:
            raise _zk_failure("listing users", e) from None

    def set_user_configs(self, user, configs):
        """Replaces the user's config entity and notifies every broker; this one reloads the user
        before it answers (an authentication right after the change sees it here)."""
        entity = sanitize(user)
        try:
            self.zk.set_or_create_entity_configs(ConfigType.USER, entity, configs)
            self.zk.create_config_change_notification(f"{ConfigType.USER}/{entity}")
        except ZkError as e:
            raise _zk_failure(f"writing the configs of user '{user}'", e) from None
        self.broker.credential_cache.update_user(user, dict(configs))

    # -- client quota entities ---------------------------------------------------------------------------
    def quota_entity_configs(self, entity) -> dict:
        entity_type, name = entity_config_path(entity)
        try:
            return self.zk.get_entity_configs(entity_type, name)
        except (ZkError, ZkDataError) as e:
            raise _zk_failure(f"reading the configs of {entity_type}/{name}", e) from None

    def set_quota_entity_configs(self, entity, configs):
        """Replaces the entity's config (other keys, e.g. a user's SCRAM credentials, are the
        caller's to keep) and notifies every broker; this one applies it before answering."""
        entity_type, name = entity_config_path(entity)
        try:
            self.zk.set_or_create_entity_configs(entity_type, name, configs)
            self.zk.create_config_change_notification(f"{entity_type}/{name}")
        except ZkError as e:
            raise _zk_failure(f"writing the configs of {entity_type}/{name}", e) from None
        self.broker.quota_configs.update(entity, dict(configs))

    def quota_entity_paths(self) -> list[tuple[str, str]]:
        """(entity type, sanitized name) of every stored user, user's client and client entity."""
        try:
            out = []
            for user in self.zk.get_children(f"/config/{ConfigType.USER}"):
                out.append((ConfigType.USER, user))
                for client in self.zk.get_children(f"/config/{ConfigType.USER}/{user}/clients"):
                    out.append((ConfigType.USER, f"{user}/clients/{client}"))
            out.extend((ConfigType.CLIENT, c) for c in self.zk.get_children(f"/config/{ConfigType.CLIENT}"))
            return out
        except ZkError as e:
            raise _zk_failure("listing users and clients", e) from None

    def _reload_entity(self, entity_type, name):
        """A user or client entity from the store into the credential cache and quota configs."""
        configs = self.zk.get_entity_configs(entity_type, name)
        if entity_type == ConfigType.USER and "/" not in name:
            self.broker.credential_cache.update_user(desanitize(name), configs)
        entity = entity_from_path(entity_type, name)
        if entity is not None:
            self.broker.quota_configs.update(entity, configs)

    # -- group configs ---------------------------------------------------------------------------------
    def group_configs(self, group) -> dict:
        """The stored configs of a group (raw strings)."""
        try:
            return self.zk.get_entity_configs(ConfigType.GROUP, sanitize(group))
        except (ZkError, ZkDataError) as e:
            raise _zk_failure(f"reading the configs of group '{group}'", e) from None

    def set_group_configs(self, group, configs):
        """Replaces a group's configs (validated by the caller) and notifies every broker; this
        one applies them before answering."""
        entity = sanitize(group)
        try:
            self.zk.set_or_create_entity_configs(ConfigType.GROUP, entity, configs)
            self.zk.create_config_change_notification(f"{ConfigType.GROUP}/{entity}")
        except ZkError as e:
            raise _zk_failure(f"writing the configs of group '{group}'", e) from None
        self.broker.group_configs.update(group, dict(configs))

    def _group_entities(self) -> list[str]:
        try:
            return self.zk.get_children(f"/config/{ConfigType.GROUP}")
        except ZkError as e:
            raise _zk_failure("listing group configs", e) from None

    def _reload_group(self, entity):
        group = desanitize(entity)
        configs = self.zk.get_entity_configs(ConfigType.GROUP, entity)
        try:
            self.broker.group_configs.update(group, configs)
        except KafkaError as e:  # written by another tool without validation: keep the old ones
            log.error("broker %d: group %s: configs %s from the store not applied: %s", self.node_id, group, configs,
                      e.message)

    # -- dynamic broker configs -------------------------------------------------------------------------
    def broker_configs(self, entity) -> dict:
        """The stored configs of a broker entity (its id, or <default>)."""
        try:
            return self.zk.get_entity_configs(ConfigType.BROKER, entity)
        except (ZkError, ZkDataError) as e:
            raise _zk_failure(f"reading the configs of brokers/{entity}", e) from None

    def set_broker_configs(self, entity, configs):
        """Replaces a broker entity's configs and notifies every broker (Kafka's
        AdminZkClient.changeBrokerConfig); the caller applies them here."""
        try:
            self.zk.set_or_create_entity_configs(ConfigType.BROKER, entity, configs)
            self.zk.create_config_change_notification(f"{ConfigType.BROKER}/{entity}")
        except ZkError as e:
            raise _zk_failure(f"writing the configs of brokers/{entity}", e) from None

    def _reload_broker_configs(self):
        from_store = self.zk.get_entity_configs
        dynamic = self.broker.dynamic_config
        dynamic.reload(from_store(ConfigType.BROKER, BROKER_DEFAULT_ENTITY), from_store(ConfigType.BROKER,
                                                                                          str(self.node_id)))

    async def load_users_and_clients(self, loop):
        """Every user's SCRAM credentials and every client quota entity, from the store (before
        the broker registers, so that no login it answers finds the cache empty)."""
        for entity_type, name in await loop.run_in_executor(None, self.quota_entity_paths):
            await loop.run_in_executor(None, self._reload_entity, entity_type, name)
        self._entities_loaded = True

    # -- the listener ----------------------------------------------------------------------------------
    async def start(self, loop):
        await self.listener.start(loop)

    def shutdown(self):
        self.listener.shutdown()

    async def _on_changes(self, changes):
        """One round of /config/changes: each entity named read once (the znode holds the latest)."""
        call = self.listener.call
        topics, entities, groups = set(), set(), set()
        brokers = self._bootstrap  # this broker's dynamic configs to read again
        if self._bootstrap:
            topics.update(t for t, _p in list(self.broker.log_manager.logs))
            groups.update(await call(self._group_entities))
            if not self._entities_loaded:  # a change since then has its notification, read below
                entities.update(await call(self.quota_entity_paths))
        for name, data in changes:
            try:
                entity_type, entity = entity_of(data)
            except ZkDataError as e:
                log.error("broker %d: %s skipped: %s", self.node_id, name, e)
                continue
            if entity_type == ConfigType.TOPIC:
                topics.add(entity)
            elif entity_type in (ConfigType.USER, ConfigType.CLIENT):
                entities.add((entity_type, entity))
            elif entity_type == ConfigType.BROKER:
                brokers = brokers or entity in (BROKER_DEFAULT_ENTITY, str(self.node_id))
            elif entity_type == ConfigType.GROUP:
                groups.add(entity)
            else:
                log.info("broker %d: config change of %s/%s ignored (no %s configs here)", self.node_id,
                         entity_type, entity, entity_type)
        for topic in sorted(topics):
            overrides = supported_overrides(topic, await call(self.zk.get_topic_configs, topic))
            self._apply_topic(topic, overrides)
        for entity_type, name in sorted(entities):
            await call(self._reload_entity, entity_type, name)
        if brokers:
            await call(self._reload_broker_configs)
        for entity in sorted(groups):
            await call(self._reload_group, entity)
        self._bootstrap = False

    def _apply_topic(self, topic, overrides):
        lm = self.broker.log_manager
        has_logs = any(t == topic for t, _p in list(lm.logs))
        if has_logs and overrides != lm.topic_overrides.get(topic, {}):
            try:
                lm.set_topic_config(topic, overrides)
            except KafkaError as e:  # written by another tool without validation: keep the old ones
                log.error("broker %d: topic %s: configs %s from ZooKeeper not applied: %s", self.node_id, topic,
                          overrides, e.message)
                return
            log.info("broker %d: topic %s configs now %s", self.node_id, topic, overrides)
        self._controller_learns(topic, overrides)

    def _controller_learns(self, topic, overrides):
        if self.controller is not None:
            self.controller.topic_config_changed(topic, overrides)
