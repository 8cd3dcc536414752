"""The console's JSON API: one blocking function per question, run with an AdminClient on a
worker thread (app.py routes /api/... to them). Every page is drawn from these answers only,
so a script sees exactly what a person sees. docs/tools.md lists the endpoints.

Offsets are Kafka's: ``start`` is the log start offset, ``end`` the log end (high watermark,
the offset the next record will get); a partition holds ``end - start`` messages and a group's
lag on a partition is ``end - committed``.
"""
from __future__ import annotations

from ..client.admin import EARLIEST, LATEST, TOPIC_RESOURCE
from ..errors import NonEmptyGroupError
from ..protocol.api_table import ApiKey

# groups whose members hold partitions: an admin commit would be refused or overwritten
ACTIVE_GROUP_STATES = ("Stable", "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")
RESET_TARGETS = ("earliest", "latest", "offset", "timestamp")
# Kafka's own message for NON_EMPTY_GROUP (org.apache.kafka.common.protocol.Errors): DeleteGroups
# answers the code alone
NON_EMPTY_GROUP_MESSAGE = "The group is not empty."


class ApiError(ValueError):
    """A request the API refuses as asked; ``status`` is the HTTP status to answer, ``code``
    the Kafka error name behind it (if any)."""

    def __init__(self, message: str, status: int = 400, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


def offline(p) -> bool:
    """Whether a partition (TopicPartitionInfo) has no leader to answer for it."""
    return p.leader < 0 or p.error == "LEADER_NOT_AVAILABLE"


def group_lag(committed: dict, ends: dict) -> dict:
    """{(topic, partition): end - committed} for the committed partitions whose end is known."""
    out = {}
    for (t, p), offset in committed.items():
        end = ends.get(t, {}).get(p)
        if end is not None:
            out[(t, p)] = max(0, end - offset)
    return out


def _offsets(admin, topics) -> dict:
    """{(topic, partition): (start, end)} of the partitions of ``topics`` ({name: TopicDescription});
    (None, None) for an offline one (its offsets cannot be asked: the AdminClient would wait
    out its timeout for a leader)."""
    online = [(t, p.partition) for t, info in topics.items() for p in info.partitions if not offline(p)]
    out = {(t, p.partition): (None, None) for t, info in topics.items() for p in info.partitions}
    if online:
        starts = admin.list_offsets({tp: EARLIEST for tp in online})
        ends = admin.list_offsets({tp: LATEST for tp in online})
        out.update({tp: (starts[tp].offset, ends[tp].offset) for tp in online})
    return out


def _messages(start, end):
    return None if start is None else end - start


def _partition_sizes(admin) -> dict | None:
    """{(topic, partition): bytes of one copy (the largest replica's)}, or None when the brokers
    do not serve DescribeLogDirs (sizes then show as unknown)."""
    if not admin.supports(ApiKey.DESCRIBE_LOG_DIRS):
        return None
    out = {}
    for (t, p, _broker), size in admin.log_dir_sizes().items():
        out[(t, p)] = max(out.get((t, p), 0), size)
    return out


def overview(admin) -> dict:
    cluster = admin.describe_cluster()
    _, topics = admin.metadata(None)
    parts = [p for t in topics.values() for p in t.partitions]
    user = [t for t in topics.values() if not t.internal]
    groups = admin.list_groups()
    return {
        "cluster_id": cluster.cluster_id,
        "controller": cluster.controller_id,
        "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
                     "controller": b.node_id == cluster.controller_id} for b in cluster.brokers],
        "topics": len(user),
        "internal_topics": len(topics) - len(user),
        "partitions": sum(len(t.partitions) for t in user),
        "all_partitions": len(parts),
        "under_replicated": sum(1 for p in parts if p.under_replicated),
        "offline": sum(1 for p in parts if offline(p)),
        "groups": len(groups),
    }


def topic_list(admin, internal: bool = False) -> dict:
    topics = admin.list_topics(internal=internal)
    offsets = _offsets(admin, topics)
    sizes = _partition_sizes(admin)
    rows = []
    for name, info in topics.items():
        mine = [(name, p.partition) for p in info.partitions]
        rows.append({
            "name": name,
            "internal": info.internal,
            "partitions": len(info.partitions),
            "replication_factor": max((len(p.replicas) for p in info.partitions), default=0),
            "messages": sum(_messages(*offsets[tp]) or 0 for tp in mine),
            "size": None if sizes is None else sum(sizes.get(tp, 0) for tp in mine),
            "under_replicated": sum(1 for p in info.partitions if p.under_replicated),
            "offline": sum(1 for p in info.partitions if offline(p)),
        })
    return {"topics": rows, "sizes_known": sizes is not None}


