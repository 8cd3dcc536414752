"""The web console (``kafkacore console``) against a real broker process, through its JSON API
and in a real headless browser (Debian's chromium driven by Playwright): the numbers on the
pages are the ones produced, the charts move while records arrive, the dialogs' changes take
effect, bad input gets a clear message, and no request leaves the console's own origin.

One broker, one console and one browser for the whole module; each test has its own topics
or groups, so the tests do not depend on each other's order.
"""
from __future__ import annotations

import base64
import collections
import contextlib
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from _kcutil import wait_for
from _browser import launch_chromium, skip_or_fail_without_browser  # tests/ (tests/tools/conftest.py)
from broker_client import ROOT, BrokerProcess

from kafkacore import Producer
from kafkacore.client.admin import EARLIEST, LATEST, TOPIC_RESOURCE, AdminClient

T0 = int(time.time() * 1000) - 3_600_000  # the payload records' timestamps: T0, T0 + 1 s, ...
JSON_VALUE = {"id": 7, "items": ["a", "b"], "nested": {"ok": True}}
BINARY_VALUE = b"\x00\x01\x02\xff\xfe"
HTML_VALUE = b"<script>window.__pwned = 1</script><b>bold</b>"
PAYLOADS = [  # (key, value, headers) at offsets 0, 1, 2, 3 of topic "payloads"
    (b"json-key", json.dumps(JSON_VALUE).encode(), [("trace-id", b"abc-123"), ("empty", None)]),
    (b"bin-key", BINARY_VALUE, []),
    (b"html-key", HTML_VALUE, [("<i>h</i>", b"<img src=x onerror=alert(1)>")]),
    (None, b"plain text", []),
]
ORDERS_PARTITIONS = 3
CONSOLE_START_S = 30


# -- fixtures ----------------------------------------------------------------------------------
# share-group and consumer-group (KIP-848) members that heartbeat often, so a ShareConsumer or a
# consumer with group.protocol=consumer gets its partitions at once
GROUP_SETTINGS = {"group.share.heartbeat.interval.ms": "200", "group.share.min.heartbeat.interval.ms": "100",
                  "group.share.session.timeout.ms": "3000", "group.share.min.session.timeout.ms": "1000",
                  "group.consumer.heartbeat.interval.ms": "200", "group.consumer.min.heartbeat.interval.ms": "100",
                  "group.consumer.session.timeout.ms": "3000", "group.consumer.min.session.timeout.ms": "1000"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("console") / "data", settings=GROUP_SETTINGS) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker):
    with AdminClient(broker.bootstrap) as a:
        yield a


@pytest.fixture(scope="module")
def produced(broker, admin):
    """Known records: {"orders": {partition: count}} over 3 partitions, and "payloads" (one
    partition) holding PAYLOADS with timestamps T0, T0 + 1 s, ..."""
    admin.create_topic("orders", ORDERS_PARTITIONS, 1, {"retention.ms": "3600000"})
    admin.create_topic("payloads", 1, 1)
    counts = {p: 0 for p in range(ORDERS_PARTITIONS)}
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) as p:
        handles = [p.send("orders", b"order-%d" % i, key=b"customer-%d" % (i % 7)) for i in range(60)]
        for h in handles:
            counts[h.result(10).partition] += 1
        for i, (key, value, headers) in enumerate(PAYLOADS):
            assert p.send("payloads", value, key=key, headers=headers, timestamp_ms=T0 + i * 1000).result(10).offset == i
    return {"orders": counts}


class ConsoleProcess:
    """``python -m kafkacore -b BOOTSTRAP console --port 0``; ``url`` from its first line."""

    def __init__(self, bootstrap, *extra, env=None):
        self.proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "-b", bootstrap, "console", "--port", "0",
                                      *extra], cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        line = self._first_line()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not found:
            self.stop()
            raise RuntimeError(f"console did not start: {line!r} {self.proc.stderr.read()}")
        self.origin = f"http://127.0.0.1:{found.group(1)}"

    def _first_line(self):
        out = []
        reader = threading.Thread(target=lambda: out.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(CONSOLE_START_S)
        return out[0] if out else ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class SchemaRegistryStandIn:
    """Confluent Schema Registry's one endpoint the console asks, ``GET /schemas/ids/{id}``,
    answered as Confluent's REST API reference describes ({"schema": ..., "schemaType": ...};
    404 with error_code 40403 for an unknown id). A stand-in, since a real Schema Registry (a
    Java service whose jars are not served here) cannot run in this environment; ``asked``
    counts the requests per path."""

    def __init__(self, schemas: dict):
        import http.server

        self.schemas = schemas
        self.asked = collections.Counter()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.asked[self.path] += 1
                found = re.fullmatch(r"/schemas/ids/(\d+)", self.path)
                doc = outer.schemas.get(int(found.group(1))) if found else None
                body = json.dumps(doc if doc else {"error_code": 40403, "message": "Schema not found"}).encode()
                self.send_response(200 if doc else 404)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


USER_SCHEMA = {"type": "record", "name": "User", "namespace": "example", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "email", "type": ["null", "string"], "default": None}, {"name": "avatar", "type": "bytes"}]}
PAYMENT_SCHEMA = {"type": "record", "name": "Payment", "fields": [
    {"name": "cents", "type": "long"}, {"name": "currency", "type": {"type": "enum", "name": "Currency",
                                                                    "symbols": ["EUR", "USD"]}}]}
USER_ID, PAYMENT_ID, JSON_SCHEMA_ID, UNKNOWN_ID = 1, 2, 3, 99  # 1 in the registry, 2 in --schema-dir


@pytest.fixture(scope="module")
def registry():
    r = SchemaRegistryStandIn({USER_ID: {"schema": json.dumps(USER_SCHEMA)},
                               JSON_SCHEMA_ID: {"schema": '{"type": "object"}', "schemaType": "JSON"}})
    yield r
    r.close()


@pytest.fixture(scope="module")
def schema_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("schemas")
    (d / f"{PAYMENT_ID}.avsc").write_text(json.dumps(PAYMENT_SCHEMA))
    return d


@pytest.fixture(scope="module")
def console(broker, registry, schema_dir):
    c = ConsoleProcess(broker.bootstrap, "--schema-registry", registry.url, "--schema-dir", str(schema_dir))
    yield c
    assert c.stop() == 0, c.proc.stderr.read()


@pytest.fixture(scope="module")
def browser():
    skip_or_fail_without_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = launch_chromium(pw)
        yield b
        b.close()


@contextlib.contextmanager
def checked_page(browser, origin):
    """A fresh page (in its own browser context: its own cookies) whose every request must go
    to ``origin``, with no script error."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(15_000)
    requests, errors = [], []
    pg.on("request", lambda r: requests.append(r.url))
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert requests, "the page made no request"
    outside = [u for u in requests if not u.startswith(origin + "/")]
    assert outside == [], f"requests left the console's origin: {outside}"
    assert errors == [], f"script errors on the page: {errors}"


@pytest.fixture
def page(browser, console):
    """A fresh page whose every request must go to the console itself."""
    with checked_page(browser, console.origin) as pg:
        yield pg


def api(console, path, body=None, token=True, method=None):
    """(status, JSON document) of a request to the console's API."""
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
        if token:
            headers["X-Console-Token"] = console_token(console)
    req = urllib.request.Request(console.origin + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def console_token(console) -> str:
    with urllib.request.urlopen(console.origin + "/", timeout=10) as resp:
        html = resp.read().decode()
    return re.search(r'name="console-token" content="([^"]+)"', html).group(1)


def offsets(admin, topic, partitions):
    tps = [(topic, p) for p in range(partitions)]
    start = admin.list_offsets({tp: EARLIEST for tp in tps})
    end = admin.list_offsets({tp: LATEST for tp in tps})
    return {p: (start[(topic, p)].offset, end[(topic, p)].offset) for _, p in tps}


def cell(row, column):
    """The text of a table row's cell under ``column`` (its header text)."""
    return row.evaluate("""(tr, column) => {
        const heads = [...tr.closest('table').querySelectorAll('thead th')].map(th => th.textContent.trim());
        return tr.children[heads.indexOf(column)].textContent.trim();
    }""", column)


def produce_until(broker, topic, value, stop, per_tenth=30):
    """A thread sending ``per_tenth`` records every 0.1 s to ``topic`` until ``stop`` is set."""
    def produce():
        with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5}) as p:
            while not stop.is_set():
                for _ in range(per_tenth):
                    p.send(topic, value)
                time.sleep(0.1)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    return thread


def count_text(n: int) -> str:
    return f"{n:,}"


# -- the JSON API ------------------------------------------------------------------------------
def test_api_overview_matches_the_admin_client(console, admin, produced):
    status, doc = api(console, "/api/overview")
    assert status == 200
    cluster = admin.describe_cluster()
    _, topics = admin.metadata(None)
    user = [t for t in topics.values() if not t.internal]
    assert doc["cluster_id"] == cluster.cluster_id and doc["controller"] == cluster.controller_id
    assert [(b["node_id"], b["host"], b["port"]) for b in doc["brokers"]] == [
        (b.node_id, b.host, b.port) for b in cluster.brokers]
    assert doc["topics"] == len(user) >= 2
    assert doc["partitions"] == sum(len(t.partitions) for t in user)
    assert doc["under_replicated"] == 0 and doc["offline"] == 0


def test_api_topics_count_what_was_produced(console, admin, produced):
    status, doc = api(console, "/api/topics")
    assert status == 200
    rows = {t["name"]: t for t in doc["topics"]}
    assert rows["orders"]["messages"] == 60 and rows["orders"]["partitions"] == ORDERS_PARTITIONS
    assert rows["payloads"]["messages"] == len(PAYLOADS)
    status, detail = api(console, "/api/topics/orders")
    assert status == 200
    expected = offsets(admin, "orders", ORDERS_PARTITIONS)
    assert {p["partition"]: (p["start"], p["end"]) for p in detail["partitions"]} == expected
    assert {p: end - start for p, (start, end) in expected.items()} == produced["orders"]
    # sizes from DescribeLogDirs: one copy of each partition (a single broker here)
    sizes = {p: size for (t, p, _broker), size in admin.log_dir_sizes().items() if t == "orders"}
    assert {p["partition"]: p["size"] for p in detail["partitions"]} == sizes and all(sizes.values())
    assert rows["orders"]["size"] == detail["size"] == sum(sizes.values()) and doc["sizes_known"]
    configs = {c["name"]: c for c in detail["configs"]}
    assert configs["retention.ms"]["value"] == "3600000" and not configs["retention.ms"]["is_default"]
    admin_configs = {c.name: c.value for c in admin.describe_configs(TOPIC_RESOURCE, "orders")}
    assert {n: c["value"] for n, c in configs.items()} == admin_configs


