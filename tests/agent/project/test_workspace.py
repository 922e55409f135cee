"""Workspace: confinement of every path, listing (git-aware) and search."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from whiz.agent.errors import WhizAgentError
from whiz.agent.project.workspace import GitDirRefused, PathEscape, Workspace
from whiz.environments.secret_rules import SecretFiles


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 1\n")
    (root / "README.md").write_text("# demo\n")
    return Workspace(root)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def test_resolve_keeps_paths_inside(ws: Workspace) -> None:
    assert ws.resolve("src/app.py") == ws.root / "src" / "app.py"
    assert ws.resolve("./src/app.py") == ws.root / "src" / "app.py"
    assert ws.resolve("new/file.txt") == ws.root / "new" / "file.txt"


@pytest.mark.parametrize("bad", ["../outside.txt", "src/../../outside.txt", "..", "src/.."])
def test_dotdot_is_refused(ws: Workspace, bad: str) -> None:
    with pytest.raises(PathEscape, match=r"'\.\.'"):
        ws.resolve(bad)


@pytest.mark.parametrize("bad", ["/etc/passwd", "~/x", "C:/x"])
def test_absolute_paths_are_refused(ws: Workspace, bad: str) -> None:
    with pytest.raises(PathEscape, match="absolute"):
        ws.resolve(bad)


@pytest.mark.parametrize("bad", ["", "   ", "a\x00b"])
def test_empty_or_nul_paths_are_refused(ws: Workspace, bad: str) -> None:
    with pytest.raises(PathEscape):
        ws.resolve(bad)


def test_symlink_leading_out_is_refused(ws: Workspace, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not touch\n")
    (ws.root / "link.txt").symlink_to(secret)
    (ws.root / "outdir").symlink_to(tmp_path)
    with pytest.raises(PathEscape, match="symlink"):
        ws.resolve("link.txt")
    with pytest.raises(PathEscape, match="symlink"):
        ws.read_text("outdir/secret.txt")
    assert "link.txt" not in ws.list_files()


def test_symlink_inside_is_followed(ws: Workspace) -> None:
    (ws.root / "alias.py").symlink_to(ws.root / "src" / "app.py")
    assert ws.resolve("alias.py") == ws.root / "src" / "app.py"


def test_read_text_keeps_crlf_and_reports_problems(ws: Workspace) -> None:
    (ws.root / "win.txt").write_bytes(b"a\r\nb\r\n")
    assert ws.read_text("win.txt") == "a\r\nb\r\n"
    (ws.root / "blob.bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(WhizAgentError, match="not a UTF-8 text file"):
        ws.read_text("blob.bin")
    with pytest.raises(WhizAgentError, match="does not exist"):
        ws.read_text("missing.py")
    with pytest.raises(WhizAgentError, match="is a folder"):
        ws.read_text("src")


def test_list_files_without_git_skips_noise(ws: Workspace) -> None:
    (ws.root / "node_modules" / "x").mkdir(parents=True)
    (ws.root / "node_modules" / "x" / "i.js").write_text("")
    (ws.root / "src" / "__pycache__").mkdir()
    (ws.root / "src" / "__pycache__" / "app.pyc").write_bytes(b"")
    assert ws.list_files() == ["README.md", "src/app.py"]
    assert ws.list_files("src") == ["src/app.py"]
    assert ws.list_files(limit=1) == ["README.md"]


@needs_git
def test_list_files_in_git_repo_skips_ignored(ws: Workspace) -> None:
    git(ws.root, "init", "-q")
    (ws.root / ".gitignore").write_text("build/\n*.log\n")
    (ws.root / "build").mkdir()
    (ws.root / "build" / "out.js").write_text("x")
    (ws.root / "debug.log").write_text("x")
    assert ws.list_files() == [".gitignore", "README.md", "src/app.py"]


def test_list_files_of_a_file_or_escape_is_an_error(ws: Workspace) -> None:
    with pytest.raises(WhizAgentError, match="not a folder"):
        ws.list_files("README.md")
    with pytest.raises(PathEscape):
        ws.list_files("..")


def test_search_finds_lines_regex_or_plain(ws: Workspace) -> None:
    assert ws.search(r"return \d") == [("src/app.py", 2, "    return 1")]
    # Not a valid regex: searched as plain text.
    assert ws.search("main(") == [("src/app.py", 1, "def main():")]
    assert ws.search("nothing-here") == []
    (ws.root / "blob.bin").write_bytes(b"\xffmain(")
    assert [hit[0] for hit in ws.search("main")] == ["src/app.py"]
    with pytest.raises(WhizAgentError, match="empty"):
        ws.search("")


def test_search_stops_at_limit(ws: Workspace) -> None:
    (ws.root / "many.txt").write_text("hit\n" * 50)
    assert len(ws.search("hit", limit=7)) == 7


@needs_git
def test_git_folder_is_neither_read_nor_listed_but_gitignore_is(ws: Workspace) -> None:
    git(ws.root, "init", "-q")
    git(ws.root, "config", "remote.origin.url", "https://user:secret-token@example.com/repo.git")
    (ws.root / ".gitignore").write_text("*.log\n")
    for rel in [".git/config", "./.git/config", ".GIT/config", ".git./config", ".git", "src/../.git/HEAD"]:
        with pytest.raises(PathEscape):
            ws.read_text(rel)
    with pytest.raises(GitDirRefused, match=r"git's own folder \(\.git\)") as refused:
        ws.read_text(".git/config")
    assert refused.value.code == "git_dir_refused" and refused.value.status == 403
    assert ws.read_text(".gitignore") == "*.log\n"
    assert ws.resolve(".github/workflows/ci.yml") == ws.root / ".github" / "workflows" / "ci.yml"
    assert not any(".git/" in rel for rel in ws.list_files())
    assert ws.search("secret-token") == []


def test_a_symlink_into_the_git_folder_is_refused(ws: Workspace) -> None:
    (ws.root / ".git" / "hooks").mkdir(parents=True)
    (ws.root / ".git" / "config").write_text("[core]\n")
    (ws.root / "cfg").symlink_to(ws.root / ".git" / "config")
    (ws.root / "hooks").symlink_to(ws.root / ".git" / "hooks")
    with pytest.raises(GitDirRefused, match="symlink"):
        ws.read_text("cfg")
    with pytest.raises(GitDirRefused, match="symlink"):
        ws.resolve("hooks/pre-commit")
    assert "cfg" not in ws.list_files()


def test_a_git_folder_named_by_a_gitdir_file_is_refused(tmp_path: Path) -> None:
    # A worktree or submodule: `.git` is a file that names the real git folder.
    root = tmp_path / "proj"
    (root / "meta" / "hooks").mkdir(parents=True)
    (root / ".git").write_text("gitdir: meta\n")
    ws = Workspace(root)
    with pytest.raises(GitDirRefused):
        ws.resolve("meta/hooks/pre-commit")
    with pytest.raises(GitDirRefused):
        ws.resolve(".git")


def test_code_indexes_never_read_a_python_file_the_user_marked_secret(tmp_path):
    # What a code index holds reaches the model (a localized function is sent to be rewritten):
    # a file marked secret (`--secret-file prod_secrets.py`) is never in one.
    (tmp_path / "prod_secrets.py").write_text('def token():\n    return "sk-live-123"\n')
    (tmp_path / "stats.py").write_text("def mean(xs):\n    return sum(xs)\n")
    ws = Workspace(tmp_path, SecretFiles(extra=("prod_secrets.py",)))
    assert [path for path, _ in ws.python_sources(limit=100, max_chars=10_000)] == ["stats.py"]
