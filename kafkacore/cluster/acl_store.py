"""The ACLs in the metadata store, as Kafka's ZooKeeper-mode AclAuthorizer keeps them (zk_data.AclZNodes):

- /kafka-acl/Topic/orders holds the LITERAL ACLs of topic "orders",
  /kafka-acl-extended/prefixed/Topic/orders- the PREFIXED ones, each as
  {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]};
- CreateAcls and DeleteAcls, on any broker, rewrite a resource's znode conditionally on its zk
  version (re-reading and retrying when another broker wrote it meanwhile, as Kafka's
  updateResourceAcls does), delete it when no ACL is left, and add a change notification:
  /kafka-acl-changes/acl_changes_N ("TOPIC:orders") or /kafka-acl-extended-changes/acl_changes_N
  ({"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"});
- every broker loads all ACLs into its Authorizer at start-up, watches both change paths and
  reloads the resource each new notification names (Kafka's AclChangeNotificationHandler), and
  purges notifications older than 15 minutes as Kafka's ZkNodeChangeNotificationListener does.

The store runs only when the broker has an authorizer (authorizer.class.name)."""
from __future__ import annotations

import logging
import threading

from ..errors import KafkaError, UnknownServerError
from ..security.acl import (AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType,
                            ResourcePattern, ResourceType, validate_filter, validate_new_binding)
from .change_notifications import ChangeNotificationListener
from .zk_client import ZkError
from .zk_data import AclZNodes, ZkDataError

log = logging.getLogger("kafkacore.cluster")

STORED_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
STORED_RESOURCE_TYPES = tuple(t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY))
MAX_UPDATE_RETRIES = 10  # Kafka's AclAuthorizer maxUpdateRetries
CHANGE_PATHS = (AclZNodes.LITERAL_CHANGES_PATH, AclZNodes.EXTENDED_CHANGES_PATH)
PREFIX = AclZNodes.SEQUENCE_NUMBER_PREFIX


def resource_path(pattern: ResourcePattern) -> str:
    return f"{AclZNodes.store_path(pattern.pattern_type.name)}/{pattern.resource_type.pascal_name}/{pattern.name}"


def encode_entries(entries) -> bytes:
    return AclZNodes.encode_acls(
        {"principal": e.principal, "permissionType": e.permission_type.pascal_name,
         "operation": e.operation.pascal_name, "host": e.host}
        for e in sorted(entries))


