"""A real Prometheus server (Debian's ``prometheus``) scraping kafkacore brokers, for the metrics
tests (tests/tools/test_metrics.py, tests/tools/test_grafana_dashboards.py). Skipped without the
binary, except under CI (ci/compat_deps.sh installs it), as tests/_zookeeper.py does for ZooKeeper."""
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from broker_client import free_port


def skip_or_fail_without_prometheus():
    if shutil.which("prometheus") is None:
        reason = "prometheus is not installed (ci/compat_deps.sh installs Debian's prometheus package)"
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


class NotReady(Exception):
    """Prometheus answered, but not yet through its API (its storage is still starting)."""


class Prometheus:
    """One Prometheus scraping ``targets`` (host:port) every second, each target with the extra
    ``labels`` (what a Kubernetes PodMonitor's relabelling would add)."""

    def __init__(self, directory, targets, labels=None, job="kafkacore"):
        skip_or_fail_without_prometheus()
        self.directory = directory
        self.port = free_port()
        lines = ["global:", "  scrape_interval: 1s", "  scrape_timeout: 1s", "scrape_configs:",
                 f"  - job_name: {job}", "    static_configs:",
                 "      - targets: [" + ", ".join(f"'{t}'" for t in targets) + "]"]
        if labels:
            lines.append("        labels:")
            lines += [f"          {k}: '{v}'" for k, v in labels.items()]
        self.config = directory / "prometheus.yml"
        self.config.write_text("\n".join(lines) + "\n")
        self._log_path = directory / "prometheus.log"
        self._log = open(self._log_path, "wb")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.config}", f"--storage.tsdb.path={directory / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"], stdout=self._log, stderr=subprocess.STDOUT)

    def log_tail(self):
        return self._log_path.read_text()[-3000:]

    def api(self, path, **params):
        """The ``data`` of one API call (a failed call fails the test, with Prometheus' error)."""
        self.check_running()
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                out = json.loads(r.read())
        except urllib.error.HTTPError as e:
            body = e.read()
            try:
                out = json.loads(body)
            except ValueError:
                # a plain-text answer: 503 "Service Unavailable" while its storage starts up
                raise NotReady(f"prometheus answered HTTP {e.code}: {body[:200]!r}") from None
        assert out["status"] == "success", out
        return out["data"]

    def query(self, q):
        """An instant query's result: [{"metric": {...}, "value": [t, "v"]}, ...]."""
        return self.api("query", query=q)["result"]

    def value(self, q):
        """The first sample's value of an instant query, None when it has none."""
        result = self.query(q)
        return float(result[0]["value"][1]) if result else None

    def check_running(self):
        if self.proc.poll() is not None:
            pytest.fail(f"prometheus exited with {self.proc.returncode}:\n{self.log_tail()}")

    def wait_ready(self, timeout=60):
        """Until it answers and has scraped every target once."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                targets = self.api("targets")["activeTargets"]
                if targets and all(t["health"] == "up" for t in targets):
                    return targets
            except (OSError, urllib.error.URLError, NotReady):
                pass  # not listening yet, or not ready to answer
            if time.monotonic() > deadline:
                pytest.fail(f"prometheus scraped no target within {timeout} s:\n{self.log_tail()}")
            time.sleep(0.3)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
