"""One share group's view of one topic-partition, kept by the partition's leader (KIP-932's
share-partition; Kafka's ``SharePartition``).

- The share-partition start offset (SPSO) is the first offset not yet done; the end offset
  (SPEO) the offset after the last record ever handed out. Records in [SPSO, SPEO) are
  *in flight*, each in one state: AVAILABLE (may be delivered again), ACQUIRED (locked for one
  member until its acquisition lock expires), ACKNOWLEDGED (accepted) or ARCHIVED (rejected,
  skipped, or delivered ``group.share.delivery.count.limit`` times). Records at or past the
  SPEO are AVAILABLE with no delivery yet.
- ``acquire`` hands out AVAILABLE in-flight records first (their delivery count raised), then
  new records read from the log, in whole batches up to ``max_records`` (which a batch may pass:
  KIP-932's alignment to batch boundaries) and never so many that the in-flight window passes
  ``group.share.partition.max.record.locks``. Control records are archived, never delivered; under
  read_committed (``share.isolation.level``) records of aborted transactions are archived too and
  nothing past the last stable offset is read.
- ``acknowledge`` takes ACCEPT (1) -> ACKNOWLEDGED, RELEASE (2) -> AVAILABLE (ARCHIVED once the
  delivery count reached the limit), REJECT (3) and GAP (0) -> ARCHIVED, only for records the
  member holds (else INVALID_RECORD_STATE, and nothing of that partition's batch list changes).
- A lock that expires makes its records AVAILABLE again (ARCHIVED at the limit).
- After each change the SPSO moves over the done prefix, and the state (SPSO, every in-flight
  record's state and delivery count; ACQUIRED written as AVAILABLE) is written through the
  ``Persister`` (coordinator/share_state.py), as Kafka's SharePartition writes after
  acknowledgements and lock expiries; the first use reads it back (``load``), or, for a share
  partition never initialized, starts at ``share.auto.offset.reset`` (latest: the high
  watermark; earliest: the log start; ``by_duration:<ISO-8601 duration>``: the first record at or
  after now minus the duration, else the high watermark).

The state lives on the event loop: every method runs there, so two members never acquire the
same record.
"""
from __future__ import annotations

import logging
import re
from typing import NamedTuple

from ..clock import wall_ms
from ..errors import InvalidRecordStateError, InvalidRequestError
from ..record import iter_batches
from .share_state import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, ShareState, StateBatch

log = logging.getLogger("kafkacore.share")

