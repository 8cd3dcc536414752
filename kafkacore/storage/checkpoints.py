"""The small text files of a Kafka data directory, each written atomically (temp file, fsync,
rename, fsync of the directory) so a crash leaves the old or the new version, never a mix.

- OffsetCheckpointFile: ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``cleaner-offset-checkpoint``, ``replication-offset-checkpoint`` (the high watermarks): a
  version line ``0``, a count line, ``topic partition offset`` lines (Kafka's CheckpointFile
  with OffsetCheckpointFile's formatter).
- LeaderEpochCheckpointFile: ``leader-epoch-checkpoint`` in a partition directory: ``0``, a
  count line, ``epoch startOffset`` lines (Kafka's LeaderEpochCheckpointFile).
- meta.properties: ``version``, ``cluster.id``, ``node.id``, ``directory.id`` (KRaft form).
- PartitionMetadataFile: ``partition.metadata`` in a partition directory, the topic id.
- The clean-shutdown marker ``.kafka_cleanshutdown``."""
import json
import os
import time

from ..errors import KafkaStorageError
from ..protocol.kafka_uuid import random_uuid_text

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
PARTITION_METADATA = "partition.metadata"


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path, text: str):
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(os.path.dirname(path) or ".")
    except OSError as e:
        raise KafkaStorageError(f"writing {path} failed: {e}") from e


class OffsetCheckpointFile:
    """{(topic, partition): offset} kept in Kafka's checkpoint text format."""

    VERSION = 0

    def __init__(self, path):
        self.path = path

    def write(self, offsets):
        lines = [str(self.VERSION), str(len(offsets))]
        lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
        write_atomically(self.path, "\n".join(lines) + "\n")

    def read(self):
        """The offsets; {} when the file does not exist. A malformed file raises
        KafkaStorageError naming the line (Kafka refuses to start on one, too)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return {}
        try:
            if int(lines[0]) != self.VERSION:
                raise ValueError(f"unknown version {lines[0]!r}")
            count = int(lines[1])
            out = {}
            for line in lines[2:2 + count]:
                topic, partition, offset = line.split(" ")
                out[(topic, int(partition))] = int(offset)
            if len(out) != count:
                raise ValueError(f"expected {count} entries, found {len(out)}")
            return out
        except (ValueError, IndexError) as e:
            raise KafkaStorageError(f"malformed checkpoint file {self.path}: {e}") from e


class LeaderEpochCheckpointFile:
    """[(epoch, start offset)] in Kafka's CheckpointFile text format with the leader epoch
    formatter: ``0``, the count, then ``epoch startOffset`` lines."""

    VERSION = 0

    def __init__(self, path):
        self.path = path

    def exists(self):
        return os.path.exists(self.path)

    def write(self, entries):
        lines = [str(self.VERSION), str(len(entries))] + [f"{epoch} {start}" for epoch, start in entries]
        write_atomically(self.path, "\n".join(lines) + "\n")

    def read(self):
        """The entries in file order; [] when the file is missing or empty (Kafka creates it
        empty). A malformed file raises KafkaStorageError naming the line, as Kafka's
        CheckpointReadBuffer refuses it."""
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        except OSError as e:
            raise KafkaStorageError(f"reading {self.path} failed: {e}") from e
        if not lines:
            return []
        try:
            if int(lines[0]) != self.VERSION:
                raise ValueError(f"unknown version {lines[0]!r}, expected {self.VERSION}")
            if len(lines) == 1:
                return []
            count = int(lines[1])
            out = []
            for line in lines[2:]:
                fields = line.split()
                if len(fields) != 2:
                    raise ValueError(f"malformed line {line!r}")
                out.append((int(fields[0]), int(fields[1])))
            if len(out) != count:
                raise ValueError(f"expected {count} entries, found {len(out)}")
            return out
        except ValueError as e:
            raise KafkaStorageError(f"malformed checkpoint file {self.path}: {e}") from e

    def delete(self):
        """Removes the file, durably (the directory is fsynced)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return
        except OSError as e:
            raise KafkaStorageError(f"removing {self.path} failed: {e}") from e
        try:
            fsync_dir(os.path.dirname(self.path) or ".")
        except OSError as e:
            raise KafkaStorageError(f"fsync of the directory of {self.path} failed: {e}") from e


def read_meta_properties(path):
    """meta.properties as {key: value}."""
    return _read_properties(path)


def _read_properties(path):
    props = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except UnicodeDecodeError as e:
        raise KafkaStorageError(f"malformed {path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, _, value = line.partition("=")
        props[key.strip()] = value.strip()
    return props


def load_or_create_meta_properties(data_dir, node_id, cluster_id=None):
    """Reads meta.properties, or writes a new one. A node id or cluster id that differs from
    the one stored raises KafkaStorageError (Kafka refuses a data directory of another node)."""
    path = os.path.join(data_dir, META_PROPERTIES)
    if os.path.exists(path):
        props = _read_properties(path)
        if str(props.get("node.id")) != str(node_id):
            raise KafkaStorageError(f"{path} belongs to node.id={props.get('node.id')}, not {node_id}")
        if cluster_id is not None and props.get("cluster.id") != cluster_id:
            raise KafkaStorageError(f"{path} belongs to cluster.id={props.get('cluster.id')}, not {cluster_id}")
        return props
    props = {
        "version": "1",
        "cluster.id": cluster_id or random_uuid_text(),
        "node.id": str(node_id),
        "directory.id": random_uuid_text(),
    }
    header = "#\n#" + time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime()) + "\n"
    write_atomically(path, header + "".join(f"{k}={v}\n" for k, v in sorted(props.items())))
    return props


class PartitionMetadataFile:
    """``partition.metadata``: ``version: 0`` and ``topic_id: <base64 uuid>``."""

    def __init__(self, partition_dir):
        self.path = os.path.join(partition_dir, PARTITION_METADATA)

    def read(self):
        try:
            props = {}
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    props[key.strip()] = value.strip()
            return props.get("topic_id")
        except FileNotFoundError:
            return None

    def write(self, topic_id: str):
        write_atomically(self.path, f"version: 0\ntopic_id: {topic_id}\n")


def write_clean_shutdown(data_dir):
    write_atomically(os.path.join(data_dir, CLEAN_SHUTDOWN_FILE), json.dumps({"version": 0, "brokerEpoch": -1}))


def take_clean_shutdown(data_dir) -> bool:
    """True when the marker is there; it is removed, so a crash from now on is seen as one."""
    path = os.path.join(data_dir, CLEAN_SHUTDOWN_FILE)
    if not os.path.exists(path):
        return False
    os.unlink(path)
    fsync_dir(data_dir)
    return True
