"""``kafkacore produce TOPIC``: one record per line of stdin (or --file), as
kafka-console-producer.sh reads them, through kafkacore's Producer.

Lines are split on \\n (a \\r before it goes too). ``--format raw`` (the default) sends each
line as the value, or, with ``--key-separator SEP``, the text before the first SEP as the key
and the rest as the value (kafka-console-producer's parse.key / key.separator).
``--format json`` reads one JSON object per line: ``key``, ``value``, ``headers``,
``timestamp``, ``partition`` (what ``kafkacore consume --format json`` prints, whose ``topic``,
``offset`` and ``timestamp_type`` are ignored, so one pipes into the other). A string key or
value is sent as its UTF-8 bytes, null as null (a tombstone value), and anything else (an
object, an array, a number, true/false) as its compact JSON text, so ``{"value": {"id": 1}}``
sends ``{"id":1}``.

Input is read as it arrives (typed lines go out at once) and handed to the producer in chunks:
plain lines go through ``send_many`` (one native loop per chunk), records with headers or
per-record fields through ``send``. A bad line stops the command: the records before it are
sent and counted, and the error names the line.
"""
from __future__ import annotations

import json
import sys
import time
from collections import Counter, deque

from ..errors import KafkaError
from .clients import (add_property_option, check_partition, make_producer, parse_time_ms, properties,
                      topic_partitions, unescape)
from .common import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_TERMINATED, EXIT_USAGE, ToolError,
                     error_line, interrupted_exit_code, plural, sigterm_as_interrupt)
from .output import emit

FORMATS = ("raw", "json")
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS = ("0", "1", "all", "-1")
JSON_FIELDS = ("key", "value", "headers", "timestamp", "partition")
JSON_IGNORED = ("topic", "offset", "timestamp_type")  # printed by consume --format json
READ_SIZE = 1 << 20  # bytes per read: whatever is available, up to this (a chunk of records)
SEND_MANY_MARGIN = 1024  # bytes of room for a record's and a batch's framing


def register(sub, common):
    p = sub.add_parser(
        "produce", parents=[common], help="send records to a topic, one per line of stdin or a file",
        description="Send records to TOPIC, one per line of stdin (or --file). Prints a one-line summary "
                    "(records and partitions) to stderr.")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--file", "-f", metavar="FILE", help="read the records from FILE instead of stdin")
    p.add_argument("--format", choices=FORMATS, default="raw",
                   help="raw: each line is a value (default); json: one JSON object per line with key, value, "
                        "headers, timestamp, partition")
    p.add_argument("--key-separator", metavar="SEP",
                   help="raw lines are KEY SEP VALUE (split at the first SEP; \\t means a tab)")
    p.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                   help="a header for every record (repeatable)")
    p.add_argument("--partition", "-p", type=int, metavar="P",
                   help="send every record to partition P (default: by key, as the Java client partitions)")
    p.add_argument("--compression", choices=COMPRESSION_TYPES, help="compression.type (default none)")
    p.add_argument("--acks", choices=ACKS, help="acks: 0, 1 or all (default all)")
    add_property_option(p, "producer")
    p.set_defaults(run=run)


class _Delivery:
    """The batches the records went into, tallied in order as the broker answers: records
    acknowledged per partition, and the first error."""

    def __init__(self):
        self.pending = deque()
        self._seen = set()
        self.acked = Counter()  # partition -> records acknowledged
        self.error = None
        self.failed = 0

    def add(self, result):
        if id(result) not in self._seen:
            self._seen.add(id(result))
            self.pending.append(result)

    def add_handle(self, handle):
        batch = getattr(handle, "batch", None)
        if batch is None:  # refused before reaching a batch (too large, no metadata...)
            self.failed += 1
            self.error = self.error or handle.exception()
        else:
            self.add(batch)

    def collect(self, wait: bool = False):
        """Tallies the batches answered so far (all of them, waiting, with ``wait``)."""
        while self.pending and (wait or self.pending[0].done()):
            r = self.pending.popleft()
            self._seen.discard(id(r))
            r.wait()
            if r.error is None:
                self.acked[r.partition] += r.count
            else:
                self.failed += r.count
                self.error = self.error or r.error


def run(args) -> int:
    with sigterm_as_interrupt():  # a service manager's or kill's stop ends it as Ctrl-C does
        return _run(args)


