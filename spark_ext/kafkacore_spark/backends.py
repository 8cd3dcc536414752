"""Where records come from: a data directory's segment files (``path``) or a broker
(``kafka.bootstrap.servers``). Both answer the same questions on the driver (which partitions,
earliest / latest / by-timestamp offsets, how to split a range into tasks) and read one split
in a task as Arrow record batches."""
import math
import os
import time

from pyspark.sql.datasource import InputPartition

from kafkacore.storage.txn_view import TxnView

from .options import EARLIEST, LATEST, OptionError, SourceOptions
from .segments import DataLossError, PartitionFiles, list_partitions, read_range, segment_base_offset


class SegmentSplit(InputPartition):
    """Bytes [first, stop) of one segment file, records in [start_offset, end_offset).
    ``aborted``: None reads uncommitted; for read_committed, the (producer id, first offset,
    last offset) of the aborted transactions overlapping the split (possibly none)."""

    def __init__(self, topic, partition, log_path, first, stop, start_offset, end_offset, aborted=None):
        self.topic, self.partition = topic, partition
        self.log_path, self.first, self.stop = log_path, first, stop
        self.start_offset, self.end_offset = start_offset, end_offset
        self.aborted = aborted

    @property
    def bytes(self) -> int:
        """How many bytes of the file the task reads at most."""
        return self.stop - self.first

    def __repr__(self):
        txns = "" if self.aborted is None else f", read_committed, {len(self.aborted)} aborted transactions"
        return (f"SegmentSplit({self.topic}-{self.partition} {self.log_path}[{self.first}:{self.stop}] "
                f"offsets [{self.start_offset}, {self.end_offset}){txns})")


class PackedSplit(InputPartition):
    """Several small SegmentSplits read one after the other by one task: a Spark task's fixed
    cost is worth about as much as decoding SMALL_SPLIT_BYTES into rows, so pieces smaller than
    that (a pushed filter's few batches per partition, a small topic's partitions) share tasks."""

    def __init__(self, pieces):
        self.pieces = pieces

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.pieces)

    def __repr__(self):
        return f"PackedSplit({', '.join(map(repr, self.pieces))})"


# Packing target for small pieces: on the 2-core bench machine a task of Spark's Python source
# costs ~50-100 ms before its first row, the time its decoding takes for ~8 MiB of records.
SMALL_SPLIT_BYTES = 8 << 20


def pack_small(splits: list) -> list:
    """Next-fit, in plan order, of the pieces below SMALL_SPLIT_BYTES into tasks of at most
    SMALL_SPLIT_BYTES; bigger pieces keep a task each. A piece alone stays as it is."""
    out, current, size = [], [], 0

    def close():
        if current:
            out.append(current[0] if len(current) == 1 else PackedSplit(list(current)))
            current.clear()

    for s in splits:
        if s.bytes >= SMALL_SPLIT_BYTES:
            out.append(s)
            continue
        if size + s.bytes > SMALL_SPLIT_BYTES:
            close()
            size = 0
        current.append(s)
        size += s.bytes
    close()
    return out


# A read of less than this many small tasks' worth per core is planned as one wave of tasks.
SMALL_READ_SLOTS = 4


