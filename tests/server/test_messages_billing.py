"""Claude Code's billing header is metadata, not an instruction: it stays out of the model's prompt,
so Claude Code's sessions share one prompt prefix however they were started (`-p` or interactive)."""

from __future__ import annotations

from whiz.server.messages import system_text


def test_the_billing_header_block_is_left_out_of_the_system_prompt() -> None:
    def blocks(entrypoint: str) -> list[dict]:
        header = f"x-anthropic-billing-header: cc_version=2.1.330.d01; cc_entrypoint={entrypoint};"
        return [{"type": "text", "text": header}, {"type": "text", "text": "You are Claude Code."}]

    assert system_text(blocks("cli")) == system_text(blocks("sdk-cli")) == "You are Claude Code."
    assert system_text("x-anthropic-billing-header: as a plain string, it is the user's text") is not None
