"""A small HTTP/1.1 server on asyncio streams, enough for a local console: keep-alive,
Content-Length bodies (no chunked uploads), routes matched on the method and a path pattern.

Handlers are ``async def handler(request) -> Response``; ``{name}`` in a pattern matches one
path segment, URL-decoded into ``request.params[name]``.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger("kafkacore.console")

MAX_HEADER_BYTES = 16 * 1024
MAX_BODY_BYTES = 64 * 1024  # the API's bodies are small JSON documents
IDLE_TIMEOUT_S = 60
CLOSE_WAIT_S = 5  # at shutdown, how long a request being answered may take to finish


@dataclass
class Request:
    method: str
    path: str
    query: dict  # {name: last value}
    headers: dict  # lower-case names
    body: bytes
    params: dict = field(default_factory=dict)
    session: object = None  # the login session (auth.Session) when the console has --users

    def cookie(self, name: str) -> str | None:
        """The value of cookie ``name`` from the Cookie header, or None."""
        for item in self.headers.get("cookie", "").split(";"):
            key, sep, value = item.strip().partition("=")
            if sep and key == name:
                return value
        return None

    def form(self) -> dict:
        """An application/x-www-form-urlencoded body as {name: last value}."""
        try:
            text = self.body.decode("utf-8")
        except UnicodeDecodeError:
            raise HttpError(HTTPStatus.BAD_REQUEST, "the form is not UTF-8") from None
        return {k: v[-1] for k, v in parse_qs(text, keep_blank_values=True).items()}

    def json(self):
        """The body as a JSON object; HttpError 400 when it is not one."""
        try:
            doc = json.loads(self.body or b"{}")
        except (ValueError, UnicodeDecodeError):
            raise HttpError(HTTPStatus.BAD_REQUEST, "the request body is not JSON") from None
        if not isinstance(doc, dict):
            raise HttpError(HTTPStatus.BAD_REQUEST, "the request body is not a JSON object")
        return doc


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict = field(default_factory=dict)

    @classmethod
    def json(cls, doc, status: int = 200) -> "Response":
        return cls(status, json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode(),
                   "application/json; charset=utf-8", {"Cache-Control": "no-store"})


class HttpError(Exception):
    """Answered as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = int(status)
        self.message = message


class Router:
    def __init__(self):
        self._routes = []  # (method, pattern, compiled pattern, handler)

    def add(self, method: str, pattern: str, handler):
        regex = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(pattern)) + "$"
        self._routes.append((method, pattern, re.compile(regex), handler))

    def routes(self) -> list:
        """[(method, pattern)] in the order they were added."""
        return [(m, pattern) for m, pattern, _, _ in self._routes]

    def match(self, method: str, path: str):
        """(handler, params), or raises HttpError 404 / 405."""
        allowed = []
        for m, _, regex, handler in self._routes:
            found = regex.match(path)
            if found:
                if m == method or (m == "GET" and method == "HEAD"):
                    return handler, {k: unquote(v) for k, v in found.groupdict().items()}
                allowed.append(m)
        if allowed:
            raise HttpError(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} is not allowed on {path}")
        raise HttpError(HTTPStatus.NOT_FOUND, f"nothing at {path}")


class HttpServer:
    """Serves ``router`` on (host, port); ``check(request)`` runs before every handler and may
    raise HttpError, or return a Response to answer instead of the handler (a redirect);
    ``on_error(request, exc)`` turns an exception a handler raised into a Response (HttpError
    is handled here)."""

    def __init__(self, router: Router, on_error=None, not_found=None, check=None):
        self.router = router
        self.check = check
        self.on_error = on_error
        self.not_found = not_found  # handler for paths no route matches (GET), else a JSON 404
        self._server = None
        self._connections = {}  # {task serving a connection: its writer}

    async def start(self, host: str, port: int):
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_HEADER_BYTES)
        return self._server.sockets[0].getsockname()[:2]

    async def close(self):
        """Stops listening, then ends the connections: an idle keep-alive one (a browser keeps
        them) would otherwise be cancelled mid-read when the loop stops, and asyncio prints
        that as a traceback."""
        if self._server is not None:
            self._server.close()
            for writer in self._connections.values():
                writer.transport.close()  # its reader sees the end of the stream: _serve returns
            if self._connections:
                await asyncio.wait(list(self._connections), timeout=CLOSE_WAIT_S)
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        task = asyncio.current_task()
        self._connections[task] = writer
        try:
            while True:
                try:
                    request = await asyncio.wait_for(_read_request(reader), IDLE_TIMEOUT_S)
                except HttpError as e:
                    await _write(writer, Response.json({"error": e.message}, e.status), False, False)
                    return
                if request is None:
                    return
                keep_alive = request.headers.get("connection", "").lower() != "close"
                response = await self._dispatch(request)
                await _write(writer, response, keep_alive, request.method == "HEAD")
                if not keep_alive:
                    return
        except (asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.pop(task, None)
            writer.close()

    async def _dispatch(self, request: Request) -> Response:
        try:
            if self.check is not None:
                answer = self.check(request)
                if answer is not None:
                    return answer
            try:
                handler, request.params = self.router.match(request.method, request.path)
            except HttpError as e:
                if e.status == HTTPStatus.NOT_FOUND and self.not_found and request.method in ("GET", "HEAD"):
                    return await self.not_found(request)
                raise
            return await handler(request)
        except HttpError as e:
            return Response.json({"error": e.message}, e.status)
        except Exception as e:  # noqa: BLE001 - a page must get an answer, the log gets the detail
            if self.on_error is not None:
                answer = self.on_error(request, e)
                if answer is not None:
                    return answer
            log.exception("%s %s failed", request.method, request.path)
            return Response.json({"error": f"internal error: {type(e).__name__}: {e}"}, 500)


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if e.partial.strip():
            raise HttpError(HTTPStatus.BAD_REQUEST, "incomplete request") from None
        return None
    except asyncio.LimitOverrunError:
        raise HttpError(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request headers too large") from None
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _version = lines[0].split(" ")
    except ValueError:
        raise HttpError(HTTPStatus.BAD_REQUEST, "malformed request line") from None
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise HttpError(HTTPStatus.BAD_REQUEST, "bad Content-Length") from None
    if length > MAX_BODY_BYTES or length < 0:
        raise HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"bodies are limited to {MAX_BODY_BYTES} bytes")
    body = await reader.readexactly(length) if length else b""
    url = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
    return Request(method.upper(), url.path or "/", query, headers, body)


async def _write(writer, response: Response, keep_alive: bool, head_only: bool):
    status = HTTPStatus(response.status)
    headers = {"Content-Type": response.content_type, "Content-Length": str(len(response.body)),
               "Connection": "keep-alive" if keep_alive else "close",
               # the console's pages only ever load their own files
               "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
               **response.headers}
    head = f"HTTP/1.1 {status.value} {status.phrase}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(head.encode("latin-1") + b"\r\n" + (b"" if head_only else response.body))
    await writer.drain()
