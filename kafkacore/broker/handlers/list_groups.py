"""ListGroups (API key 16), versions 0-5.

Every group this node coordinates (all of them), sorted by id, with its protocol type ("" for
groups that only store offsets). v4+: ``states_filter`` (Empty, PreparingRebalance,
CompletingRebalance, Stable; matched case-insensitively) and the group state in the answer.
v5+: ``types_filter`` and the group type: "classic", or "consumer" for a KIP-848 group (whose
protocol type is "consumer" and states Empty, Assigning, Reconciling, Stable).
"""
from ...protocol.api_table import ApiKey
from ...protocol.messages.list_groups_response import ListedGroup, ListGroupsResponse
from ..authorization import DESCRIBE, GROUP, authorize_cluster, authorized_names
from ._group_common import coordinator

API_KEY = ApiKey.LIST_GROUPS
VERSIONS = (0, 5)


def handle(ctx, req):
    v = ctx.api_version
    groups = coordinator(ctx).list_groups(req.states_filter if v >= 4 else None, req.types_filter if v >= 5 else None)
    if not authorize_cluster(ctx, DESCRIBE):  # Kafka's rule: DESCRIBE on the cluster lists every group
        visible = authorized_names(ctx, DESCRIBE, GROUP, [g[0] for g in groups])
        groups = [g for g in groups if g[0] in visible]
    return ListGroupsResponse(groups=[
        ListedGroup(group_id=gid, protocol_type=ptype, group_state=state, group_type=gtype)
        for gid, ptype, state, gtype in groups])


def error_response(req, version, code):
    return ListGroupsResponse(error_code=code, groups=[])