def test_api_messages_describe_bytes_exactly(console, produced):
    status, doc = api(console, "/api/topics/payloads/messages?mode=offset&partition=0&offset=0&limit=4")
    assert status == 200
    recs = doc["records"]
    assert [r["offset"] for r in recs] == [0, 1, 2, 3]
    assert [r["timestamp"] for r in recs] == [T0, T0 + 1000, T0 + 2000, T0 + 3000]
    assert recs[0]["key"] == {"kind": "text", "text": "json-key", "size": 8}
    assert recs[0]["value"]["kind"] == "json" and json.loads(recs[0]["value"]["text"]) == JSON_VALUE
    assert recs[0]["headers"] == [{"key": "trace-id", "value": {"kind": "text", "text": "abc-123", "size": 7}},
                                  {"key": "empty", "value": {"kind": "null"}}]
    binary = recs[1]["value"]
    assert binary["kind"] == "binary" and binary["hex"] == "00 01 02 ff fe" and binary["text"] == "\\x00\\x01\\x02\\xff\\xfe"
    assert base64.b64decode(binary["base64"]) == BINARY_VALUE
    assert recs[2]["value"] == {"kind": "text", "text": HTML_VALUE.decode(), "size": len(HTML_VALUE)}
    assert recs[3]["key"] == {"kind": "null"}


def test_api_bad_input_gets_a_clear_status_and_message(console, produced):
    assert api(console, "/api/topics/no-such-topic") == (404, {"error": "topic 'no-such-topic' does not exist",
                                                             "code": "UNKNOWN_TOPIC_OR_PARTITION"})
    status, doc = api(console, "/api/topics/payloads/messages?mode=offset&partition=0&offset=99")
    assert status == 400 and doc["error"] == "offset 99 is outside partition 0's records (offsets 0-3)"
    status, doc = api(console, "/api/topics/payloads/messages?mode=offset&partition=0&offset=abc")
    assert status == 400 and "whole number" in doc["error"]
    status, doc = api(console, "/api/topics/payloads/messages?partition=5")
    assert status == 400 and "no partition 5" in doc["error"]
    status, doc = api(console, "/api/groups/no-such-group")
    assert status == 404 and doc["error"] == "group 'no-such-group' does not exist"
    status, doc = api(console, "/api/nothing-here")
    assert status == 404 and "GET /api" in doc["error"]


def test_api_writes_need_the_token_and_a_confirmation(console, admin, produced):
    admin.create_topic("keep-me", 1, 1)
    assert api(console, "/api/topics/keep-me/delete", {"confirm": "keep-me"}, token=False)[0] == 403
    status, doc = api(console, "/api/topics/keep-me/delete", {})
    assert status == 428 and "confirm" in doc["error"]
    assert api(console, "/api/topics/keep-me/delete", {"confirm": "other"})[0] == 428
    assert api(console, "/api/topics", {"name": "never-made", "partitions": 1})[0] == 428
    assert "keep-me" in admin.list_topics() and "never-made" not in admin.list_topics()
    status, doc = api(console, "/api/topics", {"name": "keep-me", "partitions": 1, "confirm": "keep-me"})
    assert status == 409 and doc["code"] == "TOPIC_ALREADY_EXISTS"


