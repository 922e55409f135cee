"""Screenshots of the web app's main views, for the README: `python scripts/screenshots.py`.

Starts `whiz serve` with the default model on a small demo workspace, drives the page in Debian's
headless Chromium through Playwright, and writes PNGs into docs/screenshots/. Needs what `make test`
sets up (the model, chromium, playwright from the test extra).
"""

from __future__ import annotations

import argparse
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


def shoot(page: Page, url: str, out: Path) -> None:
    page.goto(url)
    expect(page.locator("body")).to_have_attribute("data-ready", "true", timeout=60_000)

    page.fill("#prompt", "Write a Python function that checks whether a string is a palindrome.")
    page.press("#prompt", "Enter")
    expect(page.locator(".msg.assistant[data-status=completed]")).to_have_count(1, timeout=MODEL_MS)
    page.screenshot(path=out / "chat.png")
    print("wrote", out / "chat.png")

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="registry name or .gguf path")
    parser.add_argument("--chromium", type=Path, default=CHROMIUM)
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
                    shoot(page, server.url + "/", args.out)
                finally:
                    context.close()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
