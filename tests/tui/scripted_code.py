"""`whiz code` over scripted models, for the pseudo-terminal tests: `python scripted_code.py SCRIPT.json`.

The script is a JSON list of the fast model's replies, one per model call: {"text": ..., "delay_s": ...,
"chunk_chars": ...}, or {"echo": true, ...} for a reply that repeats the latest user message ("heard: ...").
Or an object: {"fast": [...], "deep": [...], "mode": "auto", "policy": "reroute:deep"}, for modes
(no "mode": as `whiz code` without --mode, the resumed session's mode, else fast).
It runs in the current directory with the approval mode from $WHIZ_TEST_APPROVAL (default auto-edit).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from whiz.agent.approvals import ApprovalMode
from whiz.agent.config import AgentConfig
from whiz.agent.models.scripted_model import Reply, ScriptedModel
from whiz.agent.models.seam import ModelRequest
from whiz.modes.pool import ScriptedPool
from whiz.modes.session import SessionOptions
from whiz.tui import run_code


def last_user_text(request: ModelRequest) -> str:
    users = [i for i in request.items if i.get("type") == "message" and i.get("role") == "user"]
    return users[-1]["content"] if users else ""


def reply(spec: dict):
    timing = {"delay_s": spec.get("delay_s", 0.0), "chunk_chars": spec.get("chunk_chars", 8)}
    if spec.get("echo"):
        return lambda request: Reply("heard: " + last_user_text(request), **timing)
    return Reply(spec["text"], **timing)


def model(specs: list[dict]):
    return lambda: ScriptedModel([reply(spec) for spec in specs])


def main() -> int:
    script = json.loads(Path(sys.argv[1]).read_text())
    if isinstance(script, list):
        script = {"fast": script}
    options = SessionOptions(
        Path.cwd(),
        agent=AgentConfig(approval=ApprovalMode(os.environ.get("WHIZ_TEST_APPROVAL", "auto-edit"))),
        resume=os.environ.get("WHIZ_TEST_RESUME") or None,
        mode=script.get("mode"),
        policy=script.get("policy", "refuse"),
    )
    pool = ScriptedPool(
        clients={label: model(script[label]) for label in ("fast", "deep") if label in script}
    )
    return run_code(options, pool=pool)


if __name__ == "__main__":
    sys.exit(main())
