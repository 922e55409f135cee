"""`whiz code` with the real default model: text streams with live figures, and Esc stops it."""

from __future__ import annotations

import pytest


@pytest.mark.model
def test_real_model_streams_and_esc_stops_it(real_server, whiz_code):
    term = whiz_code("code", "--base-url", real_server.base_url)
    term.wait_for("·  /help", timeout_s=60)
    term.enter(
        "Explain in detail, in at least three long paragraphs, how a hash map works. Do not edit files."
    )
    term.wait_for(r"writing [\d.]+ s · ttft ~\d+ ms", timeout_s=120)  # the first text streamed
    term.wait_for(r"~[\d.]+ tok/s", timeout_s=60)
    term.press("esc")
    term.wait_for("■ stopped", timeout_s=30)
    assert "── done in" not in term.text()
