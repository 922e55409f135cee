"""`whiz exec --json` end to end with the real default model: a rename in a small repository."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

GREET = """def say_hello(name):
    return "Hello, " + name + "!"


def main():
    for person in ["Ada", "Linus"]:
        print(say_hello(person))


if __name__ == "__main__":
    main()
"""

README = "# greetings\n\nPrints a greeting for each person.\n"


def test_exec_json_renames_a_function(real_server, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "greet.py").write_text(GREET)
    (repo / "README.md").write_text(README)
    task = "In greet.py, rename the function say_hello to greet_person, updating every call to it."
    env = {**os.environ, "WHIZ_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "whiz", "exec", "--json", "--base-url", real_server.root, task],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["type"] for e in events][:2] == ["thread.started", "turn.started"]
    assert events[-1]["type"] == "turn.completed"
    assert events[-1]["timings"]["decode_tokens"] > 0
    changes = [
        e["item"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == "file_change"
    ]
    assert changes and changes[-1]["changes"] == [{"path": "greet.py", "kind": "update"}]
    assert (repo / "greet.py").read_text() == GREET.replace("say_hello", "greet_person")
    assert (repo / "README.md").read_text() == README
