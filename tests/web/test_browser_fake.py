"""The page in headless Chromium against a server on the fake engine: what needs a browser, not a model.

Quick (no model): model output is never markup, sessions survive a reload and resend their history,
the speed view shows accepted drafts, a page from another origin cannot use the WebSocket, and
healing candidates show side by side with their tests.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import Page, expect

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


def count_user_turns(conversation: str) -> str:
    return f"turns={conversation.count('<|im_start|>user')}"


def open_app(page: Page, served) -> None:
    page.goto(served.root + "/")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def send(page: Page, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def test_model_output_is_shown_as_text_never_as_markup(page: Page, serve_fake):
    reply = "<img src=x onerror=\"document.title='pwned'\"> **bold** and `code`\n```python\nx = '<b>'\n```"
    open_app(page, serve_fake(script=lambda conversation: reply))
    send(page, "hi")
    msg = page.locator(".msg.assistant[data-status=completed]")
    expect(msg).to_have_count(1)
    expect(msg.locator("img")).to_have_count(0)
    expect(msg.locator("b")).to_have_count(0)
    expect(msg.locator(".body")).to_contain_text("<img src=x")
    expect(msg.locator("strong")).to_have_text("bold")
    expect(msg.locator("code.inline")).to_have_text("code")
    expect(msg.locator("pre.code")).to_contain_text("x = '<b>'")
    assert page.title() == "whiz"


def test_sessions_survive_a_reload_and_resend_their_history(page: Page, serve_fake):
    served = serve_fake(script=count_user_turns)
    sent: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent.append(json.loads(frame))))
    open_app(page, served)
    page.click("#new-session")
    send(page, "first question")
    expect(page.locator(".msg.assistant[data-status=completed] .body")).to_have_text("turns=1")
    page.click("#new-session")
    expect(page.locator("#session-list li")).to_have_count(2)

    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    page.click("#session-list button:text-is('first question')")
    send(page, "second question")
    expect(page.locator(".msg.assistant[data-status=completed] .body").nth(1)).to_have_text("turns=2")
    # The new connection holds nothing yet, so the whole history went, not a previous_response_id.
    last = [e for e in sent if e["type"] == "response.create"][-1]
    assert "previous_response_id" not in last
    assert [item["content"] for item in last["input"]] == ["first question", "turns=1", "second question"]


def test_speed_view_counts_accepted_drafts(page: Page, serve_fake):
    # A reply that repeats the prompt: prompt lookup drafts it, and most tokens are accepted drafts.
    text = "def add(a, b):\n    return a + b\n" * 8
    open_app(page, serve_fake(script=lambda conversation: text))
    send(page, text)
    expect(page.locator(".msg.assistant[data-status=completed]")).to_have_count(1)
    stats = page.locator("#turn-stats")
    expect(stats).to_contain_text("accepted drafts")
    accepted = stats.locator("dt:text-is('accepted drafts') + dd").text_content()
    assert int(accepted.split()[0]) > 0
    expect(page.locator("#gauge-tps")).not_to_have_text("–")


@pytest.fixture
def other_site() -> Iterator[str]:
    """Another origin on this machine: a plain page on another loopback port.

    (A page on a public name would be stopped by Chromium's local network checks before it
    reached whiz, so it would show nothing about whiz's own check.)
    """

    class AnotherSite(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><body>another site</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), AnotherSite)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_page_from_another_origin_cannot_use_the_socket(page: Page, serve_fake, other_site):
    served = serve_fake()
    socket_url = served.root.replace("http://", "ws://") + "/v1/responses"
    page.goto(other_site)
    closed = page.evaluate(
        """url => new Promise(done => {
            const ws = new WebSocket(url);
            ws.onclose = ev => done({code: ev.code, reason: ev.reason});
        })""",
        socket_url,
    )
    assert closed == {"code": 4403, "reason": "origin_not_allowed"}
    page.goto(served.root + "/")  # the server's own page still connects
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    send(page, "hi")
    expect(page.locator(".msg.assistant[data-status=completed] .body")).to_have_text("echo: hi")


def test_heal_shows_candidates_side_by_side_with_their_tests_and_accept_applies_one(
    page: Page, serve_fake, tmp_path, monkeypatch
):
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path / "home"))
    root = tmp_path / "project"
    root.mkdir()
    calc = root / "calc.py"
    calc.write_text(BUGGY)
    check = f"{shlex.quote(sys.executable)} -c 'from calc import add; assert add(1, 2) == 3, add(1, 2)'"

    def model(conversation: str) -> str:
        # Round 1 is wrong; round 2, which reads why it failed, is right.
        fixed = "failed (exit code 1)" in conversation
        return f"calc.py\n```python\n{FIXED if fixed else BUGGY.replace('-', '*')}```"

    served = serve_fake(script=model, workspace=root, test_cmd=check)
    page.goto(served.root + "/#workspace")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#candidates")).to_be_hidden()  # no heal yet
    page.fill("#heal-task", "Fix add in calc.py")
    page.fill("#heal-n", "2")
    page.click("#heal-submit")

    rounds = page.locator(".candidate-round")
    expect(rounds).to_have_count(2)
    expect(page.locator("#candidates")).to_have_attribute("data-status", "completed")
    expect(page.locator("#heal-progress")).to_contain_text("before: tests fail (exit 1)")
    expect(page.locator("#heal-progress")).to_contain_text("candidate 0 is chosen")
    first, second = rounds.nth(0).locator(".candidate"), rounds.nth(1).locator(".candidate")
    expect(first).to_have_count(2)
    expect(first.nth(0).locator(".badge.fail")).to_have_text("fail")
    expect(first.nth(0)).to_contain_text("exit 1")
    first.nth(0).locator(".test-output summary").click()
    expect(first.nth(0).locator(".test-output pre")).to_contain_text("AssertionError: 2")
    expect(second.nth(0).locator(".badge.pass")).to_have_text("pass")
    expect(second.nth(0).locator(".badge.chosen")).to_be_visible()
    expect(second.nth(0).locator(".diff")).to_contain_text("return a + b")
    boxes = [second.nth(i).bounding_box() for i in range(2)]
    assert boxes[0]["y"] == boxes[1]["y"] and boxes[0]["x"] < boxes[1]["x"]  # side by side
    assert calc.read_text() == BUGGY  # tested in copies only

    second.nth(0).locator("button.accept").click()
    expect(page.locator("#ws-status")).to_contain_text("Applied candidate #0 of round 2 to calc.py")
    assert calc.read_text() == FIXED
    expect(second.nth(0).locator(".decided")).to_have_text("accepted")
    page.click("#undo")
    expect(page.locator("#ws-status")).to_contain_text("Restored calc.py")
    assert calc.read_text() == BUGGY
    expect(second.nth(0).locator("button.accept")).to_have_text("Accept")  # undone: offered again


def test_healing_is_off_without_a_test_command(page: Page, serve_fake, tmp_path, monkeypatch):
    monkeypatch.setenv("WHIZ_HOME", str(tmp_path / "home"))
    served = serve_fake(workspace=tmp_path)
    page.goto(served.root + "/#workspace")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#view-workspace")).to_be_visible()
    expect(page.locator("#candidates")).to_be_hidden()
    expect(page.locator("#heal-submit")).to_be_disabled()
    expect(page.locator("#heal-task")).to_have_attribute("placeholder", re.compile("--test-cmd"))
