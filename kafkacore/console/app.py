"""The console: the page shell, its static files, the JSON API and the sampler on one
asyncio HTTP server.

Writes (create or delete a topic, reset a group's offsets) are POSTs that must carry the
server's write token (``X-Console-Token``, a random value written into the page this server
serves: another site's page cannot read it, so it cannot forge the request) and a
``"confirm"`` field naming the topic or group, which the page's confirmation dialog fills in.
"""
from __future__ import annotations

import asyncio
import hmac
import secrets
from http import HTTPStatus
from pathlib import Path

from ..client.connection import ConnectionClosed
from ..errors import KafkaError, KafkaTimeoutError
from . import api, records
from .admin_pool import AdminPool
from .http import HttpError, HttpServer, Request, Response, Router
from .sampler import Sampler

STATIC_DIR = Path(__file__).with_name("static")
SHELL_FILE = "index.html"
TOKEN_PLACEHOLDER = "__CONSOLE_TOKEN__"
TOKEN_HEADER = "x-console-token"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
                 ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png"}
# the pages the single-page application draws (anything else gets the shell with a 404)
PAGES = ("/", "/topics", "/topics/{name}", "/topics/{name}/messages", "/groups", "/groups/{group}")
WILDCARD_HOSTS = ("", "0.0.0.0", "::")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
NOT_FOUND_ERRORS = ("UNKNOWN_TOPIC_OR_PARTITION", "GROUP_ID_NOT_FOUND")
CONFLICT_ERRORS = ("TOPIC_ALREADY_EXISTS", "NON_EMPTY_GROUP", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION",
                   "REBALANCE_IN_PROGRESS")
# scripts and styles only from this server; nothing inline, nothing from elsewhere
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
                           "frame-ancestors 'none'")