def test_requests_for_another_host_name_are_refused(console):
    """A page whose domain name was pointed at 127.0.0.1 (DNS rebinding) sends its own name as
    Host: the console does not answer it, so that page cannot read the write token."""
    req = urllib.request.Request(console.origin + "/", headers={"Host": "attacker.example:80"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 421 and b"console-token" not in e.value.read()
    port = console.origin.rsplit(":", 1)[1]
    for name in ("localhost", "127.0.0.1"):
        req = urllib.request.Request(console.origin + "/api/overview", headers={"Host": f"{name}:{port}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200


def test_api_lists_its_endpoints_and_the_docs_describe_each(console):
    from _kcutil import SOURCE_ROOT

    status, doc = api(console, "/api")
    assert status == 200 and "GET /api/topics/{name}/messages" in doc["endpoints"]
    docs = (Path(SOURCE_ROOT) / "docs" / "tools.md").read_text()
    documented = {e.replace("{name}", "NAME").replace("{group}", "ID").replace("{broker}", "BROKER")
                  for e in doc["endpoints"]}
    assert [e for e in sorted(documented) if f"`{e}" not in docs] == []


# -- pages -------------------------------------------------------------------------------------
def test_overview_shows_the_brokers_and_topic_counts(page, console, admin, produced):
    from playwright.sync_api import expect

    page.goto(console.origin + "/")
    topics = [t for t in admin.list_topics().values() if not t.internal]
    expect(page.locator("#tile-brokers .value")).to_have_text("1")
    expect(page.locator("#tile-topics .value")).to_have_text(count_text(len(topics)))
    expect(page.locator("#tile-partitions .value")).to_have_text(count_text(sum(len(t.partitions) for t in topics)))
    expect(page.locator("#tile-under-replicated .value")).to_have_text("0")
    cluster = admin.describe_cluster()
    expect(page.locator("#broker-table tbody tr")).to_have_count(1)
    expect(page.locator("#broker-table tbody tr")).to_contain_text(f"{cluster.brokers[0].host}:{cluster.brokers[0].port}")
    expect(page.locator("#broker-table tbody tr")).to_contain_text("controller")
    expect(page.locator("#connection")).to_have_class(re.compile(r"\bok\b"))


def test_topic_list_shows_message_counts(page, console, produced):
    from playwright.sync_api import expect

    page.goto(console.origin + "/topics")
    row = page.locator('#topic-table tr[data-topic="orders"]')
    expect(row).to_have_count(1)
    assert cell(row, "Messages") == "60" and cell(row, "Partitions") == "3"
    assert cell(page.locator('#topic-table tr[data-topic="payloads"]'), "Messages") == str(len(PAYLOADS))
    page.fill("#topic-filter", "pay")
    expect(page.locator("#topic-table tbody tr")).to_have_count(1)
    page.click('#topic-table a:text("payloads")')
    expect(page).to_have_url(console.origin + "/topics/payloads")


def test_topic_page_shows_each_partitions_offsets_and_configs(page, console, admin, produced):
    from playwright.sync_api import expect

    page.goto(console.origin + "/topics/orders")
    expect(page.locator("#partition-table tbody tr")).to_have_count(ORDERS_PARTITIONS)
    for p, (start, end) in offsets(admin, "orders", ORDERS_PARTITIONS).items():
        row = page.locator(f'#partition-table tr[data-partition="{p}"]')
        assert (cell(row, "Start offset"), cell(row, "End offset"), cell(row, "Messages")) == (
            str(start), str(end), str(produced["orders"][p]))
        assert cell(row, "Leader") == "1" and cell(row, "Replicas") == "1" and cell(row, "In sync") == "1"
    expect(page.locator("#tile-messages .value")).to_have_text("60")
    expect(page.locator("#tile-size .value")).to_have_text(re.compile(r"^[\d.]+ (B|KiB|MiB)$"))
    changed = page.locator('#config-table tr[data-config="retention.ms"]')
    expect(changed).to_have_class("changed")
    assert cell(changed, "Value") == "3600000"
    expect(page.locator('#config-table tr[data-config="cleanup.policy"]')).not_to_have_class("changed")
    page.check("#only-changed")
    expect(page.locator("#config-table tbody tr")).to_have_count(1)


def test_message_browser_table_rows_open_onto_key_value_headers_exactly(page, console, produced):
    from playwright.sync_api import expect

    page.goto(console.origin + "/topics/payloads/messages?mode=offset&partition=0&offset=0&limit=1")
    row = page.locator("#records-table tr.record")
    expect(row).to_have_count(1)
    assert row.get_attribute("data-offset") == "0"
    key, value, headers = PAYLOADS[0]
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(T0 / 1000)) + f".{T0 % 1000:03d}"
    size = len(key) + len(value) + sum(len(k) + len(v or b"") for k, v in headers)
    assert [cell(row, c) for c in ("Partition", "Offset", "Timestamp", "Key", "Value", "Headers", "Size")] == [
        "0", "0", stamp, "json-key", json.dumps(JSON_VALUE, separators=(",", ":")), "2", f"{size} B"]
    expect(page.locator("tr.record-detail")).to_have_count(0)  # closed until asked
    row.click()
    record = page.locator("tr.record-detail")
    expect(record).to_have_count(1)
    assert row.get_attribute("aria-expanded") == "true"
    assert record.locator('[data-role="key"]').text_content() == "json-key"
    headers = record.locator(".header-row")
    expect(headers).to_have_count(2)
    assert headers.nth(0).locator(".hk").text_content() == "trace-id"
    assert headers.nth(0).locator('[data-role="header"]').text_content() == "abc-123"
    assert headers.nth(1).locator('[data-role="header"]').get_attribute("data-kind") == "null"
    shown = record.locator('pre[data-role="value"]')
    assert shown.get_attribute("data-kind") == "json"
    assert shown.text_content() == json.dumps(JSON_VALUE, indent=2)  # pretty-printed, exactly
    row.press("Enter")  # the keyboard closes it too
    expect(page.locator("tr.record-detail")).to_have_count(0)


def test_binary_is_escaped_and_markup_is_shown_as_text(page, console, produced):
    from playwright.sync_api import expect

    page.goto(console.origin + "/topics/payloads/messages?mode=offset&partition=0&offset=1&limit=2")
    expect(page.locator("tr.record")).to_have_count(2)
    assert cell(page.locator('tr.record[data-offset="1"]'), "Value") == "binary\\x00\\x01\\x02\\xff\\xfe"
    page.click('tr.record[data-offset="1"]')
    binary = page.locator('tr.record-detail pre[data-role="value"]')
    assert binary.get_attribute("data-kind") == "binary"
    assert binary.text_content() == "\\x00\\x01\\x02\\xff\\xfe"
    page.click('tr.record-detail [data-role="hex-toggle"]')
    expect(binary).to_have_text("00 01 02 ff fe")
    page.click('tr.record[data-offset="2"]')
    html = page.locator('tr.record[data-offset="2"] + tr.record-detail')
    assert cell(page.locator('tr.record[data-offset="2"]'), "Value") == HTML_VALUE.decode()
    assert html.locator('pre[data-role="value"]').text_content() == HTML_VALUE.decode()
    assert html.locator(".hk").text_content() == "<i>h</i>"
    assert html.locator('[data-role="header"]').text_content() == "<img src=x onerror=alert(1)>"
    # shown as characters: no element was made from the record's markup, and nothing ran
    assert page.locator("#records script, #records b, #records i, #records img").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_browser_newest_first_and_jumps_to_a_timestamp_or_an_offset(page, console, produced):
    from playwright.sync_api import expect

    page.goto(console.origin + "/topics/payloads/messages?partition=0&limit=3")
    expect(page.locator("tr.record")).to_have_count(3)
    assert [r.get_attribute("data-offset") for r in page.locator("tr.record").all()] == ["3", "2", "1"]
    # a time between two records' timestamps: ListOffsets by timestamp finds the next one
    page.goto(console.origin + f"/topics/payloads/messages?mode=timestamp&timestamp={T0 + 1500}")
    expect(page.locator("tr.record")).to_have_count(2)
    assert [r.get_attribute("data-offset") for r in page.locator("tr.record").all()] == ["2", "3"]
    # the form: from an offset, in the URL afterwards
    page.select_option("#mode", "offset")
    page.fill("#offset", "3")
    page.click("#load")
    expect(page.locator("tr.record")).to_have_count(1)
    assert page.locator("tr.record").get_attribute("data-offset") == "3"
    assert "mode=offset" in page.url and "offset=3" in page.url
    expect(page.locator("#scan-note")).to_be_hidden()  # no search, no scan note


@pytest.fixture(scope="module")
def people(broker, admin):
    """Topic "people": 40 JSON records, user i in partition i % 2 at offset i // 2, with a
    "region" header (eu for odd i, us for even)."""
    admin.create_topic("people", 2, 1)
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) as p:
        for i in range(PEOPLE):
            p.send("people", json.dumps(person(i)).encode(), key=b"user-%d" % i, partition=i % 2,
                   headers=[("region", b"eu" if i % 2 else b"us")])
        p.flush(10)
    return PEOPLE


PEOPLE = 40


def person(i):
    return {"user": {"id": i, "name": f"user-{i}"}, "tier": "gold" if i % 4 == 0 else "silver", "note": 'say "hi", ok'}


def searched(console, query):
    status, doc = api(console, "/api/topics/people/messages?" + urllib.parse.urlencode(query))
    assert status == 200, doc
    return sorted(json.loads(r["value"]["text"])["user"]["id"] for r in doc["records"]), doc["scan"]


def test_api_search_by_substring_or_json_path_over_a_bounded_scan(console, people):
    everything = {"searched": True, "scanned": PEOPLE, "total": PEOPLE, "limit": 10_000, "complete": True}
    assert searched(console, {"q": "USER-1", "in": "key"}) == ([1, *range(10, 20)], everything)  # any case
    assert searched(console, {"q": "eu", "in": "headers"})[0] == list(range(1, PEOPLE, 2))
    assert searched(console, {"q": "eu", "in": "key"})[0] == []
    assert searched(console, {"q": 'say "hi"', "in": "value"})[0] == list(range(PEOPLE))
    assert searched(console, {"path": "$.user.id == 7"})[0] == [7]
    assert searched(console, {"path": "$.tier == gold"})[0] == list(range(0, PEOPLE, 4))
    assert searched(console, {"path": 'user["name"] ~ "R-3"'})[0] == [3, *range(30, 40)]
    assert searched(console, {"path": "$.user.id >= 30", "q": "user-3", "in": "key"})[0] == list(range(30, 40))
    assert searched(console, {"path": "$.user.missing"})[0] == []
    # the scan's bound is shared by the partitions: newest reads each one's last 5 records
    ids, scan = searched(console, {"q": "user", "scan": "10"})
    assert ids == list(range(30, 40)) and scan == {"searched": True, "scanned": 10, "total": PEOPLE, "limit": 10,
                                                   "complete": False}
    # from an offset the scan stops once `limit` records matched (gold: offsets 0 and 2 of partition 0)
    ids, scan = searched(console, {"mode": "offset", "partition": "0", "offset": "0", "limit": "2",
                                   "path": "$.tier == gold"})
    assert ids == [0, 4] and scan["scanned"] == 3 and scan["total"] == PEOPLE // 2
    for query, message in [({"path": "$.user.id ="}, "expected ==, !=, <, <=, >, >= or ~ after the path"),
                           ({"path": "$..id"}, "cannot read the JSON path"),
                           ({"q": "x", "in": "nowhere"}, "search in must be one of any, key, value, headers"),
                           ({"q": "x", "scan": "0"}, "scan must be between 1 and 100,000, not 0")]:
        status, doc = api(console, "/api/topics/people/messages?" + urllib.parse.urlencode(query))
        assert status == 400 and message in doc["error"], (query, doc)


def test_search_in_the_browser_and_export_what_is_shown(page, console, people, tmp_path):
    import csv

    from playwright.sync_api import expect

    page.goto(console.origin + "/topics/people/messages")
    expect(page.locator("tr.record")).to_have_count(PEOPLE)
    page.fill("#search", "user-1")
    page.select_option("#search-in", "key")
    page.click("#load")
    expect(page.locator("#scan-note")).to_have_text("Scanned 40 of 40 records, 11 shown.")
    expect(page.locator("tr.record")).to_have_count(11)
    assert "q=user-1" in page.url and "in=key" in page.url
    page.fill("#search", "")
    page.fill("#json-path", "$.tier == gold")
    page.click("#load")
    expect(page.locator("tr.record")).to_have_count(PEOPLE // 4)
    rows = [(int(r.get_attribute("data-partition")), int(r.get_attribute("data-offset")))
            for r in page.locator("tr.record").all()]
    assert sorted(rows) == [(0, i // 2) for i in range(0, PEOPLE, 4)]

    with page.expect_download() as info:
        page.click("#export-jsonl")
    assert info.value.suggested_filename == "people-all-newest.jsonl"
    info.value.save_as(tmp_path / "shown.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "shown.jsonl").read_text().splitlines()]
    assert [(r["partition"], r["offset"]) for r in lines] == rows  # what is shown, in its order
    for r in lines:
        i = r["offset"] * 2
        assert r["key"] == f"user-{i}" and r["value"] == person(i)
        assert r["headers"] == [{"key": "region", "value": "us"}]
        assert r["timestamp_type"] == "CreateTime" and isinstance(r["timestamp"], int)

    with page.expect_download() as info:
        page.click("#export-csv")
    info.value.save_as(tmp_path / "shown.csv")
    with open(tmp_path / "shown.csv", newline="") as f:
        table = list(csv.reader(f))
    assert table[0] == ["partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers"]
    assert [(int(r[0]), int(r[1])) for r in table[1:]] == rows
    for r in table[1:]:
        i = int(r[1]) * 2
        assert r[4] == f"user-{i}" and json.loads(r[5]) == person(i)  # quotes and commas survive
        assert json.loads(r[6]) == [{"key": "region", "value": "us"}]


def framed(schema_id: int, payload: bytes) -> bytes:
    """Confluent's wire format: magic byte 0, the schema id (4 bytes, big-endian), the payload."""
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def avro(schema, record) -> bytes:
    import io

    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


USERS = [{"id": 42, "name": "ann", "email": "ann@example.com", "avatar": b"\x89PNG"},
         {"id": 43, "name": "bob", "email": None, "avatar": b""}]


@pytest.fixture(scope="module")
def framed_topic(broker, admin):
    """Topic "framed": Avro (registry id), Avro (--schema-dir id), JSON Schema, an unknown id, Avro."""
    payment = avro(PAYMENT_SCHEMA, {"cents": 1999, "currency": "USD"})
    # the Avro spec by hand: a long is a zigzag varint (1999 -> 3998), an enum its index as one
    assert payment == bytes([0x9E, 0x1F, 0x02])
    admin.create_topic("framed", 1, 1)
    values = [framed(USER_ID, avro(USER_SCHEMA, USERS[0])), framed(PAYMENT_ID, payment),
              framed(JSON_SCHEMA_ID, b'{"sku": "sku-7", "qty": 2}'), framed(UNKNOWN_ID, b"\x02\x04\x06"),
              framed(USER_ID, avro(USER_SCHEMA, USERS[1]))]
    keys = [b"k%d" % i for i in range(len(values))]
    keys[2] = framed(JSON_SCHEMA_ID, b'{"order": 7}')  # keys are framed too, by a key serializer
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) as p:
        for i, (k, v) in enumerate(zip(keys, values)):
            assert p.send("framed", v, key=k).result(10).offset == i
    return values


def test_api_decodes_confluent_framed_values_with_the_schemas_at_hand(console, registry, framed_topic):
    for _ in range(2):  # twice: the registry is asked once per id all the same
        status, doc = api(console, "/api/topics/framed/messages?mode=offset&partition=0&offset=0&limit=5")
        assert status == 200
    v = [r["value"] for r in doc["records"]]
    ann = {**USERS[0], "avatar": "\\x89PNG"}  # Avro bytes shown escaped, as binary elsewhere
    assert (v[0]["kind"], v[0]["format"], v[0]["schema_id"], json.loads(v[0]["text"])) == ("json", "avro", 1, ann)
    assert v[0]["size"] == len(framed_topic[0])
    payment = {"cents": 1999, "currency": "USD"}
    assert (v[1]["format"], v[1]["schema_id"], json.loads(v[1]["text"])) == ("avro", 2, payment)
    assert (v[2]["format"], v[2]["schema_id"], json.loads(v[2]["text"])) == ("json", 3, {"sku": "sku-7", "qty": 2})
    key = doc["records"][2]["key"]
    assert (key["format"], key["schema_id"], json.loads(key["text"])) == ("json", 3, {"order": 7})
    assert v[3]["kind"] == "binary" and v[3]["schema_id"] == UNKNOWN_ID and "format" not in v[3]
    assert v[3]["note"] == "Confluent-framed, schema id 99: schema 99 is not in the registry"
    assert base64.b64decode(v[3]["base64"]) == framed_topic[3]  # every byte still there
    assert json.loads(v[4]["text"]) == {**USERS[1], "avatar": ""}
    assert registry.asked == {"/schemas/ids/1": 1, "/schemas/ids/99": 1}  # (2 from the directory, 3 is JSON)
    # decoded Avro is searched like JSON
    status, doc = api(console, "/api/topics/framed/messages?" + urllib.parse.urlencode({"path": "$.name == bob"}))
    assert [r["offset"] for r in doc["records"]] == [4]


def test_framed_values_in_the_browser_show_their_schema_id(page, console, framed_topic, tmp_path):
    from playwright.sync_api import expect

    page.goto(console.origin + "/topics/framed/messages?mode=offset&partition=0&offset=0&limit=5")
    expect(page.locator("tr.record")).to_have_count(5)
    row = page.locator('tr.record[data-offset="0"]')
    assert row.locator('[data-role="schema-id"]').text_content() == "schema 1"
    ann = json.dumps({**USERS[0], "avatar": "\\x89PNG"}, separators=(",", ":"))
    assert cell(row, "Value").startswith("Avroschema 1" + ann[:40])
    row.click()
    detail = page.locator('tr.record[data-offset="0"] + tr.record-detail')
    expect(detail.locator('[data-role="schema-id"]')).to_have_text("· Confluent-framed, schema id 1")
    assert json.loads(detail.locator('pre[data-role="value"]').text_content())["name"] == "ann"
    page.click('tr.record[data-offset="3"]')
    unknown = page.locator('tr.record[data-offset="3"] + tr.record-detail')
    expect(unknown.locator('[data-role="note"]')).to_have_text(
        "Confluent-framed, schema id 99: schema 99 is not in the registry")
    assert unknown.locator('pre[data-role="value"]').get_attribute("data-kind") == "binary"
    with page.expect_download() as info:  # the export holds what is shown: Avro decoded, with its id
        page.click("#export-jsonl")
    info.value.save_as(tmp_path / "framed.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "framed.jsonl").read_text().splitlines()]
    assert lines[0]["value"] == {**USERS[0], "avatar": "\\x89PNG"} and lines[0]["value_schema_id"] == USER_ID
    assert lines[3]["value"] == {"base64": base64.b64encode(framed_topic[3]).decode()}


def test_without_fastavro_avro_stays_framed_bytes_with_a_note(broker, registry, framed_topic, tmp_path):
    """fastavro is an optional extra: a console without it (here an import of it fails, as it
    does where it is not installed) still recognises the framing and says what is missing."""
    (tmp_path / "fastavro").mkdir()
    (tmp_path / "fastavro" / "__init__.py").write_text('raise ImportError("no fastavro here")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    c = ConsoleProcess(broker.bootstrap, "--schema-registry", registry.url, env=env)
    try:
        status, doc = api(c, "/api/topics/framed/messages?mode=offset&partition=0&offset=0&limit=3")
    finally:
        assert c.stop() == 0
    assert status == 200
    v = [r["value"] for r in doc["records"]]
    assert v[0]["kind"] == "binary" and v[0]["schema_id"] == USER_ID
    assert v[0]["note"] == ("Confluent-framed, schema id 1: an Avro payload: decoding it needs fastavro "
                            "(kafkacore's console extra, or fastavro alone)")
    assert v[2]["format"] == "json" and json.loads(v[2]["text"]) == {"sku": "sku-7", "qty": 2}  # JSON needs nothing


@pytest.mark.parametrize("option, message", [
    (["--schema-registry", "ftp://registry:8081"],
     "--schema-registry 'ftp://registry:8081' is not an http:// or https:// URL"),
    (["--schema-dir", "/no/such/dir"], "--schema-dir '/no/such/dir' is not a directory")])
def test_a_bad_schema_source_is_one_line_and_exit_2(option, message):
    done = subprocess.run([sys.executable, "-m", "kafkacore", "-b", "127.0.0.1:1", "console", *option],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"kafkacore console: error: {message}"]


def test_bad_offset_and_unknown_topic_show_a_clear_message(page, console, produced):
    from playwright.sync_api import expect

    page.goto(console.origin + "/topics/payloads/messages?mode=offset&partition=0&offset=99")
    expect(page.locator("#browse-problem")).to_have_text("offset 99 is outside partition 0's records (offsets 0-3)")
    page.goto(console.origin + "/topics/no-such-topic")
    expect(page.locator("#not-found")).to_contain_text("topic 'no-such-topic' does not exist")
    page.goto(console.origin + "/topics/no-such-topic/messages")
    expect(page.locator("#not-found")).to_contain_text("topic 'no-such-topic' does not exist")
    page.goto(console.origin + "/groups/no-such-group")
    expect(page.locator("#not-found")).to_contain_text("group 'no-such-group' does not exist")
    response = page.goto(console.origin + "/no/such/page")
    assert response.status == 404
    expect(page.locator("#not-found")).to_contain_text("There is no page at /no/such/page")


def test_group_page_lag_is_log_end_minus_committed(page, console, admin, produced):
    from playwright.sync_api import expect

    committed = {("orders", 0): 1, ("orders", 1): 0, ("orders", 2): 5}
    admin.alter_group_offsets("lagging", committed)
    ends = offsets(admin, "orders", ORDERS_PARTITIONS)
    page.goto(console.origin + "/groups/lagging")
    expect(page.locator("#offset-table tbody tr")).to_have_count(3)
    total = 0
    for (topic, p), c in committed.items():
        row = page.locator(f'#offset-table tr[data-topic="{topic}"][data-partition="{p}"]')
        lag = ends[p][1] - c
        total += lag
        assert (cell(row, "Committed"), cell(row, "End"), cell(row, "Lag")) == (str(c), str(ends[p][1]), str(lag))
    expect(page.locator("#tile-lag .value")).to_have_text(count_text(total))
    expect(page.locator("#tile-state")).to_contain_text("Empty")
    status, doc = api(console, "/api/groups/lagging")
    assert status == 200 and doc["lag"] == total and doc["state"] == admin.describe_group("lagging").state
    assert {(o["topic"], o["partition"]): o["committed"] for o in doc["offsets"]} == admin.list_group_offsets("lagging")
    page.goto(console.origin + "/groups")
    expect(page.locator('#group-table tr[data-group="lagging"]')).to_contain_text(count_text(total))


def test_group_total_lag_tile_agrees_with_its_chart_while_the_lag_moves(page, console, broker, admin, produced):
    """The "Total lag" tile once showed 1,200 while the chart beside it said 660: the tile came
    from the group's document (fetched every 5 s), the chart from the sampler (every 1.5 s). The
    tile now shows the chart's latest sample, read here at the same instant as the legend."""
    admin.create_topic("lag-moves", 1, 1)
    admin.alter_group_offsets("lag-watch", {("lag-moves", 0): 0})
    stop = threading.Event()
    page.goto(console.origin + "/groups/lag-watch")
    now = page.locator("#lag-now")
    now.wait_for()
    wait_for(lambda: now.text_content() != "–", "the sampler's first sample of the group", 20)
    producer = produce_until(broker, "lag-moves", b"more", stop)
    seen = []
    try:
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            tile, legend = page.evaluate(
                "() => [document.querySelector('#tile-lag .value').textContent,"
                " document.querySelector('#lag-now').textContent]")
            assert tile == legend, (tile, legend)
            seen.append(tile)
            time.sleep(0.25)  # pacing: the page is sampled four times a second
    finally:
        stop.set()
        producer.join(30)
    assert len(set(seen)) >= 3, f"the lag did not move on the page: {sorted(set(seen))}"


def test_throughput_chart_moves_as_records_arrive(page, console, broker, admin, produced):
    admin.create_topic("live", 2, 1)
    stop = threading.Event()
    page.goto(console.origin + "/topics/live")
    chart = page.locator("#topic-chart")
    chart.wait_for()
    producer = produce_until(broker, "live", b"tick", stop)
    try:
        wait_for(lambda: float(chart.get_attribute("data-latest") or 0) > 0, "the chart to show records/s", 20)
        first = (int(chart.get_attribute("data-points")), int(chart.get_attribute("data-last-time")),
                 chart.evaluate("c => c.toDataURL()"))
        wait_for(lambda: int(chart.get_attribute("data-last-time")) > first[1], "the chart's next sample", 10)
        second = (int(chart.get_attribute("data-points")), int(chart.get_attribute("data-last-time")),
                  chart.evaluate("c => c.toDataURL()"))
        series = api(console, "/api/topics/live/series")[1]
    finally:
        stop.set()
        producer.join(30)
    assert second[1] > first[1] and second[0] >= first[0]
    assert second[2] != first[2], "the canvas was not redrawn with the new samples"
    assert float(chart.get_attribute("data-latest")) > 0
    assert sum(v for _, v in series["points"]) > 0 and series["end_offset"] > 0


def test_create_topic_through_the_dialog(page, console, admin, produced):
    from playwright.sync_api import expect

    page.goto(console.origin + "/topics")
    page.click("#create-topic")
    dialog = page.locator("dialog[open]")
    page.fill("#new-topic-name", "made-in-browser")
    page.fill("#new-topic-partitions", "2")
    page.fill("#new-topic-configs", "retention.ms=7200000")
    dialog.locator('[data-role="confirm"]').click()  # Review: nothing is made yet
    expect(page.locator("#create-summary")).to_contain_text("made-in-browser")
    assert "made-in-browser" not in admin.list_topics()
    dialog.locator('[data-role="confirm"]').click()  # Create topic
    expect(page.locator("dialog[open]")).to_have_count(0)
    expect(page.locator('#topic-table tr[data-topic="made-in-browser"]')).to_have_count(1)
    info = admin.describe_topics(["made-in-browser"])["made-in-browser"]
    assert len(info.partitions) == 2
    configs = {c.name: c for c in admin.describe_configs(TOPIC_RESOURCE, "made-in-browser")}
    assert configs["retention.ms"].value == "7200000"


def test_delete_topic_through_the_dialog(page, console, admin, produced):
    from playwright.sync_api import expect

    admin.create_topic("doomed", 1, 1)
    page.goto(console.origin + "/topics/doomed")
    page.click("#delete-topic")
    confirm = page.locator('dialog[open] [data-role="confirm"]')
    expect(confirm).to_be_disabled()
    page.fill("#confirm-name", "doome")
    expect(confirm).to_be_disabled()
    page.fill("#confirm-name", "doomed")
    expect(confirm).to_be_enabled()
    confirm.click()
    expect(page).to_have_url(console.origin + "/topics")
    assert "doomed" not in admin.list_topics()


def test_reset_offsets_of_an_idle_group(page, console, admin, produced):
    from playwright.sync_api import expect

    admin.alter_group_offsets("to-reset", {("orders", p): 2 for p in range(ORDERS_PARTITIONS)})
    page.goto(console.origin + "/groups/to-reset")
    page.click("#reset-offsets")
    page.select_option("#reset-to", "latest")
    page.click('dialog[open] [data-role="confirm"]')  # Preview: a dry run
    expect(page.locator("#reset-plan-table tbody tr")).to_have_count(ORDERS_PARTITIONS)
    assert admin.list_group_offsets("to-reset") == {("orders", p): 2 for p in range(ORDERS_PARTITIONS)}
    page.click('dialog[open] [data-role="confirm"]')  # Reset offsets
    expect(page.locator("dialog[open]")).to_have_count(0)
    ends = offsets(admin, "orders", ORDERS_PARTITIONS)
    assert admin.list_group_offsets("to-reset") == {("orders", p): ends[p][1] for p in range(ORDERS_PARTITIONS)}
    expect(page.locator("#tile-lag .value")).to_have_text("0")
    # and through the API, to an offset (kept within each partition's range, as Kafka's tool does)
    status, doc = api(console, "/api/groups/to-reset/reset-offsets",
                      {"topic": "orders", "to": "offset", "offset": 1, "confirm": "to-reset"})
    assert status == 200 and doc["executed"]
    assert admin.list_group_offsets("to-reset") == {("orders", p): min(1, ends[p][1]) for p in range(ORDERS_PARTITIONS)}


def test_reset_is_refused_while_the_group_has_members(page, console, broker, admin, produced):
    from playwright.sync_api import expect

    from kafkacore import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "busy", "auto.offset.reset": "earliest",
                         "enable.auto.commit": "false"})
    try:
        consumer.subscribe(["orders"])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        consumer.commit()
        assert consumer.assignment()
        before = admin.list_group_offsets("busy")
        status, doc = api(console, "/api/groups/busy/reset-offsets", {"topic": "orders", "to": "latest", "confirm": "busy"})
        assert status == 409 and "stop them first" in doc["error"], doc
        page.goto(console.origin + "/groups/busy")
        expect(page.locator("#member-table tbody tr")).to_have_count(1)
        page.click("#reset-offsets")
        expect(page.locator("dialog[open] .warning")).to_contain_text("1 active member")
        page.click('dialog[open] [data-role="confirm"]')  # even the preview is refused, with the reason shown
        expect(page.locator("dialog[open] .form-error")).to_contain_text("stop them first")
        assert admin.list_group_offsets("busy") == before
    finally:
        consumer.close()


def test_consumer_protocol_group_type_members_epochs_and_offsets(page, console, broker, admin, produced):
    """A confluent-kafka consumer with group.protocol=consumer (KIP-848), described through
    ConsumerGroupDescribe: the group listed with its type `consumer` and state, its member with
    its member epoch and both partitions, the group and assignment epochs, the committed offsets
    and their lag; a classic group beside it is listed as `classic`, without epochs."""
    from playwright.sync_api import expect

    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic, group, per_partition = "kip848", "kip848-readers", 6
    admin.create_topic(topic, 2, 1)
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) as p:
        for part in (0, 1):
            p.send_many(topic, [b"r-%d" % i for i in range(per_partition)], partition=part).result(10)
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                  "group.protocol": "consumer", "client.id": "kip848-reader",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got = []
        wait_for(lambda: got.extend(m for m in c.consume(10, 0.2) if m.error() is None) or
                 len(got) == 2 * per_partition, "the consumer reads both partitions")
        c.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 4),
                          confluent_kafka.TopicPartition(topic, 1, per_partition)], asynchronous=False)

        def settled():
            d = admin.describe_group(group)
            return d.state == "Stable" and d.members[0].member_epoch == d.group_epoch and d
        described = wait_for(settled, "the group is Stable")
        [m] = described.members
        status, doc = api(console, "/api/groups")
        row = next(g for g in doc["groups"] if g["group_id"] == group)
        assert (row["group_type"], row["protocol_type"], row["state"], row["members"], row["topics"], row["lag"]) == (
            "consumer", "consumer", "Stable", 1, [topic], 2)
        status, doc = api(console, f"/api/groups/{group}")
        assert status == 200 and (doc["group_type"], doc["protocol"], doc["group_epoch"], doc["assignment_epoch"]) == (
            "consumer", "uniform", described.group_epoch, described.assignment_epoch)
        assert [(x["member_id"], x["client_id"], x["member_epoch"], x["assignment"]) for x in doc["members"]] == [
            (m.member_id, "kip848-reader", m.member_epoch, [[topic, 0], [topic, 1]])]
        assert [(o["partition"], o["committed"], o["end"], o["lag"], o["member"]) for o in doc["offsets"]] == [
            (0, 4, per_partition, 2, m.member_id), (1, per_partition, per_partition, 0, m.member_id)]

        page.goto(console.origin + "/groups")
        listed = page.locator(f'#group-table tr[data-group="{group}"]')
        expect(listed).to_contain_text("Stable")
        assert (cell(listed, "Type"), cell(listed, "Protocol"), cell(listed, "State"), cell(listed, "Lag")) == (
            "consumer", "consumer", "Stable", "2")
        page.goto(console.origin + f"/groups/{group}")
        members = page.locator("#member-table tbody tr")
        expect(members).to_have_count(1)
        assert (cell(members, "Client"), cell(members, "Epoch"), cell(members, "Partitions")) == (
            "kip848-reader", str(m.member_epoch), f"{topic}-0, {topic}-1")
        expect(page.locator("#tile-type .value")).to_have_text("consumer")
        expect(page.locator("#tile-group-epoch .value")).to_have_text(str(described.group_epoch))
        expect(page.locator("#tile-assignment-epoch .value")).to_have_text(str(described.assignment_epoch))
        rows = page.locator("#offset-table tbody tr")
        expect(rows).to_have_count(2)
        p0 = page.locator(f'#offset-table tr[data-topic="{topic}"][data-partition="0"]')
        assert (cell(p0, "Committed"), cell(p0, "End"), cell(p0, "Lag")) == ("4", str(per_partition), "2")
        assert cell(p0, "Member").startswith("kip848-reader ")
    finally:
        c.close()

    from kafkacore import Consumer  # a classic group (offsets only): its type, and no epochs
    with Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "kip848-classic"}) as k:
        k.commit({(topic, 0): 1})
    status, doc = api(console, "/api/groups")
    assert next(g["group_type"] for g in doc["groups"] if g["group_id"] == "kip848-classic") == "classic"
    status, doc = api(console, "/api/groups/kip848-classic")
    assert (doc["group_type"], doc["group_epoch"], doc["members"]) == ("classic", None, [])
    page.goto(console.origin + "/groups/kip848-classic")
    expect(page.locator("#tile-type .value")).to_have_text("classic")
    expect(page.locator("#tile-group-epoch")).to_have_count(0)


