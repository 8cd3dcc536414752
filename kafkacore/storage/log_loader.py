"""Kafka's LogLoader: opens a partition directory into segments, repairing what a crash left.

1. Leftovers go: ``.deleted`` and ``.cleaned`` files, checkpoint ``.tmp`` files, index files
   without a log.
2. A ``.swap`` segment is a cleaner's replacement that was complete before the crash (files are
   renamed ``.cleaned`` -> ``.swap`` only once fully written and fsynced): the live segments it
   covers are deleted and the swap becomes live.
3. Without a clean shutdown, every segment from the one holding the recovery point on is
   recovered: batches checked (size, magic, CRC-32C, ascending offsets), the log cut at the first
   invalid byte, the indexes rebuilt; once a segment was cut, the segments after it are deleted
   (their offsets would no longer follow). Segments before it are loaded as they are, but an
   index that fails its sanity check is rebuilt; a ``.txnindex`` failing its sanity check makes
   its segment the first recovered one (docs/transactions.md 4.6).
4. The ``.txnindex`` of the first segment recovered or rebuilt and of every later one is deleted:
   the log rebuilds them while it replays the producer state from there (Log.__init__), so they
   are byte for byte what the appends wrote.
5. The last segment becomes the active one; an empty log gets one at the log start offset."""
import logging
import os

from ..clock import wall_ms
from ..errors import CorruptMessageError
from .txn_index import CorruptIndexError
from .log_segment import LogSegment
from .segment_files import (CLEANED_SUFFIX, DELETED_SUFFIX, FILE_SUFFIXES, INDEX_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX,
                            TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, parse_segment_file_name)


NOTHING_REPAIRED = 1 << 62


log = logging.getLogger("kafkacore.storage")


class LoadResult:
    def __init__(self):
        self.segments = []
        self.recovered_segments = 0
        self.rebuilt_indexes = 0
        self.truncated_bytes = 0
        self.deleted_segments = 0
        self.completed_swaps = 0
        self.corrupt_txn_indexes = 0
        self.first_repaired_offset = NOTHING_REPAIRED  # base offset of the first segment recovered or rebuilt

    @property
    def first_recovered_offset(self):
        """The base offset of the first segment recovered or rebuilt, None when none was: the
        .txnindex files from there on were deleted and are to be rebuilt."""
        return None if self.first_repaired_offset == NOTHING_REPAIRED else self.first_repaired_offset


def _base_of(name):
    parsed = parse_segment_file_name(name)
    return None if parsed is None else parsed.base_offset


def load_segments(directory, config, recovery_point, log_start_offset, clean_shutdown) -> LoadResult:
    result = LoadResult()
    names = os.listdir(directory)
    for name in names:
        if name.endswith(DELETED_SUFFIX) or name.endswith(CLEANED_SUFFIX) or name.endswith(".tmp"):
            os.unlink(os.path.join(directory, name))
    names = os.listdir(directory)

    for name in sorted(n for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)):
        base = _base_of(name)
        if base is None:
            continue
        swap = LogSegment(directory, base, config, suffix=SWAP_SUFFIX)
        swap.recover(active=False)
        covered_end = max(swap.next_offset, base + 1)
        for other in names:
            b = _base_of(other)
            if (b is not None and base <= b < covered_end and not other.endswith(SWAP_SUFFIX)
                    and any(other.endswith(s) for s in FILE_SUFFIXES)):
                os.unlink(os.path.join(directory, other))
        swap.change_suffix(SWAP_SUFFIX, "")
        swap.close()
        result.completed_swaps += 1
    names = os.listdir(directory)
    for name in names:  # index files of a swap whose log was already renamed
        if name.endswith(SWAP_SUFFIX):
            os.unlink(os.path.join(directory, name))
    names = os.listdir(directory)

    bases = sorted(b for b in (_base_of(n) for n in names if n.endswith(LOG_SUFFIX)) if b is not None)
    base_set = set(bases)
    for name in names:
        if (name.endswith(INDEX_SUFFIX) or name.endswith(TIME_INDEX_SUFFIX) or name.endswith(TXN_INDEX_SUFFIX)) \
                and _base_of(name) not in base_set:
            os.unlink(os.path.join(directory, name))

    segments = [LogSegment(directory, b, config) for b in bases]
    first_to_recover = len(segments)
    if not clean_shutdown:
        first_to_recover = 0
        for i, seg in enumerate(segments):
            if seg.base_offset <= recovery_point:
                first_to_recover = i
    i = 0
    while i < len(segments):
        seg = segments[i]
        cut = 0
        repaired = True
        if i >= first_to_recover:
            cut = seg.recover(active=False)
            result.recovered_segments += 1
        elif not seg.indexes_sane():
            cut = seg.recover(active=False)
            result.rebuilt_indexes += 1
        elif not _txn_index_sane(seg):
            # its entries cannot be trusted, nor the segments after it (Kafka recovers the
            # segment; here the replay rebuilds every .txnindex from it on)
            first_to_recover = i
            cut = seg.recover(active=False)
            result.recovered_segments += 1
            result.corrupt_txn_indexes += 1
        else:
            try:
                seg.load(active=False)
                repaired = False
            except CorruptMessageError:
                cut = seg.recover(active=False)
                result.recovered_segments += 1
        if repaired:
            result.first_repaired_offset = min(result.first_repaired_offset, seg.base_offset)
        if cut:
            result.truncated_bytes += cut
            seg.flush()
            for later in segments[i + 1:]:
                later.delete_files()
                result.deleted_segments += 1
            del segments[i + 1:]
        i += 1

    if result.first_repaired_offset != NOTHING_REPAIRED:
        for seg in segments:
            if seg.base_offset >= result.first_repaired_offset:
                seg.txn_index.delete()
    if not segments:
        segments.append(LogSegment(directory, max(log_start_offset, 0), config, created_ms=wall_ms()))
        segments[-1].load(active=False)
    active = segments[-1]
    active.load(active=True)  # grows the indexes back and sets up appends
    result.segments = segments
    return result


def _txn_index_sane(seg):
    """TransactionIndex.sanity_check as a yes/no (a file that cannot be read is a
    KafkaStorageError and stops the load: it is not damage recovery can repair)."""
    try:
        seg.txn_index.sanity_check()
    except CorruptIndexError as e:
        log.warning("%s; the segment is recovered and its .txnindex rebuilt", e)
        return False
    return True
