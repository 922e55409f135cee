"""The browser app as routes for `create_app(..., routes=[browser_app])`: what `whiz serve` mounts
above the model API (never on an `--engine-only` replica)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from whiz.models.store import default_home
from whiz.web.heal import build_heal, heal_routes
from whiz.web.pages import web_routes
from whiz.web.workspace import build_workspace, default_undo_dir, workspace_routes

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from whiz.server.state import ServerState


def browser_app(state: ServerState) -> list[BaseRoute]:
    """The browser app's routes over a server's state, for `create_app(..., routes=[browser_app])`:
    the page and its files, and, with `--workspace`, the workspace, edit and heal routes."""
    routes = web_routes(state)
    root = state.settings.workspace
    if root is not None:
        workspace = build_workspace(state, root, default_undo_dir(default_home(), root))
        heal = build_heal(state, workspace)
        routes += workspace_routes(state, workspace) + heal_routes(state, heal)
        state.closers.append(heal.close)
    return routes
