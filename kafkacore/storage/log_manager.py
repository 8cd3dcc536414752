"""Kafka's LogManager: one data directory (``log.dirs``) of partition logs.

On start it writes or checks ``meta.properties``, takes the ``.kafka_cleanshutdown`` marker (its
absence means the last run crashed and logs are recovered from their recovery points), reads the
checkpoint files and opens every ``<topic>-<partition>`` directory. While running, a scheduler
thread runs retention (``log.retention.check.interval.ms``), ``flush.ms`` flushes, checkpoint
writes and delayed file deletions, and the cleaner thread compacts. ``shutdown()`` flushes and
closes every log, writes the checkpoints with recovery points at the log ends, and writes the
clean-shutdown marker."""
import os
import re
import shutil
import threading

from ..errors import InvalidTopicError, TopicAlreadyExistsError
from .checkpoints import (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile,
                          load_or_create_meta_properties, take_clean_shutdown, write_clean_shutdown)
from .config import LogConfig
from .log import Log, parse_partition_dir
from .log_cleaner import LogCleaner
from .scheduler import InlineScheduler, Scheduler

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_LENGTH = 249


def validate_topic_name(topic):
    """Kafka's Topic.validate: 1-249 of [a-zA-Z0-9._-], not "." or ".."."""
    if not topic or topic in (".", ".."):
        raise InvalidTopicError(f"topic name {topic!r} is illegal")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(f"topic name {topic[:40]!r}... is longer than {MAX_TOPIC_LENGTH} characters")
    if not _LEGAL_TOPIC.match(topic):
        raise InvalidTopicError(f"topic name {topic!r} has characters other than ASCII alphanumerics, '.', '_' and '-'")


class LogManager:
    def __init__(self, data_dir, default_config=None, *, node_id=1, cluster_id=None, background=True,
                 retention_check_interval_ms=300000, flush_check_interval_ms=1000,
                 checkpoint_interval_ms=60000, cleaner_enable=True, cleaner_backoff_ms=15000,
                 cleaner_dedupe_buffer_size=128 << 20):
        self.data_dir = os.path.abspath(data_dir)
        os.makedirs(self.data_dir, exist_ok=True)
        self.meta = load_or_create_meta_properties(self.data_dir, node_id, cluster_id)
        self.cluster_id = self.meta["cluster.id"]
        self.default_config = default_config or LogConfig()
        self.topic_overrides = {}  # topic -> {kafka name: value}
        self.had_clean_shutdown = take_clean_shutdown(self.data_dir)
        self._recovery_checkpoint = OffsetCheckpointFile(os.path.join(self.data_dir, RECOVERY_POINT_CHECKPOINT))
        self._start_checkpoint = OffsetCheckpointFile(os.path.join(self.data_dir, LOG_START_OFFSET_CHECKPOINT))
        self.scheduler = Scheduler() if background else InlineScheduler()
        self._lock = threading.RLock()
        self.logs = {}
        recovery_points = self._recovery_checkpoint.read()
        start_offsets = self._start_checkpoint.read()
        for name in sorted(os.listdir(self.data_dir)):
            path = os.path.join(self.data_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith("-delete"):  # a deletion that did not finish before a stop
                shutil.rmtree(path, ignore_errors=True)
                continue
            parsed = parse_partition_dir(name)
            if parsed is None:
                continue
            self.logs[parsed] = Log(path, self.config_for(parsed[0]),
                                    recovery_point=recovery_points.get(parsed, 0),
                                    log_start_offset=start_offsets.get(parsed, 0),
                                    clean_shutdown=self.had_clean_shutdown, scheduler=self.scheduler)
        self.cleaner = None
        if cleaner_enable:
            self.cleaner = LogCleaner(self.data_dir, lambda: dict(self.logs), backoff_ms=cleaner_backoff_ms,
                                      dedupe_buffer_size=cleaner_dedupe_buffer_size, background=background)
        self.checkpoint()
        if background:
            self.scheduler.schedule(retention_check_interval_ms, self.run_retention, retention_check_interval_ms)
            self.scheduler.schedule(flush_check_interval_ms, self.flush_dirty_logs, flush_check_interval_ms)
            self.scheduler.schedule(checkpoint_interval_ms, self.checkpoint, checkpoint_interval_ms)
        self.closed = False

    # -- topics and partitions ---------------------------------------------------------------
    def config_for(self, topic, overrides=None):
        merged = dict(self.topic_overrides.get(topic, {}))
        merged.update(overrides or {})
        return self.default_config.with_overrides(merged)

    def get_log(self, topic, partition):
        return self.logs.get((topic, partition))

    def create_log(self, topic, partition, overrides=None, topic_id=None):
        """Creates the partition's log; TopicAlreadyExistsError when it exists."""
        validate_topic_name(topic)
        with self._lock:
            if (topic, partition) in self.logs:
                raise TopicAlreadyExistsError(f"{topic}-{partition} already exists")
            if overrides:
                self.topic_overrides.setdefault(topic, {}).update(overrides)
            config = self.config_for(topic)
            path = os.path.join(self.data_dir, f"{topic}-{partition}")
            lg = Log(path, config, scheduler=self.scheduler, topic_id=topic_id)
            self.logs[(topic, partition)] = lg
            return lg

    def get_or_create_log(self, topic, partition, overrides=None, topic_id=None):
        with self._lock:
            lg = self.logs.get((topic, partition))
            return lg if lg is not None else self.create_log(topic, partition, overrides, topic_id)

    def delete_log(self, topic, partition):
        with self._lock:
            lg = self.logs.pop((topic, partition), None)
        if lg is None:
            return False
        lg.delete()
        if self.cleaner is not None:
            self.cleaner.forget(topic, partition)
        return True

    def set_topic_config(self, topic, overrides):
        """Replaces a topic's overrides; every open partition of it takes the new config."""
        config = self.default_config.with_overrides(overrides)
        with self._lock:
            self.topic_overrides[topic] = dict(overrides)
            for (t, _p), lg in self.logs.items():
                if t == topic:
                    lg.config = config
        return config

    # -- background work ---------------------------------------------------------------------
    def run_retention(self, now=None):
        deleted = 0
        for lg in list(self.logs.values()):
            if not lg.closed:
                deleted += lg.delete_old_segments(now)
        return deleted

    def flush_dirty_logs(self, now=None):
        for lg in list(self.logs.values()):
            if not lg.closed:
                lg.maybe_flush(now)

    def checkpoint(self):
        logs = {k: lg for k, lg in self.logs.items() if not lg.closed}
        self._recovery_checkpoint.write({k: lg.recovery_point for k, lg in logs.items()})
        self._start_checkpoint.write({k: lg.log_start_offset for k, lg in logs.items()})

    def shutdown(self):
        """Clean stop: threads stopped, logs flushed and closed, checkpoints written with the
        recovery points at the log ends, then the clean-shutdown marker."""
        if self.closed:
            return
        self.closed = True
        if self.cleaner is not None:
            self.cleaner.shutdown()
        self.scheduler.shutdown(run_pending=True)
        logs = dict(self.logs)
        for lg in logs.values():
            lg.close()
        self._recovery_checkpoint.write({k: lg.log_end_offset for k, lg in logs.items()})
        self._start_checkpoint.write({k: lg.log_start_offset for k, lg in logs.items()})
        write_clean_shutdown(self.data_dir)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
