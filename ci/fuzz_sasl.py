"""Coverage-guided fuzzing (atheris/libFuzzer) of the broker's SASL server side with hostile
request frames: the SaslHandshake and SaslAuthenticate codecs and handlers, the connection's
SASL state (broker/sasl_authenticator.py) and the PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER
servers (kafkacore/security), driven as a connection drives them (tests/_sasl_drive.py).

An input is one connection: its first byte picks whether sessions re-authenticate (KIP-368),
the rest is frames, each a 2-byte length and that many bytes. Each frame must be answered or
close the connection; any exception out of the drive is a finding. The seeds are real logins
of every mechanism, so mutations start from exchanges that get deep into the servers.

    python ci/fuzz_sasl.py [-max_total_time=30] [-runs=N] [corpus_dir ...]
"""
import atexit
import importlib
import os
import shutil
import struct
import sys
import tempfile

import atheris

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

# only the code an exchange runs through is instrumented: the SASL servers and state, the two
# handlers and their messages, the request codec. Instrumenting every module the handler table
# imports took ~10 s of CPU before the first input (~2 s this way).
FUZZED = ("kafkacore.security", "kafkacore.broker.sasl_authenticator", "kafkacore.broker.handlers.sasl_",
          "kafkacore.protocol.messages.sasl_", "kafkacore.protocol.wire", "kafkacore.protocol.frames")


def _not_fuzzed():
    import kafkacore
    root = os.path.dirname(os.path.abspath(kafkacore.__file__))
    for dirpath, _dirs, files in os.walk(root):
        package = os.path.relpath(dirpath, os.path.dirname(root)).replace(os.sep, ".")
        for f in files:
            if f.endswith(".py"):
                name = package if f == "__init__.py" else f"{package}.{f[:-3]}"
                if not name.startswith(FUZZED):
                    yield name


with atheris.instrument_imports(include=["kafkacore", "_sasl_drive"], exclude=list(_not_fuzzed())):
    from _sasl_drive import CLOSE, PASSWORD, drive, listener
    for _name in ("sasl_handshake_request", "sasl_authenticate_request"):  # else loaded on first use, plain
        importlib.import_module(f"kafkacore.protocol.messages.{_name}")
    from kafkacore.broker.sasl_authenticator import SaslAuthenticator
    from kafkacore.protocol.api_table import ApiKey
    from kafkacore.protocol.frames import RequestHeader, encode_request, request_class
    from kafkacore.security import oauthbearer, plain

LISTENERS = (listener(), listener(reauth_ms=60000))


def exercise(data: bytes) -> None:
    if not data:
        return
    auth = SaslAuthenticator(LISTENERS[data[0] & 1], "127.0.0.1:1")
    pos = 1
    while pos + 2 <= len(data):
        (n,) = struct.unpack_from(">H", data, pos)
        frame = data[pos + 2:pos + 2 + n]
        pos += 2 + n
        if drive(auth, frame) is CLOSE:
            return


def _frame(api_key, version, **fields) -> bytes:
    f = encode_request(RequestHeader(api_key, version, 1, "fuzz"), request_class(api_key)(**fields))[4:]
    return struct.pack(">H", len(f)) + f


def seeds():
    # SCRAM's server-first depends on the server's nonce, so its seed carries a client-first
    # and a final of the right shape; libFuzzer's comparisons find their way from there
    return [
        b"\x00" + _frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
        + _frame(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=plain.plain_client_token("alice", PASSWORD)),
        b"\x01" + _frame(ApiKey.SASL_HANDSHAKE, 0, mechanism="PLAIN")
        + (lambda t: struct.pack(">H", len(t)) + t)(plain.plain_client_token("alice", PASSWORD)),
        b"\x00" + _frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256")
        + _frame(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL")
        + _frame(ApiKey.SASL_AUTHENTICATE, 1, auth_bytes=b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
                                                          b"p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="),
        b"\x01" + _frame(ApiKey.SASL_HANDSHAKE, 1, mechanism="OAUTHBEARER")
        + _frame(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=oauthbearer.client_token(oauthbearer.unsecured_token("svc")))
        + _frame(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\x01"),
    ]


def main():
    args = list(sys.argv)
    if not any(not a.startswith("-") for a in args[1:]):
        corpus = tempfile.mkdtemp(prefix="kc_fuzz_sasl_corpus_")
        atexit.register(shutil.rmtree, corpus, True)
        for i, s in enumerate(seeds()):
            with open(os.path.join(corpus, f"seed{i}"), "wb") as f:
                f.write(s)
        args.append(corpus)
    for s in seeds():  # the seeds themselves must run clean
        exercise(s)
    atheris.Setup(args, exercise)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