def planning_cores() -> int:
    """The cores this process may run on: the planning host's, which is Spark's default
    parallelism in local mode (a Python source cannot ask Spark for spark.default.parallelism)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def balance(splits: list, tasks: int) -> list:
    """The pieces of a small read shared out over ``tasks`` tasks, each piece to the task with
    the fewest bytes so far, biggest pieces first (longest-processing-time order), each task's
    pieces then read in plan order; a task of one piece is that piece."""
    order = {id(p): i for i, p in enumerate(splits)}
    bins = [[] for _ in range(min(tasks, len(splits)))]
    loads = [0] * len(bins)
    for piece in sorted(splits, key=lambda p: -p.bytes):
        i = loads.index(min(loads))
        bins[i].append(piece)
        loads[i] += piece.bytes
    out = []
    for b in bins:
        b.sort(key=lambda p: order[id(p)])
        out.append(b[0] if len(b) == 1 else PackedSplit(b))
    return out


class BrokerSplit(InputPartition):
    """Offsets [start_offset, end_offset) of one partition, fetched from a broker."""

    def __init__(self, topic, partition, start_offset, end_offset):
        self.topic, self.partition = topic, partition
        self.start_offset, self.end_offset = start_offset, end_offset

    def __repr__(self):
        return f"BrokerSplit({self.topic}-{self.partition} [{self.start_offset}, {self.end_offset}))"


def backend_for(opts: SourceOptions):
    return PathBackend(opts) if opts.path else BrokerBackend(opts)


class PathBackend:
    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self.read_committed = read_committed(opts)
        self._files = {}

    def _pf(self, tp) -> PartitionFiles:
        pf = self._files.get(tp)
        if pf is None:
            pf = self._files[tp] = PartitionFiles(self.opts.path, tp[0], tp[1])
        return pf

    def _txn_view(self, tp, segments=None) -> TxnView:
        """The partition's transactions as of the segment sizes listed now (or given)."""
        pf = self._pf(tp)
        segments = pf.segments() if segments is None else segments
        return TxnView(pf.dir, [(s.base_offset, s.size) for s in segments], pf.log_start_offset(segments),
                       pf.log_end_offset(segments))

    def topic_partitions(self) -> list:
        present = list_partitions(self.opts.path)
        if self.opts.assign is not None:
            missing = sorted(set(self.opts.assign) - set(present))
            if missing:
                raise OptionError(f"assigned partitions have no directory under {self.opts.path}: "
                                  + ", ".join(f"{t}-{p}" for t, p in missing))
            return list(self.opts.assign)
        return [tp for tp in present if self.opts.wants(tp[0])]

    def earliest(self, tps) -> dict:
        return {tp: self._pf(tp).log_start_offset() for tp in tps}

    def latest(self, tps) -> dict:
        if self.read_committed:
            return {tp: self._txn_view(tp).last_stable_offset for tp in tps}
        return {tp: self._pf(tp).log_end_offset() for tp in tps}

    def for_timestamps(self, targets: dict) -> dict:
        out = {tp: self._pf(tp).offset_for_timestamp(ts) for tp, ts in targets.items()}
        if self.read_committed:
            # an offset at or past the LSO is not readable yet: "none", as a broker answers
            # ListOffsets under read_committed (Kafka's fetchOffsetForTimestamp)
            for tp, o in out.items():
                if o is not None and o >= self._txn_view(tp).last_stable_offset:
                    out[tp] = None
        return out

    def stored_bytes(self, tps) -> int:
        """The size of the partitions' segment files: what reading all of them costs."""
        return sum(s.size for tp in tps for s in self._pf(tp).segments())

    def plan(self, ranges: dict, exact: bool = False) -> list:
        """SegmentSplits of about maxBytesPerPartition each; smaller when minPartitions asks
        for more tasks than that gives. A small read (under SMALL_READ_SLOTS small tasks per
        core) is shared out evenly over one wave of at most as many tasks as the host has cores
        (``balance``); in a bigger one the small pieces share tasks (``pack_small``). ``exact``: the ranges come from pushed filters, so
        each starts and stops at the batches holding its ends (PartitionFiles.splits)."""
        segs = {tp: self._pf(tp).segments() for tp in ranges}
        max_bytes = self.opts.max_bytes_per_partition
        want = self.opts.min_partitions or 0
        if want:
            total = sum(s.size for tp, (a, b) in ranges.items() if b > a for s in segs[tp])
            if total:
                max_bytes = max(1, min(max_bytes, math.ceil(total / want)))
        out = self._plan(ranges, segs, max_bytes, exact)
        if not want and not self.opts.max_records_per_partition and max_bytes >= SMALL_SPLIT_BYTES:
            # (minPartitions and maxRecordsPerPartition ask for tasks, and a maxBytesPerPartition
            # below the packing size for small ones: those plans are left as they are)
            total = sum(piece.bytes for piece in out)
            slots = planning_cores()
            if total < SMALL_READ_SLOTS * slots * SMALL_SPLIT_BYTES:
                tasks = max(1, min(slots, math.ceil(total / SMALL_SPLIT_BYTES)))
                if tasks > 1:  # pieces of at most half a task, so that the tasks come out even
                    out = self._plan(ranges, segs, math.ceil(total / (2 * tasks)), exact)
                return balance(out, tasks)
            return pack_small(out)
        # Segment tails and index granularity leave fewer pieces than total / max_bytes: cut
        # finer until there are minPartitions, or the cuts reach single batches.
        while len(out) < want and max_bytes > 1:
            max_bytes //= 2
            finer = self._plan(ranges, segs, max_bytes, exact)
            if len(finer) > len(out):
                out = finer
        return out

    def _plan(self, ranges, segs, max_bytes, exact):
        out = []
        for tp, (start, end) in sorted(ranges.items()):
            if end <= start:
                continue
            aborted = None
            if self.read_committed:
                # the view of the sizes the splits read up to, so it covers [start, end)
                aborted = [(a.producer_id, a.first_offset, a.last_offset)
                           for a in self._txn_view(tp, segs[tp]).aborted_transactions(start, end)]
            # maxRecordsPerPartition: pieces of at most that many offsets (so records), each
            # read from the batch holding its first offset to the one holding its last
            step = self.opts.max_records_per_partition or (end - start)
            for a in range(start, end, step):
                b = min(end, a + step)
                cut = exact or b - a < end - start
                for path, first, stop in self._pf(tp).splits(a, b, max_bytes, segs[tp], cut):
                    mine = None
                    if aborted is not None:
                        # an entry whose marker is before this segment cannot concern its records
                        base = segment_base_offset(path)
                        mine = [t for t in aborted if t[2] >= base]
                    out.append(SegmentSplit(tp[0], tp[1], path, first, stop, a, b, mine))
        return out


