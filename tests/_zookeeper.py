"""A real standalone ZooKeeper for tests, from Debian's ``zookeeper`` package (3.8), started by
the package's own launcher (kafkacore.cluster.local_cluster.LocalZooKeeper, the one
``kafkacore cluster up`` uses): on a free 127.0.0.1 port, data and log in its directory, a
500 ms tick so tests can use sessions of 2-6 s.

Test modules call ``require_zookeeper()`` at import, or ``skip_or_fail_without_zookeeper()`` in
the fixture that starts the server when the module also has tests that need no ZooKeeper: both
skip without Java or the jar, except under CI where that is an error (as tests/compat/
test_kcat.py does for kcat). Modules define their own fixtures (tests/conftest.py is shared
with others); ``show_log_on_failure(request, servers)`` adds the server log's tail to the
report of a failing test.
"""
from __future__ import annotations

import os

import pytest

from kafkacore.cluster.local_cluster import LocalClusterError, find_zookeeper

INSTALL_HINT = "ci/compat_deps.sh installs Debian's zookeeper package"


def missing_reason() -> str | None:
    try:
        find_zookeeper()
    except LocalClusterError as e:
        return f"{e} ({INSTALL_HINT})"
    return None


def require_zookeeper() -> None:
    """At a test module's import: skip it without ZooKeeper; under CI, fail instead."""
    reason = missing_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        raise RuntimeError(reason)
    pytest.skip(reason, allow_module_level=True)


def skip_or_fail_without_zookeeper() -> None:
    """In a fixture: skip the test without ZooKeeper; under CI, fail it."""
    reason = missing_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


class _LogOnFailure:
    """A pytest plugin, registered for one module's tests, that appends the ZooKeeper log's
    tail to the report of each failing test."""

    def __init__(self, module_name: str, servers):
        self.module_name = module_name
        self.servers = servers

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        if rep.failed and getattr(item.module, "__name__", None) == self.module_name:
            for s in list(self.servers):
                rep.sections.append((f"ZooKeeper log ({s.connect_string}), last lines", s.log_tail()))


def show_log_on_failure(request, *servers):
    """Register the report plugin for the requesting module; returns a function that unregisters
    it (call it at fixture teardown). ``servers`` may be a list the test module keeps adding to."""
    if len(servers) == 1 and isinstance(servers[0], list):
        servers = servers[0]
    plugin = _LogOnFailure(request.module.__name__, servers)
    request.config.pluginmanager.register(plugin)
    return lambda: request.config.pluginmanager.unregister(plugin)
