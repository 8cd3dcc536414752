"""A read-only view of one partition's transactions, computed from its files alone
(docs/transactions.md, section 9.3): the last stable offset and the aborted transactions of a
range, for readers of a data directory that is not theirs (the Spark ``path`` source).

Nothing here writes, locks or recovers: a broker may be appending to the same files. The
caller fixes the view first (each segment's base offset and the byte size it saw, and the log
end offset those bytes hold), and nothing past that is read, so the answer describes that
prefix of the log.

How the state is found (Kafka's own load, without its writes): the latest producer snapshot
at or below the log end gives the transactions open at its offset S (``CurrentTxnFirstOffset``);
the batches of [S, log end) are replayed on top: a transactional data batch opens its
producer's transaction, a marker closes it, and an ABORT makes an AbortedTxn exactly as the
broker's append does. Aborted transactions whose marker is below S come from the ``.txnindex``
files, and only those: the broker appends an entry right after its marker, and takes a snapshot
at a roll or a close, after every earlier append finished, so every entry below S is complete
on disk once S's snapshot is visible, while an entry at or above S may still be on its way
(the marker visible, its entry not yet). The replay covers those.

The snapshot could be skipped (replay the whole log), but the view would then cost a read of
every segment; with it, the replay reads at most the segments written since the last roll."""
from __future__ import annotations

import bisect
import logging
import os

from ..checksum import crc32c
from ..record.control import ABORT, MAGIC_V2
from ..record.errors import CorruptRecordError
from ..record.layout import ATTRIBUTES_OFFSET, CONTROL_FLAG_MASK, LOG_OVERHEAD, TRANSACTIONAL_FLAG_MASK
from .producer_state import CorruptSnapshotError, decode_snapshot, list_snapshots, parse_marker
from .segment_files import LOG_SUFFIX, TXN_INDEX_SUFFIX, HeaderWalk, segment_file_name
from .txn_index import CURRENT_VERSION, ENTRY, ENTRY_SIZE, AbortedTxn, CorruptIndexError

log = logging.getLogger(__name__)

_CHUNK = 8 << 20


def _last_offset(entry):
    return entry.last_offset


