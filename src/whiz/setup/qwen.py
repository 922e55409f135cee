"""Qwen Code: `~/.qwen/settings.json` with whiz as an OpenAI-compatible model provider (its real
context window), chosen as the model, and the key in the settings' `env`."""

from __future__ import annotations

import shlex

from whiz.setup.base import MODEL_NAME, TRIM_PROMPT, Change, Plan, Server, Where
from whiz.setup.formats import dump_json, load_json, merge

KEY_VARIABLE = "WHIZ_API_KEY"
TRIMMED_TOOLS = ("notebook_edit", "run_shell_command", "get_goal", "update_goal")
"""The tools docs/clients.md leaves out of a trimmed run."""


class QwenCode:
    name = "qwen"

    def plan(self, server: Server, where: Where) -> Plan:
        path = where.home / ".qwen" / "settings.json"
        settings, comments = load_json(path)
        entry = {
            "id": MODEL_NAME,
            "name": "whiz (local)",
            "baseUrl": server.v1,
            "envKey": KEY_VARIABLE,
            "generationConfig": {"contextWindowSize": server.context_window},
        }
        providers = settings.get("modelProviders")
        providers = providers if isinstance(providers, dict) else {}
        others = [
            m
            for m in providers.get("openai") or []
            if not (isinstance(m, dict) and m.get("id") == MODEL_NAME)
        ]
        providers["openai"] = [*others, entry]
        merge(
            settings,
            {
                "modelProviders": providers,
                "model": {"name": MODEL_NAME},
                "security": {"auth": {"selectedType": "openai"}},
                "env": {KEY_VARIABLE: server.key},
            },
        )
        shown = [
            "modelProviders.openai[whiz]",
            "model.name",
            "security.auth.selectedType",
            f"env.{KEY_VARIABLE}",
        ]
        change = Change(path, dump_json(settings), shown, path.exists(), comments, bool(server.api_key))
        trim = f"qwen --bare --system-prompt {shlex.quote(TRIM_PROMPT)} --exclude-tools "
        trim += " ".join(TRIMMED_TOOLS)
        notes = [f"its first request is about 42 KB; to trim it for a CPU (docs/clients.md): {trim}"]
        return Plan(self.name, [change], "qwen", notes)