def _run(args) -> int:
    if args.key_separator is not None and args.format != "raw":
        raise ToolError("--key-separator applies to --format raw", EXIT_USAGE)
    if args.key_separator == "":
        raise ToolError("--key-separator must not be empty", EXIT_USAGE)
    headers = [_header(h) for h in args.header]
    acks = None if args.acks is None else ("all" if args.acks == "-1" else args.acks)
    props = properties(args, {"compression.type": args.compression, "acks": acks})
    source = _open(args.file)
    count = topic_partitions(props, args.topic, create=True)
    check_partition(args.topic, args.partition, count)
    producer = make_producer(props)
    delivery = _Delivery()
    started = time.monotonic()
    reader = _Reader(args, headers, count)
    code, failure = EXIT_OK, None
    try:
        for chunk in reader.chunks(source):
            _send(producer, args, headers, chunk, delivery)
            delivery.collect()
            if delivery.error is not None:
                break
    except ToolError as e:  # a bad line: what came before it is still sent and counted
        code, failure = e.exit_code, e
    except KafkaError as e:  # the producer gave up (e.g. no memory within max.block.ms): same
        code, failure = EXIT_FAILED, e
    except KeyboardInterrupt as e:
        code = interrupted_exit_code(e)
    finally:
        try:
            producer.flush(10 if code in (EXIT_INTERRUPTED, EXIT_TERMINATED) else None)
            delivery.collect(wait=code not in (EXIT_INTERRUPTED, EXIT_TERMINATED))
        finally:
            producer.close(0 if code in (EXIT_INTERRUPTED, EXIT_TERMINATED) else None)
            if source is not sys.stdin.buffer:
                source.close()
    _summary(args, delivery, time.monotonic() - started)
    if failure is not None:
        raise failure
    if delivery.error is not None:
        raise ToolError(f"{plural(delivery.failed, 'record')} not written: {error_line(delivery.error)}", EXIT_FAILED)
    return code


def _open(path):
    if path is None or path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror or e}", EXIT_USAGE) from None


def _header(text: str):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ToolError(f"--header {text!r} is not KEY=VALUE", EXIT_USAGE)
    return key, value.encode("utf-8")


class _Chunk:
    """Records parsed from input lines: values (and keys) columns for send_many, or
    (value, key, headers, timestamp, partition) tuples for send (--format json)."""

    __slots__ = ("values", "keys", "records")

    def __init__(self):
        self.values, self.keys, self.records = [], [], []


