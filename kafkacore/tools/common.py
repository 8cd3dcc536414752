"""What every operator command shares: the global options, exit codes, one-line errors and
the connection settings.

Exit codes (documented in docs/tools.md):
  0  done
  1  the cluster or the file said no (unknown topic, invalid config, a corrupt segment...)
  2  bad usage (an unknown option, a malformed value)
  3  the cluster could not be reached, or did not answer in time
  130 interrupted (Ctrl-C)
  143 terminated (SIGTERM; consume and produce end as on Ctrl-C: commit, leave the group, summary)
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_TERMINATED = 128 + signal.SIGTERM
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "KAFKACORE_BOOTSTRAP_SERVERS"
OUTPUT_FORMATS = ("table", "json", "jsonl")

# sizes the perf tools report and plan with (perf.py, perf_reference.py)
MB = 1024 * 1024
RECORD_OVERHEAD = 8  # a record's framing, roughly, for a record without key or headers


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so a command stopped by a service
    manager or `kill` ends as on Ctrl-C: commits, leaves its group, prints its summary."""


@contextlib.contextmanager
def sigterm_as_interrupt():
    def on_sigterm(_signum, _frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted_exit_code(e: KeyboardInterrupt) -> int:
    return EXIT_TERMINATED if isinstance(e, Terminated) else EXIT_INTERRUPTED


def error_line(e) -> str:
    """A Kafka error as every command prints it: what happened, then Kafka's name for it in
    parentheses (``topic 'x' does not exist (UNKNOWN_TOPIC_OR_PARTITION)``)."""
    name = getattr(e, "name", type(e).__name__)
    message = getattr(e, "message", str(e))
    return f"{message} ({name})" if message and message != name else name


def plural(n: int, noun: str) -> str:
    """``1 record``, ``2 records``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


class ToolError(Exception):
    """A failure the command reports as one line, with its exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def add_global_options(parser: argparse.ArgumentParser, top_level: bool):
    """-b/--bootstrap-server, --command-config and -o/--output. They are accepted both before
    the noun and after the verb (``kafkacore topics list -b host:9092``, as Kafka's scripts
    place them); the top-level parser holds the defaults, the sub-parsers only override."""
    default = (lambda v: v) if top_level else (lambda v: argparse.SUPPRESS)
    parser.add_argument("-b", "--bootstrap-server", metavar="HOST:PORT[,...]", default=default(None),
                        help=f"brokers to start from (default ${BOOTSTRAP_ENV} or {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--command-config", metavar="FILE", default=default(None),
                        help="a properties file of Kafka client settings (e.g. client.id, request.timeout.ms)")
    parser.add_argument("-o", "--output", choices=OUTPUT_FORMATS, default=default("table"),
                        help="table (default, for people), json or jsonl (one object per line, for scripts)")


def common_parent() -> argparse.ArgumentParser:
    """A parent parser carrying the global options for every sub-command."""
    parent = argparse.ArgumentParser(add_help=False)
    add_global_options(parent, top_level=False)
    return parent


def bootstrap_servers(args) -> str:
    return args.bootstrap_server or os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP


def read_properties(path: str) -> dict:
    """A Java-style properties file: key=value (or key: value) lines, # and ! comments."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ToolError(f"cannot read --command-config {path}: {e.strerror or e}", EXIT_USAGE) from None
    props = {}
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise ToolError(f"{path}:{n}: {line!r} is not key=value", EXIT_USAGE)
        props[line[:sep].strip()] = line[sep + 1:].strip()
    return props


def client_settings(args) -> dict:
    """The Kafka client properties for this command: bootstrap.servers plus --command-config."""
    props = read_properties(args.command_config) if args.command_config else {}
    props["bootstrap.servers"] = bootstrap_servers(args)
    return props


def _millis(props: dict, key: str, default: int) -> int:
    text = props.get(key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ToolError(f"{key}={text!r} is not a number of milliseconds", EXIT_USAGE) from None
    if value <= 0:
        raise ToolError(f"{key}={text!r} must be above 0", EXIT_USAGE)
    return value


# Kafka's AdminClient defaults: request.timeout.ms 30 s, socket.connection.setup.timeout.ms 10 s
REQUEST_TIMEOUT_MS, CONNECT_TIMEOUT_MS = 30000, 10000


def admin_client(args):
    """An AdminClient for the command's cluster (closed by the caller, or by ``with``)."""
    from ..client.admin import AdminClient
    from ..client.config import security_config
    from ..client.security import client_security
    from ..errors import KafkaConfigError

    props = client_settings(args)
    timeout = _millis(props, "request.timeout.ms", _millis(props, "default.api.timeout.ms", REQUEST_TIMEOUT_MS))
    connect = _millis(props, "socket.connection.setup.timeout.ms", CONNECT_TIMEOUT_MS)
    try:
        security = client_security(security_config(props))
    except KafkaConfigError as e:  # a bad security setting in --command-config
        raise ToolError(f"--command-config: {e.message}", EXIT_USAGE) from None
    try:
        return AdminClient(props["bootstrap.servers"], client_id=props.get("client.id", "kafkacore-cli"),
                           request_timeout_ms=timeout, connect_timeout_ms=connect, security=security)
    except ValueError as e:
        raise ToolError(f"bad --bootstrap-server: {e}", EXIT_USAGE) from None


# -- the command grammar: NOUN VERB, each verb with the global options ---------------------------
def add_noun(subparsers, name: str, help: str):
    """The parser of ``kafkacore NAME`` and its verbs' sub-parsers (``args.verb`` names the verb,
    which error messages carry: ``kafkacore topics describe: error: ...``)."""
    parser = subparsers.add_parser(name, help=help, description=help)
    return parser.add_subparsers(dest="verb", metavar="VERB", required=True)


def add_verb(verbs, name: str, common, run, help: str, description: str | None = None):
    parser = verbs.add_parser(name, parents=[common], help=help, description=description or help)
    parser.set_defaults(run=run)
    return parser


# -- argument types: a malformed value is a usage error (exit 2) naming the value ----------------
def key_value(text: str) -> tuple[str, str]:
    """``key=value`` (the value may be empty or hold further ``=``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not key=value")
    return key.strip(), value


def _int(text: str, minimum: int, what: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if n < minimum:
        raise argparse.ArgumentTypeError(f"{n} is not {what}")
    return n


def positive_int(text: str) -> int:
    return _int(text, 1, "a number above 0")


def non_negative_int(text: str) -> int:
    return _int(text, 0, "a number of 0 or more")


def broker_id(text: str) -> int:
    return _int(text, 0, "a broker id (a number of 0 or more)")


def id_list(text: str) -> list:
    """Broker ids separated by commas: ``1,2,3``."""
    try:
        ids = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of broker ids such as 1,2,3") from None
    if any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise argparse.ArgumentTypeError(f"{text!r}: broker ids must be 0 or more and each listed once")
    return ids


def is_table(args) -> bool:
    return getattr(args, "output", "table") == "table"


def config_map(pairs) -> dict:
    """KEY=VALUE arguments as a dict; the same key twice with different values is a usage error."""
    out = {}
    for key, value in pairs:
        if out.get(key, value) != value:
            raise ToolError(f"config {key} is given twice ({out[key]!r} and {value!r})", EXIT_USAGE)
        out[key] = value
    return out


def config_changes(pairs, deletes, set_option: str, delete_option: str) -> dict:
    """The configs to set, checked against those to delete: at least one change, no key both."""
    settings = config_map(pairs)
    if not settings and not deletes:
        raise ToolError(f"nothing to change: give {set_option} KEY=VALUE and/or {delete_option} KEY", EXIT_USAGE)
    both = sorted(set(settings) & set(deletes))
    if both:
        raise ToolError(f"config {both[0]} is both set and deleted", EXIT_USAGE)
    return settings


def port_number(text):
    """argparse type: a TCP port, 0-65535 (0 picks a free one)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0-65535; 0 picks a free one)")
    return port