class TxnView:
    """The transactions of ``log_dir`` as of a fixed prefix of its segments.

    ``segments``: ``(base_offset, size)`` of every segment, by base offset, with the byte size
    the caller saw; ``log_end_offset``: the offset after the last complete batch within those
    sizes (the high watermark of a single-node log); ``log_start_offset``: the earliest offset.
    """

    def __init__(self, log_dir, segments, log_start_offset, log_end_offset):
        self.log_dir = log_dir
        self.segments = sorted((int(b), int(s)) for b, s in segments)
        self.bases = [b for b, _s in self.segments]
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
        self._txn_entries = {}  # segment base -> [AbortedTxn] with lastOffset below the snapshot
        self.snapshot_offset, self.open_transactions = self._load_snapshot()
        self.replayed_aborted = []  # AbortedTxn of ABORT markers in [snapshot offset, log end)
        self._replay()

    # -- the answers ----------------------------------------------------------------------------
    @property
    def last_stable_offset(self) -> int:
        """Kafka's UnifiedLog.lastStableOffset on a single node: the first offset of the
        earliest open transaction, raised to the log start offset, when below the log end;
        else the log end."""
        if not self.open_transactions:
            return self.log_end_offset
        first = max(min(self.open_transactions.values()), self.log_start_offset)
        return min(first, self.log_end_offset)

    def aborted_transactions(self, start_offset, upper_bound_offset) -> list:
        """The AbortedTxn entries of every aborted transaction overlapping [start_offset,
        upper_bound_offset) (Kafka's LocalLog.collectAbortedTransactions): from the segment
        holding start_offset on, the entries with lastOffset >= start_offset and firstOffset <
        upper_bound_offset, stopping after the first whose lastStableOffset reaches
        upper_bound_offset (no later transaction can overlap the range then)."""
        out = []
        i = max(0, bisect.bisect_right(self.bases, start_offset) - 1)
        for base in self.bases[i:]:
            entries = self._index_entries(base)
            for e in entries[bisect.bisect_left(entries, start_offset, key=_last_offset):]:
                if e.first_offset < upper_bound_offset:
                    out.append(e)
                if e.last_stable_offset >= upper_bound_offset:
                    return out
        replayed = self.replayed_aborted
        for e in replayed[bisect.bisect_left(replayed, start_offset, key=_last_offset):]:
            if e.first_offset < upper_bound_offset:
                out.append(e)
            if e.last_stable_offset >= upper_bound_offset:
                break
        return out

    # -- the producer snapshot ----------------------------------------------------------------
    def _load_snapshot(self):
        """(S, {producer id: first offset of its open transaction}) from the latest readable
        snapshot at or below the log end; (first segment's base, {}) when there is none.
        Snapshots above the log end describe data this view does not hold (or a log that was
        truncated since), so they are not used."""
        for offset, path in reversed(list_snapshots(self.log_dir)):
            if offset > self.log_end_offset:
                continue
            try:
                with open(path, "rb") as f:
                    producers = decode_snapshot(f.read())
            except FileNotFoundError:
                continue  # retention deleted it since the listing: an older one serves as well
            except CorruptSnapshotError as e:
                # the broker's own load skips it the same way; an older snapshot and a longer
                # replay give the same state
                log.warning("%s: producer snapshot %s is unreadable (%s); using an older one", self.log_dir, path, e)
                continue
            return offset, {pid: e.current_txn_first_offset for pid, e in producers.items()
                            if e.current_txn_first_offset >= 0}
        return (self.bases[0] if self.bases else 0), {}

    # -- the replay of [snapshot offset, log end) -------------------------------------------
    def _replay(self):
        start, end = self.snapshot_offset, self.log_end_offset
        for k, (base, size) in enumerate(self.segments):
            next_base = self.segments[k + 1][0] if k + 1 < len(self.segments) else None
            if next_base is not None and next_base <= start:
                continue  # all below the snapshot
            if base >= end:
                break
            self._replay_segment(base, size, start, end, last=next_base is None)

    def _replay_segment(self, base, size, start, end, last):
        path = os.path.join(self.log_dir, segment_file_name(base) + LOG_SUFFIX)
        with open(path, "rb") as f:  # FileNotFoundError: deleted since the caller listed it
            walk = HeaderWalk(f.fileno(), 0, size, read_size=_CHUNK, name=path)
            expect = base  # the lowest base offset the next batch may have
            for h in walk:
                if h.magic != MAGIC_V2 or h.last_offset < h.base_offset or h.base_offset < expect:
                    raise CorruptRecordError(
                        f"{path}: corrupt batch at file position {h.position} (base offset {h.base_offset}, length "
                        f"{h.size - LOG_OVERHEAD}, magic {h.magic}, last offset delta {h.last_offset - h.base_offset}; "
                        f"the base offset must be at least {expect})", h.position)
                if h.base_offset >= end:
                    return
                if h.producer_id >= 0 and h.last_offset >= start:
                    batch = walk.batch_bytes(h)
                    if crc32c(batch[ATTRIBUTES_OFFSET:]) != h.crc:
                        raise CorruptRecordError(f"{path}: the CRC of the batch at file position {h.position} "
                                                 f"(offset {h.base_offset}) does not match its data", h.position)
                    self._apply(batch, h.producer_id, h.attributes, h.base_offset, path)
                expect = h.last_offset + 1
            if not last and walk.position + LOG_OVERHEAD <= size:
                # only the last segment may end in a batch still being written
                raise CorruptRecordError(f"{path}: the batch at file position {walk.position} is cut short: it does "
                                         f"not end within the segment's {size} bytes", walk.position)

    def _apply(self, batch, pid, attrs, base_offset, path):
        """One batch with a producer id, as the broker's producer state applies it."""
        open_txns = self.open_transactions
        if not attrs & CONTROL_FLAG_MASK:
            if attrs & TRANSACTIONAL_FLAG_MASK and pid not in open_txns:
                open_txns[pid] = base_offset
            return
        try:
            parsed = parse_marker(batch)
        except CorruptRecordError as e:
            raise CorruptRecordError(f"{path}: control batch at offset {base_offset} of producer {pid}: {e}",
                                     0) from None
        if parsed is None or pid not in open_txns:
            return  # an empty control batch (its data was cleaned) or no open transaction: nothing ends
        first = open_txns.pop(pid)
        if parsed[0] == ABORT:
            # the entry's lastStableOffset: the earliest transaction open from another
            # producer, else past the marker (Kafka's ProducerStateManager.lastStableOffset)
            lso = min(open_txns.values()) if open_txns else base_offset + 1
            self.replayed_aborted.append(AbortedTxn(pid, first, base_offset, lso))

    # -- .txnindex files ------------------------------------------------------------------------
    def _index_entries(self, base) -> list:
        """The segment's AbortedTxn entries whose marker is below the snapshot offset. Entries
        past it are not read: the replay found those. A partial entry at the end is one being
        appended (its marker is at or above the snapshot offset, as the module doc says)."""
        entries = self._txn_entries.get(base)
        if entries is not None:
            return entries
        entries = []
        if base < self.snapshot_offset:
            path = os.path.join(self.log_dir, segment_file_name(base) + TXN_INDEX_SUFFIX)
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""  # no aborted transaction in the segment
            for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
                version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
                if version != CURRENT_VERSION:
                    raise CorruptIndexError(f"transaction index {path}: entry {pos // ENTRY_SIZE} has version "
                                            f"{version}, only {CURRENT_VERSION} is known")
                if last < base or (entries and last <= entries[-1].last_offset):
                    raise CorruptIndexError(f"transaction index {path}: entry {pos // ENTRY_SIZE} has last offset "
                                            f"{last}, below the segment's base {base} or not above the entry "
                                            f"before it")
                if last >= self.snapshot_offset:
                    break
                entries.append(AbortedTxn(pid, first, last, lso))
        self._txn_entries[base] = entries
        return entries