def topic_detail(admin, name: str) -> dict:
    info = admin.describe_topics([name])[name]
    offsets = _offsets(admin, {name: info})
    sizes = _partition_sizes(admin)
    partitions = []
    for p in info.partitions:
        start, end = offsets[(name, p.partition)]
        partitions.append({
            "partition": p.partition, "leader": p.leader, "replicas": p.replicas, "isr": p.isr,
            "offline_replicas": p.offline, "start": start, "end": end, "messages": _messages(start, end),
            "size": None if sizes is None else sizes.get((name, p.partition), 0),
            "under_replicated": p.under_replicated, "error": p.error,
        })
    configs = config_rows(admin.describe_configs(TOPIC_RESOURCE, name, synonyms=True))
    return {
        "name": name, "topic_id": info.topic_id, "internal": info.internal,
        "replication_factor": max((len(p.replicas) for p in info.partitions), default=0),
        "messages": sum(p["messages"] or 0 for p in partitions),
        "size": None if sizes is None else sum(p["size"] for p in partitions),
        "partitions": partitions, "configs": configs,
    }


def config_rows(entries) -> list:
    """ConfigEntries (described with their synonyms) as the pages show them. ``default`` is what
    the config would be without its own setting: the next synonym from another source (Kafka
    lists them by precedence), as ``name`` (a broker config may stand for a topic's, in its own
    unit: log.retention.hours for retention.ms) and ``value``; null when the config is at its
    default, is sensitive, or the broker lists no synonyms."""
    rows = []
    for c in entries:
        default = None
        if not c.is_default and not c.sensitive:
            default = next(({"name": n, "value": v} for n, v, source in c.synonyms if source != c.source), None)
        rows.append({"name": c.name, "value": None if c.sensitive else c.value, "source": c.source,
                     "is_default": c.is_default, "default": default, "read_only": c.read_only,
                     "sensitive": c.sensitive})
    return rows


def create_topic(admin, doc: dict) -> dict:
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ApiError("a topic needs a name")
    partitions = int_field(doc, "partitions", -1)
    replication = int_field(doc, "replication_factor", -1)
    if partitions == 0 or partitions < -1 or replication == 0 or replication < -1:
        raise ApiError("partitions and replication_factor must be at least 1 (or -1: the broker's default)")
    configs = doc.get("configs") or {}
    if not isinstance(configs, dict) or not all(isinstance(k, str) for k in configs):
        raise ApiError("configs must be an object of name: value")
    admin.create_topic(name, partitions, replication, {k: str(v) for k, v in configs.items()})
    return {"created": name}


def delete_topic(admin, name: str) -> dict:
    admin.describe_topics([name])  # UNKNOWN_TOPIC_OR_PARTITION (404) before anything else
    admin.delete_topic(name)
    return {"deleted": name}


def alter_topic_configs(admin, name: str, doc: dict) -> dict:
    """IncrementalAlterConfigs on topic ``name``: SET each of ``doc["set"]`` ({name: value}),
    DELETE (back to the default) each of ``doc["delete"]``. The broker checks the values: a bad
    one is its INVALID_CONFIG, naming the config and what it expects."""
    to_set = doc.get("set") or {}
    to_delete = doc.get("delete") or []
    if not isinstance(to_set, dict) or not all(isinstance(k, str) and k for k in to_set):
        raise ApiError("'set' must be an object of config name: value")
    if any(v is None or isinstance(v, (dict, list)) for v in to_set.values()):
        raise ApiError("each value in 'set' is a string or a number (to go back to the default, use 'delete')")
    if not isinstance(to_delete, list) or not all(isinstance(k, str) and k for k in to_delete):
        raise ApiError("'delete' must be a list of config names")
    if not to_set and not to_delete:
        raise ApiError("nothing to change: give 'set' and/or 'delete'")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise ApiError(f"{both[0]!r} is both set and deleted")
    values = {k: _config_text(v) for k, v in to_set.items()}
    admin.alter_configs(TOPIC_RESOURCE, name, values, to_delete)
    return {"topic": name, "set": values, "deleted": to_delete}


