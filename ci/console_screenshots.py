"""Takes the screenshots of the web console in docs/console/ (docs/tools.md shows them).

    .venv/bin/python ci/console_screenshots.py [--out docs/console] [--seconds 45]

Starts a broker (``kafkacore serve``, a scratch data directory, a free port), fills it with a
few topics and a consumer group that falls behind and catches up, lets the console sample
them for a while so the charts have a history, and photographs the main pages in Debian's
chromium through Playwright. Not part of the test run: it takes about a minute.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafkacore import Consumer, Producer  # noqa: E402
from kafkacore.client.admin import AdminClient  # noqa: E402

def bad_config_value(page):
    """The config dialog with the broker's refusal of a bad value on its error line."""
    page.click('#config-table tr[data-config="retention.ms"] [data-role="edit-config"]')
    page.fill("#config-value", "a week")
    page.click('dialog[open] [data-role="confirm"]')
    page.locator("dialog[open] .form-error").filter(has_text="INVALID_CONFIG").wait_for()


def produced_record(page):
    """The produce form after writing a record."""
    page.fill("#produce-key", "c-042")
    page.fill("#produce-value", json.dumps({"order_id": "o-900001", "total": 42.5, "currency": "EUR"}))
    page.fill("#produce-headers", "source=console\ntrace-id=5f2c9a")
    page.click("#produce")
    page.locator("#produced-offset").wait_for()
    page.locator("#produce-form").scroll_into_view_if_needed()


def open_row(selector):
    """Opens a record's row in the message browser."""
    return lambda page: page.click(selector)


PAGES = [  # (file, path, full page, what to do on the page first)
    ("overview.png", "/", False, None),
    ("topics.png", "/topics", False, None),
    ("topic.png", "/topics/orders", False, None),
    ("topic-produce.png", "/topics/payments", False, produced_record),
    ("topic-config.png", "/topics/orders", False, bad_config_value),
    ("messages.png", "/topics/orders/messages?partition=0&mode=offset&offset=0&limit=16", False,
     open_row("tr.record >> nth=1")),
    ("messages-search.png", "/topics/orders/messages?" + urlencode({"path": "$.total > 390", "scan": "1200"}), False,
     None),
    ("messages-avro.png", "/topics/users-avro/messages?partition=0&mode=offset&offset=0&limit=8", False,
     open_row("tr.record >> nth=0")),
    ("group.png", "/groups/billing", False, None),
    ("brokers.png", "/brokers", False, None),
    ("broker.png", "/brokers/1", False, None),
]
USER_SCHEMA_ID = 17  # the --schema-dir file 17.avsc: Confluent-framed Avro in "users-avro"
USER_SCHEMA = {"type": "record", "name": "User", "namespace": "shop", "fields": [
    {"name": "id", "type": "string"}, {"name": "name", "type": "string"},
    {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["BRONZE", "SILVER", "GOLD"]}},
    {"name": "email", "type": ["null", "string"], "default": None}, {"name": "signed_up", "type": "long"}]}
VIEWPORT = {"width": 1360, "height": 960}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the broker exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port} after {timeout} s")


def order(i, rnd):
    return {"order_id": f"o-{100000 + i}", "customer": f"c-{rnd.randrange(900):03d}",
            "items": [{"sku": f"sku-{rnd.randrange(50)}", "qty": rnd.randint(1, 4)} for _ in range(rnd.randint(1, 3))],
            "total": round(rnd.uniform(5, 400), 2), "currency": "EUR"}


def seed(bootstrap):
    with AdminClient(bootstrap) as admin:
        admin.create_topic("orders", 6, 1, {"retention.ms": "604800000", "cleanup.policy": "delete"})
        admin.create_topic("payments", 3, 1)
        admin.create_topic("clickstream", 12, 1, {"retention.ms": "86400000", "segment.bytes": "104857600"})
        admin.create_topic("customers", 3, 1, {"cleanup.policy": "compact"})
        admin.create_topic("audit-log", 1, 1)
        admin.create_topic("users-avro", 1, 1)
    rnd = random.Random(7)
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as p:
        for i in range(1500):
            p.send("orders", json.dumps(order(i, rnd)).encode(), key=b"c-%03d" % rnd.randrange(900),
                   headers=[("source", b"web"), ("trace-id", b"%016x" % rnd.getrandbits(64))])
        for i in range(800):
            p.send("payments", json.dumps({"payment": i, "status": "captured"}).encode(), key=b"o-%d" % i)
        for i in range(300):
            p.send("customers", json.dumps({"id": f"c-{i:03d}", "tier": rnd.choice(["gold", "silver"])}).encode(),
                   key=b"c-%03d" % i)
        p.send("audit-log", b"\x0a\x05admin\x12\x06delete\x18\x01", key=b"proto")
        for i in range(40):
            p.send("users-avro", avro_user(i, rnd), key=b"c-%03d" % i)
        p.flush(30)


