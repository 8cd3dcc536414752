"""DeleteGroups (API key 42), versions 0-2.

Deletes Empty groups with their committed offsets (tombstones for the offsets and the group
metadata in __consumer_offsets). A group with members is NON_EMPTY_GROUP, an unknown one
GROUP_ID_NOT_FOUND. A share group's share state is deleted first (DeleteShareGroupState through
the persister); the answer waits for it. One result per group, in request order.
"""
import inspect

from ...protocol.api_table import ApiKey
from ...protocol.messages.delete_groups_response import DeletableGroupResult, DeleteGroupsResponse
from ...errors import GroupAuthorizationFailedError
from ..authorization import DELETE, GROUP, authorized_names
from ._group_common import coordinator

API_KEY = ApiKey.DELETE_GROUPS
VERSIONS = (0, 2)


def handle(ctx, req):
    names = list(dict.fromkeys(req.groups_names))
    deletable = authorized_names(ctx, DELETE, GROUP, names)
    results = coordinator(ctx).delete_groups([g for g in names if g in deletable]) if deletable else {}
    results.update({g: GroupAuthorizationFailedError.code for g in names if g not in deletable})
    if any(inspect.iscoroutine(r) for r in results.values()):
        return _wait(req, results)
    return _response(req, results)


async def _wait(req, results):
    for gid, r in results.items():
        if inspect.iscoroutine(r):
            results[gid] = await r
    return _response(req, results)


def _response(req, results):
    return DeleteGroupsResponse(results=[DeletableGroupResult(group_id=gid, error_code=results[gid])
                                         for gid in dict.fromkeys(req.groups_names)])


def error_response(req, version, code):
    return DeleteGroupsResponse(results=[DeletableGroupResult(group_id=gid, error_code=code)
                                         for gid in dict.fromkeys(req.groups_names)])
