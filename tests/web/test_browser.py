"""The web app end to end: the real page in headless Chromium, against `whiz serve` with the real model.

Each test does what a user does (types, clicks) and checks what a user would see, plus the file on
disk where the page claims to have changed it. Turns are kept short: the model shares two cores.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from playwright.sync_api import Page, expect

from .conftest import FIXTURE_CALC, WebServer

pytestmark = pytest.mark.model

STREAMING = ".msg.assistant[data-status=in_progress] .body"
MODEL_MS = 120_000
"""How long to wait for anything the model does: it shares two cores with everything else here."""


def open_app(page: Page, server: WebServer, *, max_tokens: int = 40) -> None:
    """Load the page, give it the key, and wait until it is ready."""
    page.goto(server.url)
    page.evaluate("n => localStorage.setItem('whiz.maxOutputTokens', String(n))", max_tokens)
    expect(page.locator("#key-dialog")).to_be_visible()
    page.fill("#key-input", server.key)
    page.click("#key-submit")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def sent_events(page: Page) -> list[dict]:
    """Collects every event the page sends on its WebSockets."""
    sent: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent.append(json.loads(frame))))
    return sent


def test_page_loads_and_a_bad_key_is_refused(page: Page, web_server: WebServer):
    page.goto(web_server.url)
    expect(page.locator("#key-dialog")).to_be_visible()
    page.fill("#key-input", "not-the-key")
    page.click("#key-submit")
    expect(page.locator("#key-error")).to_contain_text("refused")
    expect(page.locator("#key-dialog")).to_be_visible()  # nothing works without a key
    page.fill("#key-input", web_server.key)
    page.click("#key-submit")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#key-dialog")).to_be_hidden()
    expect(page.locator("#model-name")).to_contain_text("qwen2.5-coder-0.5b")
    expect(page.locator("[data-mode=fast]")).to_have_attribute("aria-checked", "true")


def test_a_prompt_streams_and_the_next_turn_continues_it(page: Page, web_server: WebServer):
    sent = sent_events(page)
    open_app(page, web_server)
    page.click("#new-session")
    page.fill("#prompt", "Write a Python function that reverses a string.")
    page.press("#prompt", "Enter")
    # Text shows while the turn is still running, and more of it arrives before the end.
    expect(page.locator(STREAMING)).to_have_text(re.compile(r"\S"), timeout=MODEL_MS)
    first = page.locator(STREAMING).text_content()
    done = page.locator(".msg.assistant[data-status=completed], .msg.assistant[data-status=incomplete]")
    expect(done).to_have_count(1, timeout=MODEL_MS)
    final = done.locator(".body").text_content()
    assert len(final) > len(first) > 0 and final.startswith(first[:1])
    expect(page.locator("#gauge-tps")).to_have_text(re.compile(r"^\d+\.\d$"))  # the gauge: tokens/s and TTFT
    expect(page.locator("#gauge-ttft")).to_have_text(re.compile(r"^\d+(\.\d+)? m?s$"))
    expect(done.locator(".foot")).to_contain_text("tok/s")

    page.fill("#prompt", "Now add type hints.")
    page.press("#prompt", "Enter")
    expect(page.locator(".msg.assistant .foot:has-text('tok/s')")).to_have_count(2, timeout=MODEL_MS)
    creates = [e for e in sent if e["type"] == "response.create"]
    assert len(creates) == 2
    # The second turn sends only the new message, chained to the first response.
    assert creates[1]["previous_response_id"]
    assert creates[1]["input"] == [{"type": "message", "role": "user", "content": "Now add type hints."}]


def test_stop_cancels_a_turn_midway(page: Page, web_server: WebServer):
    sent = sent_events(page)
    open_app(page, web_server, max_tokens=400)
    page.click("#new-session")
    page.fill("#prompt", "Count from 1 to 300, one number per line.")
    page.click("#send")
    expect(page.locator(STREAMING)).to_have_text(re.compile(r"\S.{8,}", re.S), timeout=MODEL_MS)
    page.click("#stop")
    cancelled = page.locator(".msg.assistant[data-status=cancelled]")
    expect(cancelled).to_have_count(1, timeout=MODEL_MS)
    expect(cancelled.locator(".foot")).to_contain_text("cancelled")
    tokens = int(cancelled.locator(".foot").text_content().split("·")[1].split()[0])
    assert 0 < tokens < 400
    assert {"type": "response.cancel"} in sent
    expect(page.locator("#send")).to_be_visible()


def test_edit_accept_then_undo(page: Page, web_server: WebServer):
    calc = web_server.workspace / "calc.py"
    assert calc.read_text() == FIXTURE_CALC
    open_app(page, web_server)
    page.click("#tab-workspace")
    page.click("#file-list button:text-is('calc.py')")
    expect(page.locator("#file-view")).to_contain_text("def greet")
    page.fill("#edit-instruction", "add a function mul that multiplies two numbers")
    page.click("#ask-edit")
    edit = page.locator(".edit")
    expect(edit).to_have_count(1, timeout=MODEL_MS)
    expect(edit.locator(".d2h-ins").first).to_be_visible()  # the diff shows added lines
    assert calc.read_text() == FIXTURE_CALC  # proposed, not written

    edit.locator("button.accept").click()
    expect(page.locator("#ws-status")).to_contain_text("Applied to calc.py")
    changed = calc.read_text()
    assert changed != FIXTURE_CALC
    expect(page.locator("#file-view")).to_have_text(changed)  # the viewer shows the file on disk

    page.click("#undo")
    expect(page.locator("#ws-status")).to_contain_text("Restored calc.py")
    assert calc.read_text() == FIXTURE_CALC
    expect(page.locator("#file-view")).to_contain_text("def greet")


def test_run_tests_shows_their_output(page: Page, web_server: WebServer):
    open_app(page, web_server)
    page.click("#tab-workspace")
    page.click("#run-tests")
    expect(page.locator("#test-summary")).to_contain_text("passed", timeout=60_000)
    expect(page.locator("#test-output")).to_contain_text("1 passed")


BUGGY_ADD = "def add(a, b):\n    return a - b\n"
HEAL_MS = 300_000
"""A heal decodes several candidates and runs the tests in a copy for each, on two shared cores."""


def test_heal_shows_candidates_with_their_tests_and_accepting_the_passing_one_fixes_the_file(
    page: Page, web_server: WebServer
):
    calc = web_server.workspace / "calc.py"
    calc.write_text(BUGGY_ADD)  # a deliberate bug, which test_calc.py finds
    try:
        open_app(page, web_server)
        page.click("#tab-workspace")
        # The task says what to do: this tests the page, not how well the 0.5B finds bugs.
        page.fill("#heal-task", "In calc.py, add returns a - b; make it return a + b.")
        page.fill("#heal-n", "3")
        page.click(".heal-more summary")
        page.fill("#heal-max-tokens", "160")
        page.click("#heal-submit")
        expect(page.locator("#heal-cancel")).to_be_visible()  # running, with its progress
        expect(page.locator("#heal-progress")).not_to_be_empty()

        section = page.locator("#candidates")
        expect(section).not_to_have_attribute("data-status", "running", timeout=HEAL_MS)
        expect(section).to_have_attribute("data-status", "completed")
        cards = page.locator(".candidate-round").last.locator(".candidate")
        expect(cards).to_have_count(3)
        boxes = [cards.nth(i).bounding_box() for i in range(3)]
        assert len({round(b["y"]) for b in boxes}) == 1, boxes  # side by side, in one row
        for i in range(3):  # each with its test result, or why it was not tested (heal.js BADGES)
            expect(cards.nth(i).locator(".badge").first).to_have_text(
                re.compile("^(pass|fail|timeout|malformed|changed the tests|no edit|repeat|cancelled)$")
            )
        chosen = page.locator(".candidate.chosen")
        expect(chosen).to_have_count(1)
        expect(chosen.locator(".badge.pass")).to_have_text("pass")
        chosen.locator(".test-output summary").click()
        expect(chosen.locator(".test-output pre")).to_contain_text("1 passed")
        assert calc.read_text() == BUGGY_ADD  # tested in copies, nothing applied yet

        chosen.locator("button.accept").click()
        expect(page.locator("#ws-status")).to_contain_text("to calc.py")
        fixed = calc.read_text()
        assert fixed != BUGGY_ADD
        ran = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
            cwd=web_server.workspace,
            capture_output=True,
            text=True,
        )
        assert ran.returncode == 0, ran.stdout  # the accepted candidate passes here too

        page.click("#undo")
        expect(page.locator("#ws-status")).to_contain_text("Restored calc.py")
        assert calc.read_text() == BUGGY_ADD
    finally:
        calc.write_text(FIXTURE_CALC)
