"""`GET /whiz/codex/models.json`: the model's metadata as the Codex CLI reads it.

The Codex CLI knows the models it was built with; for any other it warns ("Model metadata for
`whiz` not found") and falls back to defaults made for hosted models: a ~6k-token system prompt, a
272k-token window, and no `apply_patch` tool. Its `model_catalog_json` setting names a file of
metadata instead. This route serves that file for the model this server runs: its real context
window, `apply_patch` as a free-form tool (whiz shows it to the model and returns its calls as
`custom_tool_call` items), one tool call at a time, and short instructions a small model follows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

if TYPE_CHECKING:
    from whiz.server.state import ServerState

INSTRUCTIONS = """\
You are a coding agent in the Codex CLI, working in the user's repository. Make the smallest change
that does the task; keep every other line as it is.

To see a file or run a command, call exec_command with {"cmd": "..."}, e.g. {"cmd": "cat app.py"}.
To change files, call apply_patch with a patch as its input:
*** Begin Patch
*** Update File: path/to/file.py
@@ def the_function_it_is_in():
-a line to remove, copied exactly
+the line that replaces it
*** End Patch
Use `*** Add File: path` (every line starting with +) to create a file, `*** Delete File: path` to
remove one. When the change is made, say in one short sentence what you did."""


def model_catalog(model: str, context_window: int | None) -> dict:
    """The `model_catalog_json` file for `model`, in the Codex CLI's model-info shape."""
    entry = {
        "slug": model,
        "display_name": model,
        "description": "A local model served by whiz.",
        "default_reasoning_level": None,
        "supported_reasoning_levels": [],
        "shell_type": "shell_command",
        "visibility": "list",
        "minimal_client_version": "0.0.1",
        "supported_in_api": True,
        "upgrade": None,
        "priority": 0,
        "base_instructions": INSTRUCTIONS,
        "model_messages": None,
        "supports_reasoning_summaries": False,
        "support_verbosity": False,
        "default_verbosity": None,
        "apply_patch_tool_type": "freeform",
        "input_modalities": ["text"],
        # Tool output the CLI keeps per call: a small window fills fast.
        "truncation_policy": {"mode": "tokens", "limit": 2000},
        "supports_parallel_tool_calls": False,
        "context_window": context_window or 32768,
        "reasoning_summary_format": "none",
        "experimental_supported_tools": [],
    }
    return {"models": [entry]}


def codex_routes(state: ServerState) -> list[BaseRoute]:
    async def catalog(request: Request) -> Response:
        # Public: it says only what the model is. The slug is the `model` of the CLI's config
        # ("whiz" in docs/clients.md), or ?model= names another.
        model = request.query_params.get("model") or "whiz"
        return JSONResponse(model_catalog(model, state.backend.info.n_ctx))

    return [Route("/whiz/codex/models.json", catalog, methods=["GET"])]