def test_share_group_members_start_offset_and_reset(page, console, broker, admin, produced):
    """A confluent-kafka ShareConsumer's group (KIP-932): listed as type share, its member with
    its epoch and partition, the share-partition start offset (SPSO) moving to the log end as
    the records are acknowledged; reset (AlterShareGroupOffsets) only once the group is empty."""
    from playwright.sync_api import expect

    confluent_kafka = pytest.importorskip("confluent_kafka")
    import confluent_kafka.admin
    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("confluent-kafka without ShareConsumer")
    topic, group, n = "shared", "sharers", 20
    admin.create_topic(topic, 1, 1)
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0}) as p:
        for h in [p.send(topic, b"s-%d" % i, partition=0) for i in range(n)]:
            h.result(10)
    cadmin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    res = confluent_kafka.admin.ConfigResource(
        confluent_kafka.admin.ResourceType.GROUP, group, incremental_configs=[confluent_kafka.admin.ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=confluent_kafka.admin.AlterConfigOpType.SET)])
    cadmin.incremental_alter_configs([res])[res].result(30)
    c = confluent_kafka.ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                                       "client.id": "share-reader"})
    try:
        c.subscribe([topic])
        got = []

        def all_acknowledged():
            got.extend(m for m in c.poll(0.2) if m.error() is None)
            if len(got) < n:
                return False
            c.commit_sync(30)  # implicit mode: the records polled so far are accepted
            return admin.describe_share_group_offsets(group).get((topic, 0), (-1,))[0] == n
        wait_for(all_acknowledged, "the share group acknowledges every record")
        status, doc = api(console, "/api/groups")
        row = next(g for g in doc["groups"] if g["group_id"] == group)
        assert (row["protocol_type"], row["state"], row["members"], row["topics"], row["lag"]) == (
            "share", "Stable", 1, [topic], 0)
        described = admin.describe_share_group(group)
        status, doc = api(console, f"/api/groups/{group}")
        assert status == 200 and (doc["group_epoch"], doc["assignment_epoch"]) == (
            described.group_epoch, described.assignment_epoch)
        [member] = doc["members"]
        assert (member["client_id"], member["member_epoch"], member["assignment"]) == (
            "share-reader", described.members[0].member_epoch, [[topic, 0]])
        assert doc["offsets"] == [{"topic": topic, "partition": 0, "start_offset": n, "end": n, "lag": 0,
                                   "members": [member["member_id"]]}]
        page.goto(console.origin + "/groups")
        expect(page.locator(f'#group-table tr[data-group="{group}"]')).to_contain_text("share")
        page.goto(console.origin + f"/groups/{group}")
        members = page.locator("#member-table tbody tr")
        expect(members).to_have_count(1)
        assert (cell(members, "Client"), cell(members, "Epoch"), cell(members, "Partitions")) == (
            "share-reader", str(member["member_epoch"]), f"{topic}-0")
        expect(page.locator("#tile-group-epoch .value")).to_have_text(str(described.group_epoch))
        expect(page.locator("#tile-assignment-epoch .value")).to_have_text(str(described.assignment_epoch))
        spso = page.locator(f'#offset-table tr[data-topic="{topic}"][data-partition="0"]')
        assert (cell(spso, "Start offset (SPSO)"), cell(spso, "End"), cell(spso, "Lag")) == (str(n), str(n), "0")
        status, doc = api(console, f"/api/groups/{group}/reset-offsets", {"topic": topic, "to": "earliest", "confirm": group})
        assert status == 409 and "stop them first" in doc["error"], doc
    finally:
        c.close()  # leaves the group: it is Empty at once
    wait_for(lambda: admin.describe_share_group(group).state == "Empty", "the share group empties")
    page.reload()
    expect(page.locator("#tile-members .value")).to_have_text("0")
    page.click("#reset-offsets")
    page.select_option("#reset-to", "offset")
    page.fill("#reset-offset", "5")
    page.click('dialog[open] [data-role="confirm"]')  # Preview: a dry run
    plan = page.locator("#reset-plan-table tbody tr")
    expect(plan).to_have_count(1)
    assert (cell(plan, "Now"), cell(plan, "New")) == (str(n), "5")
    assert admin.describe_share_group_offsets(group)[(topic, 0)][0] == n
    page.click('dialog[open] [data-role="confirm"]')  # Reset offsets
    expect(page.locator("dialog[open]")).to_have_count(0)
    assert admin.describe_share_group_offsets(group)[(topic, 0)][0] == 5
    expect(spso.locator("td").nth(2)).to_have_text("5")  # SPSO, then the lag: records 5 to 19 go out again
    assert (cell(spso, "Start offset (SPSO)"), cell(spso, "Lag")) == ("5", str(n - 5))
    status, doc = api(console, f"/api/groups/{group}/reset-offsets", {"topic": topic, "to": "latest", "confirm": group})
    assert status == 200 and doc["executed"] and doc["offsets"][0]["new"] == n
    assert admin.describe_share_group_offsets(group)[(topic, 0)][0] == n


