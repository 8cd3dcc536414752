"""One module per API. Each module defines:

- ``API_KEY`` and ``VERSIONS = (min, max)``: the versions it serves;
- optionally ``ADVERTISED_MIN``: a lower minimum to advertise in ApiVersions (Produce: 0, see
  handlers/produce.py), versions between it and VERSIONS[0] are answered UNSUPPORTED_VERSION;
- ``handle(ctx, request)``: returns the response object, None for no response, or an awaitable;
- optionally ``error_response(request, version, code)``: the response that answers the whole
  request with one error code (used for refused versions and for unexpected failures).

``HANDLERS`` maps api_key -> HandlerEntry; ApiVersions advertises exactly this table.
"""
from __future__ import annotations

import importlib
from typing import NamedTuple

from ...protocol.frames import api_name

MODULES = (
    "api_versions", "metadata", "produce", "fetch", "list_offsets",
    "create_topics", "delete_topics", "create_partitions", "delete_records",
    "describe_configs", "alter_configs", "incremental_alter_configs", "describe_cluster", "describe_log_dirs",
    "offset_for_leader_epoch", "init_producer_id",
    "find_coordinator", "join_group", "sync_group", "heartbeat", "leave_group",
    "offset_commit", "offset_fetch", "offset_delete", "list_groups", "describe_groups", "delete_groups",
    "leader_and_isr", "update_metadata", "stop_replica", "controlled_shutdown", "elect_leaders",
    "alter_partition_reassignments", "list_partition_reassignments",
    "add_partitions_to_txn", "add_offsets_to_txn", "end_txn", "describe_transactions", "list_transactions",
    "txn_offset_commit", "write_txn_markers", "describe_producers",
)


class HandlerEntry(NamedTuple):
    name: str
    api_key: int
    min_version: int
    max_version: int
    advertised_min: int
    handle: object
    error_response: object
    cluster_only: bool


def _load():
    # Every module listed must import: one that fails (a typo, a missing file in a wheel) would
    # silently drop its API from ApiVersions, so the error stops the broker instead.
    table = {}
    for name in MODULES:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except Exception as e:
            raise ImportError(f"the broker's handler module {__name__}.{name} failed to import "
                              f"({type(e).__name__}: {e}); the broker cannot serve its API") from e
        lo, hi = mod.VERSIONS
        table[mod.API_KEY] = HandlerEntry(api_name(mod.API_KEY), mod.API_KEY, lo, hi,
                                          getattr(mod, "ADVERTISED_MIN", lo), mod.handle,
                                          getattr(mod, "error_response", None), getattr(mod, "CLUSTER_ONLY", False))
    return table


HANDLERS = _load()
