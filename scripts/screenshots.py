"""Screenshots of the web app's main views, for docs/web.md: `python scripts/screenshots.py [--only heal]`.

Starts `whiz serve` with the default model on a small demo workspace, drives the page in Debian's
headless Chromium through Playwright, and writes PNGs into docs/screenshots/. Needs what `make test`
sets up (the model, chromium, playwright from the test extra).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright

from whiz.errors import WhizError
from whiz.gateway.local import LocalServer
from whiz.models import ModelStore, default_home
from whiz.web.headless import CHROMIUM, launch_chromium

ROOT = Path(__file__).resolve().parent.parent
MODEL_MS = 300_000

DEMO_FILE = '''\
"""Small helpers for counting words."""


def words(text):
    return text.split()


def count_words(text):
    return len(words(text))


def longest_word(text):
    return max(words(text), key=len)
'''
DEMO_TEST = """\
from textstats import count_words, longest_word


def test_count_words():
    assert count_words("a bb ccc") == 3


def test_longest_word():
    assert longest_word("a bb ccc") == "ccc"
"""


def start_server(model: str, workspace: Path, home: Path, log_dir: Path) -> LocalServer:
    env = {"WHIZ_HOME": str(home), "WHIZ_MODEL_NAME": "qwen2.5-coder-0.5b"}
    # whiz's own pytest plugins have no business in the demo project's test run.
    test_cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider -p no:asyncio"
    args = ["--model", model, "--slots", "4", "--ctx", "8192", "--kv-budget-mb", "512"]
    args += ["--workspace", str(workspace), "--test-cmd", test_cmd]
    server = LocalServer(args, log_dir, name="whiz-serve", env=env)
    try:
        server.wait_ready()
    except WhizError as exc:
        raise SystemExit(exc.message) from None
    return server


VIEWS = ("chat", "edit", "heal")
"""What --only can pick: the chat, the edit and tests views, the healing candidates."""


def shoot(page: Page, url: str, out: Path, workspace: Path, views: set[str]) -> None:
    page.goto(url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=60_000)
    if "chat" in views:
        shoot_chat(page, out)
    if "edit" in views:
        shoot_edit(page, out)
    if "heal" in views:
        shoot_heal(page, out, workspace)


def shoot_chat(page: Page, out: Path) -> None:
    page.click("#tab-chat")
    page.fill("#prompt", "Write a Python function that checks whether a string is a palindrome.")
    page.press("#prompt", "Enter")
    expect(page.locator(".msg.assistant[data-status=completed]")).to_have_count(1, timeout=MODEL_MS)
    page.screenshot(path=out / "chat.png")
    print("wrote", out / "chat.png")


def shoot_edit(page: Page, out: Path) -> None:
    page.click("#tab-workspace")
    page.click("#file-list button:text-is('textstats.py')")
    page.fill("#edit-instruction", "add a function average_word_length")
    page.click("#ask-edit")
    expect(page.locator(".edit")).to_have_count(1, timeout=MODEL_MS)
    page.fill("#edit-instruction", "")
    page.screenshot(path=out / "edit.png")
    print("wrote", out / "edit.png")

    page.locator(".edit button.accept").click()
    expect(page.locator("#ws-status")).to_contain_text("Applied")
    page.click("#run-tests")
    expect(page.locator("#test-summary")).to_contain_text("in", timeout=120_000)
    page.screenshot(path=out / "tests.png")
    print("wrote", out / "tests.png")
    page.click("#undo")
    expect(page.locator("#ws-status")).to_contain_text("Restored")


def shoot_heal(page: Page, out: Path, workspace: Path) -> None:
    # A small module with a bug its test catches; three candidates, each tested in its own copy.
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (workspace / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    page.click("#tab-workspace")
    page.click("#refresh-files")
    page.click("#file-list button:text-is('calc.py')")
    page.fill("#heal-task", "In calc.py, add returns a - b; make it return a + b.")
    page.fill("#heal-n", "3")
    page.click(".heal-more summary")
    page.fill("#heal-max-tokens", "300")
    page.check("#heal-all")  # every candidate finishes, so the picture shows three results
    page.click("#heal-submit")
    section = page.locator("#candidates")
    expect(section).to_have_attribute("data-status", re.compile("completed|failed"), timeout=MODEL_MS)
    print("heal:", page.locator("#heal-progress").text_content())
    page.locator(".candidate .test-output summary").first.click()
    # Scroll the workspace view (not the page, whose header stays) to the heal form.
    page.evaluate(
        "() => { const v = document.getElementById('view-workspace');"
        " v.scrollTop = document.getElementById('heal-form').offsetTop - v.offsetTop - 8; }"
    )
    page.screenshot(path=out / "heal.png")
    print("wrote", out / "heal.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="registry name or .gguf path")
    parser.add_argument("--chromium", type=Path, default=CHROMIUM)
    parser.add_argument("--only", action="append", choices=VIEWS, help="remake only these views")
    args = parser.parse_args()
    model = args.model
    if not model.endswith(".gguf"):
        found = ModelStore(default_home()).path(model)
        if found is None:
            raise SystemExit(f"{model} is not installed; run `whiz models pull {model}`")
        model = str(found)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "textstats"
        workspace.mkdir()
        (workspace / "textstats.py").write_text(DEMO_FILE)
        (workspace / "test_textstats.py").write_text(DEMO_TEST)
        server = start_server(model, workspace, Path(tmp) / "home", Path(tmp))
        try:
            with sync_playwright() as pw:
                context = launch_chromium(pw, Path(tmp) / "profile", executable=args.chromium, width_px=1440)
                try:
                    page = context.pages[0] if context.pages else context.new_page()
                    shoot(page, server.url + "/", args.out, workspace, set(args.only or VIEWS))
                finally:
                    context.close()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
