"""What every operator command shares: the global options, exit codes, one-line errors and
the connection settings.

Exit codes (documented in docs/tools.md):
  0  done
  1  the cluster or the file said no (unknown topic, invalid config, a corrupt segment...)
  2  bad usage (an unknown option, a malformed value)
  3  the cluster could not be reached, or did not answer in time
  130 interrupted (Ctrl-C)
"""
from __future__ import annotations

import argparse
import os

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "KAFKACORE_BOOTSTRAP_SERVERS"
OUTPUT_FORMATS = ("table", "json", "jsonl")


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


def admin_client(args):
    """An AdminClient for the command's cluster (closed by the caller, or by ``with``)."""
    from ..client.admin import AdminClient

    props = client_settings(args)
    try:
        timeout = int(props.get("request.timeout.ms", props.get("default.api.timeout.ms", 30000)))
    except ValueError:
        raise ToolError(f"request.timeout.ms={props['request.timeout.ms']!r} is not a number", EXIT_USAGE) from None
    try:
        return AdminClient(props["bootstrap.servers"], client_id=props.get("client.id", "kafkacore-cli"),
                           request_timeout_ms=timeout)
    except ValueError as e:
        raise ToolError(f"bad --bootstrap-server: {e}", EXIT_USAGE) from None
