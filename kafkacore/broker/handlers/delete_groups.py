"""DeleteGroups (API key 42), versions 0-2.

Deletes Empty groups with their committed offsets (tombstones for the offsets and the group
metadata in __consumer_offsets). A group with members is NON_EMPTY_GROUP, an unknown one
GROUP_ID_NOT_FOUND. One result per group, in request order.
"""
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
    return DeleteGroupsResponse(results=[DeletableGroupResult(group_id=gid, error_code=results[gid])
                                         for gid in dict.fromkeys(req.groups_names)])


def error_response(req, version, code):
    return DeleteGroupsResponse(results=[DeletableGroupResult(group_id=gid, error_code=code)
                                         for gid in dict.fromkeys(req.groups_names)])
