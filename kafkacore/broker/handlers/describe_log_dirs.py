"""DescribeLogDirs (API key 35), versions 0-4: what each log directory of this broker holds.

A kafkacore broker has one log directory (``log.dirs``, one path), so the answer has one entry:
its absolute path and, per partition replica stored there (leader or follower, internal topics
included, as Kafka), the size of its log (the sum of its segments' ``.log`` files, Kafka's
``UnifiedLog.size``) and ``offset_lag``, Kafka's ``max(high watermark - log end offset, 0)``
(0 on a leader). ``topics`` null asks for every partition; partitions asked for that this broker
does not store are left out, as Kafka does. v4 adds the volume's total and usable bytes
(``statvfs``: usable is what an unprivileged writer may still use, as Java's
``FileStore.getUsableSpace``). A directory that cannot be read answers KAFKA_STORAGE_ERROR
with no topics. There are no future replicas (no AlterReplicaLogDirs): ``is_future_key`` is
always false.

Version notes: v0 and v1 are the same; v2 is the flexible encoding; v3 adds the top-level error
code, v4 ``total_bytes`` / ``usable_bytes``.
"""
import os

from ...errors import KafkaStorageError
from ...protocol.api_table import ApiKey
from ...protocol.messages.describe_log_dirs_response import (DescribeLogDirsPartition, DescribeLogDirsResponse,
                                                             DescribeLogDirsResult, DescribeLogDirsTopic)
from ..authorization import DESCRIBE, require_cluster

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
VERSIONS = (0, 4)


def handle(ctx, req):
    require_cluster(ctx, DESCRIBE)
    broker = ctx.broker
    log_dir = os.path.abspath(broker.data_dir)
    try:
        vfs = os.statvfs(log_dir)
    except OSError:
        return DescribeLogDirsResponse(results=[DescribeLogDirsResult(
            error_code=KafkaStorageError.code, log_dir=log_dir, topics=[])])
    wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    by_topic = {}
    for (topic, partition), lg in sorted(list(broker.log_manager.logs.items())):
        if wanted is not None and (topic, partition) not in wanted:
            continue
        by_topic.setdefault(topic, []).append(DescribeLogDirsPartition(
            partition_index=partition, partition_size=lg.size_in_bytes,
            offset_lag=max(lg.high_watermark - lg.log_end_offset, 0), is_future_key=False))
    return DescribeLogDirsResponse(results=[DescribeLogDirsResult(
        log_dir=log_dir, topics=[DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        total_bytes=vfs.f_blocks * vfs.f_frsize, usable_bytes=vfs.f_bavail * vfs.f_frsize)])


def error_response(req, version, code):
    # v3+ has a top-level error code; before it the code can only travel in a directory entry
    if version >= 3:
        return DescribeLogDirsResponse(error_code=code, results=[])
    return DescribeLogDirsResponse(results=[DescribeLogDirsResult(error_code=code, log_dir="", topics=[])])
