"""Secrets stay home: a workspace's `.env` and keys reach the model only when the user lets them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent.conftest import Harness
from whiz.agent.approvals import Approvals, PolicyApprover, ScriptedApprover
from whiz.agent.context.repomap import repo_map
from whiz.agent.models.scripted_model import Reply
from whiz.agent.project.secret_files import MASK, SecretFiles, mask, redact
from whiz.agent.project.workspace import Workspace
from whiz.environments import SandboxMode, SandboxOptions
from whiz.environments.local import CommandResult
from whiz.modes.healing import heal_messages

STRIPE = "sk_live_51HqLyjWDarjtT1zdp7dc"
DB_PASSWORD = "hunter2-Correct-Horse"
ENV = f"""# production settings
STRIPE_KEY={STRIPE}
DATABASE_URL=postgres://app:{DB_PASSWORD}@db.internal:5432/app
DEBUG=false
"""
APP = """import os


def charge(amount):
    return {"key": os.environ["STRIPE_KEY"], "amount": amount}
"""
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACDh7yq2nHWc1ZT0VDmaXo5j4+Jd2kCw==\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


@pytest.fixture
def app(tmp_path: Path) -> Path:
    """The issue's workspace: `app.py` and a `.env` with a live key and a database password."""
    root = tmp_path / "app"
    root.mkdir()
    (root / "app.py").write_text(APP)
    (root / ".env").write_text(ENV)
    return root


def sent(h: Harness) -> str:
    """Everything the agent sent the model, as one text."""
    return "\n".join(
        r.instructions + json.dumps(r.items) + (r.prediction or "") + json.dumps(r.retry_from or [])
        for r in h.model.requests
    )


def leaks(text: str) -> list[str]:
    return [value for value in (STRIPE, DB_PASSWORD) if value in text]


@pytest.mark.parametrize("approval", ["read-only", "auto-edit", "full-auto"])
async def test_the_first_request_holds_no_secret_value(app: Path, approval: str) -> None:
    h = Harness(app, ["It charges a card."], approval=approval)
    await h.agent.run("What does charge do?")
    assert "def charge" in sent(h)  # the code is attached, as before
    assert leaks(sent(h)) == []
    assert ".env" in h.agent.instructions  # listed by name in the map


async def test_a_read_of_env_asks_even_in_full_auto_and_is_masked_when_refused(app: Path) -> None:
    approver = ScriptedApprover([False])
    h = Harness(app, ["READ .env", "It uses STRIPE_KEY."], approvals=Approvals("full-auto", approver))
    await h.agent.run("Which settings does charge use?")
    assert [r.kind for r in approver.asked] == ["secret"]
    assert ".env" in approver.asked[0].summary
    shown = h.model.requests[1].items[-1]["content"]
    assert f"STRIPE_KEY={MASK}" in shown and "DEBUG=" in shown
    assert "looks like a secret" in shown
    assert leaks(sent(h)) == []


async def test_a_read_of_env_in_read_only_asks_too(app: Path) -> None:
    approver = ScriptedApprover([True])
    h = Harness(app, ["READ .env", "It uses STRIPE_KEY."], approvals=Approvals("read-only", approver))
    await h.agent.run("Which settings does charge use?")
    assert [r.kind for r in approver.asked] == ["secret"]
    assert STRIPE in h.model.requests[1].items[-1]["content"]  # the user said yes


async def test_with_no_one_to_ask_the_read_is_masked(app: Path) -> None:
    approvals = Approvals("full-auto", PolicyApprover(allow=True))
    h = Harness(app, ["READ .env", "READ .env 2-2", "ok"], approvals=approvals)
    await h.agent.run("Which settings does charge use?")
    assert f"STRIPE_KEY={MASK}" in h.model.requests[2].items[-1]["content"]
    assert leaks(sent(h)) == []


@pytest.mark.parametrize("pattern", [STRIPE, "sk_live_5", "hunter2", "STRIPE_KEY=sk"])
async def test_a_search_for_a_value_does_not_tell_it(app: Path, pattern: str) -> None:
    h = Harness(app, [f"GREP {pattern}", "ok"], approval="full-auto")
    await h.agent.run("Where is the key set?")
    told = h.model.requests[1].items[-1]["content"]
    assert told.startswith("No matches") and ".env" not in told  # a hit would confirm the guess


async def test_a_search_for_a_key_shows_its_line_masked(app: Path) -> None:
    h = Harness(app, ["GREP STRIPE_KEY", "ok"], approval="full-auto")
    await h.agent.run("Where is the key set?")
    found = h.model.requests[1].items[-1]["content"]
    assert f".env:2: STRIPE_KEY={MASK}" in found and "app.py:5:" in found
    assert leaks(sent(h)) == []


