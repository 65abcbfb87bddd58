"""What keeps the fleet page closed: an optional bearer token and the security headers.

With `LOOPWATCH_DASHBOARD_TOKEN` set, every request needs it, as `Authorization: Bearer
<token>` (scripts, Prometheus-style scrapers) or as the page's session cookie. A browser
gets the cookie by opening `/?token=<token>` once: the server checks it, sets the cookie
(HttpOnly, SameSite=Strict, path /) and redirects to `/`, so the token leaves the address
bar and the history; the page's own requests (its snapshot and its event stream, which
cannot send headers) then carry the cookie. The cookie holds an HMAC of the token, never
the token. Anything else gets 401.

Every response carries a Content-Security-Policy that allows only the page's own scripts,
styles and connections, no framing (`frame-ancestors 'none'`), no MIME sniffing and no
referrer.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

COOKIE = "loopwatch_dashboard"
TOKEN_PARAMETER = "token"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
UNAUTHORIZED_TEXT = (
    "401: this fleet page needs its token. Open /?token=<LOOPWATCH_DASHBOARD_TOKEN> once "
    "in the browser, or send 'Authorization: Bearer <token>'.\n"
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def session_value(token: str) -> str:
    """The cookie's value: derived from the token, useless to learn the token from."""
    return hmac.new(token.encode(), b"loopwatch dashboard session", hashlib.sha256).hexdigest()


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: every response, the event stream and errors included."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)


def token_middleware(token: str) -> Middleware:
    """An aiohttp middleware that lets through only requests that hold `token`."""
    session = session_value(token)

    def holds(given: str | None, expected: str) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), expected.encode())

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        offered = request.query.get(TOKEN_PARAMETER)
        if offered is not None:
            if not holds(offered, token):
                return _unauthorized()
            # the token leaves the address bar: the cookie stands for it from now on
            redirect = web.Response(status=303, headers={"Location": request.rel_url.path})
            redirect.set_cookie(COOKIE, session, httponly=True, samesite="Strict", path="/")
            return redirect
        scheme, _, bearer = request.headers.get("Authorization", "").partition(" ")
        if (scheme.lower() == "bearer" and holds(bearer.strip(), token)) or holds(
            request.cookies.get(COOKIE), session
        ):
            return await handler(request)
        return _unauthorized()

    return guard


def _unauthorized() -> web.Response:
    return web.Response(
        status=401,
        text=UNAUTHORIZED_TEXT,
        headers={"WWW-Authenticate": 'Bearer realm="loopwatch dashboard"'},
    )
