"""``kafkacore serve``: builds the configuration, starts the broker and the server, and stops
both cleanly on SIGTERM or SIGINT (logs flushed, checkpoints and the clean-shutdown marker
written, committed offsets already durable in __consumer_offsets).

With ``metrics.port`` set, /metrics and /healthz are served over HTTP on that port of the
listener's host (broker/metrics_http.py), from the same event loop. ``--log-format json`` makes
every line the broker writes, its log and its start and stop lines, one JSON object."""
from __future__ import annotations

import asyncio
import datetime
import json
import logging
import os
import signal
import sys

from ..errors import InvalidConfigurationError, KafkaError
from .config import BrokerConfig

log = logging.getLogger("kafkacore.broker")

_json_lines = False  # --log-format json: the start and stop lines are JSON objects too


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts (UTC, ISO 8601 with milliseconds), level, logger, message,
    and exception (the formatted traceback) when there is one."""

    def format(self, record):
        out = {"ts": _timestamp(record.created), "level": record.levelname, "logger": record.name,
               "message": record.getMessage()}
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False)


def _timestamp(created):
    return datetime.datetime.fromtimestamp(created, datetime.timezone.utc).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def _say(message):
    """A start or stop line on stdout: text, or with --log-format json a JSON object like a log
    record's."""
    if _json_lines:
        import time

        message = json.dumps({"ts": _timestamp(time.time()), "level": "INFO", "logger": "kafkacore.broker",
                              "message": message}, ensure_ascii=False)
    print(message, flush=True)


def setup_logging(level="info", fmt="text"):
    global _json_lines
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
        _json_lines = True
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])


