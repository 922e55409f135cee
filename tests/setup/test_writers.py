"""Each client writer's output, read back by the client's own format, merged into what the user has
(their other settings kept, the old file backed up), shown without writing (`--print`), and a file
that does not parse refused with nothing written."""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import pytest
import yaml

from whiz.commands.setup import run_setup
from whiz.setup import CLIENTS, writer_for
from whiz.setup.base import Where
from whiz.setup.formats import strip_jsonc

ROOT = "http://127.0.0.1:9"  # nothing listens: the window is the assumed one


def setup(client: str, home: Path, *args, **kw) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    where = Where(home, {"HOME": str(home), **kw.pop("env", {})})
    code = run_setup(client, base_url=kw.pop("base_url", ROOT), where=where, out=out, err=err, **kw)
    return code, out.getvalue(), err.getvalue()


def files_of(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


def test_claude_settings_are_json_with_the_server_and_the_window(tmp_path: Path) -> None:
    home = tmp_path
    code, _, err = setup("claude", home)
    assert code == 0, err
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings["model"] == "whiz"
    assert settings["env"]["ANTHROPIC_BASE_URL"] == ROOT
    assert settings["env"]["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "32768"
    assert "no whiz server answered" in err and "--bare --system-prompt" in err


def test_codex_config_is_toml_and_keeps_the_users_comments_and_tables(tmp_path: Path) -> None:
    codex = tmp_path / ".codex"
    codex.mkdir()
    mine = '# my settings\nmodel = "o3"\napproval_policy = "on-request"\n\n'
    mine += '[mcp_servers.docs]\ncommand = "docs-mcp"\n'
    (codex / "config.toml").write_text(mine)
    code, _, err = setup("codex", tmp_path)
    assert code == 0, err
    text = (codex / "config.toml").read_text()
    config = tomllib.loads(text)
    assert config["model"] == "whiz" and config["model_provider"] == "whiz"
    assert config["approval_policy"] == "on-request", "the user's other settings stay"
    assert config["mcp_servers"]["docs"]["command"] == "docs-mcp"
    assert "# my settings" in text
    provider = config["model_providers"]["whiz"]
    assert provider["base_url"] == ROOT + "/v1" and provider["wire_api"] == "responses"
    catalog = json.loads(Path(config["model_catalog_json"]).read_text())
    assert catalog["models"][0]["context_window"] == 32768
    [backup] = codex.glob("config.toml.whiz-backup-*")
    assert backup.read_text() == mine
    assert f"the old file is at {backup}" in err


def test_opencode_config_is_json_with_the_window_and_a_trimmed_agent(tmp_path: Path) -> None:
    config_home = tmp_path / "xdg"
    path = config_home / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"theme": "nord", "provider": {"ollama": {"name": "Ollama"}}}))
    code, _, err = setup("opencode", tmp_path, env={"XDG_CONFIG_HOME": str(config_home)})
    assert code == 0, err
    config = json.loads(path.read_text())
    assert config["theme"] == "nord" and config["provider"]["ollama"] == {"name": "Ollama"}
    whiz = config["provider"]["whiz"]
    assert whiz["options"]["baseURL"] == ROOT + "/v1"
    assert whiz["models"]["whiz"]["limit"]["context"] == 32768
    assert config["model"] == "whiz/whiz" and config["agent"]["whiz-ask"]["tools"] == {"*": False}


def test_qwen_settings_with_comments_parse_and_keep_other_providers(tmp_path: Path) -> None:
    path = tmp_path / ".qwen" / "settings.json"
    path.parent.mkdir()
    path.write_text(
        '{\n  // my providers\n  "modelProviders": {"openai": [{"id": "gpt-4o", "envKey": "KEY"},\n'
        '    {"id": "whiz", "baseUrl": "http://old:1/v1"},]},\n  "ui": {"theme": "dark"},\n}\n'
    )
    code, _, err = setup("qwen", tmp_path)
    assert code == 0, err
    settings = json.loads(path.read_text())
    ids = [m["id"] for m in settings["modelProviders"]["openai"]]
    assert ids == ["gpt-4o", "whiz"], "the old whiz entry is replaced, the others kept"
    assert settings["modelProviders"]["openai"][1]["generationConfig"]["contextWindowSize"] == 32768
    assert settings["ui"] == {"theme": "dark"} and settings["model"]["name"] == "whiz"
    assert "its comments are not kept in the new file (they are in the backup)" in err


