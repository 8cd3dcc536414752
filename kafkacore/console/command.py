"""``kafkacore console``: the web console (this package) for the cluster at -b. The command
is registered by cli.py beside the operator nouns (kafkacore/tools/), whose helpers it uses."""
from __future__ import annotations

from ..tools.common import (EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, ToolError, admin_client, bootstrap_servers,
                            client_settings, port_number)

DEFAULT_PORT = 9000
DEFAULT_HOST = "127.0.0.1"


def register(subparsers, common):
    p = subparsers.add_parser("console", parents=[common], help="a web console for the cluster: topics, messages, "
                                                                "consumer groups, live charts",
                              description="Serves a web console for the cluster until Ctrl-C: open the address it "
                                          "prints. docs/tools.md (Console) describes the pages and the JSON API.")
    p.add_argument("--port", type=port_number, default=DEFAULT_PORT,
                   help=f"the port to serve on (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"the address to serve on (default {DEFAULT_HOST}: this machine only)")
    p.add_argument("--read-only", action="store_true",
                   help="refuse every change (topics, their configs and partitions, producing, groups' offsets "
                        "and deletion) with 403, and show no buttons for them")
    p.add_argument("--users", metavar="FILE",
                   help="require a login: a file of name:hash or name:hash:read-only lines (the hashes made by "
                        "`kafkacore console hash-password`)")
    p.add_argument("--schema-registry", metavar="URL",
                   help="a Confluent Schema Registry: Confluent-framed Avro keys and values are decoded with "
                        "the schemas it serves (GET URL/schemas/ids/ID; needs fastavro)")
    p.add_argument("--schema-dir", metavar="DIR",
                   help="a directory of ID.avsc files: Avro schemas by id, for Confluent-framed records "
                        "(looked at before --schema-registry)")
    p.set_defaults(run=run)
    # `kafkacore console` alone serves; `kafkacore console hash-password` makes a users file line
    verbs = p.add_subparsers(dest="verb", metavar="[hash-password]")
    h = verbs.add_parser("hash-password", help="print a --users file line for a user (the password is asked for, "
                                               "or read from stdin)",
                         description="Prints NAME:HASH (scrypt, with a random salt) for the console's --users file; "
                                     "the password is asked for twice on a terminal, else read as stdin's first line.")
    h.add_argument("name", help="the user's name (no spaces, no ':')")
    h.add_argument("--read-only", action="store_true", help="the user may only read (adds :read-only)")
    h.set_defaults(run=run_hash_password)


def run_hash_password(args) -> int:
    import getpass
    import sys

    from .auth import READ_ONLY_ROLE, hash_password

    if not args.name or ":" in args.name or any(c.isspace() for c in args.name):
        raise ToolError(f"the user name {args.name!r} is empty or holds ':' or spaces", EXIT_USAGE)
    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {args.name}: ")
        if getpass.getpass("again: ") != password:
            raise ToolError("the two passwords differ", EXIT_USAGE)
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise ToolError("the password is empty", EXIT_USAGE)
    print(f"{args.name}:{hash_password(password)}" + (f":{READ_ONLY_ROLE}" if args.read_only else ""))
    return EXIT_OK


def load_users(path: str) -> dict:
    from .auth import UsersFileError, read_users

    try:
        return read_users(path)
    except UsersFileError as e:
        raise ToolError(str(e), EXIT_USAGE) from None


def make_producer(args):
    """The produce form's Producer: the command's client settings, each record sent at once."""
    from ..client.producer import Producer

    return Producer({**client_settings(args), "linger.ms": 0})


def schema_source(args):
    """The SchemaSource of --schema-registry and --schema-dir, or None; a bad one is a usage error."""
    import os

    from .schemas import SchemaSource, check_registry_url

    if not args.schema_registry and not args.schema_dir:
        return None
    if args.schema_registry:
        try:
            check_registry_url(args.schema_registry)
        except ValueError as e:
            raise ToolError(str(e), EXIT_USAGE) from None
    if args.schema_dir and not os.path.isdir(args.schema_dir):
        raise ToolError(f"--schema-dir {args.schema_dir!r} is not a directory", EXIT_USAGE)
    return SchemaSource(args.schema_registry, args.schema_dir)


def run(args) -> int:
    import asyncio
    import signal

    from ..client.connection import ConnectionClosed
    from .app import Console

    bootstrap = bootstrap_servers(args)
    users = load_users(args.users) if args.users else None  # (before the cluster: a usage error first)
    schemas = schema_source(args)
    admin_client(args).close()  # a bad -b or --command-config is reported before anything starts

    async def serve():
        console = Console(lambda: admin_client(args), bootstrap, users=users, read_only=args.read_only,
                          make_producer=lambda: make_producer(args), schemas=schemas)
        try:
            host, port = await console.start(args.host, args.port)
        except (ConnectionClosed, ConnectionError) as e:
            raise ToolError(f"cannot reach the cluster at {bootstrap}: {e}", EXIT_UNREACHABLE) from None
        except OSError as e:
            await console.close()
            raise ToolError(f"cannot serve on {args.host}:{args.port}: {e.strerror or e}") from None
        shown = f"[{host}]" if ":" in host else host
        mode = "".join([", read-only" if args.read_only else "", f", {len(users)} user(s) can log in" if users else "",
                        f", schemas from {schemas.describe()}" if schemas else ""])
        print(f"kafkacore console: http://{shown}:{port}/ (cluster {bootstrap}{mode}; Ctrl-C stops)", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await console.close()

    asyncio.run(serve())
    return EXIT_OK
