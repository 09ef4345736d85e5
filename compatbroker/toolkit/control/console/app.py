"""The console's routes: each GET renders a page from the control operations with a Jinja2 template; with
`?fragment=1` only the page's live part (what the page's script swaps in every second or two). POST /faults takes
the fault forms (application/x-www-form-urlencoded) and renders the page again, 400 with the reason for a bad form;
a form posted from another site's page never gets here: the control server answers it with `refusal`, a 403 page.
"""
from __future__ import annotations

import importlib.resources
import logging
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote

import jinja2

from .. import ControlError
from ..operations import whole_number
from . import views
from .lag_history import LagHistory

log = logging.getLogger(__name__)

HTML = "text/html; charset=utf-8"
_STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".svg": "image/svg+xml"}
# Our pages load only our own files: no inline script, nothing from elsewhere (a hostile record cannot run code).
# Referrer-Policy same-origin (not no-referrer): with no-referrer Chromium posts our own forms with `Origin: null`.
_HEADERS = {"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
                                       "form-action 'self'; frame-ancestors 'none'",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "Cache-Control": "no-store"}
# JSON routes too: HTML when asked for
_JSON_TWINS = frozenset({"/topics", "/groups", "/requests", "/faults", "/clients"})
_FORM = "application/x-www-form-urlencoded"
_REQUEST_LOG_ROWS = 100  # rendered every second while the page is open: keep it cheap
_MAX_RECORDS = 500


@dataclass
class Page:
    """An answer of the console: status, content type, body and extra headers."""

    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


