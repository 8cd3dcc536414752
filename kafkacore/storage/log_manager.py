"""Kafka's LogManager: one data directory (``log.dirs``) of partition logs.

On start it writes or checks ``meta.properties``, takes the ``.kafka_cleanshutdown`` marker (its
absence means the last run crashed and logs are recovered from their recovery points), reads the
checkpoint files and opens every ``<topic>-<partition>`` directory. While running, a scheduler
thread runs retention (``log.retention.check.interval.ms``), ``flush.ms`` flushes, checkpoint
writes and delayed file deletions, and the cleaner thread compacts. ``shutdown()`` flushes and
closes every log, writes the checkpoints with recovery points at the log ends, and writes the
clean-shutdown marker.

Replication: ``replication-offset-checkpoint`` holds the high watermarks (written with the other
checkpoints and by ``checkpoint_high_watermarks()``); each log gets its value as
``checkpointed_high_watermark`` at start, which ``Log.make_replicated()`` applies. A truncation
of a log writes the recovery-point and log-start checkpoints at once (Kafka's
LogManager.truncateTo does), so a stale recovery point never hides appends made after it."""
import json
import os
import re
import shutil
import threading
import weakref

from ..errors import InvalidTopicError, KafkaStorageError, TopicAlreadyExistsError
from .checkpoints import (LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
                          OffsetCheckpointFile, load_or_create_meta_properties, take_clean_shutdown,
                          write_atomically, write_clean_shutdown)
from .config import LogConfig
from .dir_lock import DataDirLock
from .log import Log
from .log_cleaner import LogCleaner
from .scheduler import InlineScheduler, Scheduler
from .segment_files import parse_partition_dir

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
# Kafka keeps topic configs in its metadata log, not in log.dirs; a single-node kafkacore keeps
# each topic's overrides in this file of the data directory, so a compacted topic is still
# compacted after a restart (Kafka's loaders ignore files they do not know).
TOPIC_CONFIGS_FILE = "kafkacore-topic-configs.json"
MAX_TOPIC_LENGTH = 249


