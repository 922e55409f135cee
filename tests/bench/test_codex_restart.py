"""`whiz bench codex-restart` with the real Codex CLI (from npm) against `whiz serve --model fake`:
Codex's first turn after a restart finds all of its prompt on disk, not only its warm-up's part."""

from __future__ import annotations

import json

from tests.clients.conftest import npm_client
from whiz.bench.codex_restart import CODEX_VERSION, CodexRestartPlan, main


def test_codex_turn_after_a_restart_is_restored_whole(capsys, tmp_path):
    codex = npm_client("@openai/codex", CODEX_VERSION, "codex")
    # The fake's tokens are bytes: Codex's turn adds ~3k of them to its warm-up (~700 real tokens),
    # so the shortest entry is scaled alike, above what the turn adds.
    serve_args = ("--ctx", "65536", "--prefix-cache-min-tokens", "4096")
    plan = CodexRestartPlan("fake", codex, tmp_path / "kv", serve_args)
    assert main(plan) == 0
    out = capsys.readouterr().out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["errors"] == {}
    # The cold turn found only the warm-up's prefill; after the restart all but the last token came
    # from disk: the warm-up (Codex's instructions and tools) and the turn it added to them.
    prompt = result["prompt_tokens"]
    assert result["cold_cached_tokens"] < prompt - 256
    assert result["restarted_cached_tokens"] == prompt - 1
    assert result["kv_entries"] == 2
    assert all(result[f"{run}_ttft_ms"] > 0 for run in ("cold", "restarted", "warm"))
    assert "after a restart: the prompt from disk" in out