class Console:
    def __init__(self, make_admin, bootstrap: str, pool_size: int = 3):
        self.bootstrap = bootstrap
        self.token = secrets.token_urlsafe(24)
        self.pool = AdminPool(make_admin, pool_size)
        self.sampler = Sampler(self.pool)
        self.static = _load_static()
        self.router = self._routes()
        self.http = HttpServer(self.router, on_error=self._error, not_found=self._not_found, check=self._check_host)
        self.address = None
        self.allowed_hosts = None  # None: any Host header (when serving on every address)

    async def start(self, host: str, port: int):
        """Checks the cluster answers, then listens; returns (host, port)."""
        await self.pool.run(lambda admin: admin.describe_cluster())
        self.address = await self.http.start(host, port)
        if host not in WILDCARD_HOSTS:
            self.allowed_hosts = {host.strip("[]").lower(), *LOOPBACK_NAMES}
        self.sampler.start()
        return self.address

    async def close(self):
        await self.sampler.stop()
        await self.http.close()
        await asyncio.to_thread(self.pool.close)

    def _check_host(self, request: Request):
        """Answers only requests addressed to the console by a name of the address it serves
        on: a page elsewhere that points its own domain name at 127.0.0.1 (DNS rebinding)
        could otherwise read the console's pages and token as if it were the console."""
        if self.allowed_hosts is None:
            return
        host = request.headers.get("host", "")
        name = host[1:host.index("]")] if host.startswith("[") and "]" in host else host.rsplit(":", 1)[0]
        if name.lower() not in self.allowed_hosts:
            raise HttpError(HTTPStatus.MISDIRECTED_REQUEST, f"this console answers to {sorted(self.allowed_hosts)}, "
                                                            f"not to Host {host!r}")

    # -- routes ------------------------------------------------------------------------------
    def _routes(self) -> Router:
        r = Router()
        for page in PAGES:
            r.add("GET", page, self._shell)
        r.add("GET", "/static/{file}", self._static)
        r.add("GET", "/api", self._api_index)
        r.add("GET", "/api/overview", self._overview)
        r.add("GET", "/api/cluster/series", self._cluster_series)
        r.add("GET", "/api/topics", self._topics)
        r.add("POST", "/api/topics", self._create_topic)
        r.add("GET", "/api/topics/{name}", self._topic)
        r.add("POST", "/api/topics/{name}/delete", self._delete_topic)
        r.add("GET", "/api/topics/{name}/messages", self._messages)
        r.add("GET", "/api/topics/{name}/series", self._topic_series)
        r.add("GET", "/api/groups", self._call(api.group_list))
        r.add("GET", "/api/groups/{group}", self._group)
        r.add("GET", "/api/groups/{group}/series", self._group_series)
        r.add("POST", "/api/groups/{group}/reset-offsets", self._reset_offsets)
        return r

    async def _overview(self, request: Request) -> Response:
        doc = await self.pool.run(api.overview)
        return Response.json({**doc, "bootstrap": self.bootstrap, "sampler": {
            "interval_s": self.sampler.interval_s, "last_sample": self.sampler.last_sample_ms,
            "last_error": self.sampler.last_error}})

    def _call(self, fn):
        async def handler(request: Request) -> Response:
            return Response.json(await self.pool.run(fn))
        return handler

    async def _shell(self, request: Request, status: int = 200) -> Response:
        body, ctype = self.static[SHELL_FILE]
        return Response(status, body.replace(TOKEN_PLACEHOLDER.encode(), self.token.encode()), ctype,
                        {"Cache-Control": "no-store", "Content-Security-Policy": CONTENT_SECURITY_POLICY})

    async def _not_found(self, request: Request) -> Response:
        if request.path == "/api" or request.path.startswith("/api/"):
            raise HttpError(HTTPStatus.NOT_FOUND, f"no API endpoint at {request.path} (GET /api lists them)")
        return await self._shell(request, HTTPStatus.NOT_FOUND)

    async def _static(self, request: Request) -> Response:
        found = self.static.get(request.params["file"])
        if found is None or request.params["file"] == SHELL_FILE:
            raise HttpError(HTTPStatus.NOT_FOUND, f"no file {request.params['file']!r}")
        body, ctype = found
        return Response(200, body, ctype, {"Cache-Control": "no-cache"})

    async def _api_index(self, request: Request) -> Response:
        return Response.json({"endpoints": [f"{m} {pattern}" for m, pattern in self.router.routes()
                                            if pattern.startswith("/api/")],
                              "docs": "docs/tools.md, section Console"})

    async def _topics(self, request: Request) -> Response:
        internal = request.query.get("internal", "") not in ("", "0", "false")
        doc = await self.pool.run(api.topic_list, internal)
        for row in doc["topics"]:
            row["rate"] = self.sampler.topic_rate(row["name"])
        return Response.json(doc)

    async def _topic(self, request: Request) -> Response:
        name = request.params["name"]
        doc = await self.pool.run(api.topic_detail, name)
        doc["rate"] = self.sampler.topic_rate(name)
        return Response.json(doc)

    async def _messages(self, request: Request) -> Response:
        q = request.query
        limit = records.parse_limit(q.get("limit"))
        doc = await self.pool.run(lambda admin: records.browse(
            admin, request.params["name"], q.get("mode", "newest"), q.get("partition"), q.get("offset"),
            q.get("timestamp"), limit))
        return Response.json(doc)

    async def _topic_series(self, request: Request) -> Response:
        name = request.params["name"]
        series = self.sampler.topic_series(name)
        if series is None:
            # not sampled (yet): a topic that exists has no points so far; one that does not is a 404
            await self.pool.run(lambda admin: admin.describe_topics([name]))
            series = {"interval_s": self.sampler.interval_s, "unit": "records/s", "points": [], "end_offset": None}
        return Response.json({"topic": name, **series})

    async def _cluster_series(self, request: Request) -> Response:
        return Response.json({**self.sampler.cluster_series(), "last_error": self.sampler.last_error})

    async def _group(self, request: Request) -> Response:
        return Response.json(await self.pool.run(api.group_detail, request.params["group"]))

    async def _group_series(self, request: Request) -> Response:
        group = request.params["group"]
        series = self.sampler.group_series(group)
        if series is None:
            await self.pool.run(api.group_detail, group)  # a 404 for a group that does not exist
            series = {"interval_s": self.sampler.interval_s, "unit": "records", "points": []}
        return Response.json({"group_id": group, **series})

    # -- writes ------------------------------------------------------------------------------
    def _authorised(self, request: Request, confirm_name: str | None) -> dict:
        """The request's JSON body, once the write token and the confirmation check out."""
        given = request.headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            raise HttpError(HTTPStatus.FORBIDDEN, "missing or wrong write token: changes are made from the "
                                                  "console's own page (or send its X-Console-Token)")
        doc = request.json()
        if confirm_name is not None and doc.get("confirm") != confirm_name:
            raise HttpError(HTTPStatus.PRECONDITION_REQUIRED,
                            f"not confirmed: send \"confirm\": {confirm_name!r} to go ahead")
        return doc

    async def _create_topic(self, request: Request) -> Response:
        doc = self._authorised(request, None)
        name = doc.get("name")
        if doc.get("confirm") != name:  # (no name at all: the API's own check says so)
            raise HttpError(HTTPStatus.PRECONDITION_REQUIRED,
                            "not confirmed: send \"confirm\" equal to \"name\" to create the topic")
        return Response.json(await self.pool.run(api.create_topic, doc), HTTPStatus.CREATED)

    async def _delete_topic(self, request: Request) -> Response:
        name = request.params["name"]
        self._authorised(request, name)
        return Response.json(await self.pool.run(api.delete_topic, name))

    async def _reset_offsets(self, request: Request) -> Response:
        group = request.params["group"]
        doc = self._authorised(request, None)
        execute = not doc.get("dry_run", False)
        if execute and doc.get("confirm") != group:
            raise HttpError(HTTPStatus.PRECONDITION_REQUIRED,
                            f"not confirmed: send \"confirm\": {group!r} to reset (or \"dry_run\": true to preview)")
        return Response.json(await self.pool.run(api.reset_offsets, group, doc, execute))

    # -- errors ------------------------------------------------------------------------------
    def _error(self, request: Request, e: Exception) -> Response | None:
        if isinstance(e, api.ApiError):
            return Response.json({"error": e.message}, e.status)
        if isinstance(e, records.BrowseError):
            return Response.json({"error": str(e)}, HTTPStatus.BAD_REQUEST)
        if isinstance(e, KafkaTimeoutError):
            return Response.json({"error": f"the cluster did not answer in time: {e.message}"},
                                 HTTPStatus.GATEWAY_TIMEOUT)
        if isinstance(e, KafkaError):
            status = (HTTPStatus.NOT_FOUND if e.name in NOT_FOUND_ERRORS else
                      HTTPStatus.CONFLICT if e.name in CONFLICT_ERRORS else HTTPStatus.BAD_REQUEST)
            message = _not_found_message(e) if status == HTTPStatus.NOT_FOUND else (
                f"{e.name}: {e.message}" if e.message != e.name else e.name)
            return Response.json({"error": message, "code": e.name}, status)
        if isinstance(e, (ConnectionClosed, OSError)):
            return Response.json({"error": f"cannot reach the cluster at {self.bootstrap}: {e}"},
                                 HTTPStatus.SERVICE_UNAVAILABLE)
        return None


def _not_found_message(e: KafkaError) -> str:
    """'topic 'x' does not exist' from the AdminClient's 'topic 'x'' detail."""
    if e.message == e.name:
        return "it does not exist"
    return e.message if "does not exist" in e.message else f"{e.message} does not exist"


def _load_static() -> dict:
    """{file name: (bytes, content type)} of static/, read once (the files are small)."""
    out = {}
    for path in sorted(STATIC_DIR.iterdir()):
        if path.is_file():
            ctype = CONTENT_TYPES.get(path.suffix, "application/octet-stream")
            out[path.name] = (path.read_bytes(), ctype)
    if SHELL_FILE not in out:
        raise RuntimeError(f"the console's {SHELL_FILE} is missing from {STATIC_DIR} (a broken install?)")
    return out
