"""The web app's routes: the page at `/`, its static files, and `/whiz/info`, what the page needs to know.

The page and its files need no key (they hold no data; the page asks for a key when `/whiz/info`
says one is needed). The page's own security headers keep it out of other sites' frames, so no
site can trick a user into clicking Accept on an edit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from whiz import __version__
from whiz.web import STATIC_DIR

if TYPE_CHECKING:
    from whiz.server.state import ServerState

# 'self' covers the page's own ws:// URL in current browsers; styles may be inline (diff2html).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class AppFiles(StaticFiles):
    """The app's static files, revalidated on each load so an upgraded server serves its new app."""

    def file_response(self, *args, **kwargs) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(PAGE_HEADERS)
        return response


def web_routes(state: ServerState) -> list[BaseRoute]:
    """`/` (the app), `/static/*` (its files) and `GET /whiz/info`."""

    async def index(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", headers=PAGE_HEADERS)

    async def info(request: Request) -> Response:
        # Public, so it says only what the page needs before it has a key.
        return JSONResponse(
            {
                "version": __version__,
                "auth_required": bool(state.settings.api_keys),
                "workspace": state.settings.workspace is not None,
            }
        )

    return [
        Route("/", index, methods=["GET"]),
        Route("/whiz/info", info, methods=["GET"]),
        Mount("/static", app=AppFiles(directory=STATIC_DIR), name="static"),
    ]
