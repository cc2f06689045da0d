"""What every request to the console must pass before anything changes: no cross-site action.

A state-changing request is a POST carrying the session's CSRF token in its form, from a page
of this console: its ``Origin`` (or, when a browser sends none, its ``Referer``) must be this
console's own origin. Anything else — a GET, a foreign or missing origin, no token, another
session's token — gets 403 and changes nothing. The session cookie is HttpOnly and
SameSite=Strict (Secure over TLS), so another site's form does not even carry it.

Every answer gets headers that keep pages from being framed, sniffed or cached and allow no
script but the console's own (``SECURITY_HEADERS``): even an escaping mistake could not run
a script that came from the cluster.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_FORM_BYTES = 64 * 1024
SESSION_COOKIE = "eoslog_console_session"

SECURITY_HEADERS: Mapping[str, str] = {
    "content-security-policy": ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


class SecurityHeaders:
    """ASGI middleware adding ``SECURITY_HEADERS`` to every HTTP answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in present]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def own_origin(request: Request) -> str:
    """This console's origin as the browser addressed it (the Host header is checked against the
    allowed hosts before: TrustedHostMiddleware)."""
    return f"{request.url.scheme}://{request.headers.get('host', '')}".lower()


def same_origin(request: Request) -> bool:
    """The request came from a page of this console: ``Origin``, else ``Referer``, names it.
    Neither (a browser always sends one of them on a form POST here): refused."""
    origin = request.headers.get("origin")
    if origin is not None:
        return origin.lower() == own_origin(request)
    referer = request.headers.get("referer")
    if referer:
        parts = urlsplit(referer)
        return f"{parts.scheme}://{parts.netloc}".lower() == own_origin(request)
    return False


async def read_form(request: Request) -> dict[str, str] | None:
    """The url-encoded form of a POST (first value of each field); None when it is too large or
    not a form."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        return None
    return {k: v[0] for k, v in fields.items()}


def token_matches(expected: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())