# -- the operator's pages and actions ---------------------------------------------------------
def test_brokers_page_shows_replicas_leaders_log_dirs_and_configs(page, console, admin, produced):
    from playwright.sync_api import expect

    from kafkacore.client.admin import BROKER_RESOURCE

    _, topics = admin.metadata(None)  # internal topics too: they are on the broker's disk as well
    replicas = sum(1 for t in topics.values() for p in t.partitions if 1 in p.replicas)
    leaders = sum(1 for t in topics.values() for p in t.partitions if p.leader == 1)
    [log_dir] = admin.describe_log_dirs()
    status, doc = api(console, "/api/brokers")
    assert status == 200 and doc["controller"] == admin.describe_cluster().controller_id == 1
    [row] = doc["brokers"]
    assert (row["node_id"], row["controller"], row["replicas"], row["leaders"]) == (1, True, replicas, leaders)
    assert [d["path"] for d in row["log_dirs"]] == [log_dir.path] and row["log_dirs"][0]["error"] is None
    assert row["log_dirs"][0]["partitions"] == len(log_dir.sizes) and row["size"] >= sum(log_dir.sizes.values()) > 0
    assert api(console, "/api/brokers/7") == (404, {"error": "broker '7' is not in the cluster (its brokers: 1)"})

    page.goto(console.origin + "/")
    page.click('.sidebar a[data-nav="brokers"]')
    expect(page).to_have_url(console.origin + "/brokers")
    listed = page.locator('#broker-list tr[data-broker="1"]')
    expect(listed).to_contain_text("controller")
    assert (cell(listed, "Replicas"), cell(listed, "Leaders")) == (count_text(replicas), count_text(leaders))
    expect(page.locator("#log-dir-table tbody tr")).to_have_count(1)
    assert cell(page.locator("#log-dir-table tbody tr"), "Path") == log_dir.path
    listed.locator("a").click()
    expect(page).to_have_url(console.origin + "/brokers/1")
    expect(page.locator("#tile-role")).to_contain_text("controller")
    expect(page.locator("#tile-leaders .value")).to_have_text(count_text(leaders))
    expect(page.locator('#broker-topic-table tr[data-topic="orders"]')).to_have_count(1)
    assert cell(page.locator('#broker-topic-table tr[data-topic="orders"]'), "Leaders") == str(ORDERS_PARTITIONS)
    # the configs as the broker describes them, each with its source (and the default it overrides)
    described = {c.name: c for c in admin.describe_configs(BROKER_RESOURCE, "1", synonyms=True)}
    expect(page.locator("#config-table tbody tr")).to_have_count(len(described))
    static = sorted(n for n, c in described.items() if c.source == "STATIC_BROKER_CONFIG")
    assert static, "the test broker sets some configs in its configuration"
    row = page.locator(f'#config-table tr[data-config="{static[0]}"]')
    expect(row).to_have_class("changed")
    assert cell(row, "Value") == described[static[0]].value and cell(row, "Source") == "static broker config"
    page.check("#only-changed")
    expect(page.locator("#config-table tbody tr")).to_have_count(sum(1 for c in described.values() if not c.is_default))
    page.fill("#config-filter", static[0])
    expect(page.locator("#config-table tbody tr")).to_have_count(1)