class BrokerBackend:
    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self._consumer = None

    def __getstate__(self):
        # The stream reader is pickled to the tasks; a live consumer (threads, sockets) is not.
        return {"opts": self.opts, "_consumer": None}

    def consumer(self):
        if self._consumer is None:
            from kafkacore import Consumer

            self._consumer = Consumer(consumer_config(self.opts))
        return self._consumer

    def close(self):
        if self._consumer is not None:
            self._consumer.close(autocommit=False)
            self._consumer = None

    def topic_partitions(self) -> list:
        topics = self.consumer().list_topics()
        if self.opts.assign is not None:
            missing = sorted(tp for tp in self.opts.assign if tp[1] >= topics.get(tp[0], 0))
            if missing:
                raise OptionError("assigned partitions do not exist on the broker: "
                                  + ", ".join(f"{t}-{p}" for t, p in missing))
            return list(self.opts.assign)
        return sorted((t, p) for t, n in topics.items() if self.opts.wants(t) for p in range(n))

    def earliest(self, tps) -> dict:
        return self.consumer().beginning_offsets(list(tps)) if tps else {}

    def latest(self, tps) -> dict:
        return self.consumer().end_offsets(list(tps)) if tps else {}

    def for_timestamps(self, targets: dict) -> dict:
        if not targets:
            return {}
        found = self.consumer().offsets_for_times(targets)
        return {tp: (None if v is None else v[0]) for tp, v in found.items()}

    def stored_bytes(self, tps) -> None:
        return None  # a broker does not say how big its logs are

    def plan(self, ranges: dict, exact: bool = False) -> list:
        """One BrokerSplit per partition range, cut into pieces of maxRecordsPerPartition, and
        the biggest ranges cut further until there are minPartitions pieces (as Spark's
        KafkaOffsetRangeCalculator does)."""
        pieces = []
        for tp, (start, end) in sorted(ranges.items()):
            if end <= start:
                continue
            step = self.opts.max_records_per_partition or (end - start)
            for a in range(start, end, step):
                pieces.append((tp, a, min(end, a + step)))
        want = self.opts.min_partitions
        if want and len(pieces) < want:
            total = sum(b - a for _tp, a, b in pieces)
            split = []
            for tp, a, b in pieces:
                # half up, as Spark's Math.round (Python's round() halves to even)
                n = max(1, math.floor((b - a) * want / total + 0.5)) if total else 1
                step = math.ceil((b - a) / n)
                split.extend((tp, x, min(b, x + step)) for x in range(a, b, step))
            pieces = split
            # rounding can still leave fewer (a partition with no new records gets no share):
            # halve the largest piece until there are minPartitions or pieces of one record
            while pieces and len(pieces) < want:  # (no pieces: nothing to read)
                i = max(range(len(pieces)), key=lambda k: pieces[k][2] - pieces[k][1])
                tp, a, b = pieces[i]
                if b - a < 2:
                    break
                mid = a + (b - a) // 2
                pieces[i:i + 1] = [(tp, a, mid), (tp, mid, b)]
        return [BrokerSplit(tp[0], tp[1], a, b) for tp, a, b in pieces]


