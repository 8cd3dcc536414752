"""A real standalone ZooKeeper for tests, from Debian's ``zookeeper`` package (3.8).

``ZooKeeperServer(tmpdir)`` runs ``org.apache.zookeeper.server.ZooKeeperServerMain`` with java,
on a free 127.0.0.1 port, data and log in ``tmpdir``. /usr/share/java/zookeeper.jar names its
dependencies (netty, jute, slf4j, ...) in its manifest's Class-Path, so it is all the class path
needs; slf4j-simple (Debian's libslf4j-java, a dependency of the package) is added so the
server's log lands in ``tmpdir/zookeeper.log`` instead of nowhere.

tickTime is 500 ms and minSessionTimeout 1000 ms, so tests can use sessions of 2-6 s; the
maximum is 60 s so kafkacore's default 18 s session is granted as asked.

Test modules call ``require_zookeeper()`` at import, or ``skip_or_fail_without_zookeeper()`` in
the fixture that starts the server when the module also has tests that need no ZooKeeper: both
skip without Java or the jar, except under CI where that is an error (as tests/compat/
test_kcat.py does for kcat). Modules define their own fixtures (tests/conftest.py is shared
with others); ``show_log_on_failure(request, servers)`` adds the server log's tail to the
report of a failing test.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from broker_client import free_port  # noqa: F401 - the suite's one; test_zk_client imports it from here

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
SLF4J_SIMPLE_JAR = "/usr/share/java/slf4j-simple.jar"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
INSTALL_HINT = "ci/compat_deps.sh installs Debian's zookeeper package"


def missing_reason() -> str | None:
    if shutil.which("java") is None:
        return f"java is not installed ({INSTALL_HINT}, which brings a JRE)"
    if not os.path.isfile(ZOOKEEPER_JAR):
        return f"ZooKeeper is not installed: no {ZOOKEEPER_JAR} ({INSTALL_HINT})"
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


def four_letter_word(port: int, word: str, timeout: float = 2.0) -> str:
    """ZooKeeper's four-letter admin commands (ruok, srvr: whitelisted in zoo.cfg)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            b = s.recv(4096)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    def __init__(self, tmpdir, port: int | None = None, tick_time_ms: int = 500):
        self.dir = Path(tmpdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.dir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.port = port or free_port()
        self.tick_time_ms = tick_time_ms
        self.log_path = self.dir / "zookeeper.log"
        self.config_path = self.dir / "zoo.cfg"
        self.proc: subprocess.Popen | None = None
        self.paused = False
        self._write_config()

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_config(self) -> None:
        self.config_path.write_text("\n".join([
            f"tickTime={self.tick_time_ms}",
            f"dataDir={self.data_dir}",
            f"clientPort={self.port}",
            "clientPortAddress=127.0.0.1",
            f"minSessionTimeout={2 * self.tick_time_ms}",
            "maxSessionTimeout=60000",
            "admin.enableServer=false",  # no Jetty admin server on 8080
            "4lw.commands.whitelist=ruok,srvr",
            "maxClientCnxns=0",
            "",
        ]))

    def command(self) -> list[str]:
        cp = ZOOKEEPER_JAR + (os.pathsep + SLF4J_SIMPLE_JAR if os.path.isfile(SLF4J_SIMPLE_JAR) else "")
        return [
            shutil.which("java") or "java",
            # a small, quickly started JVM: the machine has 2 cores shared with the tests
            "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
            "-cp", cp, MAIN_CLASS, str(self.config_path),
        ]

    def start(self, timeout: float = 60.0) -> "ZooKeeperServer":
        """Start (again, on the same port and data) and wait until it serves requests."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError(f"ZooKeeper on port {self.port} is already running")
        with open(self.log_path, "ab") as log:
            log.write(f"---- starting ZooKeeper on 127.0.0.1:{self.port} ----\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.dir)
        self.paused = False
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with code {self.proc.returncode} while starting; "
                                   f"its log ends:\n{self.log_tail()}")
            try:
                # srvr answers "not currently serving requests" until the database is loaded
                last = four_letter_word(self.port, "srvr")
                if "Mode:" in last:
                    return self
            except OSError as e:
                last = str(e)
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"ZooKeeper on port {self.port} not serving after {timeout:.0f} s ({last.strip()!r}); "
                           f"its log ends:\n{self.log_tail()}")

    def stop(self, timeout: float = 15.0) -> None:
        """Stop the process (its data stays for a later start())."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        if self.paused:
            proc.send_signal(signal.SIGCONT)
            self.paused = False
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): clients see no answers, sessions do not expire meanwhile."""
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError("ZooKeeper is not running")
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.proc is not None and self.paused:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as e:
            return f"(no log: {e})"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


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
                rep.sections.append((f"ZooKeeper log (127.0.0.1:{s.port}), last lines", s.log_tail()))


def show_log_on_failure(request, *servers):
    """Register the report plugin for the requesting module; returns a function that unregisters
    it (call it at fixture teardown). ``servers`` may be a list the test module keeps adding to."""
    if len(servers) == 1 and isinstance(servers[0], list):
        servers = servers[0]
    plugin = _LogOnFailure(request.module.__name__, servers)
    request.config.pluginmanager.register(plugin)
    return lambda: request.config.pluginmanager.unregister(plugin)
