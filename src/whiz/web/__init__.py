"""whiz web: the browser app that `whiz serve` serves at `/` (static files, plain ES modules).

The files under `static/` are the whole app; `vendor/` holds the third-party libraries it uses,
copied as released (see `static/vendor/README.md`). Nothing is built at install time.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from whiz.server.state import ServerState

STATIC_DIR = Path(__file__).parent / "static"
"""Where the app's files live in the installed package."""


def browser_app(state: ServerState) -> list[BaseRoute]:
    """The browser app's routes over a server's state, for `create_app(..., routes=[browser_app])`:
    the page and its files, and, with `--workspace`, the workspace, edit and heal routes."""
    from whiz.models.store import default_home
    from whiz.web.heal import build_heal, heal_routes
    from whiz.web.pages import web_routes
    from whiz.web.workspace import build_workspace, default_undo_dir, workspace_routes

    routes = web_routes(state)
    root = state.settings.workspace
    if root is not None:
        workspace = build_workspace(state, root, default_undo_dir(default_home(), root))
        heal = build_heal(state, workspace)
        routes += workspace_routes(state, workspace) + heal_routes(state, heal)
        state.closers.append(heal.close)
    return routes