def read_committed(opts: SourceOptions) -> bool:
    """kafka.isolation.level, Spark's name and default (read_uncommitted)."""
    return opts.kafka.get("isolation.level", "read_uncommitted") == "read_committed"


def consumer_config(opts: SourceOptions) -> dict:
    conf = {"enable.auto.commit": False, "auto.offset.reset": "none"}
    conf.update(opts.kafka)
    conf.pop("group.id", None)  # the source assigns partitions itself and never joins a group
    return conf


# -- resolving offset specs -------------------------------------------------------------------
def resolve(backend, spec, tps, which: str, strategy: str = "error") -> dict:
    """An OffsetSpec -> {tp: offset}, every partition in tps covered."""
    if not tps:
        return {}
    if spec.kind == "earliest":
        return backend.earliest(tps)
    if spec.kind == "latest":
        return backend.latest(tps)
    if spec.kind == "offsets":
        missing = sorted(set(tps) - set(spec.offsets))
        if missing:
            raise OptionError(f"{which}Offsets must name every partition read; missing: "
                              + ", ".join(f"{t}-{p}" for t, p in missing))
        out = {tp: spec.offsets[tp] for tp in tps}
        need_e = [tp for tp, o in out.items() if o == EARLIEST]
        need_l = [tp for tp, o in out.items() if o == LATEST]
        out.update(backend.earliest(need_e) if need_e else {})
        out.update(backend.latest(need_l) if need_l else {})
        return out
    if spec.kind == "timestamp":
        targets = {tp: spec.timestamp for tp in tps}
    else:
        missing = sorted(set(tps) - set(spec.timestamps))
        if missing:
            raise OptionError(f"{which}OffsetsByTimestamp must name every partition read; missing: "
                              + ", ".join(f"{t}-{p}" for t, p in missing))
        targets = {tp: spec.timestamps[tp] for tp in tps}
    found = backend.for_timestamps(targets)
    none = [tp for tp in tps if found.get(tp) is None]
    if none and which == "starting" and strategy == "error":
        raise OptionError(
            "no record at or after the starting timestamp in " + ", ".join(f"{t}-{p}" for t, p in none)
            + " (set startingOffsetsByTimestampStrategy=latest to start at the end instead)")
    if none:
        found.update(backend.latest(none))
    return found