def test_edit_a_topic_config_and_add_partitions(page, console, admin, produced):
    from playwright.sync_api import expect

    admin.create_topic("tunable", 1, 1)
    page.goto(console.origin + "/topics/tunable")
    row = page.locator('#config-table tr[data-config="retention.ms"]')
    expect(row).not_to_have_class("changed")
    row.locator('[data-role="edit-config"]').click()
    page.fill("#config-value", "soon")  # the broker's refusal, on one line in the dialog
    page.click('dialog[open] [data-role="confirm"]')
    expect(page.locator("dialog[open] .form-error")).to_have_text(
        "INVALID_CONFIG: topic 'tunable': retention.ms='soon': expected an integer")
    page.fill("#config-value", "7200000")
    page.click('dialog[open] [data-role="confirm"]')
    expect(page.locator("dialog[open]")).to_have_count(0)
    expect(row).to_have_class("changed")
    assert (cell(row, "Value"), cell(row, "Source")) == ("7200000", "dynamic topic config")
    assert cell(row, "Default") == "168 (log.retention.hours)"  # Kafka's synonym: the broker's default, in hours
    described = {c.name: c for c in admin.describe_configs(TOPIC_RESOURCE, "tunable")}
    assert (described["retention.ms"].value, described["retention.ms"].source) == ("7200000", "DYNAMIC_TOPIC_CONFIG")
    row.locator('[data-role="edit-config"]').click()
    page.click("#config-reset")  # back to the default: the override is deleted
    expect(page.locator("dialog[open]")).to_have_count(0)
    expect(row).not_to_have_class("changed")
    assert {c.name: c for c in admin.describe_configs(TOPIC_RESOURCE, "tunable")}["retention.ms"].is_default

    page.click("#add-partitions")
    page.fill("#partition-count", "3")
    page.click('dialog[open] [data-role="confirm"]')
    expect(page.locator("dialog[open]")).to_have_count(0)
    expect(page.locator("#partition-table tbody tr")).to_have_count(3)
    assert len(admin.describe_topics(["tunable"])["tunable"].partitions) == 3
    status, doc = api(console, "/api/topics/tunable/partitions", {"count": 2, "confirm": "tunable"})
    assert status == 400 and doc["code"] == "INVALID_PARTITIONS" and "would not be an increase" in doc["error"]
    assert api(console, "/api/topics/tunable/configs", {"set": {"retention.ms": "1"}})[0] == 428  # not confirmed
    status, doc = api(console, "/api/topics/tunable/configs", {"set": {"no.such.config": "1"}, "confirm": "tunable"})
    assert status == 400 and doc["error"] == "INVALID_CONFIG: topic 'tunable': no.such.config='1': unknown topic config"


def test_reset_offsets_to_a_time_and_delete_a_group(page, console, broker, admin, produced):
    from playwright.sync_api import expect

    from kafkacore import Consumer

    admin.alter_group_offsets("by-time", {("payloads", 0): 0})
    page.goto(console.origin + "/groups/by-time")
    page.click("#reset-offsets")
    page.select_option("#reset-to", "timestamp")
    # a whole second in (T0 + 1 s, T0 + 2 s]: the first record at or after it is offset 2
    moment = ((T0 + 1000) // 1000 + 1) * 1000
    page.fill("#reset-time", time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(moment / 1000)))
    page.click('dialog[open] [data-role="confirm"]')  # Preview
    plan = page.locator("#reset-plan-table tbody tr")
    expect(plan).to_have_count(1)
    assert (cell(plan, "Now"), cell(plan, "New")) == ("0", "2")
    page.click('dialog[open] [data-role="confirm"]')  # Reset offsets
    expect(page.locator("dialog[open]")).to_have_count(0)
    assert admin.list_group_offsets("by-time") == {("payloads", 0): 2}
    # later than every record: the end, as kafka-consumer-groups.sh --to-datetime does
    status, doc = api(console, "/api/groups/by-time/reset-offsets",
                      {"topic": "payloads", "to": "timestamp", "timestamp": T0 + 60_000, "dry_run": True})
    assert status == 200 and [o["new"] for o in doc["offsets"]] == [len(PAYLOADS)]

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "by-time", "enable.auto.commit": "false"})
    try:
        consumer.subscribe(["payloads"])

        def assigned():
            consumer.poll(0.2)
            return bool(consumer.assignment())

        wait_for(assigned, "the consumer's partitions", 30)
        page.reload()
        expect(page.locator("#member-table tbody tr")).to_have_count(1)
        page.click("#delete-group")
        page.fill("#confirm-group", "by-time")
        page.click('dialog[open] [data-role="confirm"]')  # refused by the broker: the group has a member
        expect(page.locator("dialog[open] .form-error")).to_have_text(
            "NON_EMPTY_GROUP: The group is not empty. Group 'by-time' has active members: stop its consumers first")
        assert admin.list_group_offsets("by-time") == {("payloads", 0): 2}
    finally:
        consumer.close()
    page.click('dialog[open] [data-role="confirm"]')  # the member left: now it goes
    expect(page).to_have_url(console.origin + "/groups")
    assert "by-time" not in [g.group_id for g in admin.list_groups()]
    assert admin.list_group_offsets("by-time") == {}
    status, doc = api(console, "/api/groups/by-time/delete", {"confirm": "by-time"})
    assert (status, doc) == (404, {"error": "group 'by-time' does not exist", "code": "GROUP_ID_NOT_FOUND"})


def read_back(broker, topic, partition, count):
    """The first ``count`` records of a partition, read with kafkacore's consumer."""
    from kafkacore import Consumer

    got = []
    with contextlib.closing(Consumer({"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest"})) as c:
        c.assign([(topic, partition)])
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            got += c.poll(0.5)
    return got


