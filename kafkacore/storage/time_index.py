"""Kafka's TimeIndex: sparse map from timestamp to offset. Entries: timestamp int64 + relative
offset int32, big-endian, 12 bytes, timestamps strictly increasing. An entry says: records up to
this offset carry timestamps up to this one. The entry format and the lookup are segment_files',
which read-only readers share."""
from ._hot import hot
from .index_file import IndexFile
from .segment_files import NO_TIMESTAMP, TIME_INDEX_ENTRY, lookup_timestamp


class TimeIndex(IndexFile):
    ENTRY_SIZE = TIME_INDEX_ENTRY.size

    def entry(self, slot):
        ts, rel = TIME_INDEX_ENTRY.unpack(self.entry_bytes(slot))
        return ts, self.base_offset + rel

    def last_entry(self):
        """(timestamp, offset) of the last entry; (NO_TIMESTAMP, base offset) if none."""
        return self.entry(self.entries - 1) if self.entries else (NO_TIMESTAMP, self.base_offset)

    def lookup(self, timestamp):
        """(timestamp, offset) of the last entry with a timestamp <= timestamp, or
        (NO_TIMESTAMP, base offset): the search for an offset by time starts there."""
        entries = self.entries
        return lookup_timestamp(self.buffer(entries), entries, self.base_offset, timestamp)

    def is_full(self, more=1):
        # one slot stays free for the entry written when the segment becomes inactive
        return self.entries + more > self.max_entries - 1

    def maybe_append(self, timestamp, offset):
        """Appends (timestamp, offset) when the timestamp is larger than the last entry's (Kafka's
        maybeAppend with skipFullCheck: used once as a segment becomes inactive)."""
        if timestamp <= self.last_entry()[0] or self.entries >= self.max_entries:
            return
        self.append_entries(TIME_INDEX_ENTRY.pack(timestamp, offset - self.base_offset))

    def sane(self):
        if self.corrupt_size:
            return False
        if self.entries == 0:
            return True
        return hot.time_index_sane(self.buffer(), self.entries)

    def truncate_to_offset(self, offset):
        """Keep only entries for offsets below offset."""
        n = self.entries
        while n and self.entry(n - 1)[1] >= offset:
            n -= 1
        self.truncate_to_entries(n)
