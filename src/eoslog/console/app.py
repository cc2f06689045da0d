"""The console's web application: Starlette, Jinja templates rendered on the server, one
admin client shared by every request.

Page handlers are plain functions (Starlette runs them in its thread pool), because the
admin client is the blocking one: the same calls ``eoslog transactions`` makes. Pages
refresh themselves in place (``static/refresh.js``: fetch the page, swap its ``<main>``),
so a table follows the broker without a reload and without losing the scroll position.

Actions are POSTs the page asks to confirm, logged by the console: aborting a hanging
transaction — done only if it is still found hanging (never an open transaction a
coordinator owns), as ``eoslog transactions abort`` would; deleting a partition's records
before an offset (DeleteRecords); resetting a group's committed offset (OffsetCommit for a
group without members, which the broker refuses otherwise).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import pygal
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from eoslog.cli.common import CommandError
from eoslog.cli.transactions import Cluster, write_abort_marker
from eoslog.client import Admin, TopicPartition
from eoslog.client.errors import KafkaError
from eoslog.console import views

log = logging.getLogger("eoslog.console")

HERE = Path(__file__).parent
PAGES = (("/", "Cluster"), ("/transactions", "Transactions"), ("/partitions", "Partitions"),
         ("/records", "Records"), ("/groups", "Groups"), ("/producers", "Producers"), ("/spark", "Spark"))


class LagHistory:
    """Each group's total lag (against the high watermark and the LSO) as the groups page saw
    it, the last ``MAX_POINTS`` times, drawn as a small line chart (pygal, inline SVG)."""

    MAX_POINTS = 120

    def __init__(self) -> None:
        self._points: dict[str, deque[tuple[float, int, int]]] = {}

    def sample(self, groups: list[views.GroupRow]) -> None:
        now = time.time()
        for g in groups:
            self._points.setdefault(g.group_id, deque(maxlen=self.MAX_POINTS)).append((now, g.lag, g.lag_stable))

    def chart(self, group_id: str) -> str:
        points = list(self._points.get(group_id, ()))
        chart = pygal.Line(width=520, height=170, js=[], disable_xml_declaration=True, legend_at_bottom=True,
                           show_x_labels=False, include_x_axis=True, title="lag over time")
        chart.add("lag", [lag for _, lag, _ in points])
        chart.add("lag (read_committed)", [stable for _, _, stable in points])
        return str(chart.render(is_unicode=True))


@dataclass(frozen=True)
class ConsoleSettings:
    bootstrap_server: str
    metrics_url: str | None = None
    refresh_s: float = 5.0  # 0: no refresh in place
    # Client settings for the admin client and the records page's consumers (--command-config,
    # as Kafka's tools take them: security settings, timeouts).
    client_settings: Mapping[str, str] = field(default_factory=dict)


def create_app(settings: ConsoleSettings) -> Starlette:
    templates = Jinja2Templates(directory=HERE / "templates")
    holder: dict[str, Admin] = {}
    lag_history = LagHistory()

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        holder["admin"] = Admin({"bootstrap.servers": settings.bootstrap_server, "client.id": "eoslog-console",
                                 **settings.client_settings})
        try:
            yield
        finally:
            holder.pop("admin").close()

    def page(template: str, gather: Callable[[Cluster, Mapping[str, str]], Mapping[str, Any]]
             ) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            context: dict[str, Any] = {"pages": PAGES, "path": request.url.path, "settings": settings,
                                       "message": request.query_params.get("message"), "error": None}
            try:
                context.update(gather(Cluster(holder["admin"]), request.query_params))
            except (CommandError, KafkaError, OSError) as e:
                context["error"] = f"{type(e).__name__}: {e}"
            return templates.TemplateResponse(request, template, context)
        return endpoint

    def transactions(cluster: Cluster, _: Mapping[str, str]) -> Mapping[str, Any]:
        txns = views.transactions(cluster)
        return {"transactions": txns, "open": views.open_transactions(cluster, txns)}

    def records(cluster: Cluster, query: Mapping[str, str]) -> Mapping[str, Any]:
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
        rows, bounds = (views.records(cluster, {"bootstrap.servers": settings.bootstrap_server,
                                                **settings.client_settings},
                                      topic, partition, offset, isolation, fmt)
                        if topic else ([], (0, 0, 0)))
        return {"topics": topics, "topic": topic, "partition": partition, "offset": offset, "isolation": isolation,
                "format": fmt, "formats": views.FORMATS, "records": rows, "bounds": bounds,
                "page_size": views.RECORDS_PAGE}

    def abort(request: Request) -> Response:
        form = request.query_params  # the form posts its fields in the URL: no form parser needed
        try:
            topic, partition, producer_id = form["topic"], int(form["partition"]), int(form["producer_id"])
        except (KeyError, ValueError):
            return RedirectResponse("/transactions?message=" + quote("abort: incomplete request"), 303)
        cluster = Cluster(holder["admin"])
        try:
            found = [r for r in views.open_transactions(cluster, views.transactions(cluster))
                     if (r.topic, r.partition, r.producer_id) == (topic, partition, producer_id)]
            if not found or not found[0].hanging:
                message = (f"not aborted: producer {producer_id} has no hanging transaction in "
                           f"{topic}-{partition} any more")
            else:
                r = found[0]
                write_abort_marker(cluster, topic, partition, r.producer_id, r.producer_epoch, r.coordinator_epoch)
                message = (f"aborted the hanging transaction of producer {r.producer_id} (epoch {r.producer_epoch}) "
                           f"in {topic}-{partition} from offset {r.start_offset}")
                log.warning("console: %s", message)
        except (CommandError, KafkaError, OSError) as e:
            message = f"abort failed: {e}"
        return RedirectResponse("/transactions?message=" + quote(message), 303)

    def spark(cluster: Cluster, _: Mapping[str, str]) -> Mapping[str, Any]:
        rows, bad = views.spark_decisions(cluster, {"bootstrap.servers": settings.bootstrap_server,
                                                    **settings.client_settings})
        return {"decisions": rows, "bad": bad, "topic": views.SPARK_DECISIONS_TOPIC}

    def groups(cluster: Cluster) -> Mapping[str, Any]:
        rows = views.groups(cluster)
        lag_history.sample(rows)
        return {"groups": rows, "charts": {g.group_id: lag_history.chart(g.group_id) for g in rows}}

    async def form_action(request: Request, back: str, fields: tuple[str, ...],
                          act: Callable[[Admin, dict[str, str]], str]) -> Response:
        """A confirmed POST of the pages' small forms (url-encoded body): do it, log it, go back."""
        body = parse_qs((await request.body()).decode())
        values = {k: body.get(k, [""])[0].strip() for k in fields}
        try:
            message = await run_in_threadpool(act, holder["admin"], values)
            log.warning("console: %s", message)
        except ValueError:
            message = f"not done: {', '.join(fields)} must be given ({values})"
        except (CommandError, KafkaError, OSError) as e:
            message = f"failed: {e}"
        return RedirectResponse(f"{back}?message=" + quote(message), 303)

    def delete_records(admin: Admin, v: dict[str, str]) -> str:
        tp, offset = TopicPartition(v["topic"], int(v["partition"])), int(v["offset"])
        low = admin.delete_records({tp: offset})[tp].low_watermark
        return f"deleted the records of {tp.topic}-{tp.partition} before offset {offset}: log start now {low}"

    def reset_offsets(admin: Admin, v: dict[str, str]) -> str:
        tp, offset = TopicPartition(v["topic"], int(v["partition"])), int(v["offset"])
        admin.alter_consumer_group_offsets(v["group"], {tp: offset})
        return f"group {v['group']}: committed offset of {tp.topic}-{tp.partition} reset to {offset}"

    async def delete_records_endpoint(request: Request) -> Response:
        return await form_action(request, "/partitions", ("topic", "partition", "offset"), delete_records)

    async def reset_offsets_endpoint(request: Request) -> Response:
        return await form_action(request, "/groups", ("group", "topic", "partition", "offset"), reset_offsets)

    routes = [
        Route("/", page("cluster.html", lambda c, _: {"cluster": views.cluster_info(c, settings.metrics_url)})),
        Route("/transactions", page("transactions.html", transactions)),
        Route("/transactions/abort", abort, methods=["POST"]),
        Route("/partitions", page("partitions.html",
                                  lambda c, _: {"partitions": views.partitions(c, settings.metrics_url)})),
        Route("/partitions/delete-records", delete_records_endpoint, methods=["POST"]),
        Route("/records", page("records.html", records)),
        Route("/groups", page("groups.html", lambda c, _: groups(c))),
        Route("/groups/reset-offsets", reset_offsets_endpoint, methods=["POST"]),
        Route("/spark", page("spark.html", spark)),
        Route("/producers", page("producers.html", lambda c, _: {"producers": views.producers(c)})),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
