"""The workspace routes: browse, propose, accept, reject, undo, tests; confined paths; bad input."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from whiz.errors import InvalidRequest

from .conftest import CALC, whole_file_reply
from .test_workspace_heal import sleeping

NEW_CALC = CALC.replace("def add(", "def plus(")


def propose(client, path="calc.py", instruction="rename add to plus"):
    return client.post("/whiz/workspace/edit", json={"path": path, "instruction": instruction})


def test_files_and_file_contents(make_client, workspace):
    client = make_client(workspace=workspace)
    files = client.get("/whiz/workspace/files").json()
    assert files == {"files": ["calc.py", "pkg/util.py", "test_calc.py"], "truncated": False}
    got = client.get("/whiz/workspace/file", params={"path": "pkg/util.py"}).json()
    assert got["content"] == "X = 1\n"
    assert client.get("/whiz/workspace").json() == {"name": "project", "test_cmd": None}


@pytest.mark.parametrize(
    "path", ["../secret.txt", "/etc/passwd", "pkg/../../secret.txt", "link/secret.txt", "~/x"]
)
def test_paths_outside_the_workspace_are_refused(make_client, workspace, path):
    (workspace.parent / "secret.txt").write_text("top secret")
    (workspace / "link").symlink_to(workspace.parent)
    client = make_client(workspace=workspace)
    got = client.get("/whiz/workspace/file", params={"path": path})
    assert got.status_code == 400
    assert got.json()["error"]["code"] == "path_escape"
    assert "top secret" not in got.text
    edit = propose(client, path=path)
    assert edit.status_code == 400 and edit.json()["error"]["code"] == "path_escape"


def test_unreadable_files_get_clear_errors(make_client, workspace):
    (workspace / "blob.bin").write_bytes(b"\xff\xfe\x00\x01")
    (workspace / "big.txt").write_text("x" * 1_100_000)
    client = make_client(workspace=workspace)
    missing = client.get("/whiz/workspace/file", params={"path": "nope.py"})
    assert missing.status_code == 404 and "nope.py" in missing.json()["error"]["message"]
    binary = client.get("/whiz/workspace/file", params={"path": "blob.bin"})
    assert binary.status_code == 400 and "UTF-8" in binary.json()["error"]["message"]
    assert client.get("/whiz/workspace/file", params={"path": "big.txt"}).status_code == 413
    assert client.get("/whiz/workspace/file").status_code == 400
    assert client.get("/whiz/workspace/file", params={"path": "pkg"}).status_code == 404


def test_propose_writes_nothing_then_accept_writes_and_undo_restores(make_client, workspace):
    client = make_client(whole_file_reply("calc.py", NEW_CALC), workspace=workspace)
    got = propose(client)
    assert got.status_code == 200, got.text
    edit = got.json()["edit"]
    assert (workspace / "calc.py").read_text() == CALC  # proposed only
    [change] = edit["changes"]
    assert change["path"] == "calc.py"
    assert "-def add(a, b):" in change["diff"] and "+def plus(a, b):" in change["diff"]
    assert got.json()["whiz"]["timeline"], "the page plots the edit's speed"
    assert client.get("/whiz/workspace/edits").json()["edits"][0]["id"] == edit["id"]

    accepted = client.post("/whiz/workspace/accept", json={"id": edit["id"]})
    assert accepted.json() == {"applied": ["calc.py"]}
    assert (workspace / "calc.py").read_text() == NEW_CALC
    assert client.get("/whiz/workspace/edits").json()["edits"] == []
    # Accepting twice is an unknown edit, not a second write.
    assert client.post("/whiz/workspace/accept", json={"id": edit["id"]}).status_code == 404

    assert client.post("/whiz/workspace/undo", json={}).json() == {"restored": ["calc.py"]}
    assert (workspace / "calc.py").read_text() == CALC
    # Back to before the accept: the proposal is pending again.
    assert [e["id"] for e in client.get("/whiz/workspace/edits").json()["edits"]] == [edit["id"]]
    nothing = client.post("/whiz/workspace/undo", json={})
    assert nothing.status_code == 409 and nothing.json()["error"]["code"] == "nothing_to_undo"


def test_reject_discards_without_writing(make_client, workspace):
    client = make_client(whole_file_reply("calc.py", NEW_CALC), workspace=workspace)
    edit = propose(client).json()["edit"]
    assert client.post("/whiz/workspace/reject", json={"id": edit["id"]}).json() == {"rejected": edit["id"]}
    assert (workspace / "calc.py").read_text() == CALC
    assert client.post("/whiz/workspace/accept", json={"id": edit["id"]}).status_code == 404


def test_accept_refuses_when_the_file_changed_since(make_client, workspace):
    client = make_client(whole_file_reply("calc.py", NEW_CALC), workspace=workspace)
    edit = propose(client).json()["edit"]
    (workspace / "calc.py").write_text(CALC + "# edited by hand\n")
    got = client.post("/whiz/workspace/accept", json={"id": edit["id"]})
    assert got.status_code == 409 and "changed on disk" in got.json()["error"]["message"]
    assert (workspace / "calc.py").read_text() == CALC + "# edited by hand\n"
    assert client.post("/whiz/workspace/undo", json={}).status_code == 409  # nothing was recorded


def test_a_reply_without_a_usable_edit_is_shown_not_applied(make_client, workspace):
    client = make_client(lambda conv: "I would rename it.", workspace=workspace)
    got = propose(client)
    assert got.status_code == 422
    body = got.json()
    assert body["error"]["code"] == "no_edit"
    assert body["reply"] == "I would rename it."
    assert client.get("/whiz/workspace/edits").json()["edits"] == []


def test_edits_to_other_files_are_dropped(make_client, workspace):
    # A small model sometimes echoes an example path; a request about calc.py only edits calc.py.
    client = make_client(whole_file_reply("other.py", "print(1)\n"), workspace=workspace)
    got = propose(client)
    assert got.status_code == 422 and "calc.py" in got.json()["error"]["message"]
    assert not (workspace / "other.py").exists()


def test_bad_bodies_get_clear_errors(make_client, workspace):
    client = make_client(workspace=workspace)
    cases = [
        (dict(content=b"{not json", headers={"content-type": "application/json"}), "invalid_json"),
        (dict(json={"path": "calc.py"}), "invalid_request"),
        (dict(json={"path": "calc.py", "instruction": ""}), "invalid_request"),
        (dict(json={"path": 3, "instruction": "x"}), "invalid_request"),
        (dict(json=["calc.py"]), "invalid_request"),
        (
            dict(content=b'{"path":"calc.py","instruction":"x"}', headers={"content-type": "text/plain"}),
            "unsupported_media_type",
        ),
    ]
    for kwargs, code in cases:
        got = client.post("/whiz/workspace/edit", **kwargs)
        assert got.status_code == 400, (kwargs, got.text)
        assert got.json()["error"]["code"] == code, (kwargs, got.text)
    assert client.post("/whiz/workspace/accept", json={"id": 5}).status_code == 400
    assert client.post("/whiz/workspace/accept", json={}).status_code == 400
    assert (workspace / "calc.py").read_text() == CALC


def test_run_tests_shows_output_and_exit_code(make_client, workspace):
    client = make_client(workspace=workspace, test_cmd="echo ran in $(basename $PWD); exit 3")
    got = client.post("/whiz/workspace/test", json={}).json()
    assert got["exit_code"] == 3
    assert got["output"].strip() == "ran in project"
    assert got["timed_out"] is False


def test_a_test_command_past_its_timeout_is_killed(make_client, workspace):
    marker = f"3600.{os.getpid()}"  # an hour: the answer comes only if the command is killed
    client = make_client(workspace=workspace, test_cmd=f"echo started; sleep {marker}", test_timeout_s=0.5)
    got = client.post("/whiz/workspace/test", json={}).json()
    assert got["timed_out"] is True and got["exit_code"] is None
    assert "started" in got["output"]
    assert not sleeping(marker)


def test_no_test_command_configured(make_client, workspace):
    client = make_client(workspace=workspace)
    got = client.post("/whiz/workspace/test", json={})
    assert got.status_code == 409 and "--test-cmd" in got.json()["error"]["message"]


def test_without_a_workspace_there_are_no_workspace_routes(make_client):
    client = make_client()
    assert client.get("/whiz/workspace/files").status_code == 404
    assert client.get("/whiz/info").json()["workspace"] is False


def test_workspace_routes_need_the_key(make_client, workspace):
    client = make_client(whole_file_reply("calc.py", NEW_CALC), workspace=workspace, api_keys=["k1"])
    assert client.get("/whiz/workspace/files").status_code == 401
    wrong = client.get("/whiz/workspace/files", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
    assert propose(client).status_code == 401
    ok = client.get("/whiz/workspace/files", headers={"Authorization": "Bearer k1"})
    assert ok.status_code == 200
    assert client.get("/whiz/info").json()["auth_required"] is True


def test_other_origins_and_rebound_hosts_are_refused(make_client, workspace):
    client = make_client(whole_file_reply("calc.py", NEW_CALC), workspace=workspace)
    evil = propose_with(client, {"Origin": "http://evil.example"})
    assert evil.status_code == 403 and evil.json()["error"]["code"] == "origin_not_allowed"
    # DNS rebinding: another site's name resolving to 127.0.0.1 (a same-origin GET has no Origin).
    rebound = client.get(
        "/whiz/workspace/file", params={"path": "calc.py"}, headers={"Host": "evil.example:8321"}
    )
    assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "host_not_allowed"
    same = propose_with(client, {"Origin": "http://127.0.0.1:8321"})
    assert same.status_code == 200
    assert (workspace / "calc.py").read_text() == CALC


def propose_with(client, headers):
    return client.post(
        "/whiz/workspace/edit", json={"path": "calc.py", "instruction": "rename"}, headers=headers
    )


def test_symlinked_workspace_files_pointing_out_are_not_listed_or_read(make_client, workspace):
    outside = workspace.parent / "outside.txt"
    outside.write_text("secret")
    os.symlink(outside, workspace / "leak.txt")
    client = make_client(workspace=workspace)
    assert "leak.txt" not in client.get("/whiz/workspace/files").json()["files"]
    assert client.get("/whiz/workspace/file", params={"path": "leak.txt"}).status_code == 400


@pytest.fixture
def home_with_tools(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A HOME outside /tmp (whose private copy would hide it anyway) with two tools' folders."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    home = Path(tempfile.mkdtemp(prefix="whiz-web-home-", dir="/var/tmp"))
    home.chmod(0o755)
    for tool in ("allowed-tool", "other-tool"):
        (home / ".config" / tool).mkdir(parents=True)
        (home / ".config" / tool / "hosts.yml").write_text(f"{tool}-token\n")
    monkeypatch.setenv("HOME", str(home))
    yield home
    shutil.rmtree(home, ignore_errors=True)


def test_the_test_button_sees_what_the_config_file_allows_and_nothing_else(
    make_client, workspace, home_with_tools, tmp_path, monkeypatch
):
    config = tmp_path / "config.toml"
    config.write_text(f'[sandbox]\nallow = ["{home_with_tools}/.config/allowed-tool"]\n')
    monkeypatch.setenv("WHIZ_CONFIG", str(config))
    cmd = "cat ~/.config/allowed-tool/hosts.yml ~/.config/other-tool/hosts.yml 2>&1; true"
    out = (
        make_client(workspace=workspace, test_cmd=cmd).post("/whiz/workspace/test", json={}).json()["output"]
    )
    # What the CLI's `--sandbox-allow`/`[sandbox] allow` shows an agent's command, and only that.
    assert "allowed-tool-token" in out and "other-tool-token" not in out
    config.write_text("")
    out = (
        make_client(workspace=workspace, test_cmd=cmd).post("/whiz/workspace/test", json={}).json()["output"]
    )
    assert "allowed-tool-token" not in out and "other-tool-token" not in out


def test_a_mistake_in_the_sandbox_table_stops_the_web_app_with_its_message(
    make_client, workspace, tmp_path, monkeypatch
):
    config = tmp_path / "config.toml"
    config.write_text('[sandbox]\nalow = ["~/.config/tool"]\n')
    monkeypatch.setenv("WHIZ_CONFIG", str(config))
    with pytest.raises(InvalidRequest, match="unknown key 'alow'"):
        make_client(workspace=workspace, test_cmd="true")