def build_config(config_file=None, sets=(), host=None, port=None, data_dir=None) -> BrokerConfig:
    props = BrokerConfig.read_properties(config_file) if config_file else {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidConfigurationError(f"--set {item!r}: expected key=value")
        props[key.strip()] = value.strip()
    if data_dir is not None:
        props["log.dirs"] = data_dir
        props.pop("log.dir", None)
    config = BrokerConfig(props)
    config.set_listener(host, port)
    return config


def check_data_dir(path, source) -> None:
    """A data directory that cannot be one fails here, in one line naming the option: a path
    that is a file, or lies under a file."""
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise InvalidConfigurationError(f"{source} {path}: is not a directory")
    parent = os.path.dirname(path)
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if parent and not os.path.isdir(parent):
        raise InvalidConfigurationError(f"{source} {path}: {parent} is a file, not a directory")


def _bind_all(config):
    """[(EndPoint, socket)] for every listener, bound before anything else so that a port in use
    fails before the data directory is touched; the ones bound are closed if another fails."""
    from .server import bind_listener

    bound = []
    try:
        for ep in config.listeners:
            host = ep.host or "0.0.0.0"
            try:
                sock = bind_listener(host, ep.port)
            except OSError as e:
                which = f" (listener {ep.listener_name})" if len(config.listeners) > 1 else ""
                raise SystemExit(f"kafkacore: cannot listen on {host}:{ep.port}{which}: {e.strerror or e}") from None
            if ep.port == 0:  # any free port: the one bound is what clients and brokers are told
                ep = config.take_bound_port(ep.listener_name, sock.getsockname()[1])
            bound.append((ep, sock))
    except BaseException:
        for _ep, sock in bound:
            sock.close()
        raise
    return bound


async def run(config: BrokerConfig, ready=None, *, znodes=None, stop=None, crash=None, tls=None) -> None:
    """Runs a broker until SIGTERM/SIGINT (or ``stop``, an asyncio.Event, is set).

    ``ready(broker, host, port)`` is called once it serves. ``znodes``: the cluster's metadata
    store in this process (an EmbeddedKafkaCluster's ZnodeTree) instead of zookeeper.connect.
    ``crash`` (a threading.Event) set before ``stop`` makes the stop abrupt, as a killed
    process's: no controlled shutdown, the session simply ends. ``tls``: the SSL listeners'
    contexts (tls.server_tls), built here unless given."""
    from .inter_broker import inter_broker_security
    from .sasl_authenticator import server_sasl
    from .server import Listener, SocketServer, bind_listener
    from .tls import server_tls

    inter_broker = None
    if config["zookeeper.connect"] or znodes is not None:
        inter_broker = inter_broker_security(config, clustered=True)  # how this broker dials the others
    if tls is None:
        tls = server_tls(config)  # key stores read (and bad ones refused) before any port or file
    sasl = server_sasl(config)  # mechanisms and JAAS checked as early
    # The ports first: a port in use must fail before the data directory is created or locked.
    bound = _bind_all(config)
    metrics_port = config["metrics.port"]
    metrics_sock = None
    if metrics_port is not None:
        try:
            metrics_sock = bind_listener(config.host, metrics_port)
        except OSError as e:
            for _ep, sock in bound:
                sock.close()
            raise SystemExit(f"kafkacore: cannot serve metrics on {config.host}:{metrics_port} (metrics.port): "
                             f"{e.strerror or e}") from None
    loop = asyncio.get_running_loop()
    try:
        zk = None
        if config["zookeeper.connect"] or znodes is not None:  # round trips: off the event loop
            zk = await loop.run_in_executor(None, _connect_zookeeper, config, znodes)
        broker = start_broker(config, zk, inter_broker)
        broker.listener_tls = tls  # before the config manager's first round: it may reload key stores
    except BaseException:
        for _ep, sock in bound:
            sock.close()
        if metrics_sock is not None:
            metrics_sock.close()
        raise
    metrics_server = None
    stopping = False
    if metrics_sock is not None:
        from .metrics import BrokerMetrics
        from .metrics_http import MetricsServer, health

        broker.metrics = BrokerMetrics(broker)  # before the server: its connections count into it
        metrics_server = MetricsServer(broker.metrics, lambda: health(broker, server, stopping))
    for listener_sasl in sasl.values():
        listener_sasl.credential_cache = broker.credential_cache  # SCRAM's users, from the metadata store
    broker.attach_loop(loop)
    server = SocketServer(broker)
    if broker.metrics is not None:
        broker.metrics.watch_loop(loop)
    stop = stop or asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread
            pass
    addresses = {}
    for ep, sock in bound:
        try:
            addresses[ep.listener_name] = await server.start(
                sock=sock, listener=Listener(ep.listener_name, ep.security_protocol, tls.get(ep.listener_name),
                                             sasl.get(ep.listener_name)))
        except OSError as e:
            for _ep, other in bound:
                other.close()
            await server.stop()
            broker.shutdown()
            raise SystemExit(f"kafkacore: cannot listen on {ep.host or '0.0.0.0'}:{ep.port}: {e.strerror or e}") from None
    host, port = addresses[config.primary_listener_name]
    listening = ", ".join(f"{h}:{p} ({name})" for name, (h, p) in addresses.items())
    advertised = ", ".join(ep.connection_string for ep in config.advertised_listeners)
    # said once the broker is in its cluster (its partitions led): "listening on" means ready
    started = [f"kafkacore broker {broker.node_id} (cluster {broker.cluster_id}) listening on {listening}, "
               f"advertised as {advertised}; data directory {broker.data_dir}"]
    if metrics_server is not None:
        try:
            mhost, mport = await metrics_server.start(metrics_sock)
        except OSError as e:
            await server.stop()
            broker.shutdown()
            raise SystemExit(f"kafkacore: cannot serve metrics on {config.host}:{metrics_port} (metrics.port): "
                             f"{e.strerror or e}") from None
        started.append(f"kafkacore metrics on http://{mhost}:{mport}/metrics (health: /healthz)")
    try:
        await broker.cluster.start(loop, config.advertised_listeners)
        for line in started:
            _say(line)
        if config.ignored_keys:
            log.info("accepted but not used on a single plaintext node: %s", ", ".join(config.ignored_keys))
        if ready is not None:
            ready(broker, host, port)
        await stop.wait()
    finally:
        stopping = True
        _say("kafkacore: shutting down")
        try:
            if crash is None or not crash.is_set():
                await broker.cluster.controlled_shutdown()
        except Exception:  # noqa: BLE001 - stop anyway; the controller sees the session end
            log.exception("controlled shutdown failed")
        await server.stop()
        if metrics_server is not None:
            await metrics_server.stop()
        broker.shutdown()
        _say("kafkacore: stopped cleanly")


def start_broker(config, zk=None, inter_broker=None):
    """A KafkaServer and its membership of a cluster (not serving yet): of the cluster whose
    metadata ``zk`` reaches (a ZooKeeper's, or an in-process cluster's store; _connect_zookeeper)
    or, without one, of its own cluster of one, over the metadata store in its data directory
    (kafkacore/cluster/local_metadata.py). Closes ``zk`` if it fails. Raises KafkaError with a
    one-line message. ``inter_broker``: how it dials the other brokers (config.check_inter_broker,
    a ClientSecurity for a TLS or SASL inter-broker listener; None for PLAINTEXT)."""
    from ..cluster.cluster_node import ClusterNode
    from ..cluster.isr_store import ZkIsrStore
    from .kafka_server import KafkaServer

    if zk is not None:
        try:
            broker = KafkaServer(config, inter_broker_security=inter_broker)
        except BaseException:
            zk.close()
            raise
    else:
        from ..cluster.local_metadata import open_local_metadata
        broker = KafkaServer(config)  # its LogManager holds the data directory's lock before the store opens
        try:
            zk = open_local_metadata(broker)
        except BaseException:
            broker.abandon()
            raise
    try:
        broker.attach_cluster(ClusterNode(broker, zk), ZkIsrStore(zk))
    except BaseException:
        zk.close()
        broker.abandon()
        raise
    return broker


def _connect_zookeeper(config, znodes=None):
    """The ZooKeeper session (on ``znodes``, a store in this process, when given) and the
    cluster id (ZooKeeper's /cluster/id is the truth; the data directory's meta.properties must
    agree). Raises KafkaError with a one-line message."""
    from ..cluster.zk_client import KafkaZkClient
    from ..protocol.kafka_uuid import random_uuid_text as new_cluster_id

    zk = KafkaZkClient(None if znodes is not None else config["zookeeper.connect"],
                       session_timeout_ms=config["zookeeper.session.timeout.ms"],
                       connection_timeout_ms=config["zookeeper.connection.timeout.ms"], znodes=znodes)
    zk.start()
    try:
        zk.create_top_level_paths()
        config.values["cluster.id"] = zk.get_or_create_cluster_id(config["cluster.id"] or new_cluster_id())
    except BaseException:
        zk.close()
        raise
    return zk


def serve(args) -> int:
    setup_logging(args.log_level, getattr(args, "log_format", "text"))
    try:
        config = build_config(args.config, args.set or (), args.host, args.port, args.data_dir)
        check_data_dir(config.data_dir, "--data-dir" if args.data_dir is not None else "log.dirs")
        if config["zookeeper.connect"] and not ({"broker.id", "node.id"} & set(config.props)):
            raise InvalidConfigurationError("zookeeper.connect is set: every broker of a cluster needs its own broker.id")
        if config["metrics.port"] and config["metrics.port"] in {ep.port for ep in config.listeners}:
            raise InvalidConfigurationError(f"metrics.port={config['metrics.port']}: the Kafka listener's port; "
                                            "metrics need a port of their own")
        from .inter_broker import inter_broker_security
        from .sasl_authenticator import server_sasl
        from .tls import server_tls
        tls = server_tls(config)
        server_sasl(config)  # checked here too, to be reported as configuration
        if config["zookeeper.connect"]:
            # the inter-broker TLS and login, after the listeners' own settings
            inter_broker_security(config, clustered=True)

    except InvalidConfigurationError as e:
        print(f"kafkacore: bad configuration: {e.message}", file=sys.stderr)
        return 2
    try:
        asyncio.run(run(config, tls=tls))
    except KafkaError as e:
        print(f"kafkacore: cannot start: {e.message}", file=sys.stderr)
        return 1
    except OSError as e:  # e.g. the data directory cannot be created: no permission, disk full
        where = f": {e.filename}" if e.filename else ""
        print(f"kafkacore: cannot start: {e.strerror or e}{where}", file=sys.stderr)
        return 1
    return 0
