"""The ``kafkacore`` command: ``kafkacore serve`` runs the broker, ``kafkacore info`` reports
the build, ``kafkacore cluster up`` runs a local cluster, and the operator commands
(``kafkacore [-b HOST:PORT] NOUN VERB ...``, kafkacore/tools/) manage any Kafka-compatible
cluster."""
import argparse
import importlib
import os
import sys


def _info() -> int:
    import os

    import kafkacore

    print(f"kafkacore {kafkacore.__version__}")
    print(f"loaded from: {os.path.dirname(os.path.abspath(kafkacore.__file__))}")
    print(f"native extensions: {'on' if kafkacore.native_extensions() else 'off (pure-Python twins)'}")
    if kafkacore.native_extensions():
        from kafkacore._ext import crc

        path = {
            "avx512": "AVX-512 VPCLMULQDQ folding (long buffers) + SSE4.2 crc32",
            "mixed256": "VPCLMULQDQ (256-bit) folding + 3 crc32 streams, interleaved",
            "vpclmul256": "VPCLMULQDQ (256-bit) folding + SSE4.2 crc32",
            "pclmul": "PCLMULQDQ folding + SSE4.2 crc32",
            "sse4.2": "SSE4.2 crc32, 3-way interleaved",
            "sw": "software slicing-by-8",
        }.get(crc.implementation(), crc.implementation())
        print(f"crc32c: {path}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (no usage block): ``kafkacore serve: error: ...``,
    exit code 2; a mistyped command or verb gets the closest one suggested. Descriptions are
    module docstrings: their reST literals (double backquotes) are shown plain."""

    def __init__(self, *args, description=None, **kwargs):
        if description:
            description = description.replace("``", "")
        super().__init__(*args, description=description, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}{_did_you_mean(message)}\n")


def _did_you_mean(message: str) -> str:
    """argparse's "invalid choice: 'topic' (choose from 'info', 'topics', ...)" -> "; did you
    mean 'topics'?" (Python 3.12.7+ drops the quotes around the choices)."""
    import difflib
    import re

    m = re.search(r"invalid choice: '?([^' ]*)'? \(choose from (.*)\)$", message)
    if m is None:
        return ""
    choices = re.findall(r"'([^']*)'", m.group(2)) or [c.strip() for c in m.group(2).split(",")]
    close = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _racks(text):
    racks = [r.strip() for r in text.split(",")]
    if not all(racks):
        raise argparse.ArgumentTypeError(f"{text!r}: rack names separated by commas, none empty (e.g. a,b,c)")
    return racks


def _count(text):
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 1 <= n <= 64:
        raise argparse.ArgumentTypeError(f"{n} is not between 1 and 64")
    return n


def _run_tool(args) -> int:
    """Runs an operator command; every failure becomes one line on stderr and an exit code."""
    from .client.connection import ConnectionClosed
    from .errors import KafkaConfigError, KafkaError, KafkaTimeoutError
    from .tools.common import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, ToolError,
                               error_line)

    prog = " ".join(["kafkacore"] + [v for v in (args.command, getattr(args, "verb", None)) if v])
    try:
        code = args.run(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        # the reader went away (`| head`): not an error. Kafka connections never raise it
        # (they raise ConnectionClosed), so it is stdout; point it at /dev/null so that the
        # interpreter's final flush does not complain again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except ToolError as e:
        code, message = e.exit_code, e.message
    except KafkaConfigError as e:  # a client property (-X, --command-config) with a bad value
        code, message = EXIT_USAGE, f"bad client configuration: {e}"
    except KafkaTimeoutError as e:
        code, message = EXIT_UNREACHABLE, e.message
    except KafkaError as e:
        code, message = EXIT_FAILED, error_line(e)
    except (ConnectionClosed, ConnectionError, TimeoutError) as e:
        code, message = EXIT_UNREACHABLE, f"cannot reach the cluster: {e}"
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    print(f"{prog}: error: {message}", file=sys.stderr)
    return code


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree (``kafkacore completion`` walks it to write shell completion)."""
    from .tools import NOUNS
    from .tools.cluster_info import register_verbs as register_cluster_verbs
    from .tools.common import add_global_options, common_parent, port_number as _port

    parser = _Parser(prog="kafkacore", description=__doc__)
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    add_global_options(parser, top_level=True)
    common = common_parent()
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    sub.add_parser("info", help="show the version and which native paths are in use")
    serve = sub.add_parser("serve", help="run the broker (127.0.0.1:9092 and the default data directory "
                                         "unless told otherwise)")
    serve.add_argument("--host", help="listen address (default: from listeners, 127.0.0.1)")
    serve.add_argument("--port", type=_port, help="listen port (default: from listeners, 9092)")
    serve.add_argument("--data-dir", help="data directory (log.dirs; default $KAFKACORE_DATA_DIR or "
                                          "~/.local/share/kafkacore/data)")
    serve.add_argument("--config", help="a server.properties file with Kafka broker property names")
    serve.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="a broker property (repeatable), e.g. --set num.partitions=3")
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                       help="debug, info, warning or error (default info)")
    serve.add_argument("--log-format", default="text", choices=("text", "json"),
                       help="text, or json: one JSON object per line (ts, level, logger, message, exception)")
    cluster = sub.add_parser("cluster", help="describe a cluster; run a local one for development (ZooKeeper and "
                                             "brokers)")
    cluster.set_defaults(print_help=cluster.print_help)
    cluster_sub = cluster.add_subparsers(dest="verb", parser_class=_Parser, metavar="VERB")
    up = cluster_sub.add_parser("up", help="start ZooKeeper (the system's) and N brokers on 127.0.0.1 until Ctrl-C")
    up.add_argument("--brokers", type=_count, default=3, help="how many brokers (default 3)")
    up.add_argument("--data-dir", default="kafkacore-cluster", help="root of every broker's data directory and the "
                                                                   "logs (default ./kafkacore-cluster)")
    up.add_argument("--base-port", type=_port, help="broker i listens on base-port + i - 1 (default: free ports)")
    up.add_argument("--zookeeper-port", type=_port, help="ZooKeeper's client port (default: a free port)")
    up.add_argument("--set", action="append", metavar="KEY=VALUE", help="a property for every broker (repeatable)")
    up.add_argument("--racks", type=_racks, metavar="RACK,RACK,...",
                    help="broker.rack of the brokers, dealt round-robin (e.g. a,b,c: broker 1 in a, 2 in b, ...)")
    up.add_argument("--security", choices=("plaintext", "ssl", "sasl_ssl"), default="plaintext",
                    help="ssl: mutual TLS between brokers and TLS for clients; sasl_ssl: SCRAM-SHA-512 over TLS for "
                         "both (a test CA is made with openssl; the client settings are printed). Brokers listen for "
                         "each other on base-port + N + i - 1 (default: free ports)")
    migrate = cluster_sub.add_parser("migrate", help="move a stopped single node's topics into ZooKeeper, so that its "
                                                     "data directory starts as a broker of a cluster")
    migrate.add_argument("--data-dir", required=True, help="the single node's data directory (stopped)")
    migrate.add_argument("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]",
                         help="the cluster's zookeeper.connect")
    restart = cluster_sub.add_parser("restart", help="start broker N of a running `cluster up` again (stopping it "
                                                     "first if it runs)")
    restart.add_argument("broker", type=_count, metavar="N", help="the broker's id (1 to --brokers)")
    restart.add_argument("--data-dir", default="kafkacore-cluster", help="the --data-dir the cluster was started "
                                                                        "with (default ./kafkacore-cluster)")
    register_cluster_verbs(cluster_sub, common)
    for noun in NOUNS:
        importlib.import_module(f"kafkacore.tools.{noun}").register(sub, common)
    # the web console's command lives with the console (kafkacore/console/command.py)
    from .console.command import register as register_console
    register_console(sub, common)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.root_parser = parser  # `kafkacore completion` walks the whole tree
    if getattr(args, "run", None) is not None:
        return _run_tool(args)
    if args.version:
        import kafkacore

        print(kafkacore.__version__)
        return 0
    if args.command == "info":
        return _info()
    if args.command == "cluster":
        if args.verb == "migrate":
            from .cluster.migrate import cluster_migrate
            return cluster_migrate(args)
        if args.verb == "restart":
            from .cluster.local_cluster import cluster_restart

            return cluster_restart(args)
        if args.verb != "up":
            args.print_help()
            return 2
        for item in args.set or ():
            if "=" not in item:
                parser.exit(2, f"kafkacore cluster up: error: argument --set: {item!r} is not key=value\n")
        from .cluster.local_cluster import cluster_up

        return cluster_up(args)
    if args.command == "serve":
        from .broker.main import serve as run_serve

        return run_serve(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
