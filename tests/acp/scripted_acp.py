"""`whiz acp` over a scripted model, for the ACP tests: `python scripted_acp.py SCRIPT.json`.

The script is a JSON list of the fast model's replies, one per model call: {"text": ...,
"delay_s": ..., "chunk_chars": ..., "print": ...}; or an object {"fast": [...], "deep": [...]} for modes. The
approval mode comes from $WHIZ_TEST_APPROVAL (default auto-edit), the sandbox from
$WHIZ_TEST_SANDBOX (default workspace-write); sessions live under $WHIZ_HOME.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from whiz.acp.stdio import run
from whiz.agent.approvals import ApprovalMode
from whiz.agent.config import AgentConfig
from whiz.agent.models.scripted_model import Reply, ScriptedModel
from whiz.environments import SandboxMode, SandboxOptions
from whiz.modes.pool import ScriptedPool
from whiz.modes.session import SessionOptions


def reply(spec: dict):
    """One reply; with "print", it first writes that to stdout as a stray library would, through
    `print` and straight to file descriptor 1."""
    made = Reply(spec["text"], delay_s=spec.get("delay_s", 0.0), chunk_chars=spec.get("chunk_chars", 8))
    if "print" not in spec:
        return made

    def noisy(request):
        print(spec["print"], flush=True)
        os.write(1, f"{spec['print']} (fd 1)\n".encode())
        return made

    return noisy


def model(specs: list[dict]):
    replies = [reply(spec) for spec in specs]
    shared = ScriptedModel(replies)  # one script across the process's sessions, in order
    return lambda: shared


def main() -> int:
    script = json.loads(Path(sys.argv[1]).read_text())
    if isinstance(script, list):
        script = {"fast": script}
    agent = AgentConfig(
        approval=ApprovalMode(os.environ.get("WHIZ_TEST_APPROVAL", "auto-edit")),
        sandbox=SandboxOptions(SandboxMode(os.environ.get("WHIZ_TEST_SANDBOX", "workspace-write"))),
        check_edits=False,
    )
    options = SessionOptions(Path.cwd(), agent=agent)
    labels = [label for label in ("fast", "deep") if label in script]
    pool = ScriptedPool(clients={label: model(script[label]) for label in labels})
    return run(options, pool=pool, verbose=True)


if __name__ == "__main__":
    sys.exit(main())
