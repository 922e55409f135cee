"""Zed: `$XDG_CONFIG_HOME/zed/settings.json` with whiz's own agent as an external agent (`whiz acp`,
the Agent Client Protocol), whiz as an OpenAI-compatible model for Zed's own features (its real
window), and edit predictions from whiz's completion endpoint (`/v1/completions`)."""

from __future__ import annotations

import shutil
import sys

from whiz.setup.base import MODEL_NAME, Change, Plan, Server, Where
from whiz.setup.formats import dump_json, load_json, merge

PREDICTION_TOKENS = 64
"""A completion as you type is a few dozen tokens."""


def whiz_command(server: Server) -> tuple[str, list[str]]:
    """How Zed starts `whiz acp`: by absolute path (an editor started from a dock has no shell PATH)."""
    found = shutil.which("whiz")
    command, args = (found, ["acp"]) if found else (sys.executable, ["-m", "whiz", "acp"])
    if server.explicit:
        args += ["--base-url", server.root]
    return command, args


class Zed:
    name = "zed"

    def plan(self, server: Server, where: Where) -> Plan:
        path = where.config_home() / "zed" / "settings.json"
        settings, comments = load_json(path)
        command, args = whiz_command(server)
        agent = {"type": "custom", "command": command, "args": args, "env": {}}
        if server.api_key:
            agent["env"] = {"WHIZ_API_KEY": server.api_key}
        capabilities = {
            "tools": True,
            "images": False,
            "parallel_tool_calls": False,
            "prompt_cache_key": False,
        }
        model = {
            "name": MODEL_NAME,
            "display_name": "whiz (local)",
            "max_tokens": server.context_window,
            "capabilities": capabilities,
        }
        predictions = {
            "api_url": server.v1 + "/completions",
            "model": MODEL_NAME,
            "prompt_format": "qwen",
            "max_output_tokens": PREDICTION_TOKENS,
        }
        current = settings.get("edit_predictions")
        provider_set = isinstance(current, dict) and current.get("provider")
        wanted = {"open_ai_compatible_api": predictions}
        if not provider_set:
            wanted["provider"] = "open_ai_compatible_api"
        merge(
            settings,
            {
                "agent_servers": {"whiz": agent},
                "language_models": {
                    "openai_compatible": {"whiz": {"api_url": server.v1, "available_models": [model]}}
                },
                "edit_predictions": wanted,
            },
        )
        shown = [
            "agent_servers.whiz",
            "language_models.openai_compatible.whiz",
            "edit_predictions.open_ai_compatible_api",
        ]
        notes = ["open the agent panel and pick whiz to run whiz's own agent (`whiz acp`) in Zed"]
        if provider_set:
            notes.append(
                f'edit predictions stay with "{current["provider"]}"; set "edit_predictions": '
                '{"provider": "open_ai_compatible_api"} to take them from whiz'
            )
        else:
            shown.append("edit_predictions.provider")
        if server.api_key:
            notes.append("Zed reads the model's key from WHIZ_API_KEY (or its provider settings)")
        change = Change(path, dump_json(settings), shown, path.exists(), comments, bool(server.api_key))
        return Plan(self.name, [change], "zed", notes)
