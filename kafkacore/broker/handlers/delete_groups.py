"""DeleteGroups (API key 42), versions 0-2.

Deletes Empty groups with their committed offsets (tombstones for the offsets and the group
metadata in __consumer_offsets). A group with members is NON_EMPTY_GROUP, an unknown one
GROUP_ID_NOT_FOUND. One result per group, in request order.
"""
from ...protocol.api_table import ApiKey
from ...protocol.messages.delete_groups_response import DeletableGroupResult, DeleteGroupsResponse
from ._group_common import coordinator

API_KEY = ApiKey.DELETE_GROUPS
VERSIONS = (0, 2)


def handle(ctx, req):
    results = coordinator(ctx).delete_groups(list(dict.fromkeys(req.groups_names)))
    return DeleteGroupsResponse(results=[DeletableGroupResult(group_id=gid, error_code=results[gid])
                                         for gid in dict.fromkeys(req.groups_names)])


def error_response(req, version, code):
    return DeleteGroupsResponse(results=[DeletableGroupResult(group_id=gid, error_code=code)
                                         for gid in dict.fromkeys(req.groups_names)])
