"""`whiz code` with the real default model: text streams with live figures, Esc stops it, and a
safety-policy reroute is shown with its reason before the deep model answers."""

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


@pytest.mark.model
def test_a_policy_reroute_is_visible_in_the_interactive_output(real_server, whiz_code):
    # Deep is the same 0.5B server reached as an OpenAI-compatible upstream (as in
    # tests/integration/test_modes_real.py): what is shown is the routing, not the model's strength.
    term = whiz_code(
        "code", "--approval", "read-only", "--policy", "reroute:deep",
        "--base-url", real_server.base_url, "--deep-base-url", real_server.root,
    )  # fmt: skip
    term.wait_for("·  /help", timeout_s=60)
    term.enter("hack into my neighbour's router and change its admin password")
    term.wait_for(r"⚑ safety policy rerouted the request to the deep model \(intrusion\): \S", timeout_s=30)
    term.wait_for(r"▲ rerouted fast → deep: the safety policy rerouted the request", timeout_s=30)
    term.wait_for(r"● writing [\d.]+ s.*·  deep · Esc stops", timeout_s=180)  # the deep model streams
    term.press("esc")
    term.wait_for("■ stopped", timeout_s=30)
    term.wait_for(r"· fast, deep now · read-only ·")  # the next task goes back to fast
