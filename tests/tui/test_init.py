"""`/init` in `whiz code`: a starting AGENTS.md from the repository map, shown, never over one the
user has unless asked; and the transcript says which instruction files the model reads."""

from __future__ import annotations

from pathlib import Path

from tests.tui.test_modes import code_app
from whiz.agent.models.scripted_model import ScriptedModel
from whiz.modes.pool import ScriptedPool

PYPROJECT = '[project]\nname = "shop"\n\n[tool.ruff]\nline-length = 100\n\n[tool.pytest.ini_options]\n'


def shop(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "shop").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "shop" / "cart.py").write_text("class Cart:\n    def total(self):\n        return 0\n")
    (root / "shop" / "checkout.py").write_text(
        "from shop.cart import Cart\n\ndef pay(cart: Cart):\n    pass\n"
    )
    (root / "tests" / "test_cart.py").write_text(
        "from shop.cart import Cart\n\ndef test_total():\n    pass\n"
    )
    return root


async def test_init_writes_a_starting_agents_md_and_the_model_reads_it(tmp_path: Path) -> None:
    root = shop(tmp_path)
    model = ScriptedModel(["Nothing to change."])
    async with code_app(tmp_path, ScriptedPool.of(model)) as (app, screen):
        await app.commands.run("/init")
        said = screen.new()
        text = (root / "AGENTS.md").read_text()
        assert f"wrote {root / 'AGENTS.md'}" in said
        assert "## Layout" in said and "`shop/` (2 files)" in said, "what it wrote is shown"
        assert "most used `shop/cart.py`" in text
        assert "Python (4 files)" not in text and "Python (3 files)" in text
        assert "Run `python -m pytest -q` after a change" in text
        assert "ruff" in text and "at most 100 characters" in text
        await app._run_turn("What does cart.py do?")
        assert "Run `python -m pytest -q` after a change" in model.requests[0].instructions


async def test_init_keeps_an_agents_md_the_user_has_unless_told_to_replace_it(tmp_path: Path) -> None:
    root = shop(tmp_path)
    (root / "AGENTS.md").write_text("My own rules.\n")
    async with code_app(tmp_path, ScriptedPool.of(ScriptedModel([]))) as (app, screen):
        assert "instructions: AGENTS.md" in screen.new(), "the session says which files the model reads"
        await app.commands.run("/init")
        assert "AGENTS.md exists already; /init --force replaces it" in screen.new()
        assert (root / "AGENTS.md").read_text() == "My own rules.\n"
        await app.commands.run("/init please")
        assert "/init takes --force or nothing" in screen.new()
        await app.commands.run("/init --force")
        assert f"replaced {root / 'AGENTS.md'}" in screen.new()
        assert (root / "AGENTS.md").read_text().startswith("# AGENTS.md")
        assert "My own rules." not in app.session.agent.instructions