class _Reader:
    def __init__(self, args, headers, partitions):
        self.format = args.format
        self.separator = None if args.key_separator is None else unescape(args.key_separator).encode("utf-8")
        self.headers = headers
        self.partitions = partitions
        self.topic = args.topic
        self.default_partition = args.partition
        self.line_number = 0

    def chunks(self, source):
        """Yields a _Chunk per read; a partial last line waits for the rest of it (or the end
        of the input)."""
        read = getattr(source, "read1", source.read)
        rest = b""
        while True:
            data = read(READ_SIZE)
            if not data:
                if rest:
                    yield from self._parse([rest])
                return
            lines = (rest + data).split(b"\n")
            rest = lines.pop()
            if lines:
                yield from self._parse(lines)

    def _parse(self, lines):
        """One _Chunk from complete lines (plain lines as they are: no per-line Python work
        beyond what the format needs)."""
        chunk = _Chunk()
        first = self.line_number + 1
        self.line_number += len(lines)
        if any(line.endswith(b"\r") for line in lines):
            lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
        if self.format == "json":
            for i, line in enumerate(lines):
                if line.strip():
                    try:
                        chunk.records.append(self._json(line, first + i))
                    except ToolError:
                        yield chunk  # the lines before the bad one are sent
                        raise
        elif self.separator is not None:
            parts = [line.partition(self.separator) for line in lines]
            bad = next((i for i, p in enumerate(parts) if not p[1]), None)
            if bad is not None:
                parts = parts[:bad]
            chunk.keys = [p[0] for p in parts]
            chunk.values = [p[2] for p in parts]
            if bad is not None:
                yield chunk
                raise ToolError(f"line {first + bad}: no key separator "
                                f"{self.separator.decode('utf-8', 'replace')!r}", EXIT_FAILED)
        else:
            chunk.values = lines
        yield chunk

    def _json(self, line, number):
        where = f"line {number}"
        try:
            obj = json.loads(line)
        except (ValueError, UnicodeDecodeError) as e:
            raise ToolError(f"{where}: not JSON ({e})", EXIT_FAILED) from None
        if not isinstance(obj, dict):
            raise ToolError(f"{where}: expected a JSON object with {', '.join(JSON_FIELDS)}", EXIT_FAILED)
        unknown = [k for k in obj if k not in JSON_FIELDS and k not in JSON_IGNORED]
        if unknown:
            raise ToolError(f"{where}: unknown field {unknown[0]!r} (known: {', '.join(JSON_FIELDS)})", EXIT_FAILED)
        headers = list(self.headers)
        raw_headers = obj.get("headers")
        if isinstance(raw_headers, dict):
            headers += [(k, _json_bytes(v)) for k, v in raw_headers.items()]
        elif isinstance(raw_headers, list):
            for h in raw_headers:
                if not (isinstance(h, list) and len(h) == 2 and isinstance(h[0], str)):
                    raise ToolError(f"{where}: headers are an object or a list of [key, value] pairs", EXIT_FAILED)
                headers.append((h[0], _json_bytes(h[1])))
        elif raw_headers is not None:
            raise ToolError(f"{where}: headers are an object or a list of [key, value] pairs", EXIT_FAILED)
        ts = obj.get("timestamp")
        if isinstance(ts, str):
            try:
                ts = parse_time_ms(ts, "timestamp")
            except ToolError as e:
                raise ToolError(f"{where}: {e.message}", EXIT_FAILED) from None
        elif ts is not None and (isinstance(ts, bool) or not isinstance(ts, int)):
            raise ToolError(f"{where}: timestamp is milliseconds or an ISO-8601 string", EXIT_FAILED)
        partition = obj.get("partition", self.default_partition)
        if partition is not None:
            if isinstance(partition, bool) or not isinstance(partition, int):
                raise ToolError(f"{where}: partition must be an integer", EXIT_FAILED)
            if not 0 <= partition < self.partitions:
                raise ToolError(f"{where}: partition {partition} of {self.topic!r} does not exist "
                                f"(the topic has {self.partitions})", EXIT_FAILED)
        return _json_bytes(obj.get("value")), _json_bytes(obj.get("key")), headers or None, ts, partition


def _json_bytes(v):
    """A JSON key, value or header value as record bytes: strings as UTF-8, null as null,
    anything else as its compact JSON text."""
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode("utf-8")
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _send(producer, args, headers, chunk, delivery):
    if chunk.values and not headers and _fits(producer, chunk):
        handle = producer.send_many(args.topic, chunk.values, keys=chunk.keys or None, partition=args.partition)
        for r in handle.results:
            delivery.add(r)
        return
    headers = headers or None
    for i, value in enumerate(chunk.values):
        delivery.add_handle(producer.send(args.topic, value, chunk.keys[i] if chunk.keys else None,
                                          args.partition, headers))
    for value, key, rec_headers, ts, partition in chunk.records:
        delivery.add_handle(producer.send(args.topic, value, key, partition, rec_headers, ts))


def _fits(producer, chunk) -> bool:
    """Whether every record of the chunk is well below the producer's size limits. send_many
    raises for a record too large (and the records before it are then sent uncounted), send
    reports it through the record's handle: chunks near the limits take send."""
    limit = min(producer.config["max.request.size"], producer.config["buffer.memory"]) - SEND_MANY_MARGIN
    largest = max(map(len, chunk.values)) + (max(map(len, chunk.keys)) if chunk.keys else 0)
    return largest < limit


def _summary(args, delivery, elapsed):
    total = sum(delivery.acked.values())
    parts = ", ".join(f"{p}: {n}" for p, n in sorted(delivery.acked.items()))
    line = f"{plural(total, 'record')} produced to {args.topic}"
    if parts:
        line += f" (partition {parts})" if len(delivery.acked) == 1 else f" (partitions {parts})"
    if delivery.failed:
        line += f", {delivery.failed} failed"
    print(f"kafkacore produce: {line} in {elapsed:.2f} s", file=sys.stderr)
    if args.output in ("json", "jsonl"):
        emit(args, {"topic": args.topic, "records": total, "failed": delivery.failed,
                    "partitions": {str(p): n for p, n in sorted(delivery.acked.items())},
                    "seconds": round(elapsed, 3)})