MAX_PARTITIONS = 1 << 20  # a sanity bound per CreateTopics/CreatePartitions request


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
                 cleaner_dedupe_buffer_size=128 << 20, replicated=False,
                 producer_id_expiration_ms=86400000, producer_id_expiration_check_interval_ms=600000):
        """producer_id_expiration_ms / _check_interval_ms: Kafka's producer.id.expiration.ms and
        producer.id.expiration.check.interval.ms (docs/transactions.md 4.8). replicated: every log is opened (and created) replicated, its high watermark the
        checkpointed one; otherwise a caller switches logs with Log.make_replicated()."""
        self.replicated = replicated
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.data_dir = os.path.abspath(data_dir)
        os.makedirs(self.data_dir, exist_ok=True)
        self.closed = True  # until opened: shutdown() of a half-built manager only drops the lock
        self._dir_lock = DataDirLock(self.data_dir)  # before anything in the directory is read or written
        try:
            self._open(node_id, cluster_id, default_config, background, retention_check_interval_ms,
                       flush_check_interval_ms, checkpoint_interval_ms, cleaner_enable, cleaner_backoff_ms,
                       cleaner_dedupe_buffer_size, producer_id_expiration_check_interval_ms)
        except BaseException:
            self._dir_lock.release()
            raise

    def _open(self, node_id, cluster_id, default_config, background, retention_check_interval_ms,
              flush_check_interval_ms, checkpoint_interval_ms, cleaner_enable, cleaner_backoff_ms,
              cleaner_dedupe_buffer_size, producer_id_expiration_check_interval_ms):
        self.meta = load_or_create_meta_properties(self.data_dir, node_id, cluster_id)
        self.cluster_id = self.meta["cluster.id"]
        self.default_config = default_config or LogConfig()
        self._topic_configs_path = os.path.join(self.data_dir, TOPIC_CONFIGS_FILE)
        self.topic_overrides = self._read_topic_configs()  # topic -> {kafka name: value}
        self.had_clean_shutdown = take_clean_shutdown(self.data_dir)
        self._recovery_checkpoint = OffsetCheckpointFile(os.path.join(self.data_dir, RECOVERY_POINT_CHECKPOINT))
        self._start_checkpoint = OffsetCheckpointFile(os.path.join(self.data_dir, LOG_START_OFFSET_CHECKPOINT))
        self._hw_checkpoint = OffsetCheckpointFile(os.path.join(self.data_dir, REPLICATION_OFFSET_CHECKPOINT))
        self.scheduler = Scheduler() if background else InlineScheduler()
        self._lock = threading.RLock()
        # one writer of the checkpoint files at a time, each writing values read under it, so
        # an older value never overwrites a newer one (a truncation's against the periodic job)
        self._checkpoint_lock = threading.Lock()
        self.cleaner = None
        self.logs = {}
        recovery_points = self._recovery_checkpoint.read()
        start_offsets = self._start_checkpoint.read()
        high_watermarks = self._hw_checkpoint.read()
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
            self.logs[parsed] = self._watched(Log(
                path, self.config_for(parsed[0]), recovery_point=recovery_points.get(parsed, 0),
                log_start_offset=start_offsets.get(parsed, 0), clean_shutdown=self.had_clean_shutdown,
                scheduler=self.scheduler, checkpointed_high_watermark=high_watermarks.get(parsed),
                replicated=self.replicated))
        if cleaner_enable:
            self.cleaner = LogCleaner(self.data_dir, lambda: dict(self.logs), backoff_ms=cleaner_backoff_ms,
                                      dedupe_buffer_size=cleaner_dedupe_buffer_size, background=background)
        self.checkpoint()
        if background:
            self.scheduler.schedule(retention_check_interval_ms, self.run_retention, retention_check_interval_ms)
            self.scheduler.schedule(flush_check_interval_ms, self.flush_dirty_logs, flush_check_interval_ms)
            self.scheduler.schedule(checkpoint_interval_ms, self.checkpoint, checkpoint_interval_ms)
            self.scheduler.schedule(producer_id_expiration_check_interval_ms, self.remove_expired_producers,
                                    producer_id_expiration_check_interval_ms)
        self.closed = False

    # -- topics and partitions ---------------------------------------------------------------
    def _read_topic_configs(self):
        try:
            with open(self._topic_configs_path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise KafkaStorageError(f"malformed {self._topic_configs_path}: {e}") from e
        return {topic: {k: str(v) for k, v in cfg.items()} for topic, cfg in data.items()}

    def _write_topic_configs(self):
        write_atomically(self._topic_configs_path, json.dumps(self.topic_overrides, indent=1, sort_keys=True))

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
                self.config_for(topic, overrides)  # a bad value fails before anything is stored
                self.topic_overrides.setdefault(topic, {}).update({k: str(v) for k, v in overrides.items()})
                self._write_topic_configs()
            config = self.config_for(topic)
            path = os.path.join(self.data_dir, f"{topic}-{partition}")
            lg = self._watched(Log(path, config, scheduler=self.scheduler, topic_id=topic_id,
                                   replicated=self.replicated))
            self.logs[(topic, partition)] = lg
            return lg

    def _watched(self, lg):
        manager = weakref.ref(self)  # no cycle: a closed manager's logs (and fds) go with it

        def after_truncation(log):
            m = manager()
            if m is not None:
                m._after_truncation(log)
        lg.truncation_listeners.append(after_truncation)
        return lg

    def get_or_create_log(self, topic, partition, overrides=None, topic_id=None):
        with self._lock:
            lg = self.logs.get((topic, partition))
            if lg is None:
                return self.create_log(topic, partition, overrides, topic_id)
            if overrides:
                merged = dict(self.topic_overrides.get(topic, {}))
                merged.update({k: str(v) for k, v in overrides.items()})
                if merged != self.topic_overrides.get(topic):
                    self.set_topic_config(topic, merged)
            return lg

    def delete_log(self, topic, partition):
        with self._lock:
            lg = self.logs.pop((topic, partition), None)
            if lg is None:
                return False
            if not any(t == topic for t, _p in self.logs):
                if self.topic_overrides.pop(topic, None) is not None:
                    self._write_topic_configs()
        if self.cleaner is not None:
            # waits for a cleaning pass over this log to end (Kafka aborts it), so the cleaner
            # never renames files in a directory that is going away or being re-created
            self.cleaner.forget(topic, partition, lg)
        else:
            lg.delete()
        return True

    def set_default_config(self, default_config):
        """New topic defaults (dynamic broker configs): every open log takes them under its
        topic's own overrides."""
        with self._lock:
            self.default_config = default_config
            for (t, _p), lg in self.logs.items():
                lg.config = default_config.with_overrides(self.topic_overrides.get(t, {}))

    def set_topic_config(self, topic, overrides):
        """Replaces a topic's overrides; every open partition of it takes the new config."""
        config = self.default_config.with_overrides(overrides)
        with self._lock:
            self.topic_overrides[topic] = {k: str(v) for k, v in overrides.items()}
            self._write_topic_configs()
            for (t, _p), lg in self.logs.items():
                if t == topic:
                    lg.config = config
        return config

    # -- background work ---------------------------------------------------------------------
    def run_retention(self, now=None):
        deleted = 0
        with self._lock:
            logs = list(self.logs.values())
        for lg in logs:
            if not lg.closed:
                deleted += lg.delete_old_segments(now)
        return deleted

    def remove_expired_producers(self, now=None):
        """Kafka's PeriodicProducerExpirationCheck over every open log. Returns how many
        producers went."""
        removed = 0
        with self._lock:
            logs = list(self.logs.values())
        for lg in logs:
            if not lg.closed:
                removed += lg.remove_expired_producers(self.producer_id_expiration_ms, now)
        return removed

    def flush_dirty_logs(self, now=None):
        for lg in list(self.logs.values()):
            if not lg.closed:
                lg.maybe_flush(now)

    def checkpoint(self):
        """The recovery-point, log-start and high-watermark checkpoints of the open logs."""
        with self._checkpoint_lock:
            logs = self._open_logs()
            self._recovery_checkpoint.write({k: lg.recovery_point for k, lg in logs.items()})
            self._start_checkpoint.write({k: lg.log_start_offset for k, lg in logs.items()})
            self._hw_checkpoint.write(_high_watermarks(logs))

    def checkpoint_high_watermarks(self):
        """``replication-offset-checkpoint`` alone (Kafka's ReplicaManager writes it every
        replica.high.watermark.checkpoint.interval.ms)."""
        with self._checkpoint_lock:
            self._hw_checkpoint.write(_high_watermarks(self._open_logs()))

    def _open_logs(self):
        with self._lock:
            return {k: lg for k, lg in self.logs.items() if not lg.closed}

    def _after_truncation(self, lg):
        """A log was truncated (called under its lock): its recovery point went down, so the
        checkpoint must say so before any append lands above the cut (else a crash would skip
        their recovery). The cleaner's first dirty offset comes down too."""
        self.checkpoint()
        if self.cleaner is not None:
            self._truncate_cleaner_checkpoint(lg, lg.log_end_offset)

    def _truncate_cleaner_checkpoint(self, lg, end):
        self._try_lower_first_dirty((lg.topic, lg.partition), end)

    def _try_lower_first_dirty(self, key, end):
        # Kafka's maybeTruncateCheckpoint. The cleaner holds its lock through a whole pass and
        # takes the log's lock to swap segments, so this (under the log's lock) must not wait for
        # it; while a pass runs, a scheduler job tries again every 100 ms (the pass would
        # otherwise write its own, older first dirty offset after ours).
        cleaner = self.cleaner
        if cleaner is None:
            return
        if not cleaner._lock.acquire(blocking=False):
            if isinstance(self.scheduler, Scheduler) and not self.closed:
                self.scheduler.schedule(100, lambda: self._try_lower_first_dirty(key, end))
            return
        try:
            self._lower_first_dirty(key, end)
        finally:
            cleaner._lock.release()

    def _lower_first_dirty(self, key, end):
        first_dirty = self.cleaner.first_dirty
        if key in first_dirty and first_dirty[key] > end:
            first_dirty[key] = end
            self.cleaner._write_checkpoint()

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
        with self._checkpoint_lock:
            self._recovery_checkpoint.write({k: lg.log_end_offset for k, lg in logs.items()})
            self._start_checkpoint.write({k: lg.log_start_offset for k, lg in logs.items()})
            self._hw_checkpoint.write(_high_watermarks(logs))
        write_clean_shutdown(self.data_dir)
        self._dir_lock.release()

    def abandon(self):
        """Closes the files and drops the directory lock without checkpoints or the
        clean-shutdown marker: what a failed start does, so the next start recovers as after
        a crash."""
        if self.closed:
            self._dir_lock.release()
            return
        self.closed = True
        if self.cleaner is not None:
            self.cleaner.shutdown()
        self.scheduler.shutdown(run_pending=False)
        for lg in list(self.logs.values()):
            lg.close()
        self._dir_lock.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


def _high_watermarks(logs):
    """What replication-offset-checkpoint says for each log. A log not (yet) replicated has
    HW = log end offset, which is not a replicated high watermark: until make_replicated()
    applies it, the one checkpointed at start stays (bounded by the log end), so a restart
    before the ReplicaManager takes the log over does not lose it."""
    out = {}
    for key, lg in logs.items():
        checkpointed = lg.checkpointed_high_watermark
        if lg.replicated or checkpointed is None:
            out[key] = lg.high_watermark
        else:
            out[key] = min(checkpointed, lg.high_watermark)
    return out
