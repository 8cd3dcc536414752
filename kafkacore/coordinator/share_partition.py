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
  member holds (else INVALID_RECORD_STATE, and nothing of that partition's batch list changes;
  ``acknowledge`` has every case).
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
from bisect import bisect_right
from typing import NamedTuple

from ..clock import wall_ms
from ..errors import InvalidRecordStateError, InvalidRequestError, KafkaError
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


class InFlightBatch:
    """Records ``first``..``last`` (inclusive) of the in-flight window, all in one state with one
    delivery count, and while ACQUIRED one holder and acquisition (an id the lock timer checks, so
    a stale timer changes nothing). As Kafka's InFlightBatch, kept per batch range: an
    acquisition of whole log batches is one entry, cut only where an acknowledgement or a
    release splits it."""

    __slots__ = ("first", "last", "state", "delivery_count", "member_id", "acquisition")

    def __init__(self, first, last, state, delivery_count, member_id=None, acquisition=0):
        self.first = first
        self.last = last
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.acquisition = acquisition

    def __len__(self):
        return self.last - self.first + 1

    def same(self, state, delivery_count, member_id, acquisition) -> bool:
        return (self.state == state and self.delivery_count == delivery_count and self.member_id == member_id
                and self.acquisition == acquisition)


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
        self.in_flight: list[InFlightBatch] = []
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

    # -- the in-flight batches -------------------------------------------------------------------
    # ``in_flight`` covers [SPSO, SPEO) without holes, in offset order (records enter it only at
    # the end offset; offsets the log does not have are ARCHIVED entries).
    def _index(self, offset) -> int:
        """The index of the in-flight batch holding ``offset`` (in the window)."""
        return bisect_right(self.in_flight, offset, key=_first) - 1

    def _cut(self, offset) -> int:
        """Makes ``offset`` the first offset of an in-flight batch, splitting the batch holding it;
        the index of the batch starting there (``len(in_flight)`` at the end offset)."""
        in_flight = self.in_flight
        i = self._index(offset)
        if i < 0:
            return 0
        b = in_flight[i]
        if b.first == offset:
            return i
        if offset > b.last:
            return i + 1
        in_flight.insert(i + 1, InFlightBatch(offset, b.last, b.state, b.delivery_count, b.member_id, b.acquisition))
        b.last = offset - 1
        return i + 1

    def _isolate(self, first, last) -> range:
        """Cuts the in-flight batches at ``first`` and after ``last``: the indexes of exactly those records."""
        i = self._cut(first)
        return range(i, self._cut(last + 1))

    def _append(self, first, last, state, delivery_count, member_id=None, acquisition=0):
        """New records at the end offset, joined to the last batch when they are alike."""
        in_flight = self.in_flight
        if in_flight and in_flight[-1].last == first - 1 and in_flight[-1].same(state, delivery_count, member_id,
                                                                                acquisition):
            in_flight[-1].last = last
        else:
            in_flight.append(InFlightBatch(first, last, state, delivery_count, member_id, acquisition))
        self.end_offset = last + 1

    @property
    def in_flight_records(self) -> int:
        return self.end_offset - self.start_offset

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
            self.start_offset = self.end_offset = max(state.start_offset, lg.log_start_offset)
            for b in sorted(state.batches):
                if b.first_offset > self.end_offset:  # no entry: AVAILABLE, never delivered
                    self._append(self.end_offset, b.first_offset - 1, AVAILABLE, 0)
                first = max(b.first_offset, self.end_offset)
                if first <= b.last_offset:
                    # an acquisition does not outlive its leader
                    st = AVAILABLE if b.delivery_state == ACQUIRED else b.delivery_state
                    self._append(first, b.last_offset, st, b.delivery_count)
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
        for b in self.in_flight:
            if b.state == AVAILABLE:
                return b.first
        if self.end_offset - self.start_offset < self.max_in_flight:
            return self.end_offset
        return None

    def acquire(self, member_id, batches, upper, max_records) -> tuple[list[Acquired], int]:
        """Acquires for ``member_id`` from ``batches`` (the log's batches in offset order, below
        ``upper``, as ``iter_batches`` yields them, with ``aborted`` set under read_committed):
        the AVAILABLE in-flight records first, then new ones, up to ``max_records`` (new records
        in whole batches) and the in-flight cap. Returns the acquired ranges and how many of
        ``batches`` it used (the first ones: what the response must carry). It takes a batch from
        ``batches`` only while it may still acquire, so a lazy reader reads no further."""
        ranges: list[list[int]] = []  # [first, last, delivery count]
        acquired = redelivered = 0
        limit = self.delivery_count_limit
        cap = self.start_offset + self.max_in_flight  # new records stop before this offset
        acquisition = self._acquisitions + 1
        in_flight = self.in_flight
        new_archived = False
        used = 0
        for n, batch in enumerate(batches, 1):
            first, last = max(batch.base_offset, self.start_offset), min(batch.last_offset, upper - 1)
            if last < first:
                continue
            used = n
            skip = batch.is_control or batch.aborted
            # records already in flight: only the AVAILABLE ones, a batch range at a time
            hi = min(last, self.end_offset - 1)
            i = self._index(first) if first <= hi else len(in_flight)
            while i < len(in_flight) and in_flight[i].first <= hi:
                b = in_flight[i]
                if b.state == AVAILABLE:
                    if b.first < first:
                        i = self._cut(first)
                        b = in_flight[i]
                    if b.last > hi:
                        self._cut(hi + 1)
                    if skip or b.delivery_count >= limit:  # (the limit may have been lowered meanwhile)
                        b.state = ARCHIVED
                        new_archived = True
                    else:
                        b.state, b.member_id, b.acquisition = ACQUIRED, member_id, acquisition
                        b.delivery_count += 1
                        _add(ranges, b.first, b.last, b.delivery_count)
                        acquired += len(b)
                        redelivered += len(b)
                i += 1
            # records never handed out: the batch's rest, up to the in-flight cap
            new_first, new_last = max(first, self.end_offset), min(last, cap - 1)
            if new_first > last:
                if acquired >= max_records:
                    break
                continue
            if new_first > new_last:
                break  # the window is full
            if new_first > self.end_offset:  # offsets the log does not have
                self._append(self.end_offset, new_first - 1, ARCHIVED, 0)
            if skip:
                self._append(new_first, new_last, ARCHIVED, 0)
                new_archived = True
            else:
                self._append(new_first, new_last, ACQUIRED, 1, member_id, acquisition)
                _add(ranges, new_first, new_last, 1)
                acquired += new_last - new_first + 1
            if new_last < last or acquired >= max_records:
                break  # the window is full, or max_records reached (never a batch more read)
        if not ranges:
            if new_archived:
                self._advance()
            return [], used
        self._acquisitions = acquisition
        self._start_lock(acquisition, ranges)
        self._advance()
        self.manager.record_acquired(acquired, redelivered)
        return [Acquired(*r) for r in ranges], used

    def _start_lock(self, acquisition, ranges):
        """One lock timer per acquisition (all the batches one fetch acquired), not per record."""
        loop = self.manager.loop()
        if loop is None:
            return
        self._timers[acquisition] = loop.call_later(self.lock_duration_ms / 1000.0, self._lock_expired, acquisition,
                                                    ranges)

    def _lock_expired(self, acquisition, ranges):
        self._timers.pop(acquisition, None)
        expired = 0
        in_flight = self.in_flight
        for first, last, _count in ranges:
            i = max(0, self._index(first))
            while i < len(in_flight) and in_flight[i].first <= last:
                b = in_flight[i]
                if b.state == ACQUIRED and b.acquisition == acquisition:
                    self._release(b)
                    expired += len(b)
                i += 1
        if expired:
            self.manager.record_lock_timeouts(expired)
            log.debug("share partition %s %s-%d: acquisition %d's lock expired", self.group_id, self.topic,
                      self.partition, acquisition)
            self._advance()
            self.manager.state_changed(self)

    def _release(self, b):
        """Acquired records given back: AVAILABLE, or ARCHIVED once delivered the limit's times."""
        if b.delivery_count >= self.delivery_count_limit:
            b.state = ARCHIVED
            self.manager.record_archived(len(b))
        else:
            b.state = AVAILABLE
        b.member_id = None

    # -- acknowledging ---------------------------------------------------------------------------
    def acknowledge(self, member_id, batches) -> None:
        """``batches``: [(first offset, last offset, [types])], the types one for the whole
        range or one per offset. As Kafka's SharePartition.acknowledge, batch by batch, and
        nothing changes unless every batch is good: malformed batches are INVALID_REQUEST
        (``check_batches``); a batch wholly below the SPSO, or any with nothing in flight, is
        INVALID_RECORD_STATE, one ending past the last record handed out INVALID_REQUEST (Kafka's
        fetchSubMap); of a batch the SPSO moved into, the records below it (done already) are
        skipped; every other record named must be ACQUIRED by ``member_id`` and named once,
        INVALID_RECORD_STATE otherwise."""
        in_flight = self.in_flight
        check_batches(batches)
        where = f"{self.topic}-{self.partition}"
        checked = []
        prev_last = None
        for first, last, types in batches:
            if first == prev_last:  # (check_batches lets a batch start on the previous one's last offset)
                raise InvalidRecordStateError(f"offset {first} of {where} is acknowledged twice")
            prev_last = last
            if not in_flight or last < self.start_offset:
                raise InvalidRecordStateError(f"offsets {first}-{last} of {where} are not in flight (the share "
                                              f"partition's are {self.start_offset}-{self.end_offset - 1})")
            if last >= self.end_offset:
                raise InvalidRequestError(f"offsets {first}-{last} of {where} pass the last record handed out "
                                          f"({self.end_offset - 1})")
            if first < self.start_offset:
                types = types if len(types) == 1 else types[self.start_offset - first:]
                first = self.start_offset
            i, offset = self._index(first), first
            while offset <= last:  # the window has no holes: batch i holds offset
                b = in_flight[i]
                if b.state != ACQUIRED or b.member_id != member_id:
                    raise InvalidRecordStateError(
                        f"offset {offset} of {where} is not acquired by member {member_id} "
                        f"(it is {STATE_NAMES[b.state]})")
                offset, i = b.last + 1, i + 1
            checked.append((first, last, types))
        counts = {ACCEPT: 0, RELEASE: 0, REJECT: 0, GAP: 0}
        for first, last, types in checked:
            for run_first, run_last, t in _runs(first, last, types):
                for i in self._isolate(run_first, run_last):
                    b = in_flight[i]
                    counts[t] += len(b)
                    if t == RELEASE:
                        self._release(b)
                        continue
                    # ACCEPT; REJECT and GAP (an offset without a record: done, not counted as archived)
                    b.state = ACKNOWLEDGED if t == ACCEPT else ARCHIVED
                    b.member_id = None
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
        for b in self.in_flight:
            if b.state == ACQUIRED and b.member_id == member_id:
                self._release(b)
                changed = True
        if changed:
            self._advance()
        return changed

    # -- the start offset and the persisted state ------------------------------------------------
    def _advance(self):
        """The SPSO over the prefix of ACKNOWLEDGED and ARCHIVED records."""
        in_flight = self.in_flight
        done = 0
        for b in in_flight:
            if b.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            done += 1
        if done:
            del in_flight[:done]
        self.start_offset = in_flight[0].first if in_flight else self.end_offset

    def log_start_moved(self, log_start):
        """Records below the log start (retention, DeleteRecords) are gone: the SPSO follows."""
        if log_start > self.start_offset:
            in_flight = self.in_flight
            gone = 0
            for b in in_flight:
                if b.last >= log_start:
                    b.first = max(b.first, log_start)
                    break
                gone += 1
            del in_flight[:gone]
            self.start_offset = log_start
            self.end_offset = max(self.end_offset, log_start)

    def state(self) -> ShareState:
        """What the persister keeps: the SPSO and the in-flight records as state batches
        (ACQUIRED written AVAILABLE: a lock does not outlive the leader)."""
        batches = []
        for b in self.in_flight:
            st = AVAILABLE if b.state == ACQUIRED else b.state
            if batches and batches[-1].delivery_state == st and batches[-1].delivery_count == b.delivery_count:
                batches[-1] = batches[-1]._replace(last_offset=b.last)
            else:
                batches.append(StateBatch(b.first, b.last, st, b.delivery_count))
        return ShareState(self.state_epoch, self.start_offset, self.leader_epoch, tuple(batches))

    async def write_state(self):
        try:
            await self.manager.persister.write_state(self.group_id, self.manager.topic_uuid(self.topic_id),
                                                     self.partition, self.state())
        except KafkaError as e:
            self.manager.write_refused(self, e)  # a fenced share partition goes
            raise

    def counts(self) -> dict:
        """In-flight records per state name (tools, tests)."""
        out = {name: 0 for name in STATE_NAMES.values()}
        for b in self.in_flight:
            out[STATE_NAMES[b.state]] += len(b)
        return out

    def close(self):
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