# AcknowledgeType (KIP-932): the numbers ShareFetch and ShareAcknowledge carry
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
ACK_TYPES = (GAP, ACCEPT, RELEASE, REJECT)
STATE_NAMES = {AVAILABLE: "AVAILABLE", ACQUIRED: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED", ARCHIVED: "ARCHIVED"}

# share.auto.offset.reset and share.isolation.level (Kafka 4.1's GroupConfig values)
LATEST, EARLIEST, BY_DURATION = "latest", "earliest", "by_duration:"
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's Duration.parse takes it (PnDTnHnMn.nS; no negative parts,
    as Kafka's by_duration refuses them): milliseconds. ValueError otherwise."""
    m = _DURATION.match(text.strip().upper())
    if not m or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(f"{text!r} is not an ISO-8601 duration (PnDTnHnMn.nS)")
    d, h, mi, s = m.groups()
    return int(((int(d or 0) * 24 + int(h or 0)) * 60 + int(mi or 0)) * 60000 + float(s or 0) * 1000)


def check_auto_offset_reset(value: str) -> str:
    """share.auto.offset.reset: latest, earliest or by_duration:<duration>; ValueError else."""
    if value in (LATEST, EARLIEST):
        return value
    if value.startswith(BY_DURATION):
        parse_duration_ms(value[len(BY_DURATION):])
        return value
    raise ValueError(f"{value!r}: must be latest, earliest or by_duration:<ISO-8601 duration>")


class InFlight:
    """One in-flight record: its state, deliveries so far, and while ACQUIRED who holds it and
    the acquisition (an id its lock timer checks, so a stale timer changes nothing)."""

    __slots__ = ("state", "delivery_count", "member_id", "acquisition")

    def __init__(self, state, delivery_count, member_id=None, acquisition=0):
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.acquisition = acquisition


class Acquired(NamedTuple):
    """A range of acquired records with one delivery count (a ShareFetch AcquiredRecords)."""
    first_offset: int
    last_offset: int
    delivery_count: int


class SharePartition:
    def __init__(self, manager, group_id, topic, topic_id, partition):
        self.manager = manager
        self.group_id = group_id
        self.topic = topic
        self.topic_id = topic_id  # 16 bytes
        self.partition = partition
        self.start_offset = 0  # SPSO
        self.end_offset = 0  # SPEO: the next offset never handed out
        self.in_flight: dict[int, InFlight] = {}
        self.state_epoch = 0
        self.leader_epoch = -1
        self.loaded = False
        self._acquisitions = 0
        self._timers: dict[int, object] = {}  # acquisition id -> its lock timer

    # -- configs (the group's override, else the broker's) ---------------------------------------
    def _config(self, name):
        return self.manager.group_config(self.group_id, name)

    @property
    def lock_duration_ms(self) -> int:
        return self._config("share.record.lock.duration.ms")

    @property
    def delivery_count_limit(self) -> int:
        return self.manager.broker.config["group.share.delivery.count.limit"]

    @property
    def max_in_flight(self) -> int:
        return self.manager.broker.config["group.share.partition.max.record.locks"]

    @property
    def read_committed(self) -> bool:
        return self._config("share.isolation.level") == READ_COMMITTED

    # -- loading ---------------------------------------------------------------------------------
    async def load(self, lg, leader_epoch):
        """The state from the persister, or a start at share.auto.offset.reset."""
        persister = self.manager.persister
        self.leader_epoch = leader_epoch
        state = await persister.read_state(self.group_id, self.manager.topic_uuid(self.topic_id), self.partition,
                                           leader_epoch)
        if state is None or state.start_offset < 0:
            start = self._initial_offset(lg)
            self.state_epoch = 0 if state is None else state.state_epoch
            await persister.initialize_state(self.group_id, self.manager.topic_uuid(self.topic_id), self.partition,
                                             self.state_epoch, start)
            self.start_offset = self.end_offset = start
        else:
            self.state_epoch = state.state_epoch
            self.start_offset = max(state.start_offset, lg.log_start_offset)
            end = self.start_offset
            for b in state.batches:
                for offset in range(max(b.first_offset, self.start_offset), b.last_offset + 1):
                    # an acquisition does not outlive its leader
                    st = AVAILABLE if b.delivery_state == ACQUIRED else b.delivery_state
                    self.in_flight[offset] = InFlight(st, b.delivery_count)
                    end = max(end, offset + 1)
            self.end_offset = end
            self._advance()
        self.loaded = True

    def _initial_offset(self, lg) -> int:
        reset = self._config("share.auto.offset.reset")
        if reset == EARLIEST:
            return lg.log_start_offset
        if reset.startswith(BY_DURATION):
            found = lg.offset_for_timestamp(wall_ms() - parse_duration_ms(reset[len(BY_DURATION):]))
            return found[0] if found is not None else lg.high_watermark
        return lg.high_watermark

    # -- acquiring -------------------------------------------------------------------------------
    def fetch_offset(self) -> int | None:
        """Where a read for this share partition starts: the first AVAILABLE in-flight record,
        else the end offset while the in-flight window has room; None: nothing to acquire."""
        for offset in sorted(self.in_flight):
            if self.in_flight[offset].state == AVAILABLE:
                return offset
        if self.end_offset - self.start_offset < self.max_in_flight:
            return self.end_offset
        return None

    def acquire(self, member_id, data, aborted, upper, max_records) -> list[Acquired]:
        """Acquires for ``member_id`` from ``data`` (whole batches read from the log below
        ``upper``; ``aborted``: the read_committed read's aborted transactions, else None): the
        AVAILABLE in-flight records first, then new ones, up to ``max_records`` (new records in
        whole batches) and the in-flight cap. Returns the acquired ranges."""
        got: list[tuple[int, int]] = []  # (offset, delivery count)
        limit = self.delivery_count_limit
        cap = self.start_offset + self.max_in_flight  # new records stop before this offset
        new_archived = False
        for batch in iter_batches(data, aborted):
            if len(got) >= max_records:
                break
            first, last = batch.base_offset, min(batch.last_offset, upper - 1)
            skip = batch.is_control or batch.aborted
            for offset in range(max(first, self.start_offset), last + 1):
                rec = self.in_flight.get(offset)
                if rec is not None:
                    if rec.state != AVAILABLE:
                        continue
                    if skip:
                        rec.state = ARCHIVED
                        new_archived = True
                        continue
                    if rec.delivery_count >= limit:  # the limit was lowered meanwhile
                        rec.state = ARCHIVED
                        new_archived = True
                        continue
                    got.append((offset, rec.delivery_count + 1))
                    rec.state, rec.delivery_count, rec.member_id = ACQUIRED, rec.delivery_count + 1, member_id
                elif offset >= self.end_offset:
                    if offset >= cap:
                        break
                    for gap in range(self.end_offset, offset):  # offsets the log does not have
                        self.in_flight[gap] = InFlight(ARCHIVED, 0)
                    self.end_offset = offset + 1
                    if skip:
                        self.in_flight[offset] = InFlight(ARCHIVED, 0)
                        new_archived = True
                        continue
                    self.in_flight[offset] = InFlight(ACQUIRED, 1, member_id)
                    got.append((offset, 1))
        if not got:
            if new_archived:
                self._advance()
            return []
        self._acquisitions += 1
        acquisition = self._acquisitions
        for offset, _count in got:
            self.in_flight[offset].acquisition = acquisition
        self._start_lock(acquisition, [o for o, _c in got])
        self._advance()
        self.manager.record_acquired(len(got), sum(1 for _o, c in got if c > 1))
        return _ranges(got)

    def _start_lock(self, acquisition, offsets):
        loop = self.manager.loop()
        if loop is None:
            return
        self._timers[acquisition] = loop.call_later(self.lock_duration_ms / 1000.0, self._lock_expired, acquisition,
                                                    offsets)

    def _lock_expired(self, acquisition, offsets):
        self._timers.pop(acquisition, None)
        expired = 0
        for offset in offsets:
            rec = self.in_flight.get(offset)
            if rec is not None and rec.state == ACQUIRED and rec.acquisition == acquisition:
                self._release_one(rec)
                expired += 1
        if expired:
            self.manager.record_lock_timeouts(expired)
            log.debug("share partition %s %s-%d: acquisition %d's lock expired", self.group_id, self.topic,
                      self.partition, acquisition)
            self._advance()
            self.manager.state_changed(self)

    def _release_one(self, rec):
        """An acquired record given back: AVAILABLE, or ARCHIVED once delivered the limit's times."""
        if rec.delivery_count >= self.delivery_count_limit:
            rec.state = ARCHIVED
            self.manager.record_archived(1)
        else:
            rec.state = AVAILABLE
        rec.member_id = None

    # -- acknowledging ---------------------------------------------------------------------------
    def acknowledge(self, member_id, batches) -> None:
        """``batches``: [(first offset, last offset, [types])], the types one for the whole
        range or one per offset. Every record named must be ACQUIRED by ``member_id``:
        INVALID_RECORD_STATE otherwise, and nothing changes."""
        plan = []
        for first, last, types in batches:
            if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
                raise InvalidRequestError(f"acknowledgement batch {first}-{last} with {len(types)} types")
            for t in types:
                if t not in ACK_TYPES:
                    raise InvalidRequestError(f"unknown acknowledge type {t}")
            for i, offset in enumerate(range(first, last + 1)):
                rec = self.in_flight.get(offset)
                if rec is None or rec.state != ACQUIRED or rec.member_id != member_id:
                    held = "not in flight" if rec is None else STATE_NAMES[rec.state]
                    raise InvalidRecordStateError(
                        f"offset {offset} of {self.topic}-{self.partition} is not acquired by member {member_id} "
                        f"(it is {held})")
                plan.append((rec, types[0] if len(types) == 1 else types[i]))
        counts = {ACCEPT: 0, RELEASE: 0, REJECT: 0, GAP: 0}
        for rec, t in plan:
            counts[t] += 1
            if t == ACCEPT:
                rec.state = ACKNOWLEDGED
                rec.member_id = None
            elif t == RELEASE:
                self._release_one(rec)
            else:  # REJECT, GAP (an offset without a record: done, not counted as archived)
                rec.state = ARCHIVED
                rec.member_id = None
        mgr = self.manager
        if counts[REJECT]:
            mgr.record_archived(counts[REJECT])
        for t, name in ((ACCEPT, "accept"), (RELEASE, "release"), (REJECT, "reject")):
            if counts[t]:
                mgr.record_acknowledged(name, counts[t])
        self._advance()

    def release_member(self, member_id) -> bool:
        """Every record ``member_id`` holds goes back (a closed share session, a closed
        connection): AVAILABLE, or ARCHIVED at the delivery limit, with the delivery counted.
        Whether anything changed."""
        changed = False
        for rec in self.in_flight.values():
            if rec.state == ACQUIRED and rec.member_id == member_id:
                self._release_one(rec)
                changed = True
        if changed:
            self._advance()
        return changed

    # -- the start offset and the persisted state ------------------------------------------------
    def _advance(self):
        """The SPSO over the prefix of ACKNOWLEDGED and ARCHIVED records."""
        spso = self.start_offset
        in_flight = self.in_flight
        while spso < self.end_offset:
            rec = in_flight.get(spso)
            if rec is None or rec.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            del in_flight[spso]
            spso += 1
        self.start_offset = spso

    def log_start_moved(self, log_start):
        """Records below the log start (retention, DeleteRecords) are gone: the SPSO follows."""
        if log_start > self.start_offset:
            for offset in [o for o in self.in_flight if o < log_start]:
                del self.in_flight[offset]
            self.start_offset = log_start
            self.end_offset = max(self.end_offset, log_start)

    def state(self) -> ShareState:
        """What the persister keeps: the SPSO and the in-flight records as state batches
        (ACQUIRED written AVAILABLE: a lock does not outlive the leader)."""
        batches = []
        for offset in sorted(self.in_flight):
            rec = self.in_flight[offset]
            st = AVAILABLE if rec.state == ACQUIRED else rec.state
            if batches and batches[-1].last_offset == offset - 1 and batches[-1].delivery_state == st \
                    and batches[-1].delivery_count == rec.delivery_count:
                batches[-1] = batches[-1]._replace(last_offset=offset)
            else:
                batches.append(StateBatch(offset, offset, st, rec.delivery_count))
        return ShareState(self.state_epoch, self.start_offset, self.leader_epoch, tuple(batches))

    async def write_state(self):
        await self.manager.persister.write_state(self.group_id, self.manager.topic_uuid(self.topic_id),
                                                 self.partition, self.state())

    def counts(self) -> dict:
        """In-flight records per state name (tools, tests)."""
        out = {name: 0 for name in STATE_NAMES.values()}
        for rec in self.in_flight.values():
            out[STATE_NAMES[rec.state]] += 1
        return out

    def close(self):
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


def _ranges(got) -> list[Acquired]:
    out: list[Acquired] = []
    for offset, count in got:
        if out and out[-1].last_offset == offset - 1 and out[-1].delivery_count == count:
            out[-1] = out[-1]._replace(last_offset=offset)
        else:
            out.append(Acquired(offset, offset, count))
    return out
