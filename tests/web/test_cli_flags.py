"""`whiz serve --workspace/--test-cmd`: bad values are one clear line, before any model loads."""

from typer.testing import CliRunner

from whiz.cli import app

runner = CliRunner()


def test_workspace_must_be_an_existing_folder(tmp_path):
    missing = runner.invoke(app, ["serve", "--model", "fake", "--workspace", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "--workspace" in missing.output
    (tmp_path / "file.txt").write_text("x")
    a_file = runner.invoke(app, ["serve", "--model", "fake", "--workspace", str(tmp_path / "file.txt")])
    assert a_file.exit_code == 2 and "--workspace" in a_file.output


def test_workspace_from_the_environment_is_checked_too(tmp_path, monkeypatch):
    monkeypatch.setenv("WHIZ_WORKSPACE", str(tmp_path / "gone"))
    result = runner.invoke(app, ["serve", "--model", "fake"])
    assert result.exit_code == 2 and "is not a folder" in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_test_cmd_needs_a_workspace():
    result = runner.invoke(app, ["serve", "--model", "fake", "--test-cmd", "pytest"])
    assert result.exit_code == 2 and "--workspace" in result.output


def test_help_names_the_web_flags():
    result = runner.invoke(app, ["serve", "--help"])
    assert "--workspace" in result.output and "--test-cmd" in result.output
