"""`[mcp_servers.NAME]` in the config file and `--mcp NAME=CMD`: what is started, and a clear word
on every mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from whiz.config_file import config_path
from whiz.mcp.config import McpConfigError, mcp_servers, server_flag


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_codex_spelled_tables_are_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("DOCS_TOKEN", "t0k")
    path = write(
        tmp_path,
        """
[serve]
port = 9000

[mcp_servers.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
env = { LOG_LEVEL = "warn" }
tool_timeout_sec = 5

[mcp_servers.docs]
url = "https://example.com/mcp"
http_headers = { "X-Team" = "tools" }
bearer_token_env_var = "DOCS_TOKEN"

[mcp_servers.off]
command = "x"
enabled = false
""",
    )
    servers, problems = mcp_servers([], path)
    assert problems == []
    files, docs = servers  # `off` is configured but not started
    assert files.command == "npx" and files.args[-1] == "." and files.env == {"LOG_LEVEL": "warn"}
    assert files.tool_timeout_sec == 5 and files.startup_timeout_sec == 10
    assert docs.url == "https://example.com/mcp"
    assert docs.headers() == {"X-Team": "tools", "Authorization": "Bearer t0k"}


def test_a_mistake_in_the_file_is_said_and_only_that_server_left_out(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[mcp_servers.typo]
comand = "npx"

[mcp_servers.both]
command = "a"
url = "http://b"

[mcp_servers.good]
command = "a"
""",
    )
    servers, problems = mcp_servers([], path)
    assert [s.name for s in servers] == ["good"]
    typo, both = problems
    assert str(path) in typo
    assert "unknown key 'comand' in [mcp_servers.typo] (did you mean 'command'?)" in typo
    assert "[mcp_servers.both]" in both and "`command`" in both and "`url`" in both


def test_a_file_that_is_not_toml_is_said(tmp_path: Path) -> None:
    servers, problems = mcp_servers([], write(tmp_path, "[mcp_servers.x\n"))
    assert servers == [] and "not valid TOML" in problems[0]


def test_no_file_means_no_servers(tmp_path: Path) -> None:
    assert mcp_servers([], tmp_path / "absent.toml") == ([], [])


def test_the_file_is_whiz_config_else_the_user_config_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("WHIZ_CONFIG", str(tmp_path / "mine.toml"))
    assert config_path() == tmp_path / "mine.toml"
    monkeypatch.delenv("WHIZ_CONFIG")
    assert config_path().name == "config.toml" and "whiz" in str(config_path())


def test_the_flag_is_split_as_a_shell_would_and_replaces_the_files_server(tmp_path: Path) -> None:
    path = write(tmp_path, '[mcp_servers.files]\ncommand = "old"\n')
    (files,), _ = mcp_servers(["files=npx -y 'some server' ."], path)
    assert (files.command, files.args) == ("npx", ["-y", "some server", "."])
    assert server_flag("web=http://127.0.0.1:8000/mcp").url == "http://127.0.0.1:8000/mcp"


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("no-equals", "NAME=COMMAND"),
        ("files=", "NAME=COMMAND"),
        ("bad name=npx", "may hold only letters"),
        ("files=npx 'unclosed", "cannot split"),
    ],
)
def test_a_bad_flag_is_an_error_that_says_the_form(flag: str, said: str) -> None:
    with pytest.raises(McpConfigError, match=said):
        server_flag(flag)


def test_a_server_gets_the_variables_it_is_given_and_those_named(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GH_TOKEN", "gh-1")
    monkeypatch.delenv("UNSET_VAR", raising=False)
    table = '[mcp_servers.g]\ncommand = "g"\nenv_vars = ["GH_TOKEN", "UNSET_VAR"]\nenv = { A = "1" }\n'
    path = write(tmp_path, table)
    (g,), _ = mcp_servers([], path)
    assert g.environment() == {"GH_TOKEN": "gh-1", "A": "1"}


def test_a_missing_bearer_token_variable_is_said(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("NO_SUCH_TOKEN", raising=False)
    path = write(tmp_path, '[mcp_servers.d]\nurl = "http://x"\nbearer_token_env_var = "NO_SUCH_TOKEN"\n')
    (docs,), _ = mcp_servers([], path)
    with pytest.raises(McpConfigError, match="NO_SUCH_TOKEN"):
        docs.headers()