def check_ranges(starts: dict, ends: dict, earliest: dict, fail_on_data_loss: bool) -> dict:
    """{tp: (start, end)}; a start below the earliest offset still stored is data loss."""
    ranges = {}
    for tp, end in ends.items():
        start = starts.get(tp, earliest[tp])
        if start < earliest[tp]:
            if fail_on_data_loss:
                raise DataLossError(
                    f"offsets {start}..{earliest[tp] - 1} of {tp[0]}-{tp[1]} are gone (deleted by retention "
                    f"or DeleteRecords): the earliest offset is {earliest[tp]}. Set failOnDataLoss=false to "
                    f"skip them.")
            start = earliest[tp]
        if start > end:
            raise OptionError(f"{tp[0]}-{tp[1]}: the starting offset {start} is after the ending offset {end}")
        ranges[tp] = (start, end)
    return ranges


# -- reading a split (in a task) ------------------------------------------------------------
def read_split(split, opts: SourceOptions):
    if isinstance(split, PackedSplit):
        for piece in split.pieces:
            yield from read_split(piece, opts)
        return
    if not isinstance(split, (SegmentSplit, BrokerSplit)):
        # A plan without splits (no partitions, or only empty ranges): Spark then runs one task
        # with its own placeholder, InputPartition(None), which has nothing to read.
        if type(split) is InputPartition and split.value is None:
            return
        raise TypeError(f"kafkacore cannot read {split!r}: not a split planned by this source")
    if isinstance(split, SegmentSplit):
        try:
            yield from read_range(split.topic, split.partition, split.log_path, split.first, split.stop,
                                  split.start_offset, split.end_offset, split.aborted)
        except FileNotFoundError:
            if opts.fail_on_data_loss:
                raise DataLossError(
                    f"{split.log_path} was deleted (retention) before it was read: records of "
                    f"{split.topic}-{split.partition} in [{split.start_offset}, {split.end_offset}) are lost. "
                    f"Set failOnDataLoss=false to skip them.") from None
        return
    yield from _read_from_broker(split, opts)


def _read_from_broker(split: BrokerSplit, opts: SourceOptions):
    import pyarrow.compute as pc

    from kafkacore import Consumer
    from kafkacore.errors import OffsetOutOfRangeError

    tp = (split.topic, split.partition)
    consumer = Consumer(consumer_config(opts))
    try:
        consumer.assign([tp])
        consumer.seek(split.topic, split.partition, split.start_offset)
        deadline = time.monotonic() + opts.poll_timeout_ms / 1000.0
        position = split.start_offset
        while position < split.end_offset:
            try:
                batch = consumer.poll_arrow(timeout=0.5, max_records=100_000)
            except OffsetOutOfRangeError as e:
                if opts.fail_on_data_loss:
                    raise DataLossError(
                        f"offset {position} of {tp[0]}-{tp[1]} is no longer on the broker (retention): "
                        f"{e}. Set failOnDataLoss=false to skip it.") from e
                consumer.seek_to_beginning([tp])
                continue
            if batch.num_rows:
                offsets = batch.column("offset")
                first = offsets[0].as_py()
                if first > position and opts.fail_on_data_loss and position == split.start_offset:
                    earliest = consumer.beginning_offsets([tp])[tp]
                    if earliest > position:
                        raise DataLossError(
                            f"offsets {position}..{first - 1} of {tp[0]}-{tp[1]} are gone (retention); "
                            f"set failOnDataLoss=false to skip them")
                if offsets[-1].as_py() >= split.end_offset:
                    batch = batch.filter(pc.less(offsets, split.end_offset))
                if batch.num_rows:
                    yield batch
            moved = consumer.position(split.topic, split.partition)
            if moved > position:
                # progress without rows counts: aborted records and markers are skipped, and a
                # range may hold nothing else (read_committed)
                deadline = time.monotonic() + opts.poll_timeout_ms / 1000.0
            position = moved
            if position < split.end_offset and time.monotonic() > deadline:
                raise TimeoutError(
                    f"no progress reading {tp[0]}-{tp[1]} at offset {position} (want up to {split.end_offset}) "
                    f"within kafkaConsumer.pollTimeoutMs={opts.poll_timeout_ms}")
    finally:
        consumer.close(autocommit=False)
