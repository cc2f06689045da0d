"""The console's web application: Starlette, Jinja templates rendered on the server (every value
HTML-escaped), pages gathered with the logged-in person's own clients.

A person logs in with their Kafka SASL credentials (login.py); the session (sessions.py) holds
their admin client and consumers, so the broker's ACLs decide what each page shows and
whether each action is done, and the broker's audit line names them. ``--no-auth`` (loopback
only) serves every visitor with the console's own clients instead.

Page handlers run the blocking admin client in Starlette's thread pool. Pages refresh
themselves in place (``static/refresh.js``: fetch the page, swap its ``<main>``).

Actions change the cluster, so each is guarded (guard.py: POST, the session's CSRF token, this
console's origin; else 403) and asked twice: the first POST only stores what was asked and
shows it for confirmation; the second, carrying the confirmation's token, does exactly what
was stored and logs it with the person's principal. The actions: aborting a hanging
transaction — done only if it is still found hanging (never an open transaction a coordinator
owns), as ``eoslog transactions abort`` would; deleting a partition's records before an offset
(DeleteRecords); resetting a group's committed offset (OffsetCommit for a group without
members, which the broker refuses otherwise). ``--read-only`` hides and refuses them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from eoslog.client import TopicPartition
from eoslog.client.errors import KafkaError
from eoslog.console import views
from eoslog.console.guard import SESSION_COOKIE, SecurityHeaders, read_form, same_origin, token_matches
from eoslog.console.login import MECHANISMS, LoginFailed, default_mechanism, log_in
from eoslog.console.sessions import Clients, PendingAction, Session, SessionStore
from eoslog.tools import ToolError
from eoslog.tools.transactions import Cluster, write_abort_marker

log = logging.getLogger("eoslog.console")

HERE = Path(__file__).parent
PAGES = (("/", "Cluster"), ("/transactions", "Transactions"), ("/partitions", "Partitions"),
         ("/records", "Records"), ("/groups", "Groups"), ("/producers", "Producers"), ("/spark", "Spark"))


@dataclass(frozen=True)
class ConsoleSettings:
    bootstrap_server: str
    metrics_url: str | None = None
    refresh_s: float = 5.0  # 0: no refresh in place
    # --command-config, as Kafka's tools take it: how to reach the cluster (security.protocol, TLS,
    # the default SASL mechanism, timeouts); with --no-auth also the identity every visitor uses.
    client_settings: Mapping[str, str] = field(default_factory=dict)
    auth: bool = True  # False: --no-auth
    read_only: bool = False
    tls: bool = False  # served over HTTPS: the session cookie is Secure
    idle_s: float = 30 * 60
    max_s: float = 8 * 3600
    failed_login_delay_s: float = 1.0
    allowed_hosts: tuple[str, ...] = ("*",)


@dataclass(frozen=True)
class Action:
    fields: tuple[str, ...]
    back: str
    summary: Callable[[Mapping[str, str]], str]  # what is about to happen; ValueError: incomplete
    run: Callable[[Clients, Mapping[str, str]], str]  # does it; what was done


def _ints(values: Mapping[str, str], *names: str) -> list[int]:
    out = [int(values[n]) for n in names]
    if any(v < 0 for v in out):
        raise ValueError("negative")
    return out


def _delete_records(clients: Clients, v: Mapping[str, str]) -> str:
    partition, offset = _ints(v, "partition", "offset")
    tp = TopicPartition(v["topic"], partition)
    low = clients.admin.delete_records({tp: offset})[tp].low_watermark
    return f"deleted the records of {tp.topic}-{tp.partition} before offset {offset}: log start now {low}"


def _reset_offsets(clients: Clients, v: Mapping[str, str]) -> str:
    partition, offset = _ints(v, "partition", "offset")
    clients.admin.alter_consumer_group_offsets(v["group"], {TopicPartition(v["topic"], partition): offset})
    return f"group {v['group']}: committed offset of {v['topic']}-{partition} reset to {offset}"


def _abort(clients: Clients, v: Mapping[str, str]) -> str:
    partition, producer_id = _ints(v, "partition", "producer_id")
    topic = v["topic"]
    cluster = Cluster(clients.admin)
    found = [r for r in views.open_transactions(cluster, views.transactions(cluster))
             if (r.topic, r.partition, r.producer_id) == (topic, partition, producer_id)]
    if not found or not found[0].hanging:
        return f"not aborted: producer {producer_id} has no hanging transaction in {topic}-{partition} any more"
    r = found[0]
    write_abort_marker(cluster, topic, partition, r.producer_id, r.producer_epoch, r.coordinator_epoch)
    return (f"aborted the hanging transaction of producer {r.producer_id} (epoch {r.producer_epoch}) "
            f"in {topic}-{partition} from offset {r.start_offset}")


def _summary(text: Callable[[Mapping[str, str]], str], *ints: str) -> Callable[[Mapping[str, str]], str]:
    def summary(v: Mapping[str, str]) -> str:
        _ints(v, *ints)
        if not all(v.values()):
            raise ValueError("missing")
        return text(v)
    return summary


ACTIONS: dict[str, Action] = {
    "/partitions/delete-records": Action(
        ("topic", "partition", "offset"), "/partitions",
        _summary(lambda v: f"Delete the records of {v['topic']}-{v['partition']} before offset {v['offset']}? "
                           "They cannot be read again.", "partition", "offset"),
        _delete_records),
    "/groups/reset-offsets": Action(
        ("group", "topic", "partition", "offset"), "/groups",
        _summary(lambda v: f"Reset the committed offset of group {v['group']} on {v['topic']}-{v['partition']} "
                           f"to {v['offset']}? (Only a group without members accepts it.)", "partition", "offset"),
        _reset_offsets),
    "/transactions/abort": Action(
        ("topic", "partition", "producer_id"), "/transactions",
        _summary(lambda v: f"Abort the hanging transaction of producer {v['producer_id']} in "
                           f"{v['topic']}-{v['partition']}? Its records become aborted.", "partition", "producer_id"),
        _abort),
}


def create_app(settings: ConsoleSettings) -> Starlette:
    templates = Jinja2Templates(directory=HERE / "templates")
    store = SessionStore(settings.idle_s, settings.max_s)
    shared: dict[str, Clients] = {}  # --no-auth: the console's own clients, for every visitor
    base_client = {"bootstrap.servers": settings.bootstrap_server, **settings.client_settings}

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            for clients in [*store.end_all(), *shared.values()]:
                await run_in_threadpool(clients.close)

    shared_lock = asyncio.Lock()

    async def shared_clients() -> Clients:
        """--no-auth: the console's own clients, made at the first page (the admin client connects
        as it starts: until the cluster answers, each page says why it cannot be shown)."""
        async with shared_lock:
            if "clients" not in shared:
                shared["clients"] = await run_in_threadpool(Clients, base_client)
            return shared["clients"]

    def peer(request: Request) -> str:
        return f"{request.client.host}:{request.client.port}" if request.client else "?"

    async def current(request: Request) -> Session | None:
        session, expired = store.get(request.cookies.get(SESSION_COOKIE))
        for clients in expired:
            await run_in_threadpool(clients.close)
        return session

    def with_cookie(response: Response, session: Session) -> Response:
        response.set_cookie(SESSION_COOKIE, session.id, httponly=True, samesite="strict", secure=settings.tls,
                            path="/")
        return response

    def forbidden(request: Request, why: str) -> Response:
        log.info("console: refused %s %s from %s: %s", request.method, request.url.path, peer(request), why)
        return PlainTextResponse(f"403 Forbidden: {why}\n", status_code=403)

    async def page_session(request: Request) -> tuple[Session | None, bool]:
        """The session a page is served to (new: its cookie must be set); None: log in first."""
        session = await current(request)
        if session is not None and session.logged_in:
            return session, False
        if settings.auth:
            return None, False
        identity = settings.client_settings.get("sasl.username")
        principal = f"User:{identity}" if identity else "User:ANONYMOUS"
        return store.login(f"{principal} (the console's own, --no-auth)", await shared_clients(),
                           owns_clients=False), True

    def context(request: Request, session: Session | None, **more: Any) -> dict[str, Any]:
        return {"pages": PAGES, "path": request.url.path, "settings": settings, "session": session,
                "read_only": settings.read_only, "message": session.take_message() if session else None,
                "error": None, **more}

    def page(template: str, gather: Callable[[Session, Mapping[str, str]], Mapping[str, Any]]
             ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                session, new = await page_session(request)
            except (KafkaError, OSError) as e:  # --no-auth, the cluster not answering yet
                return templates.TemplateResponse(request, template, context(
                    request, None, error=f"{type(e).__name__}: {e}"), status_code=503)
            if session is None:
                return RedirectResponse("/login", 303)
            values = context(request, session)
            try:
                values.update(await run_in_threadpool(gather, session, request.query_params))
            except (ToolError, KafkaError, OSError) as e:
                values["error"] = f"{type(e).__name__}: {e}"
            response = templates.TemplateResponse(request, template, values)
            return with_cookie(response, session) if new else response
        return endpoint

    def admin_of(session: Session) -> Cluster:
        assert session.clients is not None
        return Cluster(session.clients.admin)

    def transactions(session: Session, _: Mapping[str, str]) -> Mapping[str, Any]:
        cluster = admin_of(session)
        txns = views.transactions(cluster)
        return {"transactions": txns, "open": views.open_transactions(cluster, txns)}

    def records(session: Session, query: Mapping[str, str]) -> Mapping[str, Any]:
        assert session.clients is not None
        cluster = admin_of(session)
        topics = views.topics(cluster)
        topic = query.get("topic") or (topics[0] if topics else "")
        try:
            partition, offset = int(query.get("partition", 0)), int(query.get("offset", 0))
        except ValueError:
            partition, offset = 0, 0
        isolation = query.get("isolation", "read_uncommitted")
        isolation = isolation if isolation in ("read_committed", "read_uncommitted") else "read_uncommitted"
        fmt = query.get("format", "text")
        fmt = fmt if fmt in views.FORMATS else "text"
        rows, bounds = (views.records(cluster, session.clients, topic, partition, offset, isolation, fmt)
                        if topic else ([], (0, 0, 0)))
        return {"topics": topics, "topic": topic, "partition": partition, "offset": offset, "isolation": isolation,
                "format": fmt, "formats": views.FORMATS, "records": rows, "bounds": bounds,
                "page_size": views.RECORDS_PAGE}

    def spark(session: Session, _: Mapping[str, str]) -> Mapping[str, Any]:
        assert session.clients is not None
        rows, bad = views.spark_decisions(admin_of(session), session.clients)
        return {"decisions": rows, "bad": bad, "topic": views.SPARK_DECISIONS_TOPIC}

    def groups(session: Session, _: Mapping[str, str]) -> Mapping[str, Any]:
        rows = views.groups(admin_of(session))
        for g in rows:
            session.lag.sample(g.group_id, g.lag, g.lag_stable)
        return {"groups": rows, "charts": {g.group_id: session.lag.chart(g.group_id) for g in rows},
                "share_groups": views.share_groups(admin_of(session))}

    async def guarded_form(request: Request) -> tuple[Session, dict[str, str]] | Response:
        """The session and form of a state-changing request, or the 403 it gets."""
        if request.method != "POST":
            return forbidden(request, "not a POST")
        session = await current(request)
        if session is None:
            return forbidden(request, "no session")
        if not same_origin(request):
            return forbidden(request, "not from this console's pages (Origin/Referer)")
        form = await read_form(request)
        if form is None or not token_matches(session.csrf, form.get("csrf_token")):
            return forbidden(request, "missing or wrong CSRF token")
        return session, form

    def action_endpoint(path: str, action: Action) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if settings.read_only:
                return forbidden(request, "the console is read-only (--read-only)")
            guarded = await guarded_form(request)
            if isinstance(guarded, Response):
                return guarded
            session, form = guarded
            if not session.logged_in:
                return forbidden(request, "not logged in")
            assert session.clients is not None
            token = form.get("confirm")
            if token is not None:  # the second POST: do what was stored, nothing else
                pending = session.pending.pop(token, None)
                if pending is None or pending.action != path:
                    session.message = "not done: that confirmation was already used or has expired"
                    return RedirectResponse(action.back, 303)
                try:
                    message = await run_in_threadpool(action.run, session.clients, pending.values)
                    log.warning("console: %s: %s", session.principal, message)
                except (ToolError, KafkaError, OSError) as e:
                    message = f"failed: {type(e).__name__}: {e}"
                    log.warning("console: %s: %s (%s)", session.principal, message, pending.summary)
                session.message = message
                return RedirectResponse(action.back, 303)
            values = {k: form.get(k, "").strip() for k in action.fields}
            try:
                summary = action.summary(values)
            except (KeyError, ValueError):
                session.message = f"not done: {', '.join(action.fields)} must be given as numbers where numbers"
                return RedirectResponse(action.back, 303)
            confirm = session.ask(PendingAction(path, values, summary))
            return templates.TemplateResponse(request, "confirm.html", context(
                request, session, summary=summary, action=path, confirm=confirm, back=action.back))
        return endpoint

    async def login_page(request: Request) -> Response:
        if not settings.auth:
            return RedirectResponse("/", 303)
        session = await current(request)
        if session is not None and session.logged_in:
            return RedirectResponse("/", 303)
        new = session is None
        if session is None:
            session = store.visitor()
        response = templates.TemplateResponse(request, "login.html", context(
            request, session, mechanisms=MECHANISMS, mechanism=default_mechanism(settings.client_settings),
            user="", failure=None))
        return with_cookie(response, session) if new else response

    async def login(request: Request) -> Response:
        if not settings.auth:
            return forbidden(request, "--no-auth: nobody logs in")
        guarded = await guarded_form(request)
        if isinstance(guarded, Response):
            return guarded
        visitor, form = guarded
        user, mechanism = form.get("user", "").strip(), form.get("mechanism", "")
        try:
            clients = await run_in_threadpool(log_in, base_client, user, form.get("password", ""), mechanism)
        except LoginFailed as e:
            await asyncio.sleep(settings.failed_login_delay_s)  # slows guessing, as the broker does
            log.warning("console: failed login of user %r with %s from %s: %s", user, mechanism, peer(request), e)
            return templates.TemplateResponse(request, "login.html", context(
                request, visitor, mechanisms=MECHANISMS, mechanism=mechanism, user=user, failure=str(e)),
                status_code=401)
        store.end(visitor)
        session = store.login(f"User:{user}", clients)
        log.info("console: User:%s logged in with %s from %s", user, mechanism, peer(request))
        return with_cookie(RedirectResponse("/", 303), session)

    async def logout(request: Request) -> Response:
        guarded = await guarded_form(request)
        if isinstance(guarded, Response):
            return guarded
        session, _ = guarded
        clients = store.end(session)
        if clients is not None:
            await run_in_threadpool(clients.close)
        log.info("console: %s logged out from %s", session.principal, peer(request))
        response = RedirectResponse("/login" if settings.auth else "/", 303)
        response.delete_cookie(SESSION_COOKIE, path="/", secure=settings.tls, httponly=True, samesite="strict")
        return response

    routes = [
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["GET", "POST"]),
        Route("/", page("cluster.html", lambda s, _: {"cluster": views.cluster_info(admin_of(s),
                                                                                     settings.metrics_url)})),
        Route("/transactions", page("transactions.html", transactions)),
        Route("/partitions", page("partitions.html",
                                  lambda s, _: {"partitions": views.partitions(admin_of(s), settings.metrics_url)})),
        Route("/records", page("records.html", records)),
        Route("/groups", page("groups.html", groups)),
        Route("/spark", page("spark.html", spark)),
        Route("/producers", page("producers.html", lambda s, _: {"producers": views.producers(admin_of(s))})),
        *(Route(path, action_endpoint(path, action), methods=["GET", "POST"]) for path, action in ACTIONS.items()),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=list(settings.allowed_hosts)),
                  Middleware(SecurityHeaders)]
    return Starlette(routes=routes, lifespan=lifespan, middleware=middleware)
