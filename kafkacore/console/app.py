"""The console: the page shell, its static files, the JSON API and the sampler on one
asyncio HTTP server.

Writes are POSTs that must carry the server's write token (``X-Console-Token``, a random
value written into the page this server serves: another site's page cannot read it, so it
cannot forge the request) and a ``"confirm"`` field naming the topic or group, which the
page's confirmation dialog fills in. They create or delete a topic, change its configs, add
partitions, produce a record, reset a group's offsets or delete it.

With ``--users`` every page and API call needs a login session (auth.py), and with
``--read-only`` (or for a read-only user) every write is refused with 403 before any handler
runs, so a route added later cannot forget the check; the pages learn the mode from
``GET /api/session`` and leave the write controls out.
"""
from __future__ import annotations

import asyncio
import hmac
import html
import logging
import secrets
import time
from http import HTTPStatus
from pathlib import Path
from urllib.parse import urlencode

from ..client.connection import ConnectionClosed
from ..errors import KafkaError, KafkaTimeoutError
from . import api, brokers, records
from .auth import Authenticator, SessionStore
from .admin_pool import AdminPool
from .http import HttpError, HttpServer, Request, Response, Router
from .produce import ConsoleProducer
from .record_filter import FilterError, RecordFilter
from .sampler import Sampler

log = logging.getLogger("kafkacore.console")

STATIC_DIR = Path(__file__).with_name("static")
SHELL_FILE = "index.html"
LOGIN_FILE = "login.html"
TEMPLATES = (SHELL_FILE, LOGIN_FILE)  # filled in by the server, not served as they are
TOKEN_PLACEHOLDER = "__CONSOLE_TOKEN__"
TOKEN_HEADER = "x-console-token"
SESSION_COOKIE = "kafkacore_console_session"  # + "_PORT": cookies are shared between a host's ports
# a failed login is answered no sooner than this after it arrived, whatever failed: guessing
# is slow, and the time does not tell whether the user exists
LOGIN_FAILURE_DELAY_S = 1.0
# reachable without a session when the console has --users: the login form and what it loads
PUBLIC = {("GET", "/login"), ("POST", "/login"), ("POST", "/logout"), ("GET", "/static/console.css"),
          ("GET", "/static/logo.svg")}
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
                 ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png"}
