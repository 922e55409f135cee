"""The Codex CLI: `$CODEX_HOME/config.toml` (default `~/.codex`) with a `whiz` model provider over the
Responses API (WebSocket mode), and the model catalog file that gives Codex the real context window,
short instructions and `apply_patch` as a free-form tool."""

from __future__ import annotations

import json
from pathlib import Path

from whiz.server.codex import model_catalog
from whiz.setup.base import MODEL_NAME, Change, Plan, Server, Where
from whiz.setup.formats import load_toml


class CodexCli:
    name = "codex"

    def plan(self, server: Server, where: Where) -> Plan:
        home = Path(where.env.get("CODEX_HOME") or where.home / ".codex")
        path, catalog = home / "config.toml", home / "whiz-models.json"
        config = load_toml(path)
        config["model"] = MODEL_NAME
        config["model_provider"] = "whiz"
        config["model_catalog_json"] = str(catalog)
        providers = config.setdefault("model_providers", {})
        provider = {
            "name": "whiz",
            "base_url": server.v1,
            "wire_api": "responses",
            "supports_websockets": True,
            "stream_max_retries": 2,
        }
        if server.api_key:  # Codex reads the key from the environment, never from this file
            provider["env_key"] = "WHIZ_API_KEY"
        providers["whiz"] = provider
        shown = ["model", "model_provider", "model_catalog_json", "[model_providers.whiz]"]
        catalog_text = json.dumps(model_catalog(MODEL_NAME, server.context_window), indent=2) + "\n"
        changes = [
            Change(path, config.as_string(), shown, path.exists()),
            Change(catalog, catalog_text, [f"context_window {server.context_window}"], catalog.exists()),
        ]
        notes = ["export WHIZ_API_KEY=... before running codex"] if server.api_key else []
        return Plan(self.name, changes, "codex", notes)
