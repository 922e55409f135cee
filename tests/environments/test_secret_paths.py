"""Where a workspace's secret files are (`secret_paths`): what the sandbox hides from commands."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from whiz.environments.secret_paths import MAX_HIDDEN, SecretFinder, TooManySecrets, search_root, secret_paths
from whiz.environments.secret_rules import SecretFiles


def rel(root: Path, paths: list[Path]) -> list[str]:
    return [p.relative_to(root.resolve()).as_posix() for p in paths]


def test_dependency_folders_and_git_are_not_searched(tmp_path: Path):
    for folder in ("node_modules/pkg/test", ".venv/lib/certifi", "env/lib/certifi", ".git"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "cacert.pem").write_text("certificates\n")
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")  # a venv by any name
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "server.pem").write_text("key\n")
    assert rel(tmp_path, secret_paths(tmp_path, SecretFiles())) == ["certs/server.pem"]


def test_a_folder_of_secrets_is_hidden_whole_and_one_with_code_file_by_file(tmp_path: Path):
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text("k\n")
    (tmp_path / ".aws" / "config").write_text("region\n")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "manager.go").write_text("package secrets\n")  # code the model works on
    (tmp_path / "secrets" / "db.txt").write_text("password\n")
    assert rel(tmp_path, secret_paths(tmp_path, SecretFiles())) == [".aws", "secrets/db.txt"]


def test_shown_files_and_the_users_exceptions_stay(tmp_path: Path):
    for name in (".env", ".env.test", "prod.cfg"):
        (tmp_path / name).write_text("X=1\n")
    rules = SecretFiles(("*.cfg", "!.env.test"))
    assert rel(tmp_path, secret_paths(tmp_path, rules)) == [".env", "prod.cfg"]
    assert rel(tmp_path, secret_paths(tmp_path, rules, shown={".env"})) == ["prod.cfg"]


def test_the_search_stops_after_its_budget_of_folders_shallow_ones_first(tmp_path: Path):
    deep = tmp_path
    for depth in range(6):
        deep = deep / f"d{depth}"
        deep.mkdir()
        (deep / ".env").write_text("X=1\n")
    found = rel(tmp_path, secret_paths(tmp_path, SecretFiles(), budget=3))
    assert found == ["d0/.env", "d0/d1/.env"]  # the root, d0, d1: three folders
    assert len(secret_paths(tmp_path, SecretFiles())) == 6


def test_matching_is_the_agents(tmp_path: Path):
    rules = SecretFiles()
    for secret in (".env", "web/.env.local", "id_ed25519", "a/.ssh/config", "prod.tfvars", "kubeconfig"):
        assert rules.matches(secret), secret
    for plain in (".env.example", "id_rsa.pub", "credentials.py", "secrets/manager.go", "app.py"):
        assert not rules.matches(plain), plain


def test_a_finder_sees_what_changed_since_its_last_search(tmp_path: Path):
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "app.js").write_text("x\n")
    for folder in (tmp_path, tmp_path / "web"):
        os.utime(folder, ns=(1_000_000_000, 1_000_000_000))  # long settled: its listing is kept
    finder = SecretFinder(SecretFiles())
    assert finder.find(tmp_path) == []
    (tmp_path / "web" / ".env.local").write_text("X=1\n")
    (tmp_path / "web" / "notes.txt").hardlink_to(tmp_path / "web" / ".env.local")
    assert rel(tmp_path, finder.find(tmp_path)) == ["web/.env.local", "web/notes.txt"]
    (tmp_path / "web" / ".env.local").rename(tmp_path / "web" / "env.bak")
    assert finder.find(tmp_path) == []  # the old name is no secret; the renamed file is not one


def test_the_search_starts_at_the_repository_top_but_never_at_a_home(tmp_path: Path):
    ws = tmp_path / "repo" / "backend" / "api"
    ws.mkdir(parents=True)
    assert search_root(ws) == ws.resolve()  # no repository: the workspace alone
    (tmp_path / "repo" / ".git").mkdir()
    assert search_root(ws) == (tmp_path / "repo").resolve()
    assert search_root(ws, homes=[(tmp_path / "repo").resolve()]) == ws.resolve()  # a dotfiles repo


def test_thousands_of_keys_in_a_folder_hide_the_folder_and_at_the_top_are_refused(tmp_path: Path):
    fixtures = tmp_path / "tests" / "certs"
    fixtures.mkdir(parents=True)
    for i in range(MAX_HIDDEN + 5):
        (fixtures / f"k{i}.pem").write_text("key\n")
    (fixtures / "README").write_text("test keys\n")
    (tmp_path / ".env").write_text("X=1\n")
    assert rel(tmp_path, secret_paths(tmp_path, SecretFiles())) == [".env", "tests/certs"]
    for i in range(MAX_HIDDEN + 5):
        (tmp_path / f"k{i}.key").write_text("key\n")
    with pytest.raises(TooManySecrets, match="too many to hide"):
        secret_paths(tmp_path, SecretFiles())


def test_the_folder_that_holds_the_workspace_is_never_hidden_whole(tmp_path: Path):
    (tmp_path / ".git").mkdir()
    services = tmp_path / "services"
    (services / "api").mkdir(parents=True)
    for i in range(MAX_HIDDEN + 5):
        (services / f"k{i}.key").write_text("key\n")
    with pytest.raises(TooManySecrets):
        SecretFinder(SecretFiles()).find(tmp_path, workspace=services / "api")


def test_no_link_or_folder_of_secrets_hides_the_workspace(tmp_path: Path):
    (tmp_path / ".git").mkdir()
    ws = tmp_path / "secrets" / "api"  # `secrets/*` looks like a folder of secrets
    ws.mkdir(parents=True)
    (ws / ".env").symlink_to("..")  # a link to the folder above the workspace
    (ws / "id_rsa").symlink_to("../..")
    assert SecretFinder(SecretFiles()).find(tmp_path, workspace=ws) == []
