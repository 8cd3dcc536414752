"""The storage engine: Kafka's on-disk formats and log semantics (see docs/storage.md).

``LogManager`` owns a data directory of partition logs; ``Log`` is one partition; ``LogSegment``,
``OffsetIndex``, ``TimeIndex`` and ``TransactionIndex`` are its files; ``LogCleaner`` compacts;
``LogConfig`` holds the topic configuration with Kafka's names and defaults. ``AppendOrigin``
names who appends (Kafka's: client, coordinator, replication); ``AbortedTxn`` is a .txnindex
entry, as ``Log.read_committed`` returns them. ``segment_files`` reads a partition's files
without opening a Log (names, segments, batch headers, index lookups), for readers of a data
directory that is not theirs."""
from ._hot import IS_NATIVE
from .config import LogConfig
from .file_slice import FileSlice
from .log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log, LogAppendInfo
from .log_cleaner import LogCleaner
from .log_manager import LogManager, validate_topic_name
from .log_segment import LogSegment
from .offset_index import OffsetIndex
from .producer_state import AppendOrigin, CompletedTxn
from .segment_files import parse_partition_dir, segment_file_name
from .time_index import TimeIndex
from .txn_index import AbortedTxn, TransactionIndex

__all__ = ["IS_NATIVE", "LogConfig", "FileSlice", "Log", "LogAppendInfo", "LogSegment", "OffsetIndex",
           "TimeIndex", "LogCleaner", "LogManager", "validate_topic_name", "segment_file_name", "parse_partition_dir", "EARLIEST_TIMESTAMP",
           "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "AppendOrigin", "CompletedTxn", "AbortedTxn", "TransactionIndex"]
