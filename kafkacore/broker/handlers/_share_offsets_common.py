"""What the share-group offsets handlers (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets: Kafka 4.1's admin APIs 90-92 for KIP-932 share groups) share: the
group coordinator's word on the group (NOT_COORDINATOR, GROUP_ID_NOT_FOUND for a group of
another type, NON_EMPTY_GROUP while members consume) and the share partitions' state, read and
written through the broker's persister at each share partition's share coordinator."""
import asyncio

from ...errors import KafkaError, NonEmptyGroupError, UnknownServerError
from ._group_common import coordinator

NONE = 0


def group_error(ctx, group_id, need_empty) -> int:
    """The group-level error code (NONE: go on)."""
    code = coordinator(ctx).check_share_group_empty(group_id)
    if code == NonEmptyGroupError.code and not need_empty:
        return NONE
    return code


async def each(calls):
    """Runs ``calls`` ({key: coroutine}) side by side: {key: (error code, message, result)}."""
    keys = list(calls)
    done = await asyncio.gather(*(calls[k] for k in keys), return_exceptions=True)
    out = {}
    for k, r in zip(keys, done):
        if isinstance(r, KafkaError):
            out[k] = (r.code, r.message, None)
        elif isinstance(r, BaseException):
            if isinstance(r, asyncio.CancelledError):
                raise r
            out[k] = (UnknownServerError.code, str(r), None)
        else:
            out[k] = (NONE, None, r)
    return out
