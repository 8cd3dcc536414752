"""Prometheus' text exposition format (0.0.4), parsed for the tests independently of kafkacore's
writer (kafkacore/broker/metrics.py): tests/tools/test_metrics.py and
tests/cluster/test_cluster_metrics.py read the broker's /metrics with it."""
import re

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse_exposition(text):
    """{name: {frozenset of (label, value): float}} and {family: type}, checking the format's
    rules on the way: every sample after its family's # TYPE, each family in one block, label
    values with valid escapes, no sample twice, a histogram's buckets cumulative and ending at
    +Inf with _count."""
    assert text.endswith("\n"), "the exposition ends with a newline"
    samples, types, done = {}, {}, set()
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _h, _t, family, kind = line.split(" ")
            assert family not in types, f"family {family} declared twice"
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            if current is not None:
                done.add(current)
            types[family], current = kind, family
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, label_text, value = m.groups()
        family = name
        if types.get(current) == "histogram" and name in (current + "_bucket", current + "_sum", current + "_count"):
            family = current
        assert family == current and family not in done, f"{name} outside its family's block"
        labels = []
        if label_text:
            pos = 0
            while pos < len(label_text):
                lm = _LABEL.match(label_text, pos)
                assert lm, f"bad labels in {line!r}"
                raw = lm.group(2)
                assert re.fullmatch(r'(?:[^\\]|\\[\\"n])*', raw), f"bad escape in {line!r}"
                labels.append((lm.group(1), raw.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")))
                pos = lm.end()
        key = frozenset(labels)
        series = samples.setdefault(name, {})
        assert key not in series, f"sample twice: {line!r}"
        series[key] = float(value)
    for family, kind in types.items():
        if kind != "histogram":
            continue
        buckets = {}
        for labels, v in samples.get(family + "_bucket", {}).items():
            d = dict(labels)
            le = d.pop("le")
            buckets.setdefault(frozenset(d.items()), []).append((float(le), v))
        for labels, bs in buckets.items():
            bs.sort()
            assert bs[-1][0] == float("inf"), f"{family}{dict(labels)} has no +Inf bucket"
            counts = [v for _le, v in bs]
            assert counts == sorted(counts), f"{family}{dict(labels)} buckets not cumulative: {bs}"
            assert samples[family + "_count"][labels] == counts[-1]
            assert family + "_sum" in samples and labels in samples[family + "_sum"]
    return samples, types


def value(samples, name, **labels):
    return samples.get(name, {}).get(frozenset(labels.items()))
