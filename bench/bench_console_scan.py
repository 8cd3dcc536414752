"""The console's message search: how long a bounded scan takes (kafkacore/console/records.py).

    .venv/bin/python bench/bench_console_scan.py [--records 100000]

Starts a broker (``kafkacore serve``, a scratch data directory, a free port), fills one
partition with small JSON records, then runs the searches the message browser runs, each over
the whole partition (``scan`` = the record count, the newest mode: every record is read), with
the console's own code and an AdminClient, as the console's worker threads do. Prints the
seconds and records/s of each.
"""
from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafkacore import Producer  # noqa: E402
from kafkacore.client.admin import AdminClient  # noqa: E402
from kafkacore.console import records  # noqa: E402
from kafkacore.console.record_filter import RecordFilter  # noqa: E402

SEARCHES = [  # (label, filter): each matches exactly one record, so every record is tested
    ("key substring", lambda n: RecordFilter(f"k{n - 1}", "key")),
    ("substring anywhere (key, value, its strings, headers)", lambda n: RecordFilter(f"user-{n - 1}")),
    ("JSON path", lambda n: RecordFilter(path=f"$.user.id == {n - 1}")),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=records.MAX_SCAN)
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="kc-scan-") as tmp:
        broker = subprocess.Popen([sys.executable, "-m", "kafkacore", "serve", "--port", str(port), "--data-dir",
                                   f"{tmp}/data"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), 1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or broker.poll() is not None:
                        raise SystemExit("the broker did not start")
                    time.sleep(0.1)
            bootstrap = f"127.0.0.1:{port}"
            with AdminClient(bootstrap) as admin:
                admin.create_topic("scan", 1, 1)
                with Producer({"bootstrap.servers": bootstrap, "linger.ms": 20}) as p:
                    for i in range(args.records):
                        value = {"user": {"id": i, "name": f"user-{i}"}, "total": i % 500, "currency": "EUR"}
                        p.send("scan", json.dumps(value).encode(), key=b"k%d" % i, headers=[("source", b"bench")])
                    p.flush(120)
                print(f"{args.records:,} records of about {len(json.dumps(value))} bytes, one partition")
                for label, make in SEARCHES:
                    start = time.perf_counter()
                    doc = records.browse(admin, "scan", "newest", None, None, None, 50, make(args.records),
                                         args.records)
                    took = time.perf_counter() - start
                    assert doc["scan"]["scanned"] == args.records and len(doc["records"]) == 1, doc["scan"]
                    print(f"  {label:55s} {took:6.2f} s  {args.records / took:10,.0f} records/s")
        finally:
            broker.terminate()
            broker.wait(15)


if __name__ == "__main__":
    main()
