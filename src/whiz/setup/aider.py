"""Aider: `~/.aider.conf.yml` (the server, the model, SEARCH/REPLACE edits, no repository map for a
CPU's sake) and `~/.aider.model.metadata.json` (the model's real window, at no cost per token)."""

from __future__ import annotations

import json

from whiz.setup.base import MAX_OUTPUT_TOKENS, MODEL_NAME, Change, Plan, Server, Where
from whiz.setup.formats import dump_yaml, load_json, load_yaml, merge

MODEL = f"openai/{MODEL_NAME}"


class Aider:
    name = "aider"

    def plan(self, server: Server, where: Where) -> Plan:
        path, metadata_path = where.home / ".aider.conf.yml", where.home / ".aider.model.metadata.json"
        config = load_yaml(path)
        options = {
            "model": MODEL,
            "openai-api-base": server.v1,
            "openai-api-key": server.key,
            # Aider does not know the model and would ask for whole files; blocks are verified fast.
            "edit-format": "diff",
            "show-model-warnings": False,
            # Its repository map is prompt a CPU prefills on every change of files (docs/clients.md).
            "map-tokens": 0,
        }
        config.update(options)
        metadata, _ = load_json(metadata_path)
        entry = {
            "max_input_tokens": server.context_window,
            "max_output_tokens": MAX_OUTPUT_TOKENS,
            "max_tokens": MAX_OUTPUT_TOKENS,
            "input_cost_per_token": 0,
            "output_cost_per_token": 0,
            "litellm_provider": "openai",
            "mode": "chat",
        }
        merge(metadata, {MODEL: entry})
        changes = [
            Change(path, dump_yaml(config), list(options), path.exists(), secret=bool(server.api_key)),
            Change(metadata_path, json.dumps(metadata, indent=2) + "\n", [MODEL], metadata_path.exists()),
        ]
        notes = ["--edit-format ask for questions; --map-tokens 1024 gives it a repository map again"]
        return Plan(self.name, changes, "aider", notes)