class Console:
    """The console's pages over `operations` (a `ControlOperations`), with the lag history its charts draw."""

    def __init__(self, operations, lag_history: LagHistory | None = None):
        self._operations = operations
        self.lag_history = lag_history or LagHistory(operations)
        self._env = jinja2.Environment(
            loader=jinja2.PackageLoader(__package__, "templates"), autoescape=True,
            undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self._env.filters.update(bytes=views.human_bytes, time=views.time_text, clock=views.clock_text,
                                 segment=lambda text: quote(str(text), safe=""))
        self._static = {entry.name: entry for entry in importlib.resources.files(__package__).joinpath(
            "static").iterdir() if entry.is_file()}

    @staticmethod
    def handles(method: str, path: str, headers: dict[str, str], json_paths=frozenset()) -> bool:
        """Whether the console answers this request; the JSON routes (at `json_paths`) answer the rest, as
        before. A browser (accepting text/html) gets pages, and the console's 404 page where no route is."""
        if method == "POST":
            return path == "/faults" and headers.get("content-type", "").split(";")[0].strip() == _FORM
        if method != "GET":
            return False
        wants_html = "text/html" in headers.get("accept", "")
        if path in _JSON_TWINS or path in json_paths:
            return wants_html and path in _JSON_TWINS
        return wants_html or path in ("/", "/clients") or path.startswith(("/topics/", "/groups/", "/static/"))

    async def answer(self, method: str, path: str, query: str, raw: bytes) -> Page:
        self.lag_history.ensure_started()  # the lag charts need history from now on
        arguments = dict(parse_qsl(query, keep_blank_values=True))
        fragment = arguments.pop("fragment", "") == "1"
        try:
            if path.startswith("/static/"):
                return self._static_file(path.removeprefix("/static/"))
            if method == "POST":
                return await self._post_faults(dict(parse_qsl(raw.decode("utf-8", "replace"),
                                                              keep_blank_values=True)))
            template, context = await self._page(path, arguments)
        except ControlError as exc:
            return self._render("error.html", {"status": exc.status, "message": exc.message}, fragment, exc.status)
        except Exception as exc:  # noqa: BLE001 - a bug behind a page answers a readable 500, not a dead endpoint
            log.exception("console page %s failed", path)
            return self._render("error.html", {"status": 500, "message": f"{type(exc).__name__}: {exc}"},
                                fragment, 500)
        return self._render(template, context, fragment)

    async def _page(self, path: str, arguments: dict) -> tuple[str, dict]:
        segments = [unquote(part) for part in path.strip("/").split("/")]
        ops = self._operations
        match segments:
            case [""]:
                return "overview.html", {"overview": await ops.overview()}
            case ["topics"]:
                return "topics.html", {"topics": await ops.topic_summaries()}
            case ["topics", name]:
                return "topic.html", {"topic": await ops.topic_details(name)}
            case ["topics", name, "records"]:
                return "records.html", await self._records(name, arguments)
            case ["groups"]:
                return "groups.html", {"groups": await ops.groups()}
            case ["groups", group]:
                return "group.html", await self._group(group)
            case ["requests"]:
                api = arguments.get("api", "").strip()
                return "requests.html", {"entries": await ops.recent_requests(_REQUEST_LOG_ROWS, api or None),
                                         "recording": ops.recording_requests, "api": api,
                                         "api_names": views.API_NAMES, "rows": _REQUEST_LOG_ROWS}
            case ["faults"]:
                return "faults.html", self._faults_context(await ops.faults(), None, None, {})
            case ["clients"]:
                return "clients.html", {"clients": await ops.telemetry_clients()}
        raise ControlError(404, f"no console page at {path}")

    async def _records(self, topic: str, arguments: dict) -> dict:
        details = await self._operations.topic_details(topic, configs=False)
        fmt = arguments.get("format") or "text"
        if fmt not in views.FORMATS:
            raise ControlError(400, f"format must be one of {', '.join(views.FORMATS)}, got {fmt!r}")
        partition = whole_number(arguments.get("partition") or "0", "partition")
        offset = arguments.get("offset") or None
        timestamp = arguments.get("timestamp") or None
        limit = min(whole_number(arguments.get("limit") or "50", "limit", minimum=1), _MAX_RECORDS)
        if offset is not None:
            offset = whole_number(offset, "offset")
        if timestamp is not None:
            try:
                timestamp = views.parse_time(timestamp)
            except ValueError as exc:
                raise ControlError(400, str(exc)) from None
        if partition >= details["partitions"]:
            raise ControlError(404, f"topic {topic} has no partition {partition} "
                                    f"(it has {details['partitions']})")
        page = await self._operations.browse_records(topic, partition, offset, timestamp, limit)
        shown = [{**record, "key": views.show_bytes(record["key"], fmt, say_not_json=False),
                  "value": views.show_bytes(record["value"], fmt),
                  "headers": [(name, views.show_bytes(value, fmt, say_not_json=False))
                              for name, value in record["headers"]]}
                 for record in page["records"]]
        next_offset = shown[-1]["offset"] + 1 if shown else None
        return {"topic": details, "page": page, "records": shown, "format": fmt, "formats": views.FORMATS,
                "partition": partition, "limit": limit, "next_offset": next_offset,
                "asked": {"offset": arguments.get("offset", ""), "timestamp": arguments.get("timestamp", "")}}

    async def _group(self, group: str) -> dict:
        described = await self._operations.describe_group(group)
        lag = await self._operations.group_lag(group)
        history = self.lag_history
        chart = views.lag_chart(history.points(group), history.now_ms(), history.window_ms)
        known = [entry["lag"] for entry in lag if entry["lag"] is not None]
        return {"group": described, "share": described["type"] == "share", "lag": lag,
                "total_lag": sum(known) if known else None, "chart": chart}

    async def _post_faults(self, form: dict) -> Page:
        message, error, status = None, None, 200
        try:
            message = await self._apply_fault_form(form)
        except ControlError as exc:
            error, status = exc.message, exc.status
        context = self._faults_context(await self._operations.faults(), message, error, form)
        return self._render("faults.html", context, False, status)

    @staticmethod
    def _faults_context(faults: dict, message: str | None, error: str | None, form: dict) -> dict:
        """The faults page: rules in force, the outcome of a posted form, and the names the forms suggest."""
        return {"faults": faults, "message": message, "error": error, "form": form,
                "api_names": views.API_NAMES, "error_names": views.ERROR_NAMES}

    async def _apply_fault_form(self, form: dict) -> str:
        ops = self._operations
        action = form.get("action", "")
        api = form.get("api", "").strip() or None
        count = _optional_number(form.get("count", ""), "count", minimum=1)
        if action == "error":
            if api is None:
                raise ControlError(400, "choose the API whose requests get the error")
            rule = await ops.inject_error(api, form.get("error", "").strip(), count, form.get("topic", "").strip()
                                          or None)
            naming = f" naming topic {rule['topic']}" if rule["topic"] else ""
            return f"{_requests(rule['remaining'], rule['api'])}{naming}: answered {rule['error']} instead of served."
        if action == "latency":
            ms = whole_number(form.get("ms", ""), "ms")
            await ops.inject_latency(api, ms, count)
            return f"{_requests(count, api)}: {ms} ms late."
        if action == "drop":
            after = whole_number(form.get("after", "") or "0", "after")
            await ops.drop_connections_after(after, api, count)
            return (f"After {after} more {api or 'any'} requests, the connection of the next one is closed "
                    f"({'until cleared' if count is None else f'{count} time(s)'}).")
        if action == "clear":
            await ops.clear_faults()
            return "Every fault rule is cleared."
        raise ControlError(400, f"unknown action {action!r}: use error, latency, drop or clear")

    def refusal(self, origin: str) -> Page:
        """The 403 page for a form posted from another site's page (the control server checks `Origin` before any
        state-changing request reaches a route): a page the operator happens to visit must not inject faults."""
        message = f"a form posted from {origin} is refused: post it from the console's own pages"
        return self._render("error.html", {"status": 403, "message": message}, False, 403)

    def _static_file(self, name: str) -> Page:
        entry = self._static.get(name)
        suffix = name[name.rfind("."):] if "." in name else ""
        if entry is None or suffix not in _STATIC_TYPES:
            raise ControlError(404, f"no console file {name}")
        return Page(200, _STATIC_TYPES[suffix], entry.read_bytes(), {"Cache-Control": "no-cache",
                                                                     "X-Content-Type-Options": "nosniff"})

    def _render(self, template: str, context: dict, fragment: bool, status: int = 200) -> Page:
        layout = "fragment.html" if fragment else "base.html"
        body = self._env.get_template(template).render(layout=layout, **context).encode("utf-8")
        return Page(status, HTML, body, dict(_HEADERS))


def _optional_number(text: str, what: str, minimum: int = 0) -> int | None:
    return None if not str(text).strip() else whole_number(text, what, minimum)


def _requests(count: int | None, api: str | None) -> str:
    """'The next 2 Produce requests', 'Every request (until cleared)'..."""
    what = f"{api} request" if api else "request of any API"
    if count is None:
        return f"Every {what} (until cleared)"
    return f"The next {what}" if count == 1 else f"The next {count} {what}s"
