"""`whiz exec` in a workspace with a `.env`: its values reach neither the model nor the session's record."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.commands.test_exec import whiz

STRIPE = "sk_live_51HqLyjWDarjtT1zdp7dc"
DB_PASSWORD = "hunter2-Correct-Horse"
ENV = f"STRIPE_KEY={STRIPE}\nDATABASE_URL=postgres://app:{DB_PASSWORD}@db.internal:5432/app\n"
APP = 'import os\n\n\ndef charge(amount):\n    return {"key": os.environ["STRIPE_KEY"], "amount": amount}\n'


@pytest.fixture
def app(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    root.mkdir()
    (root / "app.py").write_text(APP)
    (root / ".env").write_text(ENV)
    return root


def stored(home: Path) -> bytes:
    """Every byte whiz keeps in its home: the session database (and its journal), undo, logs."""
    return b"".join(p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file())


@pytest.mark.parametrize("approval", ["read-only", "full-auto"])
def test_exec_sends_and_stores_no_secret_value(serve_fake, app: Path, tmp_path: Path, approval: str) -> None:
    seen: list[str] = []

    def script(conversation: str) -> str:  # asked again for each token it writes
        seen.append(conversation)
        return "It charges a card." if ".env:\n```" in conversation else "READ .env"

    server = serve_fake(script=script)
    home = tmp_path / "home"
    done = whiz(["exec", "--json", "--approval", approval, "--base-url", server.root,
                 "What does charge do?"], app, home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "def charge" in seen[0]
    for secret in (STRIPE, DB_PASSWORD):
        assert not any(secret in conversation for conversation in seen)
        assert secret.encode() not in stored(home)
    assert "STRIPE_KEY=…" in seen[-1]  # the READ asked, with no one to answer: masked


def test_exec_takes_more_secret_files_from_the_setting(serve_fake, app: Path, tmp_path: Path) -> None:
    (app / "deploy.cfg").write_text(f"token = {STRIPE}\n")
    seen: list[str] = []
    server = serve_fake(script=lambda conversation: seen.append(conversation) or "Fine.")
    home = tmp_path / "home"
    done = whiz(["exec", "--secret-file", "*.cfg", "--base-url", server.root, "What is here?"], app, home)
    assert done.returncode == 0, done.stderr
    assert seen and "deploy.cfg" in seen[0] and STRIPE not in seen[0]
