"""The repository map: definitions from tree-sitter, ranking by use, and fitting the token budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from whiz.agent.context.repomap import len_based_estimate, repo_map
from whiz.agent.project.workspace import Workspace

FILES = {
    "core/models.py": '''\
import dataclasses


@dataclasses.dataclass
class Account:
    """A bank account."""

    balance: int

    def deposit(self, amount: int) -> None:  # why: no overdraft here
        self.balance += amount

    @property
    def empty(self) -> bool:
        return self.balance == 0


def open_account(
    owner: str,
    balance: int = 0,
) -> Account:
    return Account(balance)
''',
    "core/report.py": "from core.models import Account, open_account\n\n\ndef summary(a: Account) -> str:\n"
    "    return str(open_account('x'))\n",
    "cli.py": "from core.models import Account\nfrom core.report import summary\n\n\ndef main():\n"
    "    print(summary(Account(1)))\n",
    "web/app.ts": "export class Server extends Base {\n  start(port: number): void {}\n}\n"
    "export function route(path: string) { return path }\ninterface Options { port: number }\n",
    "svc/main.go": "package main\n\ntype Store struct { n int }\n\n"
    "func (s *Store) Get(k string) int { return 0 }\n\nfunc main() {}\n",
    "lib/src/lib.rs": "pub struct Grid { w: usize }\n"
    "impl Grid {\n    pub fn new(w: usize) -> Self { Grid { w } }\n}\n",
    "broken.py": "def ok():\n    pass\n\ndef broken(:\n",
    "notes.txt": "Account open_account summary\n",
    "data.bin": "",
}


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    for rel, text in FILES.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "data.bin").write_bytes(b"\xff\xfe\x00binary")
    (tmp_path / "node_modules" / "dep").mkdir(parents=True)
    (tmp_path / "node_modules" / "dep" / "index.js").write_text("function hidden() {}\n")
    return Workspace(tmp_path)


def test_full_map_lists_files_and_definitions(ws: Workspace) -> None:
    text = repo_map(ws, budget_tokens=10_000)
    assert "core/models.py:\n" in text
    assert (
        "  class Account:\n"
        "    def deposit(self, amount: int) -> None:\n"
        "    def empty(self) -> bool:\n"
        "  def open_account(owner: str, balance: int = 0,) -> Account:\n"
    ) in text
    assert "web/app.ts:\n  class Server extends Base\n    start(port: number): void\n" in text
    assert "  function route(path: string)\n  interface Options\n" in text
    assert (
        "svc/main.go:\n  Store struct { n int }\n  func (s *Store) Get(k string) int\n  func main()\n" in text
    )
    assert "lib/src/lib.rs:\n  pub struct Grid\n  impl Grid\n    pub fn new(w: usize) -> Self\n" in text
    assert "broken.py:\n  def ok():\n" in text  # a syntax error costs only the broken part
    for plain in ("notes.txt\n", "data.bin\n"):
        assert plain in text  # no grammar, or not text: the path alone
    assert "node_modules" not in text and "hidden" not in text


@pytest.mark.parametrize("budget", [400, 120, 60, 25, 8])
def test_map_fits_the_budget(ws: Workspace, budget: int) -> None:
    text = repo_map(ws, budget_tokens=budget)
    assert len_based_estimate(text) <= budget
    assert text  # something useful always fits these budgets


def test_tight_budget_keeps_the_most_used_files_definitions(ws: Workspace) -> None:
    full = repo_map(ws, budget_tokens=10_000)
    text = repo_map(ws, budget_tokens=len_based_estimate(full) // 2)
    # core/models.py defines what the other files use, so its definitions stay.
    assert "  class Account:\n" in text
    assert "func main()" not in text and "svc/main.go\n" in text
    assert all(path in text for path in FILES)


def test_tiny_budget_lists_some_paths_then_says_how_many_are_left(ws: Workspace) -> None:
    text = repo_map(ws, budget_tokens=20)
    assert text.rstrip().splitlines()[-1].startswith("... and ")
    assert "core/models.py" in text  # the most important path comes first
    assert repo_map(ws, budget_tokens=0) == ""


def test_custom_token_counter(ws: Workspace) -> None:
    # 9 paths, plus 4 lines for the definitions of the most used file, fit 13 lines.
    text = repo_map(ws, budget_tokens=13, count_tokens=lambda s: len(s.splitlines()))
    assert len(text.splitlines()) == 13
    assert "core/models.py:" in text


def test_empty_workspace(tmp_path: Path) -> None:
    assert repo_map(Workspace(tmp_path)) == ""


def test_without_grammars_the_map_is_the_plain_tree(ws: Workspace, monkeypatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "tree_sitter_language_pack", None)  # import fails
    text = repo_map(ws, budget_tokens=10_000)
    assert text.splitlines() == sorted(FILES)
