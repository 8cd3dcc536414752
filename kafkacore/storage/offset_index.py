"""Kafka's OffsetIndex: sparse map from offset to the file position of the batch holding it.
Entries: relative offset int32 + position int32, big-endian, 8 bytes. An entry's offset is the
last offset of the batch that starts at its position. The entry format and the lookups are
segment_files', which read-only readers share."""
from ._hot import hot
from .index_file import IndexFile
from .segment_files import OFFSET_INDEX_ENTRY, lookup_offset, lookup_position


class OffsetIndex(IndexFile):
    ENTRY_SIZE = OFFSET_INDEX_ENTRY.size

    def entry(self, slot):
        rel, pos = OFFSET_INDEX_ENTRY.unpack(self.entry_bytes(slot))
        return self.base_offset + rel, pos

    def lookup(self, offset):
        """(offset, position) of the last entry at or below offset; (base offset, 0) if none."""
        entries = self.entries
        return lookup_offset(self.buffer(entries), entries, self.base_offset, offset)

    def lookup_position(self, position):
        """Position of the last entry at or below position; 0 if none."""
        entries = self.entries
        return lookup_position(self.buffer(entries), entries, position)

    def upper_bound_for_position(self, position):
        """(offset, position) of the first entry whose position is >= position, None when no
        entry reaches it (Kafka's OffsetIndex.fetchUpperBoundOffset: the smallest upper bound
        slot by value)."""
        entries = self.entries
        if entries == 0:
            return None
        slot = hot.offset_index_lookup_position(self.buffer(entries), entries, position)
        if slot >= 0 and self.entry(slot)[1] == position:
            return self.entry(slot)
        slot += 1
        return self.entry(slot) if slot < entries else None

    def last_entry(self):
        return self.entry(self.entries - 1) if self.entries else (self.base_offset, 0)

    def sane(self, log_size):
        if self.corrupt_size:
            return False
        if self.entries == 0:
            return True
        return hot.offset_index_sane(self.buffer(), self.entries, max(log_size, 1))

    def truncate_to_offset(self, offset):
        """Keep only entries for offsets below offset."""
        if self.entries == 0:
            return
        slot = hot.offset_index_lookup(self.buffer(), self.entries, min(offset - self.base_offset, 0x7FFFFFFF))
        # entries at or above offset go; an entry equal to offset too (its batch ends there)
        keep = slot + 1
        if keep > 0 and self.entry(slot)[0] >= offset:
            keep = slot
        self.truncate_to_entries(max(keep, 0))