def test_produce_form_writes_key_value_headers_to_the_partition(page, console, broker, admin, produced):
    from playwright.sync_api import expect

    admin.create_topic("produce-here", 2, 1)
    page.goto(console.origin + "/topics/produce-here")
    page.fill("#produce-key", "customer-9")
    page.fill("#produce-value", '{"total": 12.5}')
    page.fill("#produce-headers", "trace-id=abc-9\nflag")
    page.select_option("#produce-partition", "1")
    page.click("#produce")
    expect(page.locator("#produced-offset")).to_have_text("0")
    expect(page.locator("#produced-partition")).to_have_text("1")
    expect(page.locator('#partition-table tr[data-partition="1"]')).to_contain_text("1")
    page.check("#produce-null")  # a tombstone: the key with a null value (to partition 1 again)
    page.click("#produce")
    expect(page.locator("#produced-offset")).to_have_text("1")
    [first, second] = read_back(broker, "produce-here", 1, 2)
    assert (first.key, first.value, first.headers) == (b"customer-9", b'{"total": 12.5}',
                                                       [("trace-id", b"abc-9"), ("flag", None)])
    assert (second.key, second.value, second.offset) == (b"customer-9", None, 1)
    # bad input: a clear line, nothing written
    status, doc = api(console, "/api/topics/produce-here/produce",
                      {"value": "x", "partition": 5, "confirm": "produce-here"})
    assert (status, doc["error"]) == (
        400, "partition 5 of 'produce-here' does not exist (the topic has 2 partitions: 0-1)")
    page.select_option("#produce-partition", "0")
    page.fill("#produce-headers", "=no-name")
    page.click("#produce")
    expect(page.locator("#produce-error")).to_have_text("a header needs a key (text)")
    status, doc = api(console, "/api/topics/not-there/produce", {"value": "x", "confirm": "not-there"})
    assert (status, doc["code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION") and "not-there" not in admin.list_topics()
    assert offsets(admin, "produce-here", 2) == {0: (0, 0), 1: (0, 2)}


def test_a_cluster_that_goes_away_is_reported_and_the_console_recovers(browser, tmp_path):
    from playwright.sync_api import expect

    with BrokerProcess(tmp_path / "data") as other:
        second = ConsoleProcess(other.bootstrap)
        context = browser.new_context()
        try:
            pg = context.new_page()
            pg.set_default_timeout(15_000)
            pg.goto(second.origin + "/topics")
            expect(pg.locator("#connection")).to_have_class(re.compile(r"\bok\b"))
            other.stop()
            status, doc = api(second, "/api/overview")
            assert status == 503 and doc["error"].startswith(f"cannot reach the cluster at {other.bootstrap}")
            expect(pg.locator("#connection")).to_have_class(re.compile(r"\bdown\b"))  # the list's next refresh
            expect(pg.locator("#connection")).to_contain_text("cannot reach the cluster")
            pg.goto(second.origin + "/topics/anything")
            expect(pg.locator(".alert.error")).to_contain_text("cannot reach the cluster")
            other.start()
            expect(pg.locator("#connection")).to_have_class(re.compile(r"\bok\b"), timeout=20_000)
            # the page tried again by itself, and now gets the cluster's real answer
            expect(pg.locator("#not-found")).to_contain_text("topic 'anything' does not exist")
            assert api(second, "/api/overview")[0] == 200
        finally:
            context.close()
            assert second.stop() == 0


# -- the command -------------------------------------------------------------------------------
def test_unreachable_cluster_is_one_line_and_exit_3(tmp_path):
    from broker_client import free_port

    out = subprocess.run([sys.executable, "-m", "kafkacore", "-b", f"127.0.0.1:{free_port()}", "console",
                          "--port", "0"], cwd=str(ROOT), capture_output=True, text=True, timeout=60)
    assert out.returncode == 3, out
    assert out.stderr.count("\n") == 1 and "cannot reach the cluster" in out.stderr and "Traceback" not in out.stderr


def test_port_in_use_is_one_line_and_exit_1(broker, console):
    port = console.origin.rsplit(":", 1)[1]
    out = subprocess.run([sys.executable, "-m", "kafkacore", "-b", broker.bootstrap, "console", "--port", port],
                         cwd=str(ROOT), capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out
    assert out.stderr.count("\n") == 1 and f"cannot serve on 127.0.0.1:{port}" in out.stderr, out.stderr


def test_the_console_runs_the_code_under_test(console):
    """The console subprocess imports the same kafkacore as the tests (the worktree or the
    installed package, never another checkout)."""
    import kafkacore

    out = subprocess.run([sys.executable, "-c", "import kafkacore; print(kafkacore.__file__)"], cwd=str(ROOT),
                         capture_output=True, text=True, timeout=60, env=os.environ.copy())
    assert Path(out.stdout.strip()).resolve() == Path(kafkacore.__file__).resolve()


# -- read-only ---------------------------------------------------------------------------------
FORGED_POST = """async ([path, body]) => {
    // what a script on the console's own page could send: the page's token, a valid confirmation
    const token = document.querySelector('meta[name="console-token"]').content;
    const r = await fetch(path, {method: 'POST', body: JSON.stringify(body),
                                 headers: {'Content-Type': 'application/json', 'X-Console-Token': token}});
    return [r.status, await r.json()];
}"""


@pytest.fixture(scope="module")
def read_only_console(broker):
    c = ConsoleProcess(broker.bootstrap, "--read-only")
    yield c
    assert c.stop() == 0, c.proc.stderr.read()


def write_requests(console, endpoints=None, topic="ro-kept", group="ro-group"):
    """(path, body) of every POST endpoint the console lists (``endpoints``: GET /api's list,
    when the caller has it), filled in so that each would succeed on a writable console."""
    bodies = {"POST /api/topics": {"name": "ro-new", "partitions": 1, "confirm": "ro-new"},
              "POST /api/topics/{name}/delete": {"confirm": "ro-kept"},
              "POST /api/groups/{group}/reset-offsets": {"topic": "orders", "to": "latest", "confirm": "ro-group"},
              "POST /api/topics/{name}/configs": {"set": {"retention.ms": "1000"}, "confirm": "ro-kept"},
              "POST /api/topics/{name}/partitions": {"count": 2, "confirm": "ro-kept"},
              "POST /api/groups/{group}/delete": {"confirm": "ro-group"},
              "POST /api/topics/{name}/produce": {"value": "never", "confirm": "ro-kept"}}
    endpoints = api(console, "/api")[1]["endpoints"] if endpoints is None else endpoints
    posts = [e for e in endpoints if e.startswith("POST ")]
    assert sorted(posts) == sorted(bodies), "a new write endpoint: add it here"
    named = {"ro-kept": topic, "ro-group": group}
    return [(e[5:].replace("{name}", topic).replace("{group}", group),
             {k: named.get(v, v) if isinstance(v, str) else v for k, v in bodies[e].items()}) for e in posts]


def test_read_only_console_offers_no_writes_and_refuses_them(browser, read_only_console, admin, produced):
    from playwright.sync_api import expect

    c = read_only_console
    admin.create_topic("ro-kept", 1, 1)
    admin.alter_group_offsets("ro-group", {("orders", 0): 1})
    assert api(c, "/api/session") == (200, {"login": False, "user": None, "read_only": True})
    with checked_page(browser, c.origin) as pg:
        pg.goto(c.origin + "/topics")
        expect(pg.locator('#topic-table tr[data-topic="ro-kept"]')).to_have_count(1)
        expect(pg.locator("#read-only-mark")).to_be_visible()
        expect(pg.locator("#create-topic")).to_have_count(0)
        pg.goto(c.origin + "/topics/ro-kept")
        expect(pg.locator("#partition-table tbody tr")).to_have_count(1)
        expect(pg.locator("#browse-messages")).to_be_visible()  # reading goes on as before
        expect(pg.locator("#delete-topic")).to_have_count(0)
        expect(pg.locator("#add-partitions")).to_have_count(0)
        expect(pg.locator("#produce-form")).to_have_count(0)
        expect(pg.locator('#config-table tr[data-config="retention.ms"]')).to_have_count(1)
        expect(pg.locator('[data-role="edit-config"]')).to_have_count(0)
        pg.goto(c.origin + "/groups/ro-group")
        expect(pg.locator("#offset-table tbody tr")).to_have_count(1)
        expect(pg.locator("#reset-offsets")).to_have_count(0)
        expect(pg.locator("#delete-group")).to_have_count(0)
        forged = [pg.evaluate(FORGED_POST, [path, body]) for path, body in write_requests(c)]
    raw = [api(c, path, body) for path, body in write_requests(c)]
    for status, doc in forged + raw:
        assert status == 403
        assert doc["error"] == "the console is read-only (--read-only): it does not change the cluster"
    assert "ro-kept" in admin.list_topics() and "ro-new" not in admin.list_topics()
    assert len(admin.describe_topics(["ro-kept"])["ro-kept"].partitions) == 1
    assert offsets(admin, "ro-kept", 1) == {0: (0, 0)}
    assert {c.name: c for c in admin.describe_configs(TOPIC_RESOURCE, "ro-kept")}["retention.ms"].is_default
    assert admin.list_group_offsets("ro-group") == {("orders", 0): 1}


# -- the console's own login (--users) ---------------------------------------------------------
PASSWORDS = {"alice": "alice-console-pw-1", "rita": "rita-reads-only-2"}
SESSION_TOKENS = []  # every session cookie the tests saw: none may reach the console's output


@pytest.fixture(scope="module")
def users_file(tmp_path_factory):
    """alice (may write) and rita (read-only), made with ``kafkacore console hash-password``."""
    lines = ["# kafkacore console users"]
    for name, extra in (("alice", []), ("rita", ["--read-only"])):
        out = subprocess.run([sys.executable, "-m", "kafkacore", "console", "hash-password", name, *extra],
                             input=PASSWORDS[name] + "\n", cwd=str(ROOT), capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        lines.append(out.stdout.strip())
    text = "\n".join(lines) + "\n"
    assert re.fullmatch(r"alice:scrypt\$\d+\$\d+\$\d+\$[^$:]+\$[^$:]+", lines[1]) and lines[2].endswith(":read-only")
    assert not any(pw in text for pw in PASSWORDS.values())
    path = tmp_path_factory.mktemp("users") / "users.txt"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def login_console(broker, users_file):
    c = ConsoleProcess(broker.bootstrap, "--users", str(users_file))
    yield c
    assert c.stop() == 0
    output = c.proc.stdout.read() + c.proc.stderr.read()
    assert "Traceback" not in output, output
    leaked = [s for s in [*PASSWORDS.values(), *SESSION_TOKENS] if s in output]
    assert leaked == [], "a password or session token in the console's output"


def raw_request(console, method, path, body=None, headers=None):
    """(status, headers, body) without following redirects."""
    conn = http.client.HTTPConnection(console.origin.split("//")[1], timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def log_in(pg, user, password):
    pg.fill("#login-user", user)
    pg.fill("#login-password", password)
    pg.click("#login-submit")


def session_cookie(pg) -> dict:
    cookies = [c for c in pg.context.cookies() if c["name"].startswith("kafkacore_console_session")]
    assert len(cookies) == 1, cookies
    SESSION_TOKENS.append(cookies[0]["value"])
    return cookies[0]


def test_without_a_session_pages_go_to_the_login_and_the_api_is_401(login_console):
    c = login_console
    for path in ("/api/overview", "/api/topics/orders", "/api/session", "/static/app.js"):
        status, _, body = raw_request(c, "GET", path)
        assert status == 401 and "log in first" in json.loads(body)["error"], path
    status, _, body = raw_request(c, "POST", "/api/topics/orders/delete", json.dumps({"confirm": "orders"}),
                                  {"Content-Type": "application/json"})
    assert status == 401
    status, headers, body = raw_request(c, "GET", "/topics/orders?x=1")
    assert status == 303 and headers["Location"] == "/login?next=%2Ftopics%2Forders%3Fx%3D1"
    assert b"console-token" not in body
    # the login page itself sends nowhere else after logging in ("//elsewhere" is another site)
    status, _, body = raw_request(c, "GET", "/login?next=//attacker.example/")
    assert status == 200 and b'name="next" value="/"' in body


def test_login_refuses_wrong_passwords_alike_and_lets_the_right_one_in(browser, login_console, admin, produced):
    from playwright.sync_api import expect

    c = login_console
    with checked_page(browser, c.origin) as pg:
        pg.goto(c.origin + "/topics/orders")
        expect(pg).to_have_url(c.origin + "/login?next=%2Ftopics%2Forders")
        log_in(pg, "alice", "not-her-password")
        expect(pg.locator("#login-error")).to_have_text("Wrong user name or password.")
        wrong_password = pg.locator("#login-error").text_content()
        log_in(pg, "mallory", PASSWORDS["alice"])  # no such user: the same answer
        expect(pg.locator("#login-user")).to_have_value("mallory")
        assert pg.locator("#login-error").text_content() == wrong_password
        assert pg.context.cookies() == []
        log_in(pg, "alice", PASSWORDS["alice"])
        expect(pg).to_have_url(c.origin + "/topics/orders")  # where she was going
        expect(pg.locator("#partition-table tbody tr")).to_have_count(ORDERS_PARTITIONS)
        expect(pg.locator("#session-user")).to_have_text("logged in as alice")
        expect(pg.locator("#delete-topic")).to_be_visible()
        expect(pg.locator("#read-only-mark")).to_have_count(0)
        cookie = session_cookie(pg)
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and len(cookie["value"]) >= 43  # 32 bytes
        assert pg.evaluate("document.cookie") == ""  # out of the page scripts' reach
        # alice may write: a topic made through the API from her page
        status, doc = pg.evaluate(FORGED_POST, ["/api/topics", {"name": "alice-made", "partitions": 1,
                                                                "confirm": "alice-made"}])
        assert status == 201, doc
    assert "alice-made" in admin.list_topics()


def test_failed_logins_are_answered_late_and_alike(login_console):
    c = login_console
    _, _, page = raw_request(c, "GET", "/login")
    token = re.search(rb'name="token" value="([^"]+)"', page).group(1).decode()
    answers = []
    for user in ("alice", "nobody-here"):
        started = time.monotonic()
        status, headers, body = raw_request(c, "POST", "/login", urllib.parse.urlencode(
            {"token": token, "user": user, "password": "wrong", "next": "/"}),
            {"Content-Type": "application/x-www-form-urlencoded"})
        elapsed = time.monotonic() - started
        assert status == 401 and "Set-Cookie" not in headers and elapsed >= 1.0, (status, elapsed)
        answers.append(re.search(rb'id="login-error"[^>]*>([^<]*)<', body).group(1))
    assert answers[0] == answers[1] == b"Wrong user name or password."
    # the form needs the login page's token (another site's page cannot log a browser in)
    status, _, _ = raw_request(c, "POST", "/login", urllib.parse.urlencode(
        {"user": "alice", "password": PASSWORDS["alice"]}), {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 403


def test_a_read_only_user_sees_no_write_controls_and_cannot_write(browser, login_console, admin, produced):
    from playwright.sync_api import expect

    c = login_console
    admin.create_topic("rita-kept", 1, 1)
    admin.alter_group_offsets("rita-group", {("orders", 0): 1})
    with checked_page(browser, c.origin) as pg:
        pg.goto(c.origin + "/login")
        log_in(pg, "rita", PASSWORDS["rita"])
        expect(pg).to_have_url(c.origin + "/")
        session_cookie(pg)
        expect(pg.locator("#read-only-mark")).to_be_visible()
        expect(pg.locator("#session-user")).to_have_text("logged in as rita")
        pg.goto(c.origin + "/topics")
        expect(pg.locator('#topic-table tr[data-topic="rita-kept"]')).to_have_count(1)
        expect(pg.locator("#create-topic")).to_have_count(0)
        pg.goto(c.origin + "/topics/rita-kept")
        expect(pg.locator("#partition-table tbody tr")).to_have_count(1)
        expect(pg.locator("#delete-topic")).to_have_count(0)
        expect(pg.locator('#config-table tr[data-config="retention.ms"]')).to_have_count(1)
        expect(pg.locator('#add-partitions, #produce-form, [data-role="edit-config"]')).to_have_count(0)
        pg.goto(c.origin + "/groups/rita-group")
        expect(pg.locator("#offset-table tbody tr")).to_have_count(1)
        expect(pg.locator("#reset-offsets, #delete-group")).to_have_count(0)
        session = pg.evaluate("async () => (await fetch('/api/session')).json()")
        assert session == {"login": True, "user": "rita", "read_only": True}
        endpoints = pg.evaluate("async () => (await fetch('/api')).json()")["endpoints"]
        # every write the console has, forged from her page with the page's token
        answers = [pg.evaluate(FORGED_POST, [path, body])
                   for path, body in write_requests(c, endpoints, topic="rita-kept", group="rita-group")]
    assert len(answers) >= 7
    for status, doc in answers:
        assert status == 403
        assert doc["error"] == "user 'rita' may only read: the console does not change the cluster for them"
    assert "rita-kept" in admin.list_topics() and "ro-new" not in admin.list_topics()
    assert len(admin.describe_topics(["rita-kept"])["rita-kept"].partitions) == 1
    assert offsets(admin, "rita-kept", 1) == {0: (0, 0)}
    assert admin.list_group_offsets("rita-group") == {("orders", 0): 1}


def test_logout_ends_the_session_on_the_server(browser, login_console):
    from playwright.sync_api import expect

    c = login_console
    with checked_page(browser, c.origin) as pg:
        pg.goto(c.origin + "/groups")
        log_in(pg, "alice", PASSWORDS["alice"])
        expect(pg).to_have_url(c.origin + "/groups")
        cookie = session_cookie(pg)
        header = {"Cookie": f"{cookie['name']}={cookie['value']}"}
        assert raw_request(c, "GET", "/api/overview", headers=header)[0] == 200  # the cookie is the session
        pg.click("#logout")
        expect(pg).to_have_url(c.origin + "/login")
        assert pg.context.cookies() == []
        pg.goto(c.origin + "/groups")
        expect(pg).to_have_url(c.origin + "/login?next=%2Fgroups")
    # the server forgot the session: the old cookie, sent again, is refused
    status, _, body = raw_request(c, "GET", "/api/overview", headers=header)
    assert status == 401 and "log in first" in json.loads(body)["error"]


@pytest.mark.parametrize("content, message", [
    ("alice:secret-typed-here\n", "--users {path}:1: the hash is not scrypt$N$r$p$salt$key"),
    ("# only a comment\n\nbob\n", "--users {path}:3: expected name:hash or name:hash:read-only"),
    ("alice:scrypt$32768$8$1$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5:admin\n",
     "--users {path}:1: the role must be read-only or read-write, not 'admin'"),
    (None, "cannot read --users {path}: No such file or directory"),
])
def test_a_bad_users_file_is_one_line_and_exit_2(tmp_path, content, message):
    from broker_client import free_port

    path = tmp_path / "users"
    if content is not None:
        path.write_text(content)
    out = subprocess.run([sys.executable, "-m", "kafkacore", "-b", f"127.0.0.1:{free_port()}", "console",
                          "--port", "0", "--users", str(path)], cwd=str(ROOT), capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2, out
    assert out.stderr.count("\n") == 1 and message.format(path=path) in out.stderr, out.stderr
    assert "secret-typed-here" not in out.stderr  # a line is never quoted back: it may hold a password


# -- a cluster that wants a login (SASL) -------------------------------------------------------
def test_console_works_against_a_sasl_listener(tmp_path):
    from broker_client import free_port

    password = "console-sasl-pw"
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_ops="{password}";'
    port, sasl_port = free_port(), free_port()
    settings = {"listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
                "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas}

    def client_config(pw):
        path = tmp_path / f"client-{pw}.properties"
        path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                        "org.apache.kafka.common.security.plain.PlainLoginModule required "
                        f'username="ops" password="{pw}";\n')
        return str(path)

    with BrokerProcess(tmp_path / "data", settings, port=port) as b:
        c = ConsoleProcess(f"127.0.0.1:{sasl_port}", "--command-config", client_config(password))
        try:
            status, doc = api(c, "/api/overview")
            assert status == 200 and [br["port"] for br in doc["brokers"]] == [sasl_port]
            status, doc = api(c, "/api/topics", {"name": "over-sasl", "partitions": 2, "confirm": "over-sasl"})
            assert status == 201, doc
            # the produce form's producer logs in with the same --command-config
            status, doc = api(c, "/api/topics/over-sasl/produce",
                              {"value": "hi", "partition": 1, "confirm": "over-sasl"})
            assert (status, doc["partition"], doc["offset"]) == (201, 1, 0), doc
        finally:
            assert c.stop() == 0, c.proc.stderr.read()
        with AdminClient(b.bootstrap) as plain_admin:  # the topic is there, seen over PLAINTEXT
            assert len(plain_admin.describe_topics(["over-sasl"])["over-sasl"].partitions) == 2
        out = subprocess.run([sys.executable, "-m", "kafkacore", "-b", f"127.0.0.1:{sasl_port}", "console",
                              "--port", "0", "--command-config", client_config("wrong-pw")],
                             cwd=str(ROOT), capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out
        assert "SASL_AUTHENTICATION_FAILED" in out.stderr and "wrong-pw" not in out.stderr


def test_password_hashes_are_salted_and_sessions_end_when_idle():
    from kafkacore.console.auth import PasswordHash, SessionStore, User, hash_password

    first, second = hash_password("same password"), hash_password("same password")
    assert first != second  # a salt of its own each time
    parsed = PasswordHash.parse(first)
    assert parsed.matches("same password") and not parsed.matches("same passwore")
    now = [1000.0]
    store = SessionStore(idle_s=60, clock=lambda: now[0])
    token = store.create(User("alice", parsed, False))
    assert len(token) >= 43 and token != store.create(User("alice", parsed, False))
    now[0] += 59
    assert store.get(token).user == "alice"  # used: the idle time starts again
    now[0] += 59
    assert store.get(token) is not None
    now[0] += 61
    assert store.get(token) is None and store.get(token) is None