# the pages the single-page application draws (anything else gets the shell with a 404)
PAGES = ("/", "/topics", "/topics/{name}", "/topics/{name}/messages", "/groups", "/groups/{group}", "/brokers",
         "/brokers/{broker}")
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
    """``users``: {name: auth.User} to require a login (None: no login); ``read_only``: refuse
    every write whoever asks; ``make_producer``: a Producer for the produce form (None: the
    form's writes are refused)."""

    def __init__(self, make_admin, bootstrap: str, pool_size: int = 3, users: dict | None = None,
                 read_only: bool = False, make_producer=None, schemas=None):
        self.bootstrap = bootstrap
        self.schemas = schemas  # a schemas.SchemaSource (--schema-registry, --schema-dir), or None
        self.token = secrets.token_urlsafe(24)
        self.read_only = read_only
        self.auth = Authenticator(users) if users else None
        self.sessions = SessionStore()
        self.cookie_name = SESSION_COOKIE
        self.pool = AdminPool(make_admin, pool_size)
        self.sampler = Sampler(self.pool)
        self.producer = ConsoleProducer(make_producer) if make_producer else None
        self.static = _load_static()
        self.router = self._routes()
        self.http = HttpServer(self.router, on_error=self._error, not_found=self._not_found, check=self._check)
        self.address = None
        self.allowed_hosts = None  # None: any Host header (when serving on every address)

    async def start(self, host: str, port: int):
        """Checks the cluster answers, then listens; returns (host, port)."""
        await self.pool.run(lambda admin: admin.describe_cluster())
        self.address = await self.http.start(host, port)
        self.cookie_name = f"{SESSION_COOKIE}_{self.address[1]}"
        if host not in WILDCARD_HOSTS:
            self.allowed_hosts = {host.strip("[]").lower(), *LOOPBACK_NAMES}
        self.sampler.start()
        return self.address

    async def close(self):
        await self.sampler.stop()
        await self.http.close()
        if self.producer is not None:
            await asyncio.to_thread(self.producer.close)
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

    def _check(self, request: Request) -> Response | None:
        """Before every handler: the Host name, then the session (with --users), then the
        read-only mode. A page asked for without a session is redirected to the login form;
        anything else without one is 401."""
        self._check_host(request)
        method = "GET" if request.method == "HEAD" else request.method
        if self.auth is not None:
            request.session = self.sessions.get(request.cookie(self.cookie_name) or "")
            if request.session is None and (method, request.path) not in PUBLIC:
                if method == "GET" and not request.path.startswith(("/api", "/static/")):
                    target = request.path + ("?" + urlencode(request.query) if request.query else "")
                    return _redirect("/login?" + urlencode({"next": target}))
                raise HttpError(HTTPStatus.UNAUTHORIZED, "log in first: the console needs a session "
                                                         "(POST /login, or open the console in a browser)")
        # anything but a read, on any API path: a write endpoint added later is covered too
        if method != "GET" and request.path.startswith("/api") and self._may_only_read(request):
            raise HttpError(HTTPStatus.FORBIDDEN, self._read_only_reason(request))
        return None

    def _may_only_read(self, request: Request) -> bool:
        return self.read_only or (request.session is not None and request.session.read_only)

    def _read_only_reason(self, request: Request) -> str:
        if self.read_only:
            return "the console is read-only (--read-only): it does not change the cluster"
        return f"user {request.session.user!r} may only read: the console does not change the cluster for them"

    # -- routes ------------------------------------------------------------------------------
    def _routes(self) -> Router:
        r = Router()
        for page in PAGES:
            r.add("GET", page, self._shell)
        r.add("GET", "/static/{file}", self._static)
        r.add("GET", "/login", self._login_form)
        r.add("POST", "/login", self._login)
        r.add("POST", "/logout", self._logout)
        r.add("GET", "/api", self._api_index)
        r.add("GET", "/api/session", self._session)
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
        # the operator's pages and actions: brokers, topic configs and partitions, producing, deleting a group
        r.add("GET", "/api/brokers", self._call(brokers.broker_list))
        r.add("GET", "/api/brokers/{broker}", self._broker)
        r.add("POST", "/api/topics/{name}/configs", self._alter_topic_configs)
        r.add("POST", "/api/topics/{name}/partitions", self._add_partitions)
        r.add("POST", "/api/topics/{name}/produce", self._produce)
        r.add("POST", "/api/groups/{group}/delete", self._delete_group)
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
        if found is None or request.params["file"] in TEMPLATES:
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
        scan = records.parse_scan(q.get("scan"))
        search = RecordFilter(q.get("q"), q.get("in"), q.get("path"))
        doc = await self.pool.run(lambda admin: records.browse(
            admin, request.params["name"], q.get("mode", "newest"), q.get("partition"), q.get("offset"),
            q.get("timestamp"), limit, search, scan, self.schemas))
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

    # -- the login ---------------------------------------------------------------------------
    async def _session(self, request: Request) -> Response:
        s = request.session
        return Response.json({"login": self.auth is not None, "user": s.user if s else None,
                              "read_only": self._may_only_read(request)})

    def _login_page(self, next_path: str, user: str = "", error: str = "", status: int = 200) -> Response:
        body, ctype = self.static[LOGIN_FILE]
        text = body.decode("utf-8")
        problem = f'<p class="alert error" id="login-error" role="alert">{html.escape(error)}</p>' if error else ""
        for placeholder, value in (("__CONSOLE_TOKEN__", html.escape(self.token)), ("__NEXT__", html.escape(next_path)),
                                   ("__USER__", html.escape(user)), ("__ERROR__", problem)):
            text = text.replace(placeholder, value)
        return Response(status, text.encode("utf-8"), ctype,
                        {"Cache-Control": "no-store", "Content-Security-Policy": CONTENT_SECURITY_POLICY})

    async def _login_form(self, request: Request) -> Response:
        next_path = _safe_next(request.query.get("next"))
        if self.auth is None or request.session is not None:
            return _redirect(next_path)
        return self._login_page(next_path)

    def _check_form_token(self, form: dict):
        """The login and logout forms carry the page's token, as writes do: another site's page
        cannot read it, so it cannot log a browser in (as someone else) or out."""
        if not hmac.compare_digest(form.get("token", "").encode(), self.token.encode()):
            raise HttpError(HTTPStatus.FORBIDDEN, "missing or wrong form token: use the console's own login page")

    async def _login(self, request: Request) -> Response:
        arrived = time.monotonic()
        if self.auth is None:
            raise HttpError(HTTPStatus.NOT_FOUND, "this console has no login (it was started without --users)")
        form = request.form()
        self._check_form_token(form)
        next_path = _safe_next(form.get("next"))
        name = form.get("user", "")
        # scrypt takes a while on purpose: in a thread, so the other requests go on meanwhile
        user = await asyncio.to_thread(self.auth.check, name, form.get("password", ""))
        if user is None:
            await asyncio.sleep(max(0.0, LOGIN_FAILURE_DELAY_S - (time.monotonic() - arrived)))
            log.warning("console: a login failed")  # (not the name: it may be a password typed in the wrong box)
            return self._login_page(next_path, name, "Wrong user name or password.", HTTPStatus.UNAUTHORIZED)
        token = self.sessions.create(user)
        log.info("console: %s logged in", user.name)
        return _redirect(next_path, {"Set-Cookie": f"{self.cookie_name}={token}; Path=/; HttpOnly; SameSite=Strict"})

    async def _logout(self, request: Request) -> Response:
        if self.auth is None:
            raise HttpError(HTTPStatus.NOT_FOUND, "this console has no login (it was started without --users)")
        self._check_form_token(request.form())
        token = request.cookie(self.cookie_name)
        if token:
            self.sessions.end(token)
        return _redirect("/login", {"Set-Cookie": f"{self.cookie_name}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"})

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

    async def _broker(self, request: Request) -> Response:
        return Response.json(await self.pool.run(brokers.broker_detail, request.params["broker"]))

    async def _alter_topic_configs(self, request: Request) -> Response:
        name = request.params["name"]
        doc = self._authorised(request, name)
        return Response.json(await self.pool.run(api.alter_topic_configs, name, doc))

    async def _add_partitions(self, request: Request) -> Response:
        name = request.params["name"]
        doc = self._authorised(request, name)
        return Response.json(await self.pool.run(api.add_partitions, name, doc))

    async def _produce(self, request: Request) -> Response:
        name = request.params["name"]
        doc = self._authorised(request, name)
        if self.producer is None:
            raise HttpError(HTTPStatus.NOT_IMPLEMENTED, "this console was started without a producer")
        return Response.json(await self.pool.run(self.producer.produce, name, doc), HTTPStatus.CREATED)

    async def _delete_group(self, request: Request) -> Response:
        group = request.params["group"]
        self._authorised(request, group)
        return Response.json(await self.pool.run(api.delete_group, group))

    # -- errors ------------------------------------------------------------------------------
    def _error(self, request: Request, e: Exception) -> Response | None:
        if isinstance(e, api.ApiError):
            return Response.json({"error": e.message, **({"code": e.code} if e.code else {})}, e.status)
        if isinstance(e, (records.BrowseError, FilterError)):
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


def _redirect(location: str, headers: dict | None = None) -> Response:
    return Response(HTTPStatus.SEE_OTHER, b"", headers={"Location": location, "Cache-Control": "no-store",
                                                         **(headers or {})})


def _safe_next(path: str | None) -> str:
    """Where to go after the login: a path on this console only ("//host" and "/\\host" are
    other sites to a browser), so the login cannot be used to send someone elsewhere."""
    if not path or not path.startswith("/") or path.startswith(("//", "/\\")) or any(ord(c) < 32 for c in path):
        return "/"
    return path


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
    for name in TEMPLATES:
        if name not in out:
            raise RuntimeError(f"the console's {name} is missing from {STATIC_DIR} (a broken install?)")
    return out
