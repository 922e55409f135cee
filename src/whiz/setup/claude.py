"""Claude Code: `~/.claude/settings.json` (or `$CLAUDE_CONFIG_DIR`), whose `env` Claude Code sets for
itself: the server's Anthropic Messages API, the model name, and the window it compacts against."""

from __future__ import annotations

import shlex
from pathlib import Path

from whiz.setup.base import MODEL_NAME, TRIM_PROMPT, Change, Plan, Server, Where
from whiz.setup.formats import dump_json, load_json, merge


class ClaudeCode:
    name = "claude"

    def plan(self, server: Server, where: Where) -> Plan:
        path = Path(where.env.get("CLAUDE_CONFIG_DIR") or where.home / ".claude") / "settings.json"
        settings, comments = load_json(path)
        env = {
            "ANTHROPIC_BASE_URL": server.root,
            "ANTHROPIC_API_KEY": server.key,
            # Claude Code assumes a hosted model's window; it compacts against this one instead.
            "CLAUDE_CODE_AUTO_COMPACT_WINDOW": str(server.context_window),
            # Its background calls (titles, checks) would go to the local model too.
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        merge(settings, {"model": MODEL_NAME, "env": env})
        shown = [f"env.{k}" for k in env] + ["model"]
        change = Change(path, dump_json(settings), shown, path.exists(), comments, bool(server.api_key))
        trimmed = f"claude --bare --system-prompt {shlex.quote(TRIM_PROMPT)} --tools Read,Edit,Write"
        notes = [
            "Its own prompt and tools are about 20k tokens, minutes of cold prefill on a CPU; to trim "
            f"them (docs/clients.md): {trimmed}",
        ]
        return Plan(self.name, [change], "claude", notes)
