"""What the served dashboard guarantees whoever reaches it (docs/security.md).

Every response carries a Content-Security-Policy (scripts only from the app itself, plus the
hashes of Dash's own inline scripts), refuses framing, sniffing and referrers. Dash's
development routes answer 404; so does any request for a component file that is not one of the
registered packages' files (no traceback in the log). With ``dashboard.auth`` set, every request
but the health probe needs HTTP basic credentials or a user header from a trusted proxy.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from ipaddress import ip_address

from dash import Dash
from dash.exceptions import DependencyException
from flask import Response, request
from werkzeug.exceptions import NotFound

from gpuwatch.config import DashboardSettings

HEALTH_ENDPOINT = "healthz"
HEALTH_PATH = f"/{HEALTH_ENDPOINT}"
#: Routes Dash registers for its development tools (hot reload); never served.
DEV_ROUTES = frozenset({"/_reload-hash"})
#: Dash's catch-all route (pages are client-side): not for ``/_…`` paths, which are Dash's own.
CATCHALL_ROUTE = "/<path:path>"
REALM = "gpuwatch"

STATIC_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def content_security_policy(script_hashes: Sequence[str]) -> str:
    """The policy: everything from the app's own origin, inline scripts only by hash.

    Styles allow ``'unsafe-inline'``: Plotly and Dash's components set styles at run time.
    """
    directives = {
        "default-src": ["'self'"],
        "script-src": ["'self'", *script_hashes],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:", "blob:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "worker-src": ["'self'", "blob:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
    return "; ".join(f"{name} {' '.join(values)}" for name, values in directives.items())


def _plain(status: int, text: str, headers: dict[str, str] | None = None) -> Response:
    return Response(f"{text}\n", status=status, mimetype="text/plain", headers=headers)


def _basic_ok(settings: DashboardSettings) -> bool:
    given = request.authorization
    if given is None or given.type != "basic":
        return False
    user = (settings.username or "").encode()
    password = settings.password.get_secret_value().encode() if settings.password else b""
    user_ok = hmac.compare_digest((given.username or "").encode(), user)
    password_ok = hmac.compare_digest((given.password or "").encode(), password)
    return user_ok & password_ok


def _from_trusted_proxy(settings: DashboardSettings) -> bool:
    try:
        peer = ip_address(request.remote_addr or "")
    except ValueError:
        return False
    return any(peer in network for network in settings.trusted_proxies)


def refusal(settings: DashboardSettings) -> Response | None:
    """Why the current request may not proceed (a 401 or 403 response), or None."""
    if settings.auth == "basic" and not _basic_ok(settings):
        challenge = f'Basic realm="{REALM}", charset="UTF-8"'
        return _plain(401, "authentication required", {"WWW-Authenticate": challenge})
    if settings.auth == "proxy":
        if not _from_trusted_proxy(settings):
            return _plain(403, "forbidden: not from a trusted proxy")
        if not request.headers.get(settings.proxy_user_header, "").strip():
            return _plain(403, "forbidden: no authenticated user")
    return None


def _gate(settings: DashboardSettings) -> Callable[[], Response | None]:
    def gate() -> Response | None:
        rule = request.url_rule.rule if request.url_rule else None
        if rule in DEV_ROUTES or (rule == CATCHALL_ROUTE and request.path.startswith("/_")):
            raise NotFound()
        if request.path == HEALTH_PATH:
            return None
        return refusal(settings)

    return gate


def _headers(app: Dash) -> Callable[[Response], Response]:
    def add(response: Response) -> Response:
        response.headers.update(STATIC_HEADERS)
        response.headers["Content-Security-Policy"] = content_security_policy(app.csp_hashes())
        return response

    return add


def _not_found(_error: Exception) -> Response:
    return _plain(404, "not found")


def harden(app: Dash, settings: DashboardSettings) -> None:
    """Install the headers, the route filter and the authentication on ``app``'s server."""
    server = app.server
    server.debug = False
    server.register_error_handler(DependencyException, _not_found)
    server.register_error_handler(NotFound, _not_found)
    server.before_request(_gate(settings))
    server.after_request(_headers(app))
