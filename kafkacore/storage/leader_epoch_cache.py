"""Kafka's LeaderEpochFileCache: which leader epoch wrote which offsets of a partition.

Entries (epoch, start offset), ascending in both: epoch E's records start at its start offset and
end where the next entry starts (the latest epoch ends at the log end offset). They live in the
partition's ``leader-epoch-checkpoint`` (checkpoints.LeaderEpochCheckpointFile), rewritten
atomically (temp file, fsync, rename, directory fsync) on every change, before the in-memory
entries change, so a failed write leaves both as they were.

Followers use it (through OffsetForLeaderEpoch) to find where their log diverges from the
leader's; consumers use it to detect truncation (KIP-320).

Rules, as Kafka's LeaderEpochFileCache has them:

- ``assign(epoch, start)`` changes nothing when epoch is the latest epoch and start is not below
  its start offset. Otherwise every entry at the end with an epoch >= epoch or a start offset >=
  start is dropped (they conflict with the new one: a leader that assigned an epoch and then lost
  leadership before writing, say) and the entry is appended. A negative epoch or offset is
  refused (ValueError).
- ``end_offset_for(requested, log_end_offset)``: (-1, -1) for -1 or an epoch above the latest;
  (latest, log end offset) for the latest epoch; for a smaller epoch, the largest epoch <= it
  with the start offset of the first epoch above it; an epoch below every entry answers itself
  with the first entry's start offset.
- ``truncate_from_end(end)`` drops entries starting at or after end (log truncation);
  ``truncate_from_start(start)`` drops entries wholly below start and moves the last of them up
  to start (the log start offset moved).
"""
import threading
from collections import namedtuple

from ..errors import KafkaStorageError
from .checkpoints import LeaderEpochCheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

EpochEntry = namedtuple("EpochEntry", "epoch start_offset")


class LeaderEpochFileCache:
    def __init__(self, path):
        self.path = path
        self.checkpoint = LeaderEpochCheckpointFile(path)
        self.file_existed = self.checkpoint.exists()
        self._write_lock = threading.Lock()
        entries = []
        for epoch, start in self.checkpoint.read():
            if epoch < 0 or start < 0:
                raise KafkaStorageError(f"malformed checkpoint file {path}: negative entry {epoch} {start}")
            # Kafka applies assign's rule to what it reads, so a file written out of order loads
            # as the monotonic list it should have been
            entries = _assigned(entries, EpochEntry(epoch, start)) or entries
        # readers take this tuple without the lock; writers replace it whole
        self._entries = tuple(entries)

    # -- reads --------------------------------------------------------------------------------
    def entries(self):
        return list(self._entries)

    @property
    def latest_entry(self):
        """The EpochEntry of the latest epoch, or None."""
        entries = self._entries
        return entries[-1] if entries else None

    @property
    def latest_epoch(self):
        entries = self._entries
        return entries[-1].epoch if entries else UNDEFINED_EPOCH

    @property
    def earliest_entry(self):
        entries = self._entries
        return entries[0] if entries else None

    def __len__(self):
        return len(self._entries)

    def previous_epoch(self, epoch):
        """The largest epoch below epoch, or -1."""
        best = UNDEFINED_EPOCH
        for e in self._entries:
            if e.epoch < epoch:
                best = e.epoch
        return best

    def epoch_for_offset(self, offset):
        """The epoch that wrote offset: the entry starting at it, else the last one starting
        below it; -1 when offset is below every entry (Kafka's epochForOffset)."""
        found = UNDEFINED_EPOCH
        for e in self._entries:
            if e.start_offset == offset:
                return e.epoch
            if e.start_offset > offset:
                return found
            found = e.epoch
        return found

    def end_offset_for(self, requested_epoch, log_end_offset):
        """(epoch, end offset) for requested_epoch: Kafka's endOffsetFor (see the module doc)."""
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH:
            # a bootstrapping follower, or a consumer without an epoch
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries and entries[-1].epoch == requested_epoch:
            # the epoch being written: it ends at the log end
            return requested_epoch, log_end_offset
        floor = higher = None
        for e in entries:
            if e.epoch <= requested_epoch:
                floor = e
            else:
                higher = e
                break
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if floor is None:
            # older than anything cached (deleted from the log): the follower starts where the
            # first known epoch does
            return requested_epoch, higher.start_offset
        return floor.epoch, higher.start_offset

    # -- changes ------------------------------------------------------------------------------
    def assign(self, epoch, start_offset):
        """Kafka's assign (see the module doc). Returns True when the entries changed."""
        return self.assign_all([(epoch, start_offset)])

    def assign_all(self, pairs):
        """assign for each (epoch, start offset) in order, with one file write at the end."""
        with self._write_lock:
            entries = list(self._entries)
            changed = False
            for epoch, start in pairs:
                if epoch < 0 or start < 0:
                    raise ValueError(f"invalid leader epoch entry ({epoch}, {start})")
                new = _assigned(entries, EpochEntry(epoch, start))
                if new is not None:
                    entries, changed = new, True
            if changed:
                self._commit(entries)
            return changed

    def truncate_from_end(self, end_offset):
        """Drops the entries starting at or after end_offset. Returns True when any went."""
        with self._write_lock:
            entries = list(self._entries)
            if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
                return False
            while entries and entries[-1].start_offset >= end_offset:
                entries.pop()
            self._commit(entries)
            return True

    def truncate_from_start(self, start_offset):
        """Drops the entries wholly below start_offset: those starting at or below it go, and
        the last of them comes back starting at start_offset (so an entry at start_offset
        stays). Returns True when the entries changed."""
        with self._write_lock:
            entries = list(self._entries)
            removed = None
            while entries and entries[0].start_offset <= start_offset:
                removed = entries.pop(0)
            if removed is None:
                return False
            entries.insert(0, EpochEntry(removed.epoch, start_offset))
            if tuple(entries) == self._entries:
                return False
            self._commit(entries)
            return True

    def clear(self):
        """Drops every entry (the file is written empty)."""
        with self._write_lock:
            self._commit([])

    def _commit(self, entries):
        # the file first: if it cannot be written, memory still matches it
        self.checkpoint.write(entries)
        self.file_existed = True
        self._entries = tuple(entries)

    def __repr__(self):
        return f"LeaderEpochFileCache({self.path}, {list(self._entries)})"


def _assigned(entries, entry):
    """The entries after assign(entry), or None when assign changes nothing."""
    if entries:
        latest = entries[-1]
        if entry.epoch == latest.epoch and entry.start_offset >= latest.start_offset:
            return None
    out = list(entries)
    while out and (out[-1].epoch >= entry.epoch or out[-1].start_offset >= entry.start_offset):
        out.pop()
    out.append(entry)
    return out
