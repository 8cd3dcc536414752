"""``kafkacore users list | set-password | delete``: users' SCRAM credentials (what Kafka's
``kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`` manages),
through AlterUserScramCredentials and DescribeUserScramCredentials.

A password is never a command-line argument (``ps`` would show it): it is read from
``--password-file``, from standard input (``--password-stdin``), or asked for on the terminal.
The salted password is computed here; neither the password nor it is printed.
"""
from __future__ import annotations

import sys

from .common import EXIT_OK, EXIT_USAGE, ToolError, add_noun, add_verb, admin_client
from .output import emit, report

MECHANISM_CHOICES = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def register(subparsers, common):
    verbs = add_noun(subparsers, "users", "SCRAM users: list, set passwords, delete credentials")
    p = add_verb(verbs, "list", common, run_list, "users with SCRAM credentials, their mechanisms and iterations")
    p.add_argument("names", nargs="*", metavar="USER", help="only these users (default: all)")

    p = add_verb(verbs, "set-password", common, run_set_password, "create or change a user's SCRAM credential")
    p.add_argument("name", metavar="USER")
    p.add_argument("--mechanism", choices=MECHANISM_CHOICES, action="append",
                   help="SCRAM-SHA-256 and/or SCRAM-SHA-512 (repeatable; default: both)")
    p.add_argument("--iterations", type=int, default=4096, help="PBKDF2 iterations, 4096-16384 (default 4096)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--password-file", metavar="FILE", help="read the password from FILE (its first line)")
    source.add_argument("--password-stdin", action="store_true", help="read the password from standard input")

    p = add_verb(verbs, "delete", common, run_delete, "remove a user's SCRAM credential(s)")
    p.add_argument("name", metavar="USER")
    p.add_argument("--mechanism", choices=MECHANISM_CHOICES, action="append",
                   help="the credential to remove (repeatable; default: every one the user has)")


def run_list(args):
    with admin_client(args) as admin:
        users = admin.describe_user_scram_credentials(args.names or None)
    rows = [{"user": u, "mechanism": m, "iterations": i} for u in sorted(users) for m, i in users[u]]
    emit(args, rows, rows, [("user", "USER"), ("mechanism", "MECHANISM"), ("iterations", "ITERATIONS")])
    return EXIT_OK


def _read_password(args) -> str:
    if args.password_file:
        try:
            with open(args.password_file, encoding="utf-8") as f:
                password = f.readline().rstrip("\r\n")
        except OSError as e:
            raise ToolError(f"cannot read --password-file {args.password_file}: {e.strerror or e}", EXIT_USAGE) \
                from None
    elif args.password_stdin or not sys.stdin.isatty():
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        import getpass
        password = getpass.getpass(f"password for {args.name}: ")
        if getpass.getpass("again: ") != password:
            raise ToolError("the passwords differ", EXIT_USAGE)
    if not password:
        raise ToolError("empty password", EXIT_USAGE)
    return password


def run_set_password(args):
    if not 4096 <= args.iterations <= 16384:
        raise ToolError(f"--iterations {args.iterations}: SCRAM takes 4096-16384", EXIT_USAGE)
    mechanisms = args.mechanism or list(MECHANISM_CHOICES)
    password = _read_password(args)
    with admin_client(args) as admin:
        admin.alter_user_scram_credentials(upsertions=[(args.name, m, password, args.iterations)
                                                       for m in dict.fromkeys(mechanisms)])
    report(args, {"user": args.name, "mechanisms": mechanisms, "iterations": args.iterations},
           f"Set the {' and '.join(mechanisms)} credential{'s' if len(mechanisms) > 1 else ''} of user {args.name} "
           f"({args.iterations} iterations).")
    return EXIT_OK


def run_delete(args):
    with admin_client(args) as admin:
        mechanisms = args.mechanism or [m for m, _i in admin.describe_user_scram_credentials([args.name])[args.name]]
        admin.alter_user_scram_credentials(deletions=[(args.name, m) for m in dict.fromkeys(mechanisms)])
    report(args, {"user": args.name, "deleted": mechanisms},
           f"Deleted the {' and '.join(mechanisms)} credential{'s' if len(mechanisms) > 1 else ''} of user {args.name}.")
    return EXIT_OK