def avro_user(i, rnd) -> bytes:
    """A Confluent-framed Avro value: magic byte 0, the schema id (4 bytes, big-endian), Avro."""
    import io

    import fastavro

    out = io.BytesIO(b"\x00" + USER_SCHEMA_ID.to_bytes(4, "big"))
    out.seek(0, io.SEEK_END)
    name = rnd.choice(["Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret"])
    fastavro.schemaless_writer(out, fastavro.parse_schema(USER_SCHEMA), {
        "id": f"c-{i:03d}", "name": name, "tier": rnd.choice(["BRONZE", "SILVER", "GOLD"]),
        "email": f"{name.lower()}{i}@example.com" if i % 3 else None, "signed_up": 1_700_000_000_000 + i * 86_400_000})
    return out.getvalue()


def traffic(bootstrap, stop):
    """Clicks and orders at a rate that rises and falls, so the charts have a shape."""
    rnd = random.Random(11)
    start = time.monotonic()
    i = 10_000
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 20}) as p:
        while not stop.is_set():
            t = time.monotonic() - start
            clicks = int(120 + 90 * math.sin(t / 6))
            for _ in range(clicks):
                p.send("clickstream", json.dumps({"page": f"/p/{rnd.randrange(40)}"}).encode())
            for _ in range(int(25 + 20 * math.sin(t / 9 + 1))):
                p.send("orders", json.dumps(order(i, rnd)).encode(), key=b"c-%03d" % rnd.randrange(900),
                       headers=[("source", b"app")])
                i += 1
            time.sleep(0.25)


def billing(bootstrap, stop):
    """A consumer group that reads orders in bursts: its lag climbs and drops."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "billing", "auto.offset.reset": "earliest",
                  "enable.auto.commit": "false", "client.id": "billing-service"})
    c.subscribe(["orders"])
    start = time.monotonic()
    try:
        while not stop.is_set():
            busy = int((time.monotonic() - start) / 8) % 2 == 0
            if busy:
                c.poll(0.3, max_records=60)
                c.commit()
            else:
                time.sleep(0.3)
                c.poll(0)
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "console"))
    ap.add_argument("--seconds", type=float, default=45, help="how long the charts gather samples first")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = []
    stop = threading.Event()
    with tempfile.TemporaryDirectory(prefix="kc-shots-") as tmp:
        try:
            bport = free_port()
            broker = subprocess.Popen([sys.executable, "-m", "kafkacore", "serve", "--port", str(bport), "--data-dir",
                                       f"{tmp}/data", "--set", "group.initial.rebalance.delay.ms=0"],
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
            procs.append(broker)
            wait_for_port(bport, broker)
            bootstrap = f"127.0.0.1:{bport}"
            seed(bootstrap)
            schema_dir = Path(tmp) / "schemas"
            schema_dir.mkdir()
            (schema_dir / f"{USER_SCHEMA_ID}.avsc").write_text(json.dumps(USER_SCHEMA))
            console = subprocess.Popen([sys.executable, "-m", "kafkacore", "-b", bootstrap, "console", "--port", "0",
                                        "--schema-dir", str(schema_dir)],
                                       env=env, stdout=subprocess.PIPE, text=True)
            procs.append(console)
            origin = re.search(r"http://[\d.]+:\d+", console.stdout.readline()).group(0)
            threads = [threading.Thread(target=f, args=(bootstrap, stop), daemon=True) for f in (traffic, billing)]
            for t in threads:
                t.start()
            print(f"console at {origin}; sampling for {args.seconds:.0f} s", flush=True)
            time.sleep(args.seconds)
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium, headless=True)
                page = browser.new_page(viewport=VIEWPORT)
                for name, path, full, action in PAGES:
                    page.goto(origin + path)
                    page.wait_for_load_state("networkidle")
                    page.wait_for_timeout(1500)  # a chart round after the first draw
                    if action is not None:
                        action(page)
                    page.screenshot(path=str(out / name), full_page=full)
                    print(f"wrote {out / name}", flush=True)
                browser.close()
        finally:
            stop.set()
            time.sleep(1)
            for p in reversed(procs):
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()


if __name__ == "__main__":
    main()