def _add(ranges, first, last, count):
    """Appends first..last with a delivery count to ranges, joining the previous range when
    they touch and share the count."""
    if ranges and ranges[-1][1] == first - 1 and ranges[-1][2] == count:
        ranges[-1][1] = last
    else:
        ranges.append([first, last, count])


def _first(b: InFlightBatch) -> int:
    return b.first


def check_batches(batches):
    """Kafka's KafkaApis.validateAcknowledgementBatches, every batch before any is applied:
    INVALID_REQUEST for a batch whose first offset passes its last, that starts before the
    previous batch's last offset (batches ascend; the first may not start below -1), has no
    types, has per-offset types not one per offset, or a type outside GAP..REJECT."""
    prev_last = -1
    for first, last, types in batches:
        if last < first:
            raise InvalidRequestError(f"acknowledgement batch {first}-{last}: its first offset passes its last")
        if first < prev_last:
            raise InvalidRequestError(f"acknowledgement batch {first}-{last} starts before the previous batch's "
                                      f"last offset {prev_last}")
        if not types or (len(types) != 1 and len(types) != last - first + 1):
            raise InvalidRequestError(f"acknowledgement batch {first}-{last} with {len(types)} types")
        for t in types:
            if t not in ACK_TYPES:
                raise InvalidRequestError(f"unknown acknowledge type {t}")
        prev_last = last


def _runs(first, last, types):
    """An acknowledgement batch as (first, last, type) runs: one for a single type, else one per
    stretch of equal per-offset types (a batch range is cut only where the types change)."""
    if len(types) == 1:
        yield first, last, types[0]
        return
    start = 0
    for i in range(1, len(types) + 1):
        if i == len(types) or types[i] != types[start]:
            yield first + start, first + i - 1, types[start]
            start = i