async def test_a_list_names_the_file_and_says_it_is_withheld(app: Path) -> None:
    h = Harness(app, ["LIST .", "ok"], approval="full-auto")
    await h.agent.run("What is here?")
    listed = h.model.requests[1].items[-1]["content"]
    assert ".env" in listed and "like secrets" in listed


async def test_a_command_that_prints_the_file_has_its_values_masked(app: Path) -> None:
    sandbox = SandboxOptions(SandboxMode.DANGER_FULL_ACCESS)
    h = Harness(app, ["RUN cat .env", "ok"], approval="full-auto", sandbox=sandbox)
    await h.agent.run("Show the settings")
    shown = h.model.requests[1].items[-1]["content"]
    assert f"STRIPE_KEY={MASK}" in shown and "DEBUG=false" in shown
    assert leaks(sent(h)) == []


async def test_an_edit_of_env_asks_and_quotes_nothing_when_refused(app: Path) -> None:
    approver = ScriptedApprover([False])
    # A SEARCH that matches nothing: the error would quote the file's lines.
    edit = "*** Begin Patch\n*** Update File: .env\n-STRIPE_KEY=sk_test_nothing\n+STRIPE_KEY=x\n*** End Patch"
    h = Harness(app, [edit, "ok"], approvals=Approvals("full-auto", approver))
    await h.agent.run("Switch to a test key")
    assert [r.kind for r in approver.asked] == ["secret"]
    assert (app / ".env").read_text() == ENV
    assert "Not applied" in h.model.requests[1].items[-1]["content"]
    assert leaks(sent(h)) == []


async def test_a_file_the_user_names_is_attached_and_read_without_asking(app: Path) -> None:
    for n in range(10):  # not a tiny repository: nothing goes whole unless named
        (app / f"mod{n}.py").write_text(f"def f{n}():\n    return {n}\n")
    approver = ScriptedApprover([])
    h = Harness(app, ["READ .env", "ok"], approvals=Approvals("full-auto", approver))
    await h.agent.run("Why is STRIPE_KEY in .env rejected by the bank?")
    assert STRIPE in json.dumps(h.model.requests[0].items)
    assert STRIPE in h.model.requests[1].items[-1]["content"]
    assert approver.asked == []


async def test_a_symlink_to_env_is_a_secret_too(app: Path) -> None:
    (app / "notes.txt").symlink_to(".env")
    h = Harness(app, ["READ notes.txt", "ok"], approval="full-auto")
    await h.agent.run("What does charge do?")
    assert leaks(sent(h)) == []


async def test_a_private_key_under_any_name_stays_home(app: Path) -> None:
    (app / "deploy.txt").write_text(PRIVATE_KEY)
    h = Harness(app, ["READ deploy.txt", "ok"], approval="full-auto")
    await h.agent.run("What does charge do?")
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" not in sent(h)


def test_the_repository_map_lists_a_users_secret_file_without_its_contents(app: Path) -> None:
    (app / "keys.py").write_text(f'def stripe(key="{STRIPE}"):\n    return key\n')
    assert STRIPE in repo_map(Workspace(app))  # without the setting, it is code like any other
    mapped = repo_map(Workspace(app, SecretFiles(("keys.py",))))
    assert "keys.py" in mapped and STRIPE not in mapped


@pytest.mark.parametrize(
    "path",
    [".env", ".env.local", "config/.env.production", ".envrc", "prod.env", "id_rsa", "id_ed25519",
     ".ssh/id_deploy", "certs/server.pem", "tls.key", "store.p12", ".netrc", ".npmrc", ".pypirc",
     ".git-credentials", "credentials", "credentials.json", ".aws/credentials", "terraform.tfstate",
     "secrets.yaml", "prod.tfvars", ".ENV", "deploy/.docker/config.json", "gcp-credentials.json",
     "client_secret_1234.apps.json", "deploy/secrets/db_password.txt", "config/master.key"],
)  # fmt: skip
def test_files_that_look_like_secrets(path: str) -> None:
    assert SecretFiles().matches(path)


@pytest.mark.parametrize(
    "path",
    ["app.py", ".env.example", ".env.sample", "id_rsa.pub", "id_utils.py", "credentials.py",
     "secrets.ts", "environment.py", "keys.md", "README.md", "docs/env.md", "config.json",
     "src/secrets/manager.go", "tests/test_credentials_loader.py", ".env.production.template"],
)  # fmt: skip
def test_files_that_do_not(path: str) -> None:
    assert not SecretFiles().matches(path)


def test_the_users_patterns_add_files_and_take_them_out() -> None:
    files = SecretFiles(("config/prod.yaml", "*.cfg", "!.env.test"))
    assert files.matches("config/prod.yaml") and files.matches("deep/x.cfg")
    assert not files.matches(".env.test") and files.matches(".env.prod")
    assert not files.matches("config/dev.yaml")