def _config_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def add_partitions(admin, name: str, doc: dict) -> dict:
    """CreatePartitions: topic ``name`` grows to ``doc["count"]`` partitions (Kafka adds
    partitions only; fewer or as many is its INVALID_PARTITIONS)."""
    count = int_field(doc, "count", None)
    if count is None or count < 1:
        raise ApiError("'count' must be the topic's new number of partitions, a whole number above 0")
    before = len(admin.describe_topics([name])[name].partitions)  # 404 for a topic that does not exist
    admin.create_partitions(name, count)
    return {"topic": name, "partitions_before": before, "partitions": count}


def delete_group(admin, group_id: str) -> dict:
    """DeleteGroups: the broker refuses a group with members (NON_EMPTY_GROUP), since they
    would go on committing into it."""
    try:
        admin.delete_group(group_id)
    except NonEmptyGroupError:
        raise ApiError(f"NON_EMPTY_GROUP: {NON_EMPTY_GROUP_MESSAGE} Group {group_id!r} has active members: "
                       "stop its consumers first", 409, NonEmptyGroupError.name) from None
    return {"deleted": group_id}


def group_list(admin) -> dict:
    rows = []
    known = admin.list_topics(internal=True)
    for g in admin.list_groups():
        # a share group commits no offsets (OffsetFetch answers GROUP_ID_NOT_FOUND for it, as Kafka):
        # its progress is each share partition's start offset (SPSO)
        committed = (share_starts(admin, g.group_id) if g.protocol_type == "share"
                     else admin.list_group_offsets(g.group_id))
        ends = _ends(admin, committed, known)
        described = admin.describe_group(g.group_id)
        rows.append({"group_id": g.group_id, "state": described.state or g.state,
                     "group_type": g.group_type or described.group_type or None,
                     "protocol_type": g.protocol_type, "members": len(described.members),
                     "topics": sorted({t for t, _ in committed}),
                     "lag": sum(group_lag(committed, ends).values()) if committed else None})
    return {"groups": rows}


def _ends(admin, committed, known=None) -> dict:
    """{topic: {partition: end}} for the partitions of ``committed`` that still exist
    (``known``: list_topics(internal=True), when the caller has it already)."""
    known = admin.list_topics(internal=True) if known is None else known
    online = {(t, p.partition) for t, info in known.items() for p in info.partitions if not offline(p)}
    tps = [tp for tp in committed if tp in online]
    out = {}
    if tps:
        for (t, p), o in admin.list_offsets({tp: LATEST for tp in tps}).items():
            out.setdefault(t, {})[p] = o.offset
    return out


def share_starts(admin, group_id: str) -> dict:
    """{(topic, partition): SPSO} of a share group's partitions that have state (an SPSO of -1,
    state not initialised yet, is left out: nothing is known of its progress)."""
    return {tp: start for tp, (start, _epoch) in admin.describe_share_group_offsets(group_id).items() if start >= 0}


def share_group_detail(admin, g) -> dict:
    """A share group (KIP-932): its members with their epochs and partitions (a partition may
    be in several members' assignments), the group and assignment epochs, and per share
    partition the start offset (SPSO), the log end offset and the records between them (lag:
    not yet acknowledged, or not yet delivered)."""
    starts = share_starts(admin, g.group_id)
    owners = {}
    for m in g.members:
        for tp in m.assignment:
            owners.setdefault(tp, []).append(m.member_id)
    ends = _ends(admin, set(starts) | set(owners))
    rows = []
    for tp in sorted(set(starts) | set(owners)):
        end = ends.get(tp[0], {}).get(tp[1])
        start = starts.get(tp)
        rows.append({"topic": tp[0], "partition": tp[1], "start_offset": start, "end": end,
                     "lag": None if start is None or end is None else max(0, end - start),
                     "members": owners.get(tp, [])})
    return {**_group_head(g), "offsets": rows, "lag": sum(r["lag"] for r in rows if r["lag"] is not None)}


def _group_head(g) -> dict:
    """What the console shows of any group: its type, state, assignor, coordinator, epochs
    (KIP-848 and KIP-932 groups; None for a classic group) and members (a member's epoch
    likewise)."""
    return {
        "group_id": g.group_id, "state": g.state, "group_type": g.group_type or None,
        "protocol_type": g.protocol_type, "protocol": g.protocol,
        "coordinator": g.coordinator, "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
        "members": [{"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
                     "host": m.host, "member_epoch": m.member_epoch,
                     "assignment": [list(tp) for tp in m.assignment]} for m in g.members],
    }


