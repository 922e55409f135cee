"""What a server reachable from a browser must check, beyond API keys.

Any web page the user opens can make the browser connect to http://127.0.0.1:8321, so:

- A WebSocket (which browsers open across origins freely) and every workspace request must come
  from the server's own page: a browser's `Origin` must name the host the request was sent to.
  Requests without `Origin` come from programs (the openai SDK, the Codex CLI, curl) and pass.
- DNS rebinding makes another site's name resolve to 127.0.0.1, so its pages count as same-origin.
  A server bound to loopback therefore answers browser-facing routes only under loopback names.
- Browsers cannot set headers on a WebSocket, so the page sends its key as a subprotocol:
  `["whiz", "whiz-key.<base64url of the key>"]`; the server selects "whiz".
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from whiz.errors import Forbidden

SUBPROTOCOL = "whiz"
KEY_PREFIX = "whiz-key."
FORBIDDEN_CLOSE_CODE = 4403
"""WebSocket close code for a refused origin or host (4000-4999 are the application's; 403 as in HTTP)."""

_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


def is_loopback(host: str) -> bool:
    """True for loopback addresses and names (`127.0.0.1`, `::1`, `localhost`, `*.localhost`)."""
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _host_port(netloc: str, scheme: str) -> tuple[str, int | None]:
    parts = urlsplit(f"{scheme}://{netloc}")
    try:
        port = parts.port
    except ValueError:
        return netloc.lower(), None
    return (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme)


class BrowserGuard:
    """Origin and Host checks for the routes a browser reaches. `loopback_only` when bound to loopback.

    `hosts`, when given, is an allow-list of Host names (loopback names always pass; "*" passes
    any), checked on every request and not only on loopback binds: DNS rebinding reaches a server
    on a LAN address as well. `origins` are extra origins allowed besides the server's own.
    """

    def __init__(self, loopback_only: bool, hosts: Iterable[str] | None = None, origins: Iterable[str] = ()):
        self.loopback_only = loopback_only
        self.hosts = None if hosts is None else {h.strip("[]").lower() for h in hosts}
        self.origins = {_origin_key(o) for o in origins}

    def host_allowed(self, host: str) -> bool:
        if is_loopback(host):
            return True
        if self.loopback_only:
            return self.hosts is not None and host in self.hosts
        # An address literal cannot be rebound (rebinding needs a name the attacker controls), so a
        # server reachable from the network answers at any of its addresses without a list of them.
        return self.hosts is None or "*" in self.hosts or host in self.hosts or _is_address(host)

    def check(self, headers: Mapping[str, str], scheme: str = "http", *, browsers_only: bool = False) -> None:
        """Raise `Forbidden` unless the request may come from here (see the module's docstring).

        `browsers_only` skips requests without `Origin` entirely: right for WebSockets, which
        browsers always open with one; wrong for HTTP GETs, which same-origin pages send without.
        """
        origin = headers.get("origin")
        if browsers_only and origin is None:
            return
        host_header = headers.get("host", "")
        host, port = _host_port(host_header, "https" if scheme in ("https", "wss") else "http")
        if not self.host_allowed(host):
            where = "a loopback address" if self.loopback_only and self.hosts is None else "its allowed hosts"
            raise Forbidden(
                f"This server answers only at {where}, not at '{host_header}' (see --allowed-hosts).",
                code="host_not_allowed",
            )
        if origin is None:
            return  # not a browser, or a same-origin GET
        parts = urlsplit(origin)
        if parts.scheme not in _DEFAULT_PORTS or not parts.netloc:
            raise Forbidden(f"Origin '{origin}' is not allowed here.", code="origin_not_allowed")
        if _origin_key(origin) in self.origins:
            return
        if _host_port(parts.netloc, parts.scheme) != (host, port):
            raise Forbidden(
                f"Origin '{origin}' is not allowed: only pages served by this server may use it.",
                code="origin_not_allowed",
            )


def _origin_key(origin: str) -> tuple[str, str, int | None]:
    parts = urlsplit(origin.strip().rstrip("/"))
    host, port = _host_port(parts.netloc, parts.scheme or "http")
    return parts.scheme, host, port


def key_from_subprotocols(offered: Iterable[str]) -> str | None:
    """The API key a browser sent as a `whiz-key.<base64url>` subprotocol, if any."""
    for proto in offered:
        if proto.startswith(KEY_PREFIX):
            raw = proto[len(KEY_PREFIX) :]
            try:
                return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode()
            except (binascii.Error, UnicodeDecodeError):
                return raw  # not base64: no configured key matches it, so it is refused as wrong
    return None
