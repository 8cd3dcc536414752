"""The README's Spark pipeline, run as written against a real broker and its data directory."""
import json
import re
import struct
from pathlib import Path

from test_spark_stream import _consume_all

from _kcutil import SOURCE_ROOT

from kafkacore import Producer

README = Path(SOURCE_ROOT) / "README.md"


def _pipeline_code() -> str:
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    code = [b for b in blocks if "kafkacore_spark" in b]
    assert len(code) == 1, "the README has one Spark pipeline example"
    return code[0]


def test_readme_pipeline(spark, broker):
    orders = [{"id": i, "amount": float(i * 10), "country": "NL" if i % 2 else "FR"} for i in range(40)]
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        for o in orders:
            value = b"\x00" + struct.pack(">i", 7) + json.dumps(o).encode()  # Confluent wire format
            p.send("events", value, headers=[("trace", b"t%d" % o["id"])])
        p.flush(30)
    code = (_pipeline_code().replace('"data/events-*/*.log"', repr(broker.data_dir + "/events-*/*.log"))
            .replace('"data"', repr(broker.data_dir)).replace('"127.0.0.1:9092"', repr(broker.bootstrap)))
    scope = {"spark": spark}
    exec(compile(code, str(README), "exec"), scope)
    by_id = lambda kv: kv[1]["id"]  # noqa: E731
    want = sorted(((o["country"].encode(), o) for o in orders if o["amount"] > 100), key=by_id)
    got = sorted(((k, json.loads(v)) for (_p, k, v, _h) in _consume_all(broker, "big-orders", len(want))), key=by_id)
    assert got == want
    assert scope["stream"].isStreaming
    assert scope["orders"].count() == len(want)
