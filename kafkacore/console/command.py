"""``kafkacore console``: the web console (this package) for the cluster at -b. The command
is registered by cli.py beside the operator nouns (kafkacore/tools/), whose helpers it uses."""
from __future__ import annotations

from ..tools.common import EXIT_OK, EXIT_UNREACHABLE, ToolError, admin_client, bootstrap_servers, port_number

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
    p.set_defaults(run=run)


def run(args) -> int:
    import asyncio
    import signal

    from ..client.connection import ConnectionClosed
    from .app import Console

    bootstrap = bootstrap_servers(args)
    admin_client(args).close()  # a bad -b or --command-config is reported before anything starts

    async def serve():
        console = Console(lambda: admin_client(args), bootstrap)
        try:
            host, port = await console.start(args.host, args.port)
        except (ConnectionClosed, ConnectionError) as e:
            raise ToolError(f"cannot reach the cluster at {bootstrap}: {e}", EXIT_UNREACHABLE) from None
        except OSError as e:
            await console.close()
            raise ToolError(f"cannot serve on {args.host}:{args.port}: {e.strerror or e}") from None
        shown = f"[{host}]" if ":" in host else host
        print(f"kafkacore console: http://{shown}:{port}/ (cluster {bootstrap}; Ctrl-C stops)", flush=True)
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
