"""`whiz exec` as a user runs it: a subprocess against a server on the fake engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.agent.conftest import GREET, sr
from tests.conftest import free_port
from whiz.engine.fake import last_user_message

# Both places: a rename that left the call behind would be sent back by the edit check.
RENAME = sr("greet.py", "def say_hello(name):", "def greet(name):") + sr(
    "greet.py", '    print(say_hello("world"))', '    print(greet("world"))'
)


def whiz(args: list[str], cwd: Path, home: Path, timeout_s: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "WHIZ_HOME": str(home)}
    env.pop("WHIZ_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "whiz", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def rename_script(conversation: str) -> str:
    return RENAME if "Rename" in last_user_message(conversation) else "Done."


def test_exec_json_streams_events_and_exits_0(serve_fake, project: Path, tmp_path: Path) -> None:
    server = serve_fake(script=rename_script)
    # More than a rename, so the model makes it (a rename alone is exact: the test below).
    task = "Rename say_hello to greet in greet.py, and say what you changed"
    done = whiz(["exec", "--json", "--base-url", server.root, task], project, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    evs = events(done.stdout)
    types = [e["type"] for e in evs]
    assert types[0] == "thread.started" and types[1] == "turn.started" and types[-1] == "turn.completed"
    assert evs[0]["thread_id"].startswith("sess_")
    started = {e["item"]["id"] for e in evs if e["type"] == "item.started"}
    completed = {e["item"]["id"] for e in evs if e["type"] == "item.completed"}
    assert started <= completed  # every item that starts, completes
    changes = [e["item"] for e in evs if e["type"] == "item.completed" and e["item"]["type"] == "file_change"]
    assert changes and changes[0]["changes"] == [{"path": "greet.py", "kind": "update"}]
    usage = evs[-1]["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert evs[-1]["timings"]["model_calls"] == 1
    assert (project / "greet.py").read_text().startswith("def greet(name):")


def test_exec_json_renames_a_function_and_every_call_without_asking_the_model(
    serve_fake, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    greet = 'def say_hello(name):\n    return "Hi " + name\n\n\ndef main():\n    print(say_hello("Ada"))\n'
    (repo / "greet.py").write_text(greet)
    (repo / "README.md").write_text("# greetings\n")
    server = serve_fake(script=lambda conversation: "README.md\n```\n# wrong\n```\n")  # never asked
    task = "In greet.py, rename the function say_hello to greet_person, updating every call to it."
    done = whiz(["exec", "--json", "--base-url", server.root, task], repo, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    evs = events(done.stdout)
    assert evs[-1]["type"] == "turn.completed" and evs[-1]["timings"]["model_calls"] == 0
    items = [e["item"] for e in evs if e["type"] == "item.completed"]
    assert [i["type"] for i in items] == ["file_change", "agent_message"]
    assert items[0]["changes"] == [{"path": "greet.py", "kind": "update"}]
    assert "say_hello to greet_person" in items[1]["text"]
    assert (repo / "greet.py").read_text() == greet.replace("say_hello", "greet_person")
    assert (repo / "README.md").read_text() == "# greetings\n"


def test_no_exact_renames_leaves_a_rename_to_the_model(serve_fake, project: Path, tmp_path: Path) -> None:
    server = serve_fake(script=rename_script)
    task = "Rename say_hello to greet in greet.py"
    done = whiz(
        ["exec", "--json", "--no-exact-renames", "--base-url", server.root, task], project, tmp_path / "h"
    )
    assert done.returncode == 0, done.stderr
    assert events(done.stdout)[-1]["timings"]["model_calls"] == 1
    assert (project / "greet.py").read_text().startswith("def greet(name):")


def test_exec_that_cannot_finish_fails_with_a_reason(serve_fake, project: Path, tmp_path: Path) -> None:
    server = serve_fake(script=lambda conv: sr("greet.py", "def nowhere():", "def greet(name):"))
    done = whiz(["exec", "--json", "--base-url", server.root, "Rename it"], project, tmp_path / "home")
    assert done.returncode == 1
    last = events(done.stdout)[-1]
    assert last["type"] == "turn.failed" and "3 times" in last["error"]["message"]
    assert (project / "greet.py").read_text() == GREET


def test_exec_plain_output_then_undo(serve_fake, project: Path, tmp_path: Path) -> None:
    server = serve_fake(script=rename_script)
    done = whiz(["exec", "--base-url", server.root, "Rename say_hello"], project, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert "+def greet(name):" in done.stderr  # the diff is shown
    undone = whiz(["undo"], project, tmp_path / "home")
    assert undone.returncode == 0 and "greet.py" in undone.stderr
    assert (project / "greet.py").read_text() == GREET


def test_resume_last_with_a_new_task(serve_fake, project: Path, tmp_path: Path) -> None:
    server = serve_fake(script=rename_script)
    home = tmp_path / "home"
    first = whiz(["exec", "--json", "--base-url", server.root, "What is here?"], project, home)
    assert first.returncode == 0
    thread = events(first.stdout)[0]["thread_id"]
    again = whiz(["resume", "--last", "--json", "--base-url", server.root, "Rename say_hello"], project, home)
    assert again.returncode == 0, again.stderr
    assert events(again.stdout)[0]["thread_id"] == thread
    listing = whiz(["resume"], project, home)
    assert thread in listing.stdout and "2 turn(s)" in listing.stdout


def test_no_server_at_an_explicit_url_is_one_clear_line(project: Path, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = whiz(["exec", "--json", "--base-url", url, "anything"], project, tmp_path / "home")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "no whiz server answers at" in done.stderr and url in done.stderr
    assert events(done.stdout) == [{"type": "error", "message": done.stderr.strip().removeprefix("error: ")}]


def test_a_bad_api_key_is_one_clear_line(serve_fake, project: Path, tmp_path: Path) -> None:
    server = serve_fake(api_keys=["right"])
    done = whiz(
        ["exec", "--base-url", server.root, "--api-key", "wrong", "anything"], project, tmp_path / "home"
    )
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "refused the API key" in done.stderr


def test_bad_flags_are_refused(project: Path, tmp_path: Path) -> None:
    done = whiz(["exec", "--approval", "yolo", "x"], project, tmp_path / "home")
    assert done.returncode == 2 and "--approval must be" in done.stderr
    done = whiz(["exec", "  "], project, tmp_path / "home")
    assert done.returncode == 2 and "empty" in done.stderr


def test_without_a_server_one_starts_in_process(project: Path, tmp_path: Path) -> None:
    env_url = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "WHIZ_HOME": str(tmp_path / "home"), "WHIZ_BASE_URL": env_url}
    done = subprocess.run(
        [sys.executable, "-m", "whiz", "exec", "--json", "--in-process", "--model", "fake", "What is here?"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f"whiz: no whiz server at {env_url}; starting fake in this process"]
    messages = [e["item"]["text"] for e in events(done.stdout) if e["type"] == "item.completed"]
    assert messages and messages[0].startswith("echo: What is here?")  # the fake engine's answer


def test_a_full_disk_fails_cleanly_and_writes_nothing(serve_fake, project: Path, tmp_path: Path) -> None:
    import resource

    big = "".join(f"line {i}\n" for i in range(30_000))  # about 250 kB
    (project / "big.txt").write_text(big)
    server = serve_fake(script=lambda conv: sr("big.txt", "line 0", "first line"))

    def small_files() -> None:  # writes past 100 kB fail with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000))

    env = {**os.environ, "WHIZ_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "whiz", "exec", "--base-url", server.root, "change the first line of big.txt"],
        cwd=project, env=env, capture_output=True, text=True, timeout=60, preexec_fn=small_files,
    )  # fmt: skip
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "File too large" in errors[0] and "nothing was changed" in errors[0].lower()
    assert (project / "big.txt").read_text() == big
    assert sorted(p.name for p in project.iterdir()) == ["README.md", "big.txt", "greet.py"]  # no temp files


def test_without_a_server_one_starts_in_the_background_and_serves_the_next_command(
    project: Path, tmp_path: Path
) -> None:
    env_url = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "WHIZ_HOME": str(tmp_path / "home"), "WHIZ_BASE_URL": env_url}
    env.pop("WHIZ_IN_PROCESS", None)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "whiz", *args]
        return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=120)

    try:
        first = run("exec", "--json", "--model", "fake", "What is in greet.py?")
        assert first.returncode == 0, first.stderr
        assert "starting fake in the background" in first.stderr
        second = run("exec", "--json", "--model", "fake", "And now?")
        assert second.returncode == 0 and second.stderr == ""  # the warm one answered: nothing started
        messages = [e["item"]["text"] for e in events(second.stdout) if e["type"] == "item.completed"]
        assert messages and messages[0].startswith("echo:")
        status = run("serve", "status")
        assert status.returncode == 0 and status.stdout.startswith("fake  http://127.0.0.1:")
        pid = int(status.stdout.split("pid ")[1].split()[0])
    finally:
        stopped = run("serve", "stop")
    assert stopped.returncode == 0 and f"pid {pid}" in stopped.stdout
    assert run("serve", "status").returncode == 1  # none left
    stat = Path(f"/proc/{pid}/stat")
    assert not stat.exists() or stat.read_text().split(") ", 1)[1].startswith("Z")  # gone (or unreaped)
