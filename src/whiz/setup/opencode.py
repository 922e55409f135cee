"""OpenCode: `$XDG_CONFIG_HOME/opencode/opencode.json` with a `whiz` provider (its OpenAI-compatible
package), the model's real window, whiz as the default model, and a trimmed `whiz-ask` agent (a
one-line prompt and no tools) for questions on a CPU."""

from __future__ import annotations

from whiz.setup.base import MAX_OUTPUT_TOKENS, MODEL_NAME, TRIM_PROMPT, Change, Plan, Server, Where
from whiz.setup.formats import dump_json, load_json, merge


class OpenCode:
    name = "opencode"

    def plan(self, server: Server, where: Where) -> Plan:
        path = where.config_home() / "opencode" / "opencode.json"
        config, comments = load_json(path)
        config.setdefault("$schema", "https://opencode.ai/config.json")
        limit = {"context": server.context_window, "output": MAX_OUTPUT_TOKENS}
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "whiz",
            "options": {"baseURL": server.v1, "apiKey": server.key},
            "models": {MODEL_NAME: {"name": MODEL_NAME, "limit": limit}},
        }
        ask = {"mode": "primary", "model": f"whiz/{MODEL_NAME}", "prompt": TRIM_PROMPT, "tools": {"*": False}}
        merge(
            config,
            {"provider": {"whiz": provider}, "model": f"whiz/{MODEL_NAME}", "agent": {"whiz-ask": ask}},
        )
        shown = ["provider.whiz", "model", "agent.whiz-ask"]
        change = Change(path, dump_json(config), shown, path.exists(), comments, bool(server.api_key))
        notes = ["for a quick question without OpenCode's long prompt: opencode run --agent whiz-ask '...'"]
        return Plan(self.name, [change], f"opencode --model whiz/{MODEL_NAME}", notes)