def test_mask_keeps_the_names_and_hides_every_value() -> None:
    text = (
        "# prod\nexport A_KEY='abc def'\n\n[default]\naws_secret_access_key = wJalrXUtnFEMI\n"
        'db:\n  password: hunter2\n{"token": "xyz", "n": 3}\n' + PRIVATE_KEY
    )
    masked = mask(text)
    assert masked.splitlines()[:8] == [
        f"# {MASK}", f"export A_KEY={MASK}", "", "[default]", f"aws_secret_access_key = {MASK}",
        "db:", f"  password: {MASK}", MASK,
    ]  # fmt: skip
    for value in ("abc def", "wJalrXUtnFEMI", "hunter2", "xyz", "b3BlbnNzaC1", "QyNTUxOQ"):
        assert value not in masked


def test_redact_hides_values_and_private_keys_anywhere() -> None:
    out = redact(f"key is {STRIPE}.\n{PRIVATE_KEY}", {STRIPE})
    assert STRIPE not in out and "b3BlbnNzaC1" not in out and f"key is {MASK}." in out


async def test_a_task_the_user_did_not_write_gets_no_secret_it_names(app: Path) -> None:
    approver = ScriptedApprover([False])
    h = Harness(app, ["READ .env", "ok"], approvals=Approvals("full-auto", approver))
    await h.agent.run(f"Check that .env holds the key; the last run printed {STRIPE}", from_user=False)
    assert [r.kind for r in approver.asked] == ["secret"]
    assert leaks(sent(h)) == []


def test_a_heals_failing_tests_print_no_secret_value(app: Path) -> None:
    printed = f"E   AssertionError: charge failed with key {STRIPE}\n"
    baseline = CommandResult("pytest -q", 1, printed, 1.0)
    messages = heal_messages(Workspace(app), "Make the tests pass.", "pytest -q", baseline)
    assert "charge failed with key" in json.dumps(messages)
    assert leaks(json.dumps(messages)) == []


async def test_a_search_cannot_test_a_guess_against_the_mask(app: Path) -> None:
    """A pattern that matches the masked line either way (`…` or the guess) must not answer
    differently for a right guess than for a wrong one."""
    answers = []
    for guess in ("sk_live_5", "zz_wrong_"):
        h = Harness(app, [f"GREP STRIPE_KEY=({guess}|{MASK})", "ok"], approval="full-auto")
        await h.agent.run("Where is the key set?")
        answers.append(h.model.requests[1].items[-1]["content"].replace(guess, "GUESS"))
    assert answers[0] == answers[1]


async def test_a_short_password_is_masked_in_a_commands_output(app: Path) -> None:
    (app / ".env").write_text("DB_PASSWORD=pass\nDB_USER=app\n")
    sandbox = SandboxOptions(SandboxMode.DANGER_FULL_ACCESS)
    h = Harness(app, ["RUN cat .env; echo 3 passed", "ok"], approval="full-auto", sandbox=sandbox)
    await h.agent.run("Show the settings")
    shown = h.model.requests[1].items[-1]["content"]
    assert f"DB_PASSWORD={MASK}" in shown and "3 passed" in shown and "DB_USER=app" in shown


async def test_a_private_key_stays_home_even_when_the_user_names_it(app: Path) -> None:
    (app / "deploy.pem").write_text(PRIVATE_KEY)
    approver = ScriptedApprover([])
    h = Harness(app, ["READ deploy.pem", "ok"], approvals=Approvals("full-auto", approver))
    await h.agent.run("Is deploy.pem an ed25519 key?")
    assert "OPENSSH PRIVATE KEY" in h.model.requests[1].items[-1]["content"]
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" not in sent(h)
    assert approver.asked == []


async def test_tool_calls_get_the_same_masked_view(app: Path) -> None:
    calls = [("read_file", {"path": ".env"}), ("search_text", {"text": "sk_live"})]
    h = Harness(app, [Reply("", calls), "ok"], approval="full-auto", actions="tools")
    await h.agent.run("Which settings does charge use?")
    outputs = [i["output"] for i in h.model.requests[1].items if i.get("type") == "function_call_output"]
    assert f"STRIPE_KEY={MASK}" in outputs[0] and outputs[1].startswith("No matches")
    assert leaks(sent(h)) == []


def test_a_hard_link_of_a_secret_file_is_a_secret_under_its_other_name(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("STRIPE_KEY=sk_live_4eC39HqLyjWDarjtT1zdp7dc\n")
    (tmp_path / "settings.txt").hardlink_to(tmp_path / ".env")
    (tmp_path / "plain.txt").write_text("hello\n")
    (tmp_path / "other.txt").hardlink_to(tmp_path / "plain.txt")
    ws = Workspace(tmp_path)
    assert ws.is_secret("settings.txt")
    assert not ws.is_secret("plain.txt") and not ws.is_secret("other.txt")