def test_aider_config_is_yaml_and_its_metadata_gives_the_window(tmp_path: Path) -> None:
    (tmp_path / ".aider.conf.yml").write_text("dark-mode: true\nmodel: gpt-4o\n")
    code, _, err = setup("aider", tmp_path)
    assert code == 0, err
    config = yaml.safe_load((tmp_path / ".aider.conf.yml").read_text())
    assert config["dark-mode"] is True and config["model"] == "openai/whiz"
    assert config["openai-api-base"] == ROOT + "/v1" and config["edit-format"] == "diff"
    assert config["map-tokens"] == 0
    metadata = json.loads((tmp_path / ".aider.model.metadata.json").read_text())
    assert metadata["openai/whiz"]["max_input_tokens"] == 32768


def test_zed_settings_run_whiz_acp_and_take_predictions_from_whiz(tmp_path: Path) -> None:
    path = tmp_path / ".config" / "zed" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        '// Zed settings\n{\n  "theme": "One Dark", // mine\n  "agent_servers": {"other": {}},\n}\n'
    )
    code, _, err = setup("zed", tmp_path, base_url=ROOT)
    assert code == 0, err
    settings = json.loads(path.read_text())
    assert settings["theme"] == "One Dark" and "other" in settings["agent_servers"]
    agent = settings["agent_servers"]["whiz"]
    assert agent["type"] == "custom" and Path(agent["command"]).is_absolute()
    assert "acp" in agent["args"] and agent["args"][-2:] == ["--base-url", ROOT]
    assert settings["edit_predictions"]["provider"] == "open_ai_compatible_api"
    assert settings["edit_predictions"]["open_ai_compatible_api"]["api_url"] == ROOT + "/v1/completions"
    models = settings["language_models"]["openai_compatible"]["whiz"]["available_models"]
    assert models[0]["max_tokens"] == 32768


def test_zed_keeps_the_users_prediction_provider_and_says_how_to_switch(tmp_path: Path) -> None:
    path = tmp_path / ".config" / "zed" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"edit_predictions": {"provider": "copilot"}}))
    code, _, err = setup("zed", tmp_path)
    assert code == 0, err
    settings = json.loads(path.read_text())
    assert settings["edit_predictions"]["provider"] == "copilot"
    assert 'edit predictions stay with "copilot"' in err


@pytest.mark.parametrize("client", list(CLIENTS))
def test_print_shows_the_files_and_writes_nothing(client: str, tmp_path: Path) -> None:
    before = files_of(tmp_path)
    code, out, err = setup(client, tmp_path, print_only=True)
    assert code == 0, err
    assert files_of(tmp_path) == before
    plan = writer_for(client).plan(_server(), Where(tmp_path, {"HOME": str(tmp_path)}))
    for change in plan.changes:
        assert f"# {change.path}\n" in out
    assert "would write" in err


@pytest.mark.parametrize(
    ("client", "name", "broken"),
    [
        ("claude", ".claude/settings.json", '{"model": '),
        ("codex", ".codex/config.toml", "model = = 1\n"),
        ("qwen", ".qwen/settings.json", "[1, 2"),
        ("aider", ".aider.conf.yml", "model: [unclosed\n"),
        ("zed", ".config/zed/settings.json", "{ // only a comment"),
        ("opencode", ".config/opencode/opencode.json", '["not", "an", "object"]'),
    ],
)
def test_a_file_that_does_not_parse_is_refused_and_nothing_is_written(client, name, broken, tmp_path):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(broken)
    before = files_of(tmp_path)
    code, _, err = setup(client, tmp_path)
    assert code == 2
    assert str(path) in err and "nothing was written" in err.lower()
    assert files_of(tmp_path) == before


def test_running_it_twice_changes_nothing_the_second_time(tmp_path: Path) -> None:
    setup("claude", tmp_path)
    code, _, err = setup("claude", tmp_path)
    assert code == 0 and "already set up:" in err
    assert not list((tmp_path / ".claude").glob("*.whiz-backup-*"))


def test_an_unknown_client_is_named_with_the_ones_there_are(tmp_path: Path) -> None:
    code, _, err = setup("vscode", tmp_path)
    assert code == 2 and "no client 'vscode'; whiz setup knows claude, codex" in err


def test_a_key_is_written_for_the_user_alone(tmp_path: Path) -> None:
    code, _, err = setup("claude", tmp_path, api_key="sk-local")
    assert code == 0, err
    path = tmp_path / ".claude" / "settings.json"
    assert json.loads(path.read_text())["env"]["ANTHROPIC_API_KEY"] == "sk-local"
    assert path.stat().st_mode & 0o077 == 0


def test_jsonc_comments_inside_strings_stay() -> None:
    text = '{"url": "http://x//y", /* c */ "a": [1, 2,], "s": "a \\" // b", // end\n}'
    assert json.loads(strip_jsonc(text)) == {"url": "http://x//y", "a": [1, 2], "s": 'a " // b'}


def _server():
    from whiz.setup.base import Server

    return Server(ROOT, explicit=True)