def group_detail(admin, group_id: str) -> dict:
    g = admin.describe_group(group_id)
    if g.protocol_type == "share":
        return share_group_detail(admin, g)
    committed = admin.list_group_offsets(group_id)
    if g.state == "Dead" and not committed:
        raise ApiError(f"group {group_id!r} does not exist", 404)
    owners = {tp: m.member_id for m in g.members for tp in m.assignment}
    assigned = set(owners)
    ends = _ends(admin, set(committed) | assigned)
    rows = []
    for tp in sorted(set(committed) | assigned):
        end = ends.get(tp[0], {}).get(tp[1])
        c = committed.get(tp)
        rows.append({"topic": tp[0], "partition": tp[1], "committed": c, "end": end,
                     "lag": None if c is None or end is None else max(0, end - c), "member": owners.get(tp)})
    return {**_group_head(g), "offsets": rows, "lag": sum(r["lag"] for r in rows if r["lag"] is not None)}


def reset_offsets(admin, group_id: str, doc: dict, execute: bool) -> dict:
    """The new committed offsets of ``group_id`` on every partition of ``doc["topic"]``
    (to earliest, latest, an offset, or the first offset at or after a time - ListOffsets by
    timestamp, the end where no record is that late - each kept within its partition's range,
    as Kafka's tool does); committed only when ``execute``. Refused while the group has members.
    A share group's start offsets (SPSO) are set the same way, through AlterShareGroupOffsets
    (as kafka-share-groups.sh --reset-offsets)."""
    topic = doc.get("topic")
    if not isinstance(topic, str) or not topic:
        raise ApiError("name the topic whose offsets to reset")
    to = doc.get("to")
    if to not in RESET_TARGETS:
        raise ApiError(f"'to' must be one of {', '.join(RESET_TARGETS)}")
    target = int_field(doc, to, None) if to in ("offset", "timestamp") else None
    if to in ("offset", "timestamp") and (target is None or target < 0):
        what = "milliseconds since the epoch" if to == "timestamp" else "a whole number"
        raise ApiError(f"'{to}' must be {what}, 0 or more")
    g = admin.describe_group(group_id)
    share = g.protocol_type == "share"
    if g.members or g.state in ACTIVE_GROUP_STATES:
        raise ApiError(f"group {group_id!r} is {g.state} with {len(g.members)} member(s): offsets can only be "
                       "reset while no consumer is in the group (stop them first)", 409)
    info = admin.describe_topics([topic])[topic]
    tps = [(topic, p.partition) for p in info.partitions]
    leaderless = [p.partition for p in info.partitions if offline(p)]
    if leaderless:
        raise ApiError(f"partitions {leaderless} of {topic!r} have no leader: their offsets cannot be reset now", 409)
    bounds = _offsets(admin, {topic: info})
    current = (share_starts(admin, group_id) if share else admin.list_group_offsets(group_id, tps))
    at_time = admin.list_offsets({tp: target for tp in tps}) if to == "timestamp" else {}
    plan = {}
    for tp in tps:
        start, end = bounds[tp]
        if to == "timestamp":
            wanted = at_time[tp].offset if at_time[tp].offset >= 0 else end  # no record that late: the end
        else:
            wanted = start if to == "earliest" else end if to == "latest" else target
        plan[tp] = min(max(wanted, start), end)
    if execute and share:
        try:
            admin.alter_share_group_offsets(group_id, plan)
        except NonEmptyGroupError:  # a member joined since the check above
            raise ApiError(f"NON_EMPTY_GROUP: {NON_EMPTY_GROUP_MESSAGE} Share group {group_id!r} has active "
                           "members: stop them first", 409, NonEmptyGroupError.name) from None
    elif execute:
        admin.alter_group_offsets(group_id, plan)
    return {"group_id": group_id, "topic": topic, "executed": execute,
            "offsets": [{"partition": p, "current": current.get((t, p)), "new": plan[(t, p)],
                         "start": bounds[(t, p)][0], "end": bounds[(t, p)][1]} for t, p in tps]}


def int_field(doc, key, default):
    v = doc.get(key, default)
    if v is None or v == "":
        return default
    if isinstance(v, bool):
        raise ApiError(f"{key} must be a whole number")
    try:
        return int(v)
    except (TypeError, ValueError):
        raise ApiError(f"{key} must be a whole number, not {v!r}") from None

