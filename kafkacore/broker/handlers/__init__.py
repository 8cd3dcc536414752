"""One module per API. Each module defines:

- ``API_KEY`` and ``VERSIONS = (min, max)``: the versions it serves;
- optionally ``ADVERTISED_MIN``: a lower minimum to advertise in ApiVersions (Produce: 0, see
  handlers/produce.py), versions between it and VERSIONS[0] are answered UNSUPPORTED_VERSION;
- ``handle(ctx, request)``: returns the response object, None for no response, or an awaitable;
- optionally ``error_response(request, version, code)``: the response that answers the whole
  request with one error code (used for refused versions and for unexpected failures);
- optionally ``GROUP_PROTOCOL``: the group protocol the API belongs to; it is served (and
  advertised) only while ``group.coordinator.rebalance.protocols`` names it (``share`` also
  needs ``group.share.enable``: ``config.served_group_protocols``).

``HANDLERS`` maps api_key -> HandlerEntry; ApiVersions advertises exactly this table. The
modules are found, not listed: every module here whose name does not start with '_'.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import NamedTuple

from ...protocol.frames import api_name



def handler_modules() -> list[str]:
    """Every module of this package whose name does not start with '_' is a handler: a new API
    is served by adding its module, with nothing to register by hand (``_configs`` and the
    like are shared helpers)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


class HandlerEntry(NamedTuple):
    name: str
    api_key: int
    min_version: int
    max_version: int
    advertised_min: int
    handle: object
    error_response: object
    cluster_only: bool
    group_protocol: str | None


def _load():
    # Every handler module must import: one that fails would silently drop its API from
    # ApiVersions, so the error stops the broker instead.
    table = {}
    for name in handler_modules():
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except Exception as e:
            raise ImportError(f"the broker's handler module {__name__}.{name} failed to import "
                              f"({type(e).__name__}: {e}); the broker cannot serve its API") from e
        if mod.API_KEY in table:
            raise ImportError(f"{__name__}.{name} serves API key {mod.API_KEY}, as {table[mod.API_KEY].name} does")
        lo, hi = mod.VERSIONS
        table[mod.API_KEY] = HandlerEntry(api_name(mod.API_KEY), mod.API_KEY, lo, hi,
                                          getattr(mod, "ADVERTISED_MIN", lo), mod.handle,
                                          getattr(mod, "error_response", None), getattr(mod, "CLUSTER_ONLY", False),
                                          getattr(mod, "GROUP_PROTOCOL", None))
    return table


HANDLERS = _load()