def decode_entries(data, what) -> frozenset[AccessControlEntry]:
    entries = set()
    for item in AclZNodes.decode_acls(data, what):
        operation = AclOperation.from_name(item["operation"])
        permission = AclPermissionType.from_name(item["permissionType"])
        if operation in (AclOperation.UNKNOWN, AclOperation.ANY) or \
                permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise ZkDataError(f"{what}: ACL entry with operation {item['operation']!r} and permission type "
                              f"{item['permissionType']!r}")
        entries.add(AccessControlEntry(item["principal"], item["host"], operation, permission))
    return frozenset(entries)


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(the change path's sequential prefix, the notification's data)."""
    if pattern.pattern_type == PatternType.LITERAL:
        return (f"{AclZNodes.LITERAL_CHANGES_PATH}/{PREFIX}",
                AclZNodes.encode_literal_change(pattern.resource_type.name, pattern.name))
    return (f"{AclZNodes.EXTENDED_CHANGES_PATH}/{PREFIX}",
            AclZNodes.encode_extended_change(pattern.resource_type.name, pattern.name, pattern.pattern_type.name))


def decode_change(change_path: str, data) -> ResourcePattern:
    if change_path == AclZNodes.LITERAL_CHANGES_PATH:
        type_name, name = AclZNodes.decode_literal_change(data)
        pattern_type = PatternType.LITERAL
    else:
        type_name, name, pattern_name = AclZNodes.decode_extended_change(data)
        pattern_type = PatternType.from_name(pattern_name)
    resource_type = ResourceType.from_name(type_name)
    if resource_type not in STORED_RESOURCE_TYPES or pattern_type not in STORED_PATTERN_TYPES:
        raise ZkDataError(f"ACL change notification names no stored resource: {bytes(data or b'')[:200]!r}")
    return ResourcePattern(resource_type, name, pattern_type)


def _zk_failure(what, e):
    return UnknownServerError(f"{what}: the metadata store failed: {e}")


class ZkAclStore:
    def __init__(self, broker, zk):
        self.broker = broker
        self.authorizer = broker.authorizer
        self.zk = zk
        self.node_id = broker.node_id
        self._write_lock = threading.Lock()  # this broker's writers one at a time; others: versions
        self._listener_of = {path: ChangeNotificationListener(zk, path, PREFIX, self._change_handler(path),
                                                              node_id=self.node_id, what=f"ACL changes of {path}")
                             for path in CHANGE_PATHS}
        self.listeners = tuple(self._listener_of.values())

    # -- reading ---------------------------------------------------------------------------------
    def _read(self, pattern) -> tuple[frozenset, int]:
        path = resource_path(pattern)
        data, version = self.zk.get_versioned_data(path)
        return decode_entries(data, path), version

    def load_all(self) -> int:
        """Every ACL of the store into the authorizer (Kafka's AclAuthorizer.loadCache); their count."""
        count = 0
        for pattern_type in STORED_PATTERN_TYPES:
            root = AclZNodes.store_path(pattern_type.name)
            for resource_type in STORED_RESOURCE_TYPES:
                for name in self.zk.get_children(f"{root}/{resource_type.pascal_name}"):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    count += self._reload(pattern)
        return count

    def _reload(self, pattern) -> int:
        try:
            entries, _version = self._read(pattern)
        except ZkDataError as e:  # written by another tool: keep what was held, and say so
            log.error("broker %d: ACLs of %s not loaded: %s", self.node_id, resource_path(pattern), e)
            return 0
        self.authorizer.set_acls(pattern, entries)
        return len(entries)

    # -- the admin side (blocking round trips: handlers call these off the event loop) ------------
    def create_acls(self, bindings) -> list[KafkaError | None]:
        """One result per binding, in order: None (created, or there already) or its error."""
        results: list[KafkaError | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            try:
                validate_new_binding(binding)
            except KafkaError as e:
                results[i] = e
                continue
            by_pattern.setdefault(binding.pattern, []).append(i)
        for pattern, indexes in by_pattern.items():
            try:
                self._update(pattern, lambda current, idx=indexes: current | {bindings[i].entry for i in idx})
            except KafkaError as e:
                for i in indexes:
                    results[i] = e
        return results

    def delete_acls(self, filters) -> list[tuple[KafkaError | None, list[AclBinding]]]:
        """Per filter: (error, the bindings it deleted). Every filter is matched against the ACLs
        as they were before this request (a binding two filters match is reported by both)."""
        matched: list[list[AclBinding] | KafkaError] = []
        for f in filters:
            try:
                validate_filter(f)
                matched.append(self.authorizer.acls(f))
            except KafkaError as e:
                matched.append(e)
        doomed: dict[ResourcePattern, set] = {}
        for m in matched:
            if not isinstance(m, KafkaError):
                for b in m:
                    doomed.setdefault(b.pattern, set()).add(b.entry)
        failed: dict[ResourcePattern, KafkaError] = {}
        for pattern, entries in doomed.items():
            try:
                self._update(pattern, lambda current, gone=frozenset(entries): current - gone)
            except KafkaError as e:
                failed[pattern] = e
        out = []
        for m in matched:
            if isinstance(m, KafkaError):
                out.append((m, []))
                continue
            error = next((failed[b.pattern] for b in m if b.pattern in failed), None)
            out.append((error, [] if error else m))
        return out

    def _update(self, pattern, change):
        """Kafka's updateResourceAcls: read, change, write conditionally on the version read,
        again if another writer won; then notify every broker and reload here."""
        path = resource_path(pattern)
        with self._write_lock:
            try:
                for _attempt in range(MAX_UPDATE_RETRIES):
                    try:
                        current, version = self._read(pattern)
                    except ZkDataError:
                        current, version = frozenset(), self.zk.get_versioned_data(path)[1]  # overwrite it
                    new = frozenset(change(current))
                    if new == current:
                        break
                    if new:
                        done = self.zk.conditional_set_or_create(path, encode_entries(new), version)
                    else:
                        done = self.zk.conditional_delete(path, version)
                    if done:
                        prefix_path, data = encode_change(pattern)
                        self.zk.create_sequential(prefix_path, data)
                        log.info("broker %d: ACLs of %s now %s", self.node_id, path, sorted(new))
                        break
                else:
                    raise UnknownServerError(f"the ACLs of {path} were changed by others {MAX_UPDATE_RETRIES} times "
                                             "in a row while this update was written; not written")
            except ZkError as e:
                raise _zk_failure(f"writing the ACLs of {path}", e) from None
            self.authorizer.set_acls(pattern, new)

    # -- the listeners ---------------------------------------------------------------------------
    async def start(self, loop):
        paths = [AclZNodes.store_path(p.name) + f"/{t.pascal_name}" for p in STORED_PATTERN_TYPES
                 for t in STORED_RESOURCE_TYPES]
        for path in paths:  # Kafka's createAclPaths (the listeners make the change paths)
            await loop.run_in_executor(None, self.zk.make_sure_persistent_path_exists, path)
        count = await loop.run_in_executor(None, self.load_all)
        log.info("broker %d: %d ACLs loaded", self.node_id, count)
        for listener in self.listeners:
            await listener.start(loop)

    def shutdown(self):
        for listener in self.listeners:
            listener.shutdown()

    def _change_handler(self, change_path):
        async def on_changes(changes):
            patterns = []
            for name, data in changes:
                try:
                    patterns.append(decode_change(change_path, data))
                except ZkDataError as e:
                    log.error("broker %d: %s/%s skipped: %s", self.node_id, change_path, name, e)
            for pattern in dict.fromkeys(patterns):  # one read per resource: the znode holds the latest
                await self._listener_of[change_path].call(self._reload, pattern)
        return on_changes
